// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.widget;

import android.content.Context;

public class Button extends TextView {
    public Button(Context context) {
        super(context);
    }
}
