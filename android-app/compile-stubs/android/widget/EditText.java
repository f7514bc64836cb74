// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.widget;

import android.content.Context;
import android.text.Editable;

public class EditText extends TextView {
    public EditText(Context context) {
        super(context);
    }

    @Override
    public Editable getText() { throw new RuntimeException("stub"); }
}
