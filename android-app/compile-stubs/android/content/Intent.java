// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.content;

import android.net.Uri;

public class Intent {
    public static final String ACTION_OPEN_DOCUMENT = "android.intent.action.OPEN_DOCUMENT";
    public static final String CATEGORY_OPENABLE = "android.intent.category.OPENABLE";

    public Intent(String action) { throw new RuntimeException("stub"); }

    public Intent(Context packageContext, Class<?> cls) { throw new RuntimeException("stub"); }

    public String getAction() { throw new RuntimeException("stub"); }

    public Uri getData() { throw new RuntimeException("stub"); }

    public Intent setAction(String action) { throw new RuntimeException("stub"); }

    public Intent addCategory(String category) { throw new RuntimeException("stub"); }

    public Intent setType(String type) { throw new RuntimeException("stub"); }

    public Intent putExtra(String name, String value) { throw new RuntimeException("stub"); }

    public Intent putExtra(String name, boolean value) { throw new RuntimeException("stub"); }

    public String getStringExtra(String name) { throw new RuntimeException("stub"); }

    public boolean getBooleanExtra(String name, boolean defaultValue) { throw new RuntimeException("stub"); }
}
