// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.app;

public class NotificationManager {
    public static final int IMPORTANCE_LOW = 2;
    public static final int IMPORTANCE_HIGH = 4;

    public void createNotificationChannel(NotificationChannel channel) { throw new RuntimeException("stub"); }

    public void notify(int id, Notification notification) { throw new RuntimeException("stub"); }

    public void cancel(int id) { throw new RuntimeException("stub"); }
}
