/*
 * Gesture strokes: what is dispatched for each action, and what is refused.
 */
package com.btl.agent.core;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import org.junit.Test;

public class GesturesTest {
    private static final int W = 1080;
    private static final int H = 2400;

    @Test
    public void aTapIsAShortStationaryTouch() {
        Gestures.Stroke tap = Gestures.tap(540, 1200, W, H);
        assertEquals(540, tap.fromX);
        assertEquals(1200, tap.toY);
        assertTrue(tap.isStationary());
        assertEquals(50, tap.durationMs);
        assertEquals(0.0, tap.length(), 0.0);
    }

    @Test
    public void aLongPressHoldsLongerThanTheLongPressTimeout() {
        Gestures.Stroke press = Gestures.longPress(0, 0, 800, W, H);
        assertTrue(press.isStationary());
        assertEquals(800, press.durationMs);
        assertThrows(IllegalArgumentException.class, () -> Gestures.longPress(10, 10, 500, W, H));
        assertThrows(IllegalArgumentException.class, () -> Gestures.longPress(10, 10, 60_001, W, H));
    }

    @Test
    public void aSwipeRunsFromStartToEnd() {
        // agent-core's "up" swipe on 1080x2400: (540, 1800) -> (540, 600) in 300 ms.
        Gestures.Stroke up = Gestures.swipe(540, 1800, 540, 600, 300, W, H);
        assertFalse(up.isStationary());
        assertEquals(1200.0, up.length(), 1e-9);
        assertEquals(300, up.durationMs);
        // A 3-4-5 triangle: 300 across, 400 down.
        assertEquals(500.0, Gestures.swipe(100, 100, 400, 500, 300, W, H).length(), 1e-9);
    }

    @Test
    public void pointsOffTheScreenAreRefusedNotClamped() {
        IllegalArgumentException e =
                assertThrows(IllegalArgumentException.class, () -> Gestures.tap(1080, 5, W, H));
        assertEquals("tap at (1080, 5) is off the 1080x2400 screen", e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> Gestures.tap(-1, 5, W, H));
        assertThrows(IllegalArgumentException.class, () -> Gestures.tap(5, 2400, W, H));
        Gestures.tap(1079, 2399, W, H);
        assertThrows(IllegalArgumentException.class, () -> Gestures.swipe(10, 10, 10, 2400, 300, W, H));
        assertThrows(IllegalArgumentException.class, () -> Gestures.tap(0, 0, 0, H));
    }

    @Test
    public void swipesNeedALengthAndAPlatformDuration() {
        assertThrows(IllegalArgumentException.class, () -> Gestures.swipe(10, 10, 10, 10, 300, W, H));
        assertThrows(IllegalArgumentException.class, () -> Gestures.swipe(10, 10, 20, 10, 0, W, H));
        assertThrows(IllegalArgumentException.class, () -> Gestures.swipe(10, 10, 20, 10, 60_001, W, H));
        assertEquals(60_000, Gestures.swipe(10, 10, 20, 10, 60_000, W, H).durationMs);
    }
}
