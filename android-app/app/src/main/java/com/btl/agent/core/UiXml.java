/*
 * Writes a UI tree as `uiautomator dump` does: one line, Android's XML
 * declaration, <hierarchy rotation="R">, one top-level <node> per window,
 * the attributes in uiautomator's order. The native side reads it back with
 * agent-core's parser, which takes real devices' dumps, so this is the one
 * format for the blink annotation, the safety gate and the trajectories.
 *
 * Text is Unicode-safe: characters XML 1.0 cannot carry (controls, unpaired
 * surrogates, non-characters) become '.', as uiautomator's dumper does, and
 * line breaks and tabs in values are written as character references so a
 * parser's attribute normalisation keeps them.
 */
package com.btl.agent.core;

import java.util.List;

public final class UiXml {
    private UiXml() {
    }

    public static String write(List<UiNode> windows, int rotation) {
        StringBuilder out = new StringBuilder(4096);
        out.append("<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"")
                .append(rotation).append("\">");
        for (UiNode window : windows) {
            node(window, out);
        }
        return out.append("</hierarchy>").toString();
    }

    private static void node(UiNode n, StringBuilder out) {
        out.append("<node");
        attr(out, "index", Integer.toString(n.index));
        attr(out, "text", n.text);
        attr(out, "resource-id", n.resourceId);
        attr(out, "class", n.className);
        attr(out, "package", n.packageName);
        attr(out, "content-desc", n.contentDesc);
        attr(out, "checkable", n.checkable);
        attr(out, "checked", n.checked);
        attr(out, "clickable", n.clickable);
        attr(out, "enabled", n.enabled);
        attr(out, "focusable", n.focusable);
        attr(out, "focused", n.focused);
        attr(out, "scrollable", n.scrollable);
        attr(out, "long-clickable", n.longClickable);
        attr(out, "password", n.password);
        attr(out, "selected", n.selected);
        attr(out, "bounds", "[" + n.bounds[0] + "," + n.bounds[1] + "][" + n.bounds[2] + "," + n.bounds[3] + "]");
        if (n.children.isEmpty()) {
            out.append(" />");
            return;
        }
        out.append('>');
        for (UiNode child : n.children) {
            node(child, out);
        }
        out.append("</node>");
    }

    private static void attr(StringBuilder out, String name, boolean value) {
        attr(out, name, value ? "true" : "false");
    }

    private static void attr(StringBuilder out, String name, String value) {
        out.append(' ').append(name).append("=\"");
        escape(value == null ? "" : value, out);
        out.append('"');
    }

    static void escape(String s, StringBuilder out) {
        for (int i = 0; i < s.length(); ) {
            int c = s.codePointAt(i);
            int width = Character.charCount(c);
            boolean unpaired = Character.isSurrogate(s.charAt(i)) && width == 1;
            i += width;
            if (unpaired || !xmlChar(c)) {
                out.append('.');
                continue;
            }
            switch (c) {
                case '&': out.append("&amp;"); break;
                case '<': out.append("&lt;"); break;
                case '>': out.append("&gt;"); break;
                case '"': out.append("&quot;"); break;
                case '\n': out.append("&#10;"); break;
                case '\r': out.append("&#13;"); break;
                case '\t': out.append("&#9;"); break;
                default: out.appendCodePoint(c);
            }
        }
    }

    /** Whether uiautomator keeps the character (its stripInvalidXMLChars set). */
    static boolean xmlChar(int c) {
        if (c == '\t' || c == '\n' || c == '\r') {
            return true;
        }
        if (c < 0x20 || (c >= 0x7F && c <= 0x84) || (c >= 0x86 && c <= 0x9F)) {
            return false;
        }
        if (c >= 0xFDD0 && c <= 0xFDDF) {
            return false;
        }
        return (c & 0xFFFE) != 0xFFFE;
    }
}
