// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.view;

public abstract class ViewGroup extends View {
    public void addView(View child) { throw new RuntimeException("stub"); }
}
