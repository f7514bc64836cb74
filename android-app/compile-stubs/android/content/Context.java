// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.content;

import java.io.File;

public abstract class Context {
    public static final int MODE_PRIVATE = 0;

    public final <T> T getSystemService(Class<T> serviceClass) { throw new RuntimeException("stub"); }

    public abstract SharedPreferences getSharedPreferences(String name, int mode);

    public abstract File getExternalFilesDir(String type);

    public abstract ContentResolver getContentResolver();

    public abstract ComponentName startService(Intent service);

    public abstract ComponentName startForegroundService(Intent service);

    public abstract void startActivity(Intent intent);
}
