/*
 * One episode of the native agent (libbtl_android.so). It owns the native
 * handle and serialises the calls the native side requires to be
 * serialised: run() at most once, cancel() from any thread while it runs,
 * and close() freeing the handle only after run() has returned.
 */
package com.btl.agent.core;

public final class NativeAgent implements AutoCloseable {
    static {
        System.loadLibrary("btl_android");
    }

    private long handle;
    private boolean running;
    private boolean ran;
    private boolean closeRequested;

    private NativeAgent(long handle) {
        this.handle = handle;
    }

    /**
     * Starts an episode recorded in {@code trajectoryDir} (which must not hold
     * one yet): loads the policy named in {@code configJson} and reads the
     * screen size through {@code device}.
     *
     * @throws AgentException when the request is invalid or the model does not load
     */
    public static NativeAgent create(String configJson, String trajectoryDir, DeviceBridge device,
            AgentListener listener) {
        return new NativeAgent(nativeCreate(configJson, trajectoryDir, device, listener));
    }

    /**
     * Goes on with the episode recorded in {@code trajectoryDir} that ended
     * without an outcome (the app's process was killed) or because the device
     * failed: its goal, settings, Plan history and step count come from the
     * trajectory; {@code requestJson} names the policy, which must be the one
     * that recorded it.
     *
     * @throws AgentException when the episode already ended, another policy
     *     recorded it, or the request is invalid or the model does not load
     */
    public static NativeAgent resume(String requestJson, String trajectoryDir, DeviceBridge device,
            AgentListener listener) {
        return new NativeAgent(nativeResume(requestJson, trajectoryDir, device, listener));
    }

    /**
     * Runs the episode to its end on the calling thread (never the UI thread)
     * and returns {"trajectory": DIR, "outcome": {...}} as JSON.
     */
    public String run() {
        long h;
        synchronized (this) {
            if (handle == 0) {
                throw new IllegalStateException("the episode was closed");
            }
            if (running || ran) {
                throw new IllegalStateException("an episode runs once");
            }
            running = true;
            ran = true;
            h = handle;
        }
        try {
            return nativeRun(h);
        } finally {
            synchronized (this) {
                running = false;
                if (closeRequested) {
                    free();
                }
            }
        }
    }

    /** Asks a running episode to stop before its next action or model call. */
    public synchronized void cancel() {
        if (handle != 0) {
            nativeCancel(handle);
        }
    }

    /** Frees the episode; while it runs, stops it and frees it when run() returns. */
    @Override
    public synchronized void close() {
        if (handle == 0) {
            return;
        }
        if (running) {
            closeRequested = true;
            nativeCancel(handle);
        } else {
            free();
        }
    }

    private void free() {
        long h = handle;
        handle = 0;
        nativeFree(h);
    }

    private static native long nativeCreate(String configJson, String trajectoryDir, DeviceBridge device,
            AgentListener listener);

    private static native long nativeResume(String requestJson, String trajectoryDir, DeviceBridge device,
            AgentListener listener);

    private static native String nativeRun(long handle);

    private static native void nativeCancel(long handle);

    private static native void nativeFree(long handle);
}
