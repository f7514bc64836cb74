// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.text;

public interface InputType {
    int TYPE_CLASS_TEXT = 1;
    int TYPE_CLASS_NUMBER = 2;
}
