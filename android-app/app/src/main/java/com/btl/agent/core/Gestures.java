/*
 * The strokes the accessibility service dispatches for the agent's actions,
 * as plain numbers: where the finger goes down, where it lifts, and for how
 * long it touches. The service turns a Stroke into a Path and a
 * GestureDescription.StrokeDescription.
 *
 * Points off the screen are refused, never clamped: a clamped tap lands on
 * whatever sits at the screen edge, which the agent never chose. Durations
 * must fit what the platform accepts (positive, at most
 * GestureDescription.getMaxGestureDuration(), 60 s).
 */
package com.btl.agent.core;

public final class Gestures {
    /** Touch time of a tap: well under ViewConfiguration's 100 ms tap timeout. */
    public static final int TAP_MS = 50;
    /** ViewConfiguration's default long-press timeout; a shorter hold is a tap. */
    public static final int LONG_PRESS_TIMEOUT_MS = 500;
    /** GestureDescription.getMaxGestureDuration(). */
    public static final int MAX_GESTURE_MS = 60_000;

    private Gestures() {
    }

    /** A single-finger stroke in screen pixels. */
    public static final class Stroke {
        public final int fromX;
        public final int fromY;
        public final int toX;
        public final int toY;
        public final int durationMs;

        Stroke(int fromX, int fromY, int toX, int toY, int durationMs) {
            this.fromX = fromX;
            this.fromY = fromY;
            this.toX = toX;
            this.toY = toY;
            this.durationMs = durationMs;
        }

        /** Whether the finger stays where it went down (a tap or a long press). */
        public boolean isStationary() {
            return fromX == toX && fromY == toY;
        }

        /** Length of the stroke in pixels. */
        public double length() {
            return Math.hypot(toX - fromX, toY - fromY);
        }
    }

    public static Stroke tap(int x, int y, int width, int height) {
        checkPoint("tap", x, y, width, height);
        return new Stroke(x, y, x, y, TAP_MS);
    }

    public static Stroke longPress(int x, int y, int holdMs, int width, int height) {
        checkPoint("long press", x, y, width, height);
        if (holdMs <= LONG_PRESS_TIMEOUT_MS || holdMs > MAX_GESTURE_MS) {
            throw new IllegalArgumentException("long press hold of " + holdMs + " ms is outside ("
                    + LONG_PRESS_TIMEOUT_MS + ", " + MAX_GESTURE_MS + "] ms");
        }
        return new Stroke(x, y, x, y, holdMs);
    }

    public static Stroke swipe(int x1, int y1, int x2, int y2, int durationMs, int width, int height) {
        checkPoint("swipe start", x1, y1, width, height);
        checkPoint("swipe end", x2, y2, width, height);
        if (x1 == x2 && y1 == y2) {
            throw new IllegalArgumentException("swipe from (" + x1 + ", " + y1 + ") goes nowhere");
        }
        if (durationMs <= 0 || durationMs > MAX_GESTURE_MS) {
            throw new IllegalArgumentException(
                    "swipe duration of " + durationMs + " ms is outside (0, " + MAX_GESTURE_MS + "] ms");
        }
        return new Stroke(x1, y1, x2, y2, durationMs);
    }

    private static void checkPoint(String what, int x, int y, int width, int height) {
        if (width <= 0 || height <= 0) {
            throw new IllegalArgumentException("screen size " + width + "x" + height + " is empty");
        }
        if (x < 0 || y < 0 || x >= width || y >= height) {
            throw new IllegalArgumentException(
                    what + " at (" + x + ", " + y + ") is off the " + width + "x" + height + " screen");
        }
    }
}
