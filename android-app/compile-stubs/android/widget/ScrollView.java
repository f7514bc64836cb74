// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.widget;

import android.content.Context;

public class ScrollView extends android.view.ViewGroup {
    public ScrollView(Context context) { throw new RuntimeException("stub"); }
}
