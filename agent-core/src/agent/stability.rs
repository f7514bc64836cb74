//! Waiting for the screen to settle after an action, and the [`Clock`] the
//! wait runs on.
//!
//! The screen counts as stable once two consecutive screenshots are equal,
//! pixel for pixel; android_world polls 3 times at 0.5 s, which the default
//! [`StabilityConfig`] reproduces. The wait never fails the step: on timeout
//! the agent goes on with the last screenshot and records that the screen
//! never settled (an animation or a clock may never stop moving).

use crate::device::{Device, DeviceError};
use image::RgbaImage;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// Time as the agent sees it; tests and the virtual phone use a
/// [`ManualClock`] so waiting costs nothing.
pub trait Clock: Send {
    /// Time since an arbitrary fixed origin.
    fn now(&self) -> Duration;

    fn sleep(&mut self, duration: Duration);
}

/// Wall-clock time.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: Instant,
}

impl Default for SystemClock {
    fn default() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn sleep(&mut self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

/// A clock that only moves when slept on; sleeping returns at once.
#[derive(Debug, Clone, Copy, Default)]
pub struct ManualClock {
    now: Duration,
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        self.now
    }

    fn sleep(&mut self, duration: Duration) {
        self.now += duration;
    }
}

/// How the agent waits for the screen to settle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StabilityConfig {
    /// Time between two screenshots.
    pub poll_interval_ms: u64,
    /// Give up waiting after this long.
    pub timeout_ms: u64,
}

impl Default for StabilityConfig {
    /// android_world's 3 polls at 0.5 s.
    fn default() -> Self {
        Self {
            poll_interval_ms: 500,
            timeout_ms: 1500,
        }
    }
}

/// How a wait ended, as recorded in the trajectory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settle {
    /// Whether two consecutive screenshots matched before the timeout.
    pub stable: bool,
    /// Screenshots taken, the first included.
    pub screenshots: u32,
    pub waited_ms: u64,
}

/// Polls screenshots until two consecutive ones match or the timeout
/// passes; returns the last screenshot, which is the next observation.
pub fn wait_until_stable(
    device: &mut dyn Device,
    clock: &mut dyn Clock,
    config: &StabilityConfig,
) -> Result<(RgbaImage, Settle), DeviceError> {
    let start = clock.now();
    // A zero interval would spin forever on a clock that only moves when
    // slept on.
    let interval = Duration::from_millis(config.poll_interval_ms.max(1));
    let timeout = Duration::from_millis(config.timeout_ms);
    let mut last = device.screenshot()?;
    let mut screenshots = 1;
    loop {
        let waited = clock.now().saturating_sub(start);
        if waited >= timeout {
            let settle = Settle {
                stable: false,
                screenshots,
                waited_ms: millis(waited),
            };
            return Ok((last, settle));
        }
        clock.sleep(interval.min(timeout - waited));
        let next = device.screenshot()?;
        screenshots += 1;
        if next == last {
            let settle = Settle {
                stable: true,
                screenshots,
                waited_ms: millis(clock.now().saturating_sub(start)),
            };
            return Ok((next, settle));
        }
        last = next;
    }
}

pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceAction;
    use crate::device::ui::UiNode;
    use crate::protocol::Size;

    /// Shows `frames[i]` on the i-th screenshot, then the last one forever.
    struct Flicker {
        frames: Vec<u8>,
        shots: usize,
    }

    impl Device for Flicker {
        fn name(&self) -> String {
            "flicker".into()
        }
        fn screen_size(&mut self) -> Result<Size, DeviceError> {
            Ok(Size::new(2, 2))
        }
        fn screenshot(&mut self) -> Result<RgbaImage, DeviceError> {
            let i = self.shots.min(self.frames.len() - 1);
            self.shots += 1;
            Ok(RgbaImage::from_pixel(
                2,
                2,
                image::Rgba([self.frames[i]; 4]),
            ))
        }
        fn ui_tree(&mut self) -> Result<Option<UiNode>, DeviceError> {
            Ok(None)
        }
        fn perform(&mut self, _: &DeviceAction) -> Result<(), DeviceError> {
            Ok(())
        }
    }

    #[test]
    fn stable_after_two_equal_screenshots() {
        let mut device = Flicker {
            frames: vec![1, 2, 3, 3],
            shots: 0,
        };
        let mut clock = ManualClock::default();
        let (shot, settle) =
            wait_until_stable(&mut device, &mut clock, &StabilityConfig::default()).unwrap();
        assert_eq!(shot.get_pixel(0, 0).0, [3; 4]);
        assert_eq!(
            settle,
            Settle {
                stable: true,
                screenshots: 4,
                waited_ms: 1500
            }
        );
    }

    #[test]
    fn gives_up_at_the_timeout() {
        let mut device = Flicker {
            frames: (0..100).collect(),
            shots: 0,
        };
        let mut clock = ManualClock::default();
        let config = StabilityConfig {
            poll_interval_ms: 400,
            timeout_ms: 1000,
        };
        let (shot, settle) = wait_until_stable(&mut device, &mut clock, &config).unwrap();
        // Polls at 400, 800 and (clipped to the timeout) 1000 ms.
        assert_eq!(shot.get_pixel(0, 0).0, [3; 4]);
        assert_eq!(
            settle,
            Settle {
                stable: false,
                screenshots: 4,
                waited_ms: 1000
            }
        );
        assert_eq!(clock.now(), Duration::from_millis(1000));
    }
}
