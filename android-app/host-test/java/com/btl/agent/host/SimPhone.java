/*
 * Host test only: the virtual phone of agent-core (feature host-sim of
 * libbtl_android), reached through JNI. Not an Android class and never in
 * the APK.
 */
package com.btl.agent.host;

final class SimPhone implements AutoCloseable {
    static {
        System.loadLibrary("btl_android");
    }

    private long handle;

    /** A phone with {@code task} set up on it ("" for none). */
    SimPhone(String task, long seed) {
        handle = nativeOpen(task, seed);
    }

    int width() {
        return nativeSize(handle, false);
    }

    int height() {
        return nativeSize(handle, true);
    }

    byte[] screenshotRgba() {
        return nativeScreenshot(handle);
    }

    String uiXml() {
        return nativeUiXml(handle);
    }

    void touch(int x, int y, int holdMs) {
        nativeTap(handle, x, y, holdMs);
    }

    void swipe(int x1, int y1, int x2, int y2, int durationMs) {
        nativeSwipe(handle, new int[] {x1, y1, x2, y2}, durationMs);
    }

    void type(String text) {
        nativeType(handle, text);
    }

    void back() {
        nativeKey(handle, 0, 0);
    }

    void home() {
        nativeKey(handle, 1, 0);
    }

    void advance(int ms) {
        nativeKey(handle, 2, ms);
    }

    boolean taskSucceeded() {
        return nativeTaskSucceeded(handle);
    }

    @Override
    public void close() {
        long h = handle;
        handle = 0;
        nativeClose(h);
    }

    static native void nativePanic(String message);

    private static native long nativeOpen(String task, long seed);

    private static native void nativeClose(long handle);

    private static native int nativeSize(long handle, boolean vertical);

    private static native byte[] nativeScreenshot(long handle);

    private static native String nativeUiXml(long handle);

    private static native void nativeTap(long handle, int x, int y, int holdMs);

    private static native void nativeSwipe(long handle, int[] points, int durationMs);

    private static native void nativeType(long handle, String text);

    private static native void nativeKey(long handle, int key, int ms);

    private static native boolean nativeTaskSucceeded(long handle);
}
