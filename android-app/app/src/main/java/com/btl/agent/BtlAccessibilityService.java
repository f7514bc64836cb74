/*
 * The agent's hands and eyes on a phone: screenshots through
 * AccessibilityService.takeScreenshot (API 30), taps, long presses and
 * swipes through dispatchGesture, Back and Home through
 * performGlobalAction, typing through ACTION_SET_TEXT on the focused field,
 * and the UI tree of every window exported as a uiautomator dump.
 *
 * The native agent calls the DeviceBridge methods on its own thread; each
 * blocks until the platform has answered (callbacks arrive on the main
 * thread or on this service's executor, never on the waiting thread) and
 * throws with a readable message when it fails or times out.
 */
package com.btl.agent;

import android.accessibilityservice.AccessibilityService;
import android.accessibilityservice.GestureDescription;
import android.graphics.Bitmap;
import android.graphics.Path;
import android.graphics.Rect;
import android.hardware.HardwareBuffer;
import android.hardware.display.DisplayManager;
import android.os.Bundle;
import android.view.Display;
import android.view.WindowManager;
import android.view.accessibility.AccessibilityEvent;
import android.view.accessibility.AccessibilityNodeInfo;
import android.view.accessibility.AccessibilityWindowInfo;
import com.btl.agent.core.DeviceBridge;
import com.btl.agent.core.Gestures;
import com.btl.agent.core.RgbaFrame;
import com.btl.agent.core.UiNode;
import com.btl.agent.core.UiXml;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

public final class BtlAccessibilityService extends AccessibilityService implements DeviceBridge {
    private static final long CALL_TIMEOUT_MS = 10_000;
    /** takeScreenshot refuses calls closer than this (ERROR_TAKE_SCREENSHOT_INTERVAL_TIME_SHORT). */
    private static final long SCREENSHOT_INTERVAL_MS = 350;
    private static final int SCREENSHOT_ATTEMPTS = 4;

    private static volatile BtlAccessibilityService current;

    private final ExecutorService callbacks = Executors.newSingleThreadExecutor();

    /** The connected service, or null when the user has not enabled it. */
    public static BtlAccessibilityService current() {
        return current;
    }

    @Override
    protected void onServiceConnected() {
        current = this;
    }

    @Override
    public boolean onUnbind(android.content.Intent intent) {
        current = null;
        return super.onUnbind(intent);
    }

    @Override
    public void onDestroy() {
        current = null;
        callbacks.shutdown();
        super.onDestroy();
    }

    @Override
    public void onAccessibilityEvent(AccessibilityEvent event) {
        // The agent reads the screen when it needs it; events are not used.
    }

    @Override
    public void onInterrupt() {
    }

    @Override
    public String name() {
        return android.os.Build.MANUFACTURER + " " + android.os.Build.MODEL + " (Android "
                + android.os.Build.VERSION.RELEASE + ", accessibility service)";
    }

    private Rect screen() {
        return getSystemService(WindowManager.class).getMaximumWindowMetrics().getBounds();
    }

    @Override
    public int screenWidth() {
        return screen().width();
    }

    @Override
    public int screenHeight() {
        return screen().height();
    }

    @Override
    public RgbaFrame screenshot() {
        for (int attempt = 1; ; attempt++) {
            CountDownLatch done = new CountDownLatch(1);
            AtomicReference<ScreenshotResult> result = new AtomicReference<>();
            int[] error = {0};
            takeScreenshot(Display.DEFAULT_DISPLAY, callbacks, new TakeScreenshotCallback() {
                @Override
                public void onSuccess(ScreenshotResult screenshot) {
                    result.set(screenshot);
                    done.countDown();
                }

                @Override
                public void onFailure(int errorCode) {
                    error[0] = errorCode;
                    done.countDown();
                }
            });
            await(done, "screenshot");
            if (result.get() != null) {
                return toFrame(result.get());
            }
            if (error[0] != ERROR_TAKE_SCREENSHOT_INTERVAL_TIME_SHORT || attempt == SCREENSHOT_ATTEMPTS) {
                throw new IllegalStateException("takeScreenshot failed with error code " + error[0]);
            }
            sleep(SCREENSHOT_INTERVAL_MS);
        }
    }

    /** Copies the hardware buffer into tightly packed RGBA bytes. */
    private static RgbaFrame toFrame(ScreenshotResult screenshot) {
        HardwareBuffer buffer = screenshot.getHardwareBuffer();
        try {
            Bitmap wrapped = Bitmap.wrapHardwareBuffer(buffer, screenshot.getColorSpace());
            if (wrapped == null) {
                throw new IllegalStateException("the screenshot buffer cannot be read as a bitmap");
            }
            // ARGB_8888 stores its pixels as R, G, B, A bytes in memory,
            // which is the order the native side reads.
            Bitmap software = wrapped.copy(Bitmap.Config.ARGB_8888, false);
            wrapped.recycle();
            ByteBuffer pixels = ByteBuffer.allocate(software.getByteCount());
            software.copyPixelsToBuffer(pixels);
            int width = software.getWidth();
            int height = software.getHeight();
            software.recycle();
            return new RgbaFrame(width, height, pixels.array());
        } finally {
            buffer.close();
        }
    }

    @Override
    public String uiTreeXml() {
        List<UiNode> windows = new ArrayList<>();
        for (AccessibilityWindowInfo window : getWindows()) {
            AccessibilityNodeInfo root = window.getRoot();
            if (root != null) {
                windows.add(toNode(root, 0));
            }
        }
        if (windows.isEmpty()) {
            AccessibilityNodeInfo root = getRootInActiveWindow();
            if (root == null) {
                return null;
            }
            windows.add(toNode(root, 0));
        }
        return UiXml.write(windows, rotation());
    }

    private int rotation() {
        Display display = getSystemService(DisplayManager.class).getDisplay(Display.DEFAULT_DISPLAY);
        return display == null ? 0 : display.getRotation();
    }

    private static UiNode toNode(AccessibilityNodeInfo info, int index) {
        UiNode n = new UiNode();
        n.index = index;
        n.text = text(info.getText());
        n.resourceId = text(info.getViewIdResourceName());
        n.className = text(info.getClassName());
        n.packageName = text(info.getPackageName());
        n.contentDesc = text(info.getContentDescription());
        n.checkable = info.isCheckable();
        n.checked = info.isChecked();
        n.clickable = info.isClickable();
        n.enabled = info.isEnabled();
        n.focusable = info.isFocusable();
        n.focused = info.isFocused();
        n.scrollable = info.isScrollable();
        n.longClickable = info.isLongClickable();
        n.password = info.isPassword();
        n.selected = info.isSelected();
        Rect bounds = new Rect();
        info.getBoundsInScreen(bounds);
        n.setBounds(bounds.left, bounds.top, bounds.right, bounds.bottom);
        for (int i = 0; i < info.getChildCount(); i++) {
            AccessibilityNodeInfo child = info.getChild(i);
            // uiautomator leaves out what the user cannot see, and numbers
            // the rest by their position among all children.
            if (child != null && child.isVisibleToUser()) {
                n.children.add(toNode(child, i));
            }
        }
        return n;
    }

    private static String text(CharSequence s) {
        return s == null ? "" : s.toString();
    }

    @Override
    public void tap(int x, int y) {
        dispatch(Gestures.tap(x, y, screenWidth(), screenHeight()), "tap");
    }

    @Override
    public void longPress(int x, int y, int holdMs) {
        dispatch(Gestures.longPress(x, y, holdMs, screenWidth(), screenHeight()), "long press");
    }

    @Override
    public void swipe(int x1, int y1, int x2, int y2, int durationMs) {
        dispatch(Gestures.swipe(x1, y1, x2, y2, durationMs, screenWidth(), screenHeight()), "swipe");
    }

    private void dispatch(Gestures.Stroke stroke, String what) {
        Path path = new Path();
        path.moveTo(stroke.fromX, stroke.fromY);
        if (!stroke.isStationary()) {
            path.lineTo(stroke.toX, stroke.toY);
        }
        GestureDescription gesture = new GestureDescription.Builder()
                .addStroke(new GestureDescription.StrokeDescription(path, 0, stroke.durationMs))
                .build();
        CountDownLatch done = new CountDownLatch(1);
        boolean[] completed = {false};
        boolean accepted = dispatchGesture(gesture, new GestureResultCallback() {
            @Override
            public void onCompleted(GestureDescription g) {
                completed[0] = true;
                done.countDown();
            }

            @Override
            public void onCancelled(GestureDescription g) {
                done.countDown();
            }
        }, null);
        if (!accepted) {
            throw new IllegalStateException("the system refused the " + what + " gesture");
        }
        await(done, what);
        if (!completed[0]) {
            throw new IllegalStateException("the " + what + " gesture was cancelled");
        }
    }

    @Override
    public void typeText(String text) {
        AccessibilityNodeInfo field = findFocus(AccessibilityNodeInfo.FOCUS_INPUT);
        if (field == null || !field.isEditable()) {
            throw new IllegalStateException("no text field has the input focus");
        }
        // Typing adds to what the field holds, as a keyboard would; a hint
        // shown in an empty field is not its text.
        String current = field.isShowingHintText() ? "" : text(field.getText());
        Bundle args = new Bundle();
        args.putCharSequence(AccessibilityNodeInfo.ACTION_ARGUMENT_SET_TEXT_CHARSEQUENCE, current + text);
        if (!field.performAction(AccessibilityNodeInfo.ACTION_SET_TEXT, args)) {
            throw new IllegalStateException("the focused field refused the text");
        }
    }

    @Override
    public void back() {
        global(GLOBAL_ACTION_BACK, "back");
    }

    @Override
    public void home() {
        global(GLOBAL_ACTION_HOME, "home");
    }

    private void global(int action, String what) {
        if (!performGlobalAction(action)) {
            throw new IllegalStateException("the system refused the " + what + " action");
        }
    }

    @Override
    public void waitMs(int ms) {
        sleep(ms);
    }

    private static void await(CountDownLatch latch, String what) {
        try {
            if (!latch.await(CALL_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
                throw new IllegalStateException(what + " timed out after " + CALL_TIMEOUT_MS + " ms");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(what + " was interrupted", e);
        }
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting", e);
        }
    }
}
