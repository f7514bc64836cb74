// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.hardware;

public final class HardwareBuffer implements AutoCloseable {
    @Override
    public void close() { throw new RuntimeException("stub"); }
}
