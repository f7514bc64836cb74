// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.content;

import java.io.File;

public class ContextWrapper extends Context {
    @Override
    public SharedPreferences getSharedPreferences(String name, int mode) { throw new RuntimeException("stub"); }

    @Override
    public File getExternalFilesDir(String type) { throw new RuntimeException("stub"); }

    @Override
    public ContentResolver getContentResolver() { throw new RuntimeException("stub"); }

    @Override
    public ComponentName startService(Intent service) { throw new RuntimeException("stub"); }

    @Override
    public ComponentName startForegroundService(Intent service) { throw new RuntimeException("stub"); }

    @Override
    public void startActivity(Intent intent) { throw new RuntimeException("stub"); }
}
