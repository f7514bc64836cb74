/*
 * JSON string literals, checked against RFC 8259's escapes.
 */
package com.btl.agent.core;

import static org.junit.Assert.assertEquals;

import org.junit.Test;

public class JsonTest {
    @Test
    public void escapesQuotesBackslashesAndControls() {
        assertEquals("\"a\\\"b\\\\c\"", Json.quote("a\"b\\c"));
        assertEquals("\"\\n\\r\\t\\u0001\\u001f\"", Json.quote("\n\r\t\u0001\u001f"));
    }

    @Test
    public void leavesOtherCharactersAsTheyAre() {
        assertEquals("\"/ ü 👋 \u007f\"", Json.quote("/ ü 👋 \u007f"));
        assertEquals("\"\"", Json.quote(""));
    }
}
