// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android;

public final class R {
    public static final class drawable {
        public static final int ic_dialog_alert = 0x01080027;
        public static final int ic_menu_view = 0x01080045;
    }
}
