// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.graphics;

public class Path {
    public void moveTo(float x, float y) { throw new RuntimeException("stub"); }

    public void lineTo(float x, float y) { throw new RuntimeException("stub"); }
}
