// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.content.pm;

public class ServiceInfo {
    public static final int FOREGROUND_SERVICE_TYPE_SPECIAL_USE = 1 << 30;
}
