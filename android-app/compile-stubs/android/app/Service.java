// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.app;

import android.content.Intent;
import android.os.IBinder;

public abstract class Service extends android.content.ContextWrapper {
    public static final int START_NOT_STICKY = 2;
    public static final int STOP_FOREGROUND_REMOVE = 1;

    public void onCreate() { }

    public int onStartCommand(Intent intent, int flags, int startId) { throw new RuntimeException("stub"); }

    public abstract IBinder onBind(Intent intent);

    public boolean onUnbind(Intent intent) { throw new RuntimeException("stub"); }

    public void onDestroy() { }

    public final void startForeground(int id, Notification notification) { throw new RuntimeException("stub"); }

    public final void startForeground(int id, Notification notification, int foregroundServiceType) {
        throw new RuntimeException("stub");
    }

    public final void stopForeground(int notificationBehavior) { throw new RuntimeException("stub"); }

    public final void stopSelf() { throw new RuntimeException("stub"); }

    public final void stopSelf(int startId) { throw new RuntimeException("stub"); }
}
