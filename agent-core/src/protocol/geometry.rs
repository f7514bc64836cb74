//! The model frame: Qwen2.5-VL's `smart_resize` and the mapping of points
//! between the model frame and the device screen.
//!
//! The model sees the screenshot resized so both sides are multiples of 28 and
//! the pixel count lies in `[min_pixels, max_pixels]`; it answers in pixels of
//! that resized image. The arithmetic below follows the reference Python
//! operation by operation (same division order, `round` with halves to even,
//! IEEE `sqrt`), so the sizes agree exactly, not approximately.

use super::action::Point;
use thiserror::Error;

/// Side length of one merged vision patch of Qwen2.5-VL (14 px patches, 2×2 merge).
pub const FACTOR: u32 = 28;
/// Smallest pixel count Qwen2.5-VL accepts (4 merged patches).
pub const MIN_PIXELS: u64 = 3136;
/// `max_pixels` used to train BTL-UI.
pub const TRAINING_MAX_PIXELS: u64 = 4_014_080;
/// Longest side over shortest side that the model accepts.
pub const MAX_ASPECT_RATIO: f64 = 200.0;

/// A width and height in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Size {
    pub width: u32,
    pub height: u32,
}

impl Size {
    pub fn new(width: u32, height: u32) -> Self {
        Self { width, height }
    }

    pub fn pixels(&self) -> u64 {
        u64::from(self.width) * u64::from(self.height)
    }
}

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}", self.width, self.height)
    }
}

#[derive(Debug, Clone, PartialEq, Error)]
pub enum ResizeError {
    #[error("image size {0} has a zero side")]
    Empty(Size),
    #[error("image size {size} has aspect ratio {ratio:.1}, above the model's limit of 200")]
    AspectRatio { size: Size, ratio: f64 },
    #[error("min_pixels {min} exceeds max_pixels {max}")]
    PixelBounds { min: u64, max: u64 },
}

/// Qwen2.5-VL's `smart_resize` with factor 28 and `min_pixels` 3136.
pub fn smart_resize(size: Size, max_pixels: u64) -> Result<Size, ResizeError> {
    smart_resize_with(size, FACTOR, MIN_PIXELS, max_pixels)
}

/// `smart_resize` with every parameter explicit.
pub fn smart_resize_with(
    size: Size,
    factor: u32,
    min_pixels: u64,
    max_pixels: u64,
) -> Result<Size, ResizeError> {
    if size.width == 0 || size.height == 0 {
        return Err(ResizeError::Empty(size));
    }
    if min_pixels > max_pixels {
        return Err(ResizeError::PixelBounds {
            min: min_pixels,
            max: max_pixels,
        });
    }
    let (h, w) = (f64::from(size.height), f64::from(size.width));
    let ratio = h.max(w) / h.min(w);
    if ratio > MAX_ASPECT_RATIO {
        return Err(ResizeError::AspectRatio { size, ratio });
    }
    let f = f64::from(factor);
    // Every branch keeps a side at least one factor long; on the shrinking
    // branch this stops a tiny max_pixels from giving a zero side, as
    // transformers does.
    let by = |n: f64| n.max(f) as u64;
    let mut h_bar = by((h / f).round_ties_even() * f);
    let mut w_bar = by((w / f).round_ties_even() * f);
    if h_bar * w_bar > max_pixels {
        let beta = ((h * w) / max_pixels as f64).sqrt();
        h_bar = by((h / beta / f).floor() * f);
        w_bar = by((w / beta / f).floor() * f);
    } else if h_bar * w_bar < min_pixels {
        let beta = (min_pixels as f64 / (h * w)).sqrt();
        h_bar = by((h * beta / f).ceil() * f);
        w_bar = by((w * beta / f).ceil() * f);
    }
    Ok(Size::new(saturate(w_bar), saturate(h_bar)))
}

fn saturate(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// The pair of frames one observation lives in: the device screen and the
/// model frame (`smart_resize` of the screen).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FrameMap {
    pub device: Size,
    pub model: Size,
}

/// A point in whole device pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct DevicePoint {
    pub x: u32,
    pub y: u32,
}

impl FrameMap {
    pub fn new(device: Size, max_pixels: u64) -> Result<Self, ResizeError> {
        Ok(Self {
            device,
            model: smart_resize(device, max_pixels)?,
        })
    }

    /// Whether a model-frame point lies on the model image (edges included).
    pub fn in_model_frame(&self, p: Point) -> bool {
        p.x.is_finite()
            && p.y.is_finite()
            && (0.0..=f64::from(self.model.width)).contains(&p.x)
            && (0.0..=f64::from(self.model.height)).contains(&p.y)
    }

    /// Model-frame point to device pixels: scaled per axis by
    /// `device / model`, rounded half to even and clamped onto the screen.
    pub fn to_device(&self, p: Point) -> DevicePoint {
        DevicePoint {
            x: scale_clamped(p.x, self.device.width, self.model.width),
            y: scale_clamped(p.y, self.device.height, self.model.height),
        }
    }

    /// Device pixel to model frame (no rounding: the model frame is where
    /// fractional coordinates are harmless).
    pub fn to_model(&self, p: DevicePoint) -> Point {
        Point::new(
            f64::from(p.x) * f64::from(self.model.width) / f64::from(self.device.width),
            f64::from(p.y) * f64::from(self.model.height) / f64::from(self.device.height),
        )
    }

    /// [`to_model`](Self::to_model) in whole pixels: the point a model
    /// writes for a device point (an oracle's tap, a listed element).
    pub fn to_model_rounded(&self, p: DevicePoint) -> Point {
        let m = self.to_model(p);
        Point::new(m.x.round(), m.y.round())
    }
}

fn scale_clamped(v: f64, device: u32, model: u32) -> u32 {
    let scaled = (v * f64::from(device) / f64::from(model)).round_ties_even();
    let max = f64::from(device.saturating_sub(1));
    // NaN compares false everywhere; `clamp` would keep it, so map it to 0.
    if scaled.is_nan() {
        0
    } else {
        scaled.clamp(0.0, max) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resize(w: u32, h: u32, max: u64) -> (u32, u32) {
        let s = smart_resize(Size::new(w, h), max).unwrap();
        (s.width, s.height)
    }

    #[test]
    fn spec_checks() {
        assert_eq!(resize(720, 1280, TRAINING_MAX_PIXELS), (728, 1288));
        assert_eq!(resize(2560, 1440, TRAINING_MAX_PIXELS), (2548, 1428));
    }

    // Round branch with a tie: 42/28 = 1.5 rounds to 2 (even), 70/28 = 2.5
    // rounds to 2 (even), so 42x70 -> 56x56 (3136 pixels, not below min).
    #[test]
    fn rounding_ties_go_to_even() {
        assert_eq!(resize(42, 70, TRAINING_MAX_PIXELS), (56, 56));
        // 98/28 = 3.5 -> 4 -> 112.
        assert_eq!(resize(98, 98, TRAINING_MAX_PIXELS), (112, 112));
    }

    // Shrink branch, by hand: 1080x2400 with max 1_000_000.
    // beta = sqrt(2_592_000 / 1_000_000) = 1.6099689437998486
    // h: 2400 / beta = 1490.71...; / 28 = 53.24 -> 53 -> 1484
    // w: 1080 / beta = 670.82...;  / 28 = 23.96 -> 23 -> 644
    #[test]
    fn shrink_branch() {
        assert_eq!(resize(1080, 2400, 1_000_000), (644, 1484));
    }

    // Grow branch, by hand: 10x20 rounds to 28x28 = 784 < 3136.
    // beta = sqrt(3136 / 200) = 3.9597979746446663
    // h: 20 * beta = 79.20 / 28 = 2.83 -> 3 -> 84; w: 39.60 / 28 = 1.41 -> 2 -> 56
    #[test]
    fn grow_branch() {
        assert_eq!(resize(10, 20, TRAINING_MAX_PIXELS), (56, 84));
    }

    // Shrink branch with a side clamped: 35x199, max 3448. Rounded 28x196 =
    // 5488 > 3448; beta = sqrt(6965 / 3448) = 1.4213; h: 199 / beta / 28 =
    // 5.0006 -> 140; w: 35 / beta / 28 = 0.879 -> 0, held at 28. The result,
    // 28x140 = 3920, exceeds max_pixels, as the reference allows.
    #[test]
    fn shrink_branch_holds_a_short_side_at_one_patch() {
        assert_eq!(resize(35, 199, 3448), (28, 140));
    }

    #[test]
    fn aspect_ratio_limit() {
        assert!(smart_resize(Size::new(200, 1), TRAINING_MAX_PIXELS).is_ok());
        let err = smart_resize(Size::new(201, 1), TRAINING_MAX_PIXELS).unwrap_err();
        assert!(matches!(err, ResizeError::AspectRatio { .. }));
        assert!(err.to_string().contains("201x1"));
        assert!(matches!(
            smart_resize(Size::new(0, 10), TRAINING_MAX_PIXELS),
            Err(ResizeError::Empty(_))
        ));
    }

    // 720x1280 -> 728x1288: model x 663 -> 663 * 720 / 728 = 655.71 -> 656,
    // y 1135 -> 1135 * 1280 / 1288 = 1127.95 -> 1128.
    #[test]
    fn model_to_device_by_hand() {
        let map = FrameMap::new(Size::new(720, 1280), TRAINING_MAX_PIXELS).unwrap();
        assert_eq!(map.model, Size::new(728, 1288));
        assert_eq!(
            map.to_device(Point::new(663.0, 1135.0)),
            DevicePoint { x: 656, y: 1128 }
        );
        assert_eq!(
            map.to_device(Point::new(728.0, 1288.0)),
            DevicePoint { x: 719, y: 1279 },
            "clamped onto the screen"
        );
        assert_eq!(
            map.to_device(Point::new(-5.0, f64::NAN)),
            DevicePoint { x: 0, y: 0 }
        );
        assert!(map.in_model_frame(Point::new(728.0, 0.0)));
        assert!(!map.in_model_frame(Point::new(728.5, 0.0)));
    }
}
