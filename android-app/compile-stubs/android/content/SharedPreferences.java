// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.content;

public interface SharedPreferences {
    interface Editor {
        Editor putString(String key, String value);

        void apply();
    }

    String getString(String key, String defValue);

    Editor edit();
}
