// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.widget;

import android.content.Context;

public class LinearLayout extends android.view.ViewGroup {
    public static final int VERTICAL = 1;

    public LinearLayout(Context context) { throw new RuntimeException("stub"); }

    public void setOrientation(int orientation) { throw new RuntimeException("stub"); }
}
