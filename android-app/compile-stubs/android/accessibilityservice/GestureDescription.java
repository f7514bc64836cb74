// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.accessibilityservice;

import android.graphics.Path;

public final class GestureDescription {
    public static final class Builder {
        public Builder addStroke(StrokeDescription strokeDescription) { throw new RuntimeException("stub"); }

        public GestureDescription build() { throw new RuntimeException("stub"); }
    }

    public static class StrokeDescription {
        public StrokeDescription(Path path, long startTime, long duration) { throw new RuntimeException("stub"); }
    }
}
