/*
 * One view of the screen with the attributes a uiautomator dump records.
 * The accessibility service fills it from AccessibilityNodeInfo; UiXml
 * writes it out. Plain data, no Android types, so the export is unit-tested
 * on the host.
 */
package com.btl.agent.core;

import java.util.ArrayList;
import java.util.List;

public final class UiNode {
    public int index;
    public String text = "";
    public String resourceId = "";
    public String className = "";
    public String packageName = "";
    public String contentDesc = "";
    public boolean checkable;
    public boolean checked;
    public boolean clickable;
    public boolean enabled = true;
    public boolean focusable;
    public boolean focused;
    public boolean scrollable;
    public boolean longClickable;
    public boolean password;
    public boolean selected;
    /** left, top, right, bottom in screen pixels: the visible part of the view. */
    public final int[] bounds = new int[4];
    public final List<UiNode> children = new ArrayList<>();

    public UiNode setBounds(int left, int top, int right, int bottom) {
        bounds[0] = left;
        bounds[1] = top;
        bounds[2] = right;
        bounds[3] = bottom;
        return this;
    }

    /** Appends {@code child}, numbering it among its siblings as uiautomator does. */
    public UiNode add(UiNode child) {
        child.index = children.size();
        children.add(child);
        return this;
    }
}
