// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.app;

import android.content.Intent;
import android.os.Bundle;
import android.view.View;

public class Activity extends android.content.ContextWrapper {
    public static final int RESULT_OK = -1;

    protected void onCreate(Bundle savedInstanceState) { }

    protected void onActivityResult(int requestCode, int resultCode, Intent data) { }

    public void setContentView(View view) { throw new RuntimeException("stub"); }

    public void startActivityForResult(Intent intent, int requestCode) { throw new RuntimeException("stub"); }

    public final void runOnUiThread(Runnable action) { throw new RuntimeException("stub"); }
}
