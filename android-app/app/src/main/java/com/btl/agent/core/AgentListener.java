/*
 * What the native agent tells the app while an episode runs, and the one
 * question it asks: whether a sensitive action may run (the safety gate's
 * "ask"). Both are called on the episode's thread.
 */
package com.btl.agent.core;

public interface AgentListener {
    /** {@code step} counts from 1; {@code message} is "thinking" or the action about to run. */
    void onProgress(int step, String message);

    /**
     * Blocks until the user allows or declines the action. {@code action} is
     * the action as JSON in model coordinates; {@code pattern} is the
     * sensitive pattern that matched {@code matchedText}. Anything but true
     * declines, and a declined action ends the episode.
     */
    boolean confirmSensitive(String goal, String plan, String action, String pattern, String matchedText);
}
