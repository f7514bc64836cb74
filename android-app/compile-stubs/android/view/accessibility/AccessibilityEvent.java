// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.view.accessibility;

public final class AccessibilityEvent { }
