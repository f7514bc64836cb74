// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.view;

public class View {
    public interface OnClickListener {
        void onClick(View v);
    }

    public void setPadding(int left, int top, int right, int bottom) { throw new RuntimeException("stub"); }

    public void setOnClickListener(OnClickListener l) { throw new RuntimeException("stub"); }
}
