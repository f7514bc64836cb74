// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.graphics;

public final class Rect {
    public int left;
    public int top;
    public int right;
    public int bottom;

    public int width() { throw new RuntimeException("stub"); }

    public int height() { throw new RuntimeException("stub"); }
}
