// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.os;

public final class Bundle {
    public void putCharSequence(String key, CharSequence value) { throw new RuntimeException("stub"); }
}
