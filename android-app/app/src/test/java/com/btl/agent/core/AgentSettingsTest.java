/*
 * Settings as the user types them: defaults, refusals, and the session
 * request they become.
 */
package com.btl.agent.core;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;

import java.util.HashMap;
import java.util.Map;
import org.junit.Test;

public class AgentSettingsTest {
    private static Map<String, String> values(String... pairs) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i < pairs.length; i += 2) {
            m.put(pairs[i], pairs[i + 1]);
        }
        return m;
    }

    private static String refusal(String... pairs) {
        return assertThrows(IllegalArgumentException.class, () -> AgentSettings.parse(values(pairs))).getMessage();
    }

    @Test
    public void blankValuesTakeTheDefaults() {
        AgentSettings s = AgentSettings.parse(values("threads", "  ", "backend", ""));
        assertEquals(4_014_080L, s.maxPixels);
        assertEquals(4, s.threads);
        assertEquals("cpu", s.backend);
        assertEquals(1, s.vote);
        assertEquals(30, s.maxSteps);
        assertEquals("btl-ui", s.profile);
        assertEquals("ask", s.confirm);
        assertEquals("", s.model);
    }

    @Test
    public void readsWhatTheUserTyped() {
        AgentSettings s = AgentSettings.parse(values("max_pixels", "1_003_520", "threads", " 6 ", "backend", "Vulkan",
                "vote", "5", "profile", "BTL-EXTENDED", "confirm", "deny", "model", "/sdcard/m.gguf"));
        assertEquals(1_003_520L, s.maxPixels);
        assertEquals(6, s.threads);
        assertEquals("vulkan", s.backend);
        assertEquals(5, s.vote);
        assertEquals("btl-extended", s.profile);
        assertEquals("deny", s.confirm);
        assertEquals("/sdcard/m.gguf", s.model);
    }

    @Test
    public void refusalsNameTheSettingAndTheValue() {
        assertEquals("threads must be a whole number, got 'four'", refusal("threads", "four"));
        assertEquals("threads must be between 1 and 64, got 0", refusal("threads", "0"));
        assertEquals("max_pixels must be between 3136 and 100000000, got 3135", refusal("max_pixels", "3135"));
        assertEquals("backend must be one of cpu, vulkan, got 'metal'", refusal("backend", "metal"));
        assertEquals("vote must be between 1 and 16, got 17", refusal("vote", "17"));
        assertEquals("confirm must be one of ask, deny, allow, got 'maybe'", refusal("confirm", "maybe"));
        assertEquals("model must be an absolute path, got 'm.gguf'", refusal("model", "m.gguf"));
        assertEquals("max_steps must be a whole number, got '99999999999999999999'",
                refusal("max_steps", "99999999999999999999"));
    }

    @Test
    public void becomesTheNativeSessionRequest() {
        AgentSettings s = AgentSettings.parse(values("model", "/m/model.gguf", "mmproj", "/m/mmproj.gguf",
                "threads", "8", "max_steps", "12"));
        String expected = "{\"agent\": {\"goal\": \"Say \\\"hi\\\" 👋\", \"max_pixels\": 4014080, \"max_steps\": 12,"
                + " \"profile\": \"btl-ui\", \"safety\": {\"on_sensitive\": \"ask\"}},"
                + " \"policy\": {\"kind\": \"llama\", \"model\": \"/m/model.gguf\", \"mmproj\": \"/m/mmproj.gguf\","
                + " \"threads\": 8, \"backend\": \"cpu\"}, \"vote\": 1}";
        assertEquals(expected, s.toSessionJson("  Say \"hi\" 👋 "));
    }

    @Test
    public void aResumeRequestNamesThePolicyAlone() {
        // What is typed for the episode's own settings is not read, wrong or not.
        AgentSettings s = AgentSettings.parsePolicy(values("model", "/m/model.gguf", "mmproj", "/m/mmproj.gguf",
                "backend", "vulkan", "max_steps", "0", "vote", "many"));
        assertEquals("{\"policy\": {\"kind\": \"llama\", \"model\": \"/m/model.gguf\","
                + " \"mmproj\": \"/m/mmproj.gguf\", \"threads\": 4, \"backend\": \"vulkan\"}}", s.toResumeJson());
        assertEquals("choose the model file and the mmproj file first",
                assertThrows(IllegalArgumentException.class,
                        () -> AgentSettings.parsePolicy(values("model", "/a")).toResumeJson()).getMessage());
        assertEquals("threads must be between 1 and 64, got 0",
                assertThrows(IllegalArgumentException.class,
                        () -> AgentSettings.parsePolicy(values("threads", "0"))).getMessage());
    }

    @Test
    public void aSessionNeedsAGoalAndModelFiles() {
        AgentSettings none = AgentSettings.parse(values());
        assertEquals("choose the model file and the mmproj file first",
                assertThrows(IllegalArgumentException.class, () -> none.toSessionJson("go")).getMessage());
        AgentSettings files = AgentSettings.parse(values("model", "/a", "mmproj", "/b"));
        assertEquals("the goal is empty",
                assertThrows(IllegalArgumentException.class, () -> files.toSessionJson(" ")).getMessage());
    }
}
