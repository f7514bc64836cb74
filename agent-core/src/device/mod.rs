//! Devices the agent acts on: the [`Device`] trait and its backends.
//!
//! A device offers a screenshot, optionally a UI tree, its screen size, and
//! performs [`DeviceAction`]s in device pixels. The agent maps model-frame
//! actions to device actions with [`DeviceAction::from_model`]; backends never
//! see the model frame.
//!
//! [`ui::UiNode`] is the screen's accessibility tree as every backend
//! reports it (`uiautomator dump`'s XML); [`elements`] flattens it into the
//! lines profile `btl-screen-text` prompts with.
//!
//! # Backends
//! Host builds (feature `host`) have two; on the phone the Android app
//! implements [`Device`] itself.
#![cfg_attr(
    feature = "host",
    doc = "- [`adb::AdbDevice`]: any Android device or emulator (or the virtual
  phone) through the adb server, with per-call timeouts.
- [`sim::SimDevice`]: the virtual phone in-process.

[`adb_server::PrivateAdbServer`] starts an adb server of one's own for
tests, benchmarks and collection on the virtual phone."
)]

#[cfg(feature = "host")]
pub mod adb;
#[cfg(feature = "host")]
pub mod adb_server;
pub mod elements;
#[cfg(feature = "host")]
pub mod framebuffer;
#[cfg(feature = "host")]
pub mod sim;
pub mod ui;

use crate::protocol::{Action, DevicePoint, Direction, FrameMap, Size};
use image::RgbaImage;
use std::time::Duration;
use thiserror::Error;
use ui::UiNode;

/// How long a long press holds: Android reports a long press after 500 ms;
/// 800 ms leaves room for slow devices, as the spec asks.
pub const LONG_PRESS_MS: u32 = 800;
/// The longest side a device's screen may report: an 8K panel is 7,680.
/// Past it a reported size is taken for a broken or hostile device.
pub const MAX_SCREEN_SIDE: u32 = 16_384;
/// The most pixels a screenshot may hold (8K is 33.2 million); as RGBA,
/// 128 MiB.
pub const MAX_SCREEN_PIXELS: u64 = 1 << 25;

/// Whether an image of `width` × `height` is within [`MAX_SCREEN_PIXELS`]:
/// screenshots are decoded whole, four bytes a pixel, and a few kilobytes
/// of PNG can claim gigabytes.
pub fn within_screen_pixels(width: u32, height: u32) -> bool {
    u64::from(width) * u64::from(height) <= MAX_SCREEN_PIXELS
}

/// Whether an image of `width` × `height` is within both screen bounds:
/// [`MAX_SCREEN_SIDE`] a side and [`MAX_SCREEN_PIXELS`] in all.
pub fn fits_a_screen(width: u32, height: u32) -> bool {
    width.max(height) <= MAX_SCREEN_SIDE && within_screen_pixels(width, height)
}

/// What is wrong with a screen of `width` × `height`, if no phone has one.
fn screen_fault(width: u32, height: u32) -> Option<String> {
    if width == 0 || height == 0 {
        Some(format!("a screen of {width}x{height} has no pixels"))
    } else if !fits_a_screen(width, height) {
        Some(format!(
            "a screen of {width}x{height} is past the {MAX_SCREEN_SIDE} pixels a side and \
             {MAX_SCREEN_PIXELS} pixels in all any phone has"
        ))
    } else {
        None
    }
}

/// Refuses a screen of `width` × `height` no phone has, naming what
/// reported it.
pub fn check_screen(operation: &str, width: u32, height: u32) -> Result<Size, DeviceError> {
    match screen_fault(width, height) {
        Some(reason) => Err(DeviceError::Protocol {
            operation: operation.into(),
            reason,
        }),
        None => Ok(Size::new(width, height)),
    }
}

/// Decodes screenshot bytes (of `format`, or of the format their first
/// bytes show when `None`), reading the size from the header first: a few
/// kilobytes of PNG can claim gigabytes of pixels, so a size no phone's
/// screen has is refused before any is allocated. The error says why, in
/// words for the caller to put after what it was reading.
pub fn decode_screenshot(
    bytes: &[u8],
    format: Option<image::ImageFormat>,
) -> Result<image::DynamicImage, String> {
    let unreadable = |e: image::ImageError| format!("not an image ({} bytes): {e}", bytes.len());
    let reader = || -> Result<_, String> {
        let cursor = std::io::Cursor::new(bytes);
        match format {
            Some(format) => Ok(image::ImageReader::with_format(cursor, format)),
            None => image::ImageReader::new(cursor)
                .with_guessed_format()
                .map_err(|e| unreadable(e.into())),
        }
    };
    let (width, height) = reader()?.into_dimensions().map_err(unreadable)?;
    if let Some(fault) = screen_fault(width, height) {
        return Err(fault);
    }
    reader()?.decode().map_err(unreadable)
}

/// Duration of a swipe gesture: fast enough to fling a list, slow enough not
/// to be taken for a tap.
pub const SWIPE_MS: u32 = 300;

/// An action in device pixels.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DeviceAction {
    Tap {
        at: DevicePoint,
    },
    LongPress {
        at: DevicePoint,
    },
    Swipe {
        from: DevicePoint,
        to: DevicePoint,
        duration_ms: u32,
    },
    Type {
        text: String,
    },
    Back,
    Home,
    Wait {
        ms: u32,
    },
}

impl DeviceAction {
    /// The device action for a model-frame action; `None` for `Finish`,
    /// which ends the episode instead of touching the device.
    ///
    /// A swipe moves the finger across the middle of the screen in its
    /// direction, from 3/4 to 1/4 of the axis (so `up` scrolls content to
    /// reveal what is below).
    pub fn from_model(action: &Action, frame: &FrameMap) -> Option<Self> {
        Some(match action {
            Action::Tap { point_2d } => Self::Tap {
                at: frame.to_device(*point_2d),
            },
            Action::LongPress { point_2d } => Self::LongPress {
                at: frame.to_device(*point_2d),
            },
            Action::Type { text } => Self::Type { text: text.clone() },
            Action::Swipe { direction } => {
                let Size { width, height } = frame.device;
                let (cx, cy) = (width / 2, height / 2);
                let (near_x, far_x) = (width / 4, width - width / 4);
                let (near_y, far_y) = (height / 4, height - height / 4);
                let (from, to) = match direction {
                    Direction::Up => ((cx, far_y), (cx, near_y)),
                    Direction::Down => ((cx, near_y), (cx, far_y)),
                    Direction::Left => ((far_x, cy), (near_x, cy)),
                    Direction::Right => ((near_x, cy), (far_x, cy)),
                };
                Self::Swipe {
                    from: DevicePoint {
                        x: from.0,
                        y: from.1,
                    },
                    to: DevicePoint { x: to.0, y: to.1 },
                    duration_ms: SWIPE_MS,
                }
            }
            Action::Back => Self::Back,
            Action::Home => Self::Home,
            Action::Wait => Self::Wait { ms: 1000 },
            Action::Finish { .. } => return None,
        })
    }
}

/// Why a device call failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum DeviceError {
    /// The device did not answer within the call's time limit.
    #[error("{operation} timed out after {after:?}")]
    Timeout { operation: String, after: Duration },
    /// The connection to the device or the adb server is gone.
    #[error("connection lost during {operation}: {reason}")]
    Disconnected { operation: String, reason: String },
    /// A device command ran and reported failure.
    #[error("`{command}` failed with exit code {exit_code}: {stderr}")]
    Command {
        command: String,
        exit_code: i32,
        stderr: String,
    },
    /// The device answered something we cannot read.
    #[error("unexpected reply to {operation}: {reason}")]
    Protocol { operation: String, reason: String },
    /// The action cannot be performed on this device (e.g. off-screen).
    #[error("cannot perform {action}: {reason}")]
    Unsupported { action: String, reason: String },
}

/// A phone the agent can observe and act on.
pub trait Device: Send {
    /// A short human-readable name ("virtual phone", an adb serial).
    fn name(&self) -> String;

    fn screen_size(&mut self) -> Result<Size, DeviceError>;

    fn screenshot(&mut self) -> Result<RgbaImage, DeviceError>;

    /// The current UI tree, `None` when the device offers none.
    fn ui_tree(&mut self) -> Result<Option<UiNode>, DeviceError>;

    fn perform(&mut self, action: &DeviceAction) -> Result<(), DeviceError>;

    /// A system setting (`settings get NAMESPACE KEY`), `None` when unset.
    /// Task checkers read device state through it, as android_world does,
    /// so they work on any Android device, not only the virtual phone.
    fn setting(&mut self, namespace: &str, key: &str) -> Result<Option<String>, DeviceError> {
        Err(DeviceError::Unsupported {
            action: format!("settings get {namespace} {key}"),
            reason: format!("{} has no system settings", self.name()),
        })
    }

    /// Changes a system setting (`settings put NAMESPACE KEY VALUE`); how a
    /// task puts a real device in its starting state.
    fn put_setting(&mut self, namespace: &str, key: &str, value: &str) -> Result<(), DeviceError> {
        Err(DeviceError::Unsupported {
            action: format!("settings put {namespace} {key} {value}"),
            reason: format!("{} has no system settings", self.name()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Point, TRAINING_MAX_PIXELS};

    #[test]
    fn screens_no_phone_has_are_refused() {
        for (w, h) in [(1080, 2400), (7680, 4320), (16_384, 2048), (1, 1)] {
            assert_eq!(check_screen("wm size", w, h).unwrap(), Size::new(w, h));
        }
        let refused = |w, h| check_screen("wm size", w, h).unwrap_err().to_string();
        assert_eq!(
            refused(0, 2400),
            "unexpected reply to wm size: a screen of 0x2400 has no pixels"
        );
        // One side too long; then the sides within bounds but 2^25 + 1 pixels
        // in all (5,793 × 5,793 = 33,558,849).
        for (w, h) in [(16_385, 10), (u32::MAX, u32::MAX), (5793, 5793)] {
            assert!(refused(w, h).contains("any phone has"), "{w}x{h}");
        }
        assert!(check_screen("wm size", 5792, 5792).is_ok());
    }

    /// A PNG of `width` × `height` by its header, whose pixel data is a
    /// 2 × 2 grey image's.
    fn png_claiming(width: u32, height: u32) -> Vec<u8> {
        let mut png = Vec::new();
        image::GrayImage::new(2, 2)
            .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
            .unwrap();
        // The signature (8 bytes), IHDR's length and type (8), its width
        // and height, then its CRC over type and data (PNG spec §5.3, §11.2.2).
        png[16..20].copy_from_slice(&width.to_be_bytes());
        png[20..24].copy_from_slice(&height.to_be_bytes());
        let crc = crc32fast::hash(&png[12..29]);
        png[29..33].copy_from_slice(&crc.to_be_bytes());
        png
    }

    /// A screenshot's header is read before its pixels: a small file that
    /// claims more pixels than any screen has is refused undecoded, whether
    /// its format is given or guessed.
    #[test]
    fn a_screenshot_larger_than_any_screen_is_refused_before_decoding() {
        for format in [Some(image::ImageFormat::Png), None] {
            let decoded = |png: &[u8]| decode_screenshot(png, format);
            assert_eq!(
                decoded(&png_claiming(23_000, 23_000)).unwrap_err(),
                "a screen of 23000x23000 is past the 16384 pixels a side and 33554432 pixels \
                 in all any phone has"
            );
            // The PNG decoder refuses a side of 0 itself.
            let e = decoded(&png_claiming(0, 2)).unwrap_err();
            assert!(e.starts_with("not an image ("), "{e}");
            // The header is what was checked: a plausible size is decoded,
            // and its pixel data, made for 2 x 2, is then found short.
            let e = decoded(&png_claiming(1080, 2400)).unwrap_err();
            assert!(e.starts_with("not an image ("), "{e}");
            let image = decoded(&png_claiming(2, 2)).unwrap();
            assert_eq!((image.width(), image.height()), (2, 2));
            let e = decoded(b"GIF89a, or so it says").unwrap_err();
            assert!(e.starts_with("not an image (21 bytes): "), "{e}");
        }
    }

    // 1080x2400 -> model frame 1092x2408 (2400/28 = 85.7 -> 86; 1080/28 =
    // 38.6 -> 39). Model (546, 1204) -> device (546 * 1080/1092,
    // 1204 * 2400/2408) = (540.0, 1200.0).
    #[test]
    fn model_actions_map_to_device_pixels() {
        let frame = FrameMap::new(Size::new(1080, 2400), TRAINING_MAX_PIXELS).unwrap();
        assert_eq!(frame.model, Size::new(1092, 2408));
        let tap = Action::Tap {
            point_2d: Point::new(546.0, 1204.0),
        };
        assert_eq!(
            DeviceAction::from_model(&tap, &frame),
            Some(DeviceAction::Tap {
                at: DevicePoint { x: 540, y: 1200 }
            })
        );
        let up = Action::Swipe {
            direction: Direction::Up,
        };
        assert_eq!(
            DeviceAction::from_model(&up, &frame),
            Some(DeviceAction::Swipe {
                from: DevicePoint { x: 540, y: 1800 },
                to: DevicePoint { x: 540, y: 600 },
                duration_ms: SWIPE_MS
            })
        );
        assert_eq!(
            DeviceAction::from_model(&Action::Finish { answer: None }, &frame),
            None
        );
    }
}
