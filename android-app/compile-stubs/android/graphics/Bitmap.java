// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.graphics;

import android.hardware.HardwareBuffer;
import java.nio.Buffer;

public final class Bitmap {
    public enum Config { ARGB_8888 }

    public static Bitmap wrapHardwareBuffer(HardwareBuffer hardwareBuffer, ColorSpace colorSpace) {
        throw new RuntimeException("stub");
    }

    public Bitmap copy(Config config, boolean isMutable) { throw new RuntimeException("stub"); }

    public void recycle() { throw new RuntimeException("stub"); }

    public int getByteCount() { throw new RuntimeException("stub"); }

    public int getWidth() { throw new RuntimeException("stub"); }

    public int getHeight() { throw new RuntimeException("stub"); }

    public void copyPixelsToBuffer(Buffer dst) { throw new RuntimeException("stub"); }
}
