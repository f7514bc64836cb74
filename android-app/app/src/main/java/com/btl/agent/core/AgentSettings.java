/*
 * The app's settings, read from the text the user typed (or the app's
 * SharedPreferences, which hold the same strings), checked, and written as
 * the native session request. Every refusal names the setting and the value,
 * so the app can show it as it is.
 */
package com.btl.agent.core;

import java.util.Collections;
import java.util.Locale;
import java.util.Map;

public final class AgentSettings {
    public static final String MODEL = "model";
    public static final String MMPROJ = "mmproj";
    public static final String MAX_PIXELS = "max_pixels";
    public static final String THREADS = "threads";
    public static final String BACKEND = "backend";
    public static final String VOTE = "vote";
    public static final String MAX_STEPS = "max_steps";
    public static final String PROFILE = "profile";
    public static final String CONFIRM = "confirm";

    /** Qwen2.5-VL's training max_pixels, agent-core's default. */
    public static final long DEFAULT_MAX_PIXELS = 4_014_080L;
    /** Qwen2.5-VL's min_pixels: smaller frames cannot be encoded. */
    public static final long MIN_PIXELS = 3_136L;

    public final String model;
    public final String mmproj;
    public final long maxPixels;
    public final int threads;
    public final String backend;
    public final int vote;
    public final int maxSteps;
    public final String profile;
    public final String confirm;

    private AgentSettings(Map<String, String> values, boolean policyOnly) {
        model = path(values, MODEL);
        mmproj = path(values, MMPROJ);
        threads = (int) number(values, THREADS, 4, 1, 64);
        backend = choice(values, BACKEND, "cpu", "cpu", "vulkan");
        // A resumed episode keeps its own settings: what is typed for them
        // now is not read, so a mistake there cannot block the resume.
        Map<String, String> episode = policyOnly ? Collections.emptyMap() : values;
        maxPixels = number(episode, MAX_PIXELS, DEFAULT_MAX_PIXELS, MIN_PIXELS, 100_000_000L);
        vote = (int) number(episode, VOTE, 1, 1, 16);
        maxSteps = (int) number(episode, MAX_STEPS, 30, 1, 500);
        profile = choice(episode, PROFILE, "btl-ui", "btl-ui", "btl-extended");
        confirm = choice(episode, CONFIRM, "ask", "ask", "deny", "allow");
    }

    /**
     * Reads settings; a missing or blank value takes its default.
     *
     * @throws IllegalArgumentException naming the first setting that is wrong
     */
    public static AgentSettings parse(Map<String, String> values) {
        return new AgentSettings(values, false);
    }

    /**
     * Reads the policy's settings only (model, mmproj, threads, backend), for
     * {@link #toResumeJson}: the episode's own settings are its recorded ones.
     *
     * @throws IllegalArgumentException naming the first of them that is wrong
     */
    public static AgentSettings parsePolicy(Map<String, String> values) {
        return new AgentSettings(values, true);
    }

    /** The native session request for an episode towards {@code goal} with the llama.cpp policy. */
    public String toSessionJson(String goal) {
        if (goal == null || goal.trim().isEmpty()) {
            throw new IllegalArgumentException("the goal is empty");
        }
        return "{\"agent\": {\"goal\": " + Json.quote(goal.trim())
                + ", \"max_pixels\": " + maxPixels
                + ", \"max_steps\": " + maxSteps
                + ", \"profile\": " + Json.quote(profile)
                + ", \"safety\": {\"on_sensitive\": " + Json.quote(confirm) + "}}"
                + ", \"policy\": " + policyJson()
                + ", \"vote\": " + vote + "}";
    }

    /**
     * The native request to resume an interrupted episode with the llama.cpp
     * policy: the policy alone, since the goal and the other settings are the
     * episode's own, as its episode.json records them.
     */
    public String toResumeJson() {
        return "{\"policy\": " + policyJson() + "}";
    }

    private String policyJson() {
        if (model.isEmpty() || mmproj.isEmpty()) {
            throw new IllegalArgumentException("choose the model file and the mmproj file first");
        }
        return "{\"kind\": \"llama\", \"model\": " + Json.quote(model)
                + ", \"mmproj\": " + Json.quote(mmproj)
                + ", \"threads\": " + threads
                + ", \"backend\": " + Json.quote(backend) + "}";
    }

    private static String raw(Map<String, String> values, String key) {
        String v = values.get(key);
        return v == null ? "" : v.trim();
    }

    private static String path(Map<String, String> values, String key) {
        String v = raw(values, key);
        if (!v.isEmpty() && !v.startsWith("/")) {
            throw new IllegalArgumentException(key + " must be an absolute path, got '" + v + "'");
        }
        return v;
    }

    private static long number(Map<String, String> values, String key, long dflt, long min, long max) {
        String v = raw(values, key).replace("_", "");
        if (v.isEmpty()) {
            return dflt;
        }
        long n;
        try {
            n = Long.parseLong(v);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(key + " must be a whole number, got '" + raw(values, key) + "'");
        }
        if (n < min || n > max) {
            throw new IllegalArgumentException(key + " must be between " + min + " and " + max + ", got " + n);
        }
        return n;
    }

    private static String choice(Map<String, String> values, String key, String dflt, String... allowed) {
        String v = raw(values, key).toLowerCase(Locale.ROOT);
        if (v.isEmpty()) {
            return dflt;
        }
        for (String a : allowed) {
            if (a.equals(v)) {
                return a;
            }
        }
        throw new IllegalArgumentException(
                key + " must be one of " + String.join(", ", allowed) + ", got '" + raw(values, key) + "'");
    }
}
