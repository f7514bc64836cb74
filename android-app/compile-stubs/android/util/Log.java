// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.util;

public final class Log {
    public static int w(String tag, String msg) { throw new RuntimeException("stub"); }

    public static int e(String tag, String msg, Throwable tr) { throw new RuntimeException("stub"); }
}
