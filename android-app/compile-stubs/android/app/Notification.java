// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.app;

import android.content.Context;
import android.graphics.drawable.Icon;

public class Notification {
    public static class Action {
        public static final class Builder {
            public Builder(Icon icon, CharSequence title, PendingIntent intent) { throw new RuntimeException("stub"); }

            public Builder(int icon, CharSequence title, PendingIntent intent) { throw new RuntimeException("stub"); }

            public Action build() { throw new RuntimeException("stub"); }
        }
    }

    public abstract static class Style { }

    public static class BigTextStyle extends Style {
        public BigTextStyle bigText(CharSequence cs) { throw new RuntimeException("stub"); }
    }

    public static class Builder {
        public Builder(Context context, String channelId) { throw new RuntimeException("stub"); }

        public Builder setSmallIcon(int icon) { throw new RuntimeException("stub"); }

        public Builder setContentTitle(CharSequence title) { throw new RuntimeException("stub"); }

        public Builder setContentText(CharSequence text) { throw new RuntimeException("stub"); }

        public Builder setOngoing(boolean ongoing) { throw new RuntimeException("stub"); }

        public Builder setStyle(Style style) { throw new RuntimeException("stub"); }

        public Builder addAction(Action action) { throw new RuntimeException("stub"); }

        public Notification build() { throw new RuntimeException("stub"); }
    }
}
