// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.view;

import android.graphics.Rect;

public final class WindowMetrics {
    public Rect getBounds() { throw new RuntimeException("stub"); }
}
