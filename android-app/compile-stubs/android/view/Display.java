// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.view;

public final class Display {
    public static final int DEFAULT_DISPLAY = 0;

    public int getRotation() { throw new RuntimeException("stub"); }
}
