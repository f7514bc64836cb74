// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.hardware.display;

import android.view.Display;

public final class DisplayManager {
    public Display getDisplay(int displayId) { throw new RuntimeException("stub"); }
}
