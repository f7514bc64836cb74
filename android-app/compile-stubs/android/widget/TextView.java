// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.widget;

import android.content.Context;

public class TextView extends android.view.View {
    public TextView(Context context) { throw new RuntimeException("stub"); }

    public CharSequence getText() { throw new RuntimeException("stub"); }

    public final void setText(CharSequence text) { throw new RuntimeException("stub"); }

    public void setHint(CharSequence hint) { throw new RuntimeException("stub"); }

    public void setInputType(int type) { throw new RuntimeException("stub"); }

    public void setTextIsSelectable(boolean selectable) { throw new RuntimeException("stub"); }
}
