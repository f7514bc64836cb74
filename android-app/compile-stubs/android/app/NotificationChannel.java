// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.app;

public final class NotificationChannel {
    public NotificationChannel(String id, CharSequence name, int importance) { throw new RuntimeException("stub"); }
}
