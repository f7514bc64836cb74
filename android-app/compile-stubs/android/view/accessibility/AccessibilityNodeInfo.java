// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.view.accessibility;

import android.graphics.Rect;
import android.os.Bundle;

public class AccessibilityNodeInfo {
    public static final int FOCUS_INPUT = 1;
    public static final int ACTION_SET_TEXT = 0x00200000;
    public static final String ACTION_ARGUMENT_SET_TEXT_CHARSEQUENCE =
            "ACTION_ARGUMENT_SET_TEXT_CHARSEQUENCE";

    public CharSequence getText() { throw new RuntimeException("stub"); }

    public String getViewIdResourceName() { throw new RuntimeException("stub"); }

    public CharSequence getClassName() { throw new RuntimeException("stub"); }

    public CharSequence getPackageName() { throw new RuntimeException("stub"); }

    public CharSequence getContentDescription() { throw new RuntimeException("stub"); }

    public boolean isCheckable() { throw new RuntimeException("stub"); }

    public boolean isChecked() { throw new RuntimeException("stub"); }

    public boolean isClickable() { throw new RuntimeException("stub"); }

    public boolean isEnabled() { throw new RuntimeException("stub"); }

    public boolean isFocusable() { throw new RuntimeException("stub"); }

    public boolean isFocused() { throw new RuntimeException("stub"); }

    public boolean isScrollable() { throw new RuntimeException("stub"); }

    public boolean isLongClickable() { throw new RuntimeException("stub"); }

    public boolean isPassword() { throw new RuntimeException("stub"); }

    public boolean isSelected() { throw new RuntimeException("stub"); }

    public boolean isEditable() { throw new RuntimeException("stub"); }

    public boolean isShowingHintText() { throw new RuntimeException("stub"); }

    public boolean isVisibleToUser() { throw new RuntimeException("stub"); }

    public void getBoundsInScreen(Rect outBounds) { throw new RuntimeException("stub"); }

    public int getChildCount() { throw new RuntimeException("stub"); }

    public AccessibilityNodeInfo getChild(int index) { throw new RuntimeException("stub"); }

    public boolean performAction(int action, Bundle arguments) { throw new RuntimeException("stub"); }
}
