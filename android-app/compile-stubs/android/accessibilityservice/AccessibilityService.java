// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.accessibilityservice;

import android.graphics.ColorSpace;
import android.hardware.HardwareBuffer;
import android.content.Intent;
import android.os.Handler;
import android.os.IBinder;
import android.view.accessibility.AccessibilityEvent;
import android.view.accessibility.AccessibilityNodeInfo;
import android.view.accessibility.AccessibilityWindowInfo;
import java.util.List;
import java.util.concurrent.Executor;

public abstract class AccessibilityService extends android.app.Service {
    public static final int GLOBAL_ACTION_BACK = 1;
    public static final int GLOBAL_ACTION_HOME = 2;
    public static final int ERROR_TAKE_SCREENSHOT_INTERVAL_TIME_SHORT = 3;

    public interface TakeScreenshotCallback {
        void onSuccess(ScreenshotResult screenshot);

        void onFailure(int errorCode);
    }

    public static final class ScreenshotResult {
        public HardwareBuffer getHardwareBuffer() { throw new RuntimeException("stub"); }

        public ColorSpace getColorSpace() { throw new RuntimeException("stub"); }
    }

    public abstract static class GestureResultCallback {
        public void onCompleted(GestureDescription gestureDescription) { }

        public void onCancelled(GestureDescription gestureDescription) { }
    }

    public abstract void onAccessibilityEvent(AccessibilityEvent event);

    public abstract void onInterrupt();

    protected void onServiceConnected() { }

    @Override
    public final IBinder onBind(Intent intent) { throw new RuntimeException("stub"); }

    public List<AccessibilityWindowInfo> getWindows() { throw new RuntimeException("stub"); }

    public AccessibilityNodeInfo getRootInActiveWindow() { throw new RuntimeException("stub"); }

    public AccessibilityNodeInfo findFocus(int focus) { throw new RuntimeException("stub"); }

    public final boolean performGlobalAction(int action) { throw new RuntimeException("stub"); }

    public final boolean dispatchGesture(GestureDescription gesture, GestureResultCallback callback,
            Handler handler) { throw new RuntimeException("stub"); }

    public void takeScreenshot(int displayId, Executor executor, TakeScreenshotCallback callback) {
        throw new RuntimeException("stub");
    }
}
