/*
 * The phone as the native agent reaches it. The native side calls these
 * methods from the thread running the episode (never the UI thread); each
 * may block until the phone has done what was asked. Coordinates are screen
 * pixels. An exception thrown here ends the episode with a recorded
 * "device failed" stop reason carrying its class and message.
 */
package com.btl.agent.core;

public interface DeviceBridge {
    /** A short human-readable name, recorded in episode.json. */
    String name();

    int screenWidth();

    int screenHeight();

    RgbaFrame screenshot();

    /** The UI tree as a uiautomator dump (see {@link UiXml}), or null when there is none. */
    String uiTreeXml();

    void tap(int x, int y);

    void longPress(int x, int y, int holdMs);

    void swipe(int x1, int y1, int x2, int y2, int durationMs);

    /** Replaces the text of the focused input field with {@code text}. */
    void typeText(String text);

    void back();

    void home();

    void waitMs(int ms);
}
