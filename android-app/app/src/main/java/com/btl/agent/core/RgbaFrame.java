/*
 * One screenshot as the native side reads it: width x height pixels, four
 * bytes each in R, G, B, A order, rows top to bottom without padding.
 */
package com.btl.agent.core;

public final class RgbaFrame {
    public final int width;
    public final int height;
    public final byte[] rgba;

    public RgbaFrame(int width, int height, byte[] rgba) {
        if (width <= 0 || height <= 0) {
            throw new IllegalArgumentException("frame size " + width + "x" + height + " is empty");
        }
        long expected = 4L * width * height;
        if (rgba == null || rgba.length != expected) {
            throw new IllegalArgumentException("a " + width + "x" + height + " frame needs " + expected
                    + " RGBA bytes, got " + (rgba == null ? "null" : rgba.length));
        }
        this.width = width;
        this.height = height;
        this.rgba = rgba;
    }
}
