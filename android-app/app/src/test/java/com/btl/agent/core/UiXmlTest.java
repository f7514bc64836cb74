/*
 * UiXml against dumps written out by hand in uiautomator's format.
 */
package com.btl.agent.core;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import java.util.Arrays;
import java.util.Collections;
import org.junit.Test;

public class UiXmlTest {
    private static final String DECL = "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>";
    private static final String FLAGS_OFF = "checkable=\"false\" checked=\"false\" clickable=\"false\" enabled=\"true\" "
            + "focusable=\"false\" focused=\"false\" scrollable=\"false\" long-clickable=\"false\" password=\"false\" "
            + "selected=\"false\"";

    @Test
    public void writesANestedTreeInUiautomatorsAttributeOrder() {
        UiNode root = new UiNode();
        root.className = "android.widget.FrameLayout";
        root.packageName = "com.example";
        root.setBounds(0, 0, 1080, 2400);
        UiNode button = new UiNode();
        button.text = "OK";
        button.resourceId = "com.example:id/ok";
        button.className = "android.widget.Button";
        button.packageName = "com.example";
        button.clickable = true;
        button.focused = true;
        button.setBounds(100, 200, 300, 260);
        root.add(new UiNode()).add(button);

        String expected = DECL + "<hierarchy rotation=\"1\">"
                + "<node index=\"0\" text=\"\" resource-id=\"\" class=\"android.widget.FrameLayout\" "
                + "package=\"com.example\" content-desc=\"\" " + FLAGS_OFF + " bounds=\"[0,0][1080,2400]\">"
                + "<node index=\"0\" text=\"\" resource-id=\"\" class=\"\" package=\"\" content-desc=\"\" " + FLAGS_OFF
                + " bounds=\"[0,0][0,0]\" />"
                + "<node index=\"1\" text=\"OK\" resource-id=\"com.example:id/ok\" class=\"android.widget.Button\" "
                + "package=\"com.example\" content-desc=\"\" checkable=\"false\" checked=\"false\" clickable=\"true\" "
                + "enabled=\"true\" focusable=\"false\" focused=\"true\" scrollable=\"false\" long-clickable=\"false\" "
                + "password=\"false\" selected=\"false\" bounds=\"[100,200][300,260]\" />"
                + "</node></hierarchy>";
        assertEquals(expected, UiXml.write(Collections.singletonList(root), 1));
    }

    @Test
    public void writesEveryWindowAsATopLevelNode() {
        UiNode app = new UiNode();
        app.packageName = "a";
        UiNode keyboard = new UiNode();
        keyboard.packageName = "b";
        String xml = UiXml.write(Arrays.asList(app, keyboard), 0);
        assertTrue(xml, xml.contains("package=\"a\""));
        assertTrue(xml.indexOf("package=\"a\"") < xml.indexOf("package=\"b\""));
        assertTrue(xml.endsWith(" /></hierarchy>"));
        assertEquals(2, xml.split("<node ", -1).length - 1);
    }

    private static String escaped(String s) {
        StringBuilder out = new StringBuilder();
        UiXml.escape(s, out);
        return out.toString();
    }

    @Test
    public void escapesMarkupAndKeepsLineBreaksAsReferences() {
        assertEquals("a &amp; b &lt;c&gt; &quot;d&quot; 'e'", escaped("a & b <c> \"d\" 'e'"));
        assertEquals("one&#10;two&#13;&#9;three", escaped("one\ntwo\r\tthree"));
    }

    @Test
    public void keepsUnicodeAndReplacesWhatXmlCannotCarry() {
        // U+1F44B (waving hand) is a surrogate pair in Java and must survive whole.
        assertEquals("Grüße 👋 日本語", escaped("Grüße 👋 日本語"));
        // NUL, BEL, an unpaired high surrogate, U+FFFE and U+FDD0 become dots.
        assertEquals("a.b.c.d.e.f", escaped("a\u0000b\u0007c\uD83Dd\uFFFEe\uFDD0f"));
        // C1 controls except NEL (U+0085) are dropped the same way.
        assertEquals(".\u0085.", escaped("\u0080\u0085\u009F"));
    }

    @Test
    public void xmlCharMatchesUiautomatorsSet() {
        assertTrue(UiXml.xmlChar('\t'));
        assertTrue(UiXml.xmlChar(' '));
        assertTrue(UiXml.xmlChar(0x10FFFD));
        assertFalse(UiXml.xmlChar(0x1F));
        assertFalse(UiXml.xmlChar(0x7F));
        assertFalse(UiXml.xmlChar(0x1FFFF));
        assertFalse(UiXml.xmlChar(0xFDDF));
    }
}
