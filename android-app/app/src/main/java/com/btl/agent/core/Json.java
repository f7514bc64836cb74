/*
 * The little JSON the app writes (the native session request), without a
 * JSON library: android's org.json is not on the host JVM where this is
 * tested.
 */
package com.btl.agent.core;

public final class Json {
    private Json() {
    }

    /** {@code s} as a JSON string literal (RFC 8259 escapes; other characters as they are). */
    public static String quote(String s) {
        StringBuilder out = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': out.append("\\\""); break;
                case '\\': out.append("\\\\"); break;
                case '\n': out.append("\\n"); break;
                case '\r': out.append("\\r"); break;
                case '\t': out.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
            }
        }
        return out.append('"').toString();
    }
}
