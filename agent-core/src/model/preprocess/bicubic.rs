//! Pillow's BICUBIC resize of 8-bit RGB images, reproduced bit for bit.
//!
//! Qwen2.5-VL learned from screenshots resized by
//! `PIL.Image.resize(size, BICUBIC)` (transformers' PIL image processor and
//! qwen-vl-utils both call it), so the phone resizes the same way. General
//! resizers such as the `image` crate's CatmullRom land up to ~24 levels
//! away. This is written from Pillow's algorithm (`Resample.c` of Pillow 12
//! and 13), checked against both by `tests/preprocess.rs`. What has to match:
//!
//! - Two passes, each rounded and clamped to `u8`. Their order changed in
//!   Pillow 13 (see [`PillowVersion`]), which changes pixels by up to ~20
//!   levels. An axis whose length does not change gets no pass (so an
//!   unchanged size gives a copy).
//! - Keys' cubic with a = −0.5 and support 2, widened by the scale factor
//!   when shrinking so every source pixel contributes.
//! - Per output pixel: the taps are the source pixels from
//!   `trunc(center − support + 0.5)` to `trunc(center + support + 0.5)`,
//!   clipped to the image; the weights are normalised to sum 1 in f64, then
//!   turned into 22-bit fixed point, rounded away from zero.
//! - Integer accumulation starting from one half, an arithmetic shift, and a
//!   clamp to 0..=255.
//! - The scale comes from the source side as an f32, since Pillow takes the
//!   source box as floats.
//!
//! `Image.resize` reduces by whole factors first only when given a
//! `reducing_gap`. Its default is `None`, and transformers does not pass one,
//! so there is no such step here.

use crate::protocol::Size;
use image::RgbImage;
use std::ops::Range;
use thiserror::Error;

/// Fractional bits of the fixed-point weights: 8 bits for the pixel value and
/// 2 for the overshoot of the negative lobes fit beside them in an `i32`.
const PRECISION_BITS: u32 = 22;
/// One half in fixed point: the accumulators start here so that the final
/// shift rounds instead of truncating.
const HALF: i32 = 1 << (PRECISION_BITS - 1);
/// Support of the bicubic kernel at scale 1, in source pixels.
const SUPPORT: f64 = 2.0;
const CHANNELS: usize = 3;

/// The Pillow release whose resize to reproduce: they order the two passes
/// differently, and the intermediate rounding makes the order visible.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum PillowVersion {
    /// Pillow up to 12: always the horizontal pass first. What models trained
    /// with an earlier Pillow saw; BTL-UI (2025) predates Pillow 13 (2026).
    #[default]
    Pillow12,
    /// Pillow 13: the vertical pass first when the height loses more than
    /// twice as many pixels as the width, else the horizontal one.
    Pillow13,
}

impl PillowVersion {
    fn vertical_first(self, from: Size, to: Size) -> bool {
        let lost_h = i64::from(from.height) - i64::from(to.height);
        let lost_w = i64::from(from.width) - i64::from(to.width);
        self == Self::Pillow13 && lost_h > 0 && lost_h > 2 * lost_w
    }
}

/// Why an image could not be resized.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ResampleError {
    #[error("cannot resize an image of size {0}: it has no pixels")]
    EmptySource(Size),
    #[error("cannot resize to {0}: both sides must be at least 1 pixel")]
    EmptyTarget(Size),
    #[error("cannot resize to {0}: the image does not fit in memory")]
    TooLarge(Size),
}

/// `image.resize((width, height), Image.BICUBIC)` of the given Pillow, on RGB.
pub fn resize_bicubic_pil(
    src: &RgbImage,
    width: u32,
    height: u32,
    pillow: PillowVersion,
) -> Result<RgbImage, ResampleError> {
    let (src_w, src_h) = src.dimensions();
    let source = Size::new(src_w, src_h);
    let target = Size::new(width, height);
    if src_w == 0 || src_h == 0 {
        return Err(ResampleError::EmptySource(source));
    }
    if width == 0 || height == 0 {
        return Err(ResampleError::EmptyTarget(target));
    }
    // The output first: a size that cannot be allocated fails here, before
    // any weights are computed for it.
    let out_row = (width as usize)
        .checked_mul(CHANNELS)
        .ok_or(ResampleError::TooLarge(target))?;
    let mut out = zeroed(out_row.checked_mul(height as usize), target)?;
    let src_row = src_w as usize * CHANNELS;
    let horizontal = || Taps::new(src_w, width, target);
    let vertical = || Taps::new(src_h, height, target);
    let all = src.as_raw();

    match (width == src_w, height == src_h) {
        // Pillow's `resize` returns a copy for the same size.
        (true, true) => out.copy_from_slice(all),
        (false, true) => resample_rows(all, src_row, &horizontal()?, &mut out, out_row),
        (true, false) => resample_columns(all, src_row, 0, &vertical()?, &mut out),
        (false, false) if pillow.vertical_first(source, target) => {
            let mut stage = zeroed(src_row.checked_mul(height as usize), target)?;
            resample_columns(all, src_row, 0, &vertical()?, &mut stage);
            resample_rows(&stage, src_row, &horizontal()?, &mut out, out_row);
        }
        (false, false) => {
            // Only the rows the vertical pass reads are resized horizontally.
            let vertical = vertical()?;
            let rows = vertical.source_span();
            let mut stage = zeroed(out_row.checked_mul(rows.len()), target)?;
            let source_rows = &all[rows.start * src_row..rows.end * src_row];
            resample_rows(source_rows, src_row, &horizontal()?, &mut stage, out_row);
            resample_columns(&stage, out_row, rows.start, &vertical, &mut out);
        }
    }
    RgbImage::from_raw(width, height, out).ok_or(ResampleError::TooLarge(target))
}

/// A zero-filled buffer, or `TooLarge` instead of an allocation failure.
fn zeroed(len: Option<usize>, target: Size) -> Result<Vec<u8>, ResampleError> {
    let len = len.ok_or(ResampleError::TooLarge(target))?;
    let mut buf = Vec::new();
    buf.try_reserve_exact(len)
        .map_err(|_| ResampleError::TooLarge(target))?;
    buf.resize(len, 0);
    Ok(buf)
}

/// The source pixels and fixed-point weights of one output pixel.
#[derive(Debug, Clone, PartialEq)]
struct Tap {
    first: usize,
    weights: Range<usize>,
}

/// The taps of every output pixel along one axis.
#[derive(Debug, Clone, PartialEq)]
struct Taps {
    taps: Vec<Tap>,
    weights: Vec<i32>,
}

impl Taps {
    /// The taps of resizing `in_size` pixels to `out_size`; `target` only
    /// names the output in the error.
    fn new(in_size: u32, out_size: u32, target: Size) -> Result<Self, ResampleError> {
        let scale = f64::from(in_size as f32) / f64::from(out_size);
        let stretch = scale.max(1.0);
        let support = SUPPORT * stretch;
        let inv_stretch = 1.0 / stretch;
        let too_large = |_| ResampleError::TooLarge(target);
        let most_taps = (support.ceil() as usize)
            .saturating_mul(2)
            .saturating_add(1)
            .min(in_size as usize);
        let mut taps = Vec::new();
        taps.try_reserve_exact(out_size as usize)
            .map_err(too_large)?;
        let mut weights = Vec::new();
        weights
            .try_reserve_exact((out_size as usize).saturating_mul(most_taps))
            .map_err(too_large)?;
        let mut raw = Vec::with_capacity(most_taps);
        for i in 0..out_size {
            let center = (f64::from(i) + 0.5) * scale;
            // `as i64` truncates toward zero, like Pillow's `(int)` casts.
            let first = ((center - support + 0.5) as i64).max(0);
            let end = ((center + support + 0.5) as i64).min(i64::from(in_size));
            raw.clear();
            raw.extend((first..end).map(|x| keys_cubic((x as f64 - center + 0.5) * inv_stretch)));
            let total = raw.iter().fold(0.0, |sum, w| sum + w);
            let start = weights.len();
            weights.extend(raw.iter().map(|&w| {
                let w = if total != 0.0 { w / total } else { w };
                to_fixed(w)
            }));
            taps.push(Tap {
                first: first as usize,
                weights: start..weights.len(),
            });
        }
        Ok(Self { taps, weights })
    }

    fn iter(&self) -> impl Iterator<Item = (usize, &[i32])> {
        self.taps
            .iter()
            .map(|t| (t.first, &self.weights[t.weights.clone()]))
    }

    /// The source indices any output pixel reads.
    fn source_span(&self) -> Range<usize> {
        let start = self.taps.iter().map(|t| t.first).min().unwrap_or(0);
        let end = self
            .taps
            .iter()
            .map(|t| t.first + t.weights.len())
            .max()
            .unwrap_or(0);
        start..end.max(start)
    }
}

/// Keys' cubic convolution kernel with a = −0.5, in Pillow's operation order.
fn keys_cubic(x: f64) -> f64 {
    const A: f64 = -0.5;
    let x = x.abs();
    if x < 1.0 {
        ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        (((x - 5.0) * x + 8.0) * x - 4.0) * A
    } else {
        0.0
    }
}

/// A normalised weight in fixed point, rounded half away from zero.
fn to_fixed(w: f64) -> i32 {
    let scaled = w * f64::from(1u32 << PRECISION_BITS);
    if w < 0.0 {
        (scaled - 0.5) as i32
    } else {
        (scaled + 0.5) as i32
    }
}

/// One channel's accumulator back to a pixel value.
fn clamp_fixed(acc: i32) -> u8 {
    (acc >> PRECISION_BITS).clamp(0, 255) as u8
}

/// The horizontal pass: every row of `src` to `out`.
///
/// The accumulators wrap like Pillow's C `int`s would. With normalised
/// weights they stay far below 2^31 (|sum| ≤ 255 · 1.16 · 2^22), so wrapping
/// never happens in practice; it only keeps debug builds from panicking where
/// release builds would not.
fn resample_rows(src: &[u8], src_row: usize, taps: &Taps, out: &mut [u8], out_row: usize) {
    for (row, out_row) in src.chunks_exact(src_row).zip(out.chunks_exact_mut(out_row)) {
        for ((first, weights), px) in taps.iter().zip(out_row.chunks_exact_mut(CHANNELS)) {
            let span = &row[first * CHANNELS..(first + weights.len()) * CHANNELS];
            let mut acc = [HALF; CHANNELS];
            for (p, &w) in span.chunks_exact(CHANNELS).zip(weights) {
                for (a, &v) in acc.iter_mut().zip(p) {
                    *a = a.wrapping_add(i32::from(v).wrapping_mul(w));
                }
            }
            for (o, a) in px.iter_mut().zip(acc) {
                *o = clamp_fixed(a);
            }
        }
    }
}

/// The vertical pass: `src` holds source rows from `row_offset` on.
fn resample_columns(src: &[u8], row_len: usize, row_offset: usize, taps: &Taps, out: &mut [u8]) {
    let mut acc = vec![HALF; row_len];
    for ((first, weights), out_row) in taps.iter().zip(out.chunks_exact_mut(row_len)) {
        acc.fill(HALF);
        let rows = src[(first - row_offset) * row_len..].chunks_exact(row_len);
        for (row, &w) in rows.zip(weights) {
            for (a, &v) in acc.iter_mut().zip(row) {
                *a = a.wrapping_add(i32::from(v).wrapping_mul(w));
            }
        }
        for (o, &a) in out_row.iter_mut().zip(&acc) {
            *o = clamp_fixed(a);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::Rgb;
    use proptest::prelude::*;

    fn image(w: u32, h: u32, f: impl Fn(u32, u32) -> [u8; 3]) -> RgbImage {
        RgbImage::from_fn(w, h, |x, y| Rgb(f(x, y)))
    }

    // 2 → 1 px: scale 2, support 4, center 1.0, taps x = 0, 1 at kernel
    // arguments (x − 1 + 0.5) / 2 = ∓0.25, equal weights, so 0.5 each
    // = 2^21 in fixed point: (2^21 + (a + b)·2^21) >> 22 = ⌊(a + b + 1) / 2⌋.
    #[test]
    fn halving_two_pixels_is_their_mean_rounded_up() {
        let src = image(
            2,
            1,
            |x, _| if x == 0 { [10, 0, 255] } else { [13, 1, 254] },
        );
        let out = resize_bicubic_pil(&src, 1, 1, PillowVersion::Pillow12).unwrap();
        assert_eq!(out.get_pixel(0, 0).0, [12, 1, 255]);
    }

    // From 1 px every output center lies within half a pixel of the only
    // source pixel: one tap, normalised to weight 1, so a copy.
    #[test]
    fn a_single_source_pixel_is_spread_unchanged() {
        let src = image(1, 1, |_, _| [7, 128, 250]);
        let out = resize_bicubic_pil(&src, 5, 3, PillowVersion::Pillow12).unwrap();
        assert!(out.pixels().all(|p| p.0 == [7, 128, 250]));
    }

    // At scale 1 the kernel is sampled at whole numbers, where Keys' cubic is
    // 1 at 0 and 0 elsewhere: skipping an unchanged axis is not an
    // approximation.
    #[test]
    fn same_length_taps_are_the_identity() {
        let taps = Taps::new(9, 9, Size::new(9, 9)).unwrap();
        for (i, (first, weights)) in taps.iter().enumerate() {
            let one = i - first;
            for (k, &w) in weights.iter().enumerate() {
                assert_eq!(
                    w,
                    if k == one { 1 << PRECISION_BITS } else { 0 },
                    "pixel {i}"
                );
            }
        }
    }

    // Keys' cubic with a = −0.5 at hand-picked points: 1 at 0, 0 at 1 and 2,
    // 0.5625 at 0.5, −0.0625 at 1.5, −2/27 at 4/3.
    #[test]
    fn the_kernel_by_hand() {
        assert_eq!(keys_cubic(0.0), 1.0);
        assert_eq!(keys_cubic(1.0), 0.0);
        assert_eq!(keys_cubic(-2.0), 0.0);
        assert_eq!(keys_cubic(0.5), 0.5625);
        assert_eq!(keys_cubic(-1.5), -0.0625);
        assert!((keys_cubic(4.0 / 3.0) + 2.0 / 27.0).abs() < 1e-15);
    }

    // Pillow 13's rule, at its boundary: 131×77 → 121×57 loses 20 rows and
    // 10 columns (20 is not more than 2·10), → 121×56 loses 21 rows.
    #[test]
    fn pillow13_goes_vertical_first_when_the_height_loses_over_twice_as_much() {
        let from = Size::new(131, 77);
        let v13 = |w, h| PillowVersion::Pillow13.vertical_first(from, Size::new(w, h));
        assert!(!v13(121, 57));
        assert!(v13(121, 56));
        assert!(v13(200, 40), "wider but shorter");
        assert!(!v13(262, 154), "growing");
        assert!(!v13(65, 76), "the width loses more");
        assert!(!PillowVersion::Pillow12.vertical_first(from, Size::new(200, 40)));
    }

    #[test]
    fn bad_sizes_are_errors() {
        let src = image(4, 3, |_, _| [0; 3]);
        assert_eq!(
            resize_bicubic_pil(&src, 0, 3, PillowVersion::Pillow13),
            Err(ResampleError::EmptyTarget(Size::new(0, 3)))
        );
        let err =
            resize_bicubic_pil(&RgbImage::new(0, 5), 2, 2, PillowVersion::Pillow12).unwrap_err();
        assert_eq!(err, ResampleError::EmptySource(Size::new(0, 5)));
        assert!(err.to_string().contains("0x5"), "{err}");
    }

    #[test]
    fn an_output_too_large_for_memory_is_an_error() {
        let src = image(1, 1, |_, _| [0; 3]);
        let err =
            resize_bicubic_pil(&src, u32::MAX, u32::MAX, PillowVersion::Pillow12).unwrap_err();
        assert_eq!(err, ResampleError::TooLarge(Size::new(u32::MAX, u32::MAX)));
    }

    fn noisy(w: u32, h: u32, seed: u64) -> RgbImage {
        image(w, h, |x, y| {
            let v = ((u64::from(x) * 73_856_093) ^ (u64::from(y) * 19_349_663) ^ seed)
                .wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let b = v.to_le_bytes();
            [b[5], b[6], b[7]]
        })
    }

    fn pillow() -> impl Strategy<Value = PillowVersion> {
        prop_oneof![Just(PillowVersion::Pillow12), Just(PillowVersion::Pillow13)]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        // Each row of fixed-point weights sums to 2^22 within a few units, and
        // c · (that error) stays below one half: a flat image stays flat.
        #[test]
        fn a_constant_image_stays_constant(
            w in 1u32..40, h in 1u32..40, ow in 1u32..90, oh in 1u32..90, c in any::<[u8; 3]>(),
            pillow in pillow()
        ) {
            let out = resize_bicubic_pil(&image(w, h, |_, _| c), ow, oh, pillow).unwrap();
            prop_assert!(out.pixels().all(|p| p.0 == c));
        }

        #[test]
        fn the_output_has_the_requested_size(
            w in 1u32..50, h in 1u32..50, ow in 1u32..120, oh in 1u32..120, seed in any::<u64>(),
            pillow in pillow()
        ) {
            let out = resize_bicubic_pil(&noisy(w, h, seed), ow, oh, pillow).unwrap();
            prop_assert_eq!(out.dimensions(), (ow, oh));
        }

        #[test]
        fn the_same_size_is_a_copy(w in 1u32..60, h in 1u32..60, seed in any::<u64>(), pillow in pillow()) {
            let src = noisy(w, h, seed);
            prop_assert_eq!(resize_bicubic_pil(&src, w, h, pillow).unwrap(), src);
        }

        // A width-only resize has no vertical pass: rows that are each
        // constant stay so, with their own value.
        #[test]
        fn a_width_only_resize_keeps_constant_rows(
            w in 1u32..40, h in 1u32..40, ow in 1u32..90, seed in any::<u64>(), pillow in pillow()
        ) {
            let column = noisy(1, h, seed);
            let src = image(w, h, |_, y| column.get_pixel(0, y).0);
            let out = resize_bicubic_pil(&src, ow, h, pillow).unwrap();
            for (x, y, p) in out.enumerate_pixels() {
                prop_assert_eq!(p, column.get_pixel(0, y), "at {},{}", x, y);
            }
        }

        #[test]
        fn extreme_sizes_do_not_panic(
            (w, h) in prop_oneof![Just((1u32, 1u32)), (1u32..3, 1000u32..3000), (1000u32..3000, 1u32..3)],
            (ow, oh) in prop_oneof![Just((1u32, 1u32)), (1u32..3, 500u32..2000), (500u32..2000, 1u32..3)],
            seed in any::<u64>(),
            pillow in pillow()
        ) {
            let out = resize_bicubic_pil(&noisy(w, h, seed), ow, oh, pillow).unwrap();
            prop_assert_eq!(out.dimensions(), (ow, oh));
        }

        // Pillow 13 only reorders the passes; when it keeps Pillow 12's order
        // the pixels are the same.
        #[test]
        fn pillow13_equals_pillow12_unless_it_reorders(
            w in 1u32..50, h in 1u32..50, ow in 1u32..90, oh in 1u32..90, seed in any::<u64>()
        ) {
            let reorders = PillowVersion::Pillow13
                .vertical_first(Size::new(w, h), Size::new(ow, oh));
            prop_assume!(!reorders);
            let src = noisy(w, h, seed);
            prop_assert_eq!(
                resize_bicubic_pil(&src, ow, oh, PillowVersion::Pillow12).unwrap(),
                resize_bicubic_pil(&src, ow, oh, PillowVersion::Pillow13).unwrap()
            );
        }
    }
}
