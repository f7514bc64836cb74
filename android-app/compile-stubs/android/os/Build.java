// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.os;

public class Build {
    public static final String MANUFACTURER = null;
    public static final String MODEL = null;

    public static class VERSION {
        public static final int SDK_INT = 0;
        public static final String RELEASE = null;
    }
}
