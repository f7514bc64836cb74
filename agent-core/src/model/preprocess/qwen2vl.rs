//! Qwen2-VL / Qwen2.5-VL image preprocessing: the `pixel_values` and
//! `image_grid_thw` of transformers' `Qwen2VLImageProcessorPil` (the PIL
//! backend of `Qwen2VLImageProcessor`), bit for bit.
//!
//! The steps and their number formats follow transformers (5.23) exactly:
//! 1. resize to `smart_resize(h, w, patch · merge, min_pixels, max_pixels)`
//!    with Pillow's BICUBIC ([`resize_bicubic_pil`]) of the chosen Pillow
//!    release (the resize is transformers' only Pillow-dependent step);
//! 2. rescale: the u8 value times `rescale_factor` (1/255) in f64, then
//!    rounded to f32;
//! 3. normalise: `(x − mean) / std` in f32, with mean and std rounded to f32
//!    from their f64 config values;
//! 4. flatten into rows of merge groups: row order (block row, block column,
//!    row in block, column in block) over `patch`-sized patches; columns
//!    (channel, frame, row in patch, column in patch), with the one image
//!    repeated as all `temporal_patch_size` frames.
//!
//! Steps 2 and 3 map each u8 value through a 256-entry table per channel,
//! which gives the same bits as computing every pixel.
//!
//! The size comes from [`smart_resize_with`], the spec's `smart_resize`. It
//! holds a side that rounds to 0 at one merged patch, as qwen-vl-utils does.
//! transformers' own copy lets that side reach 0 and falls into the
//! `min_pixels` branch. So images with a side of 14 px or less can get a
//! different size than transformers gives them; phone screenshots never do.

use super::bicubic::{PillowVersion, ResampleError, resize_bicubic_pil};
use crate::protocol::{MIN_PIXELS, ResizeError, Size, smart_resize_with};
use image::RgbImage;
use std::borrow::Cow;
use thiserror::Error;

/// CLIP's per-channel mean (RGB), Qwen2-VL's `image_mean`.
pub const OPENAI_CLIP_MEAN: [f64; 3] = [0.48145466, 0.4578275, 0.40821073];
/// CLIP's per-channel standard deviation (RGB), Qwen2-VL's `image_std`.
pub const OPENAI_CLIP_STD: [f64; 3] = [0.26862954, 0.26130258, 0.27577711];

/// The settings of `Qwen2VLImageProcessor` (`preprocessor_config.json`).
#[derive(Debug, Clone, PartialEq)]
pub struct Qwen2VlImageProcessor {
    pub min_pixels: u64,
    pub max_pixels: u64,
    /// Side of one vision patch in pixels.
    pub patch_size: u32,
    /// Patches merged per side into one image token.
    pub merge_size: u32,
    /// Frames per temporal patch; a still image fills them all.
    pub temporal_patch_size: u32,
    pub rescale_factor: f64,
    pub image_mean: [f64; 3],
    pub image_std: [f64; 3],
    /// Whose resize to reproduce: the Pillow the model was trained with.
    pub pillow: PillowVersion,
}

/// The model input of one image: `rows × cols` f32 values, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct PixelValues {
    pub data: Vec<f32>,
    /// One row per patch: `grid_thw` multiplied out.
    pub rows: usize,
    /// `3 · temporal_patch_size · patch_size²`.
    pub cols: usize,
    /// `image_grid_thw`: frames, patch rows, patch columns.
    pub grid_thw: [u32; 3],
}

/// Why an image could not be preprocessed.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum PreprocessError {
    #[error("invalid image processor settings: {0}")]
    Settings(String),
    #[error(transparent)]
    Size(#[from] ResizeError),
    #[error(transparent)]
    Resample(#[from] ResampleError),
    #[error(
        "image size {size} is not a multiple of {factor} (patch_size × merge_size) on both sides"
    )]
    NotAligned { size: Size, factor: u32 },
    #[error("the pixel values of a {0} image do not fit in memory")]
    TooLarge(Size),
}

impl Qwen2VlImageProcessor {
    /// Qwen2.5-VL's processor (patch 14, merge 2, 2 frames, CLIP
    /// normalisation, `min_pixels` 3136) with the given `max_pixels`, resizing
    /// like Pillow 12 as in BTL-UI's training.
    pub fn new(max_pixels: u64) -> Self {
        Self {
            min_pixels: MIN_PIXELS,
            max_pixels,
            patch_size: 14,
            merge_size: 2,
            temporal_patch_size: 2,
            rescale_factor: 1.0 / 255.0,
            image_mean: OPENAI_CLIP_MEAN,
            image_std: OPENAI_CLIP_STD,
            pillow: PillowVersion::Pillow12,
        }
    }

    /// Side of one image token in pixels: `patch_size · merge_size`.
    pub fn factor(&self) -> Result<u32, PreprocessError> {
        let bad = |what: &str| {
            Err(PreprocessError::Settings(format!(
                "{what} must be at least 1"
            )))
        };
        if self.patch_size == 0 {
            return bad("patch_size");
        }
        if self.merge_size == 0 {
            return bad("merge_size");
        }
        if self.temporal_patch_size == 0 {
            return bad("temporal_patch_size");
        }
        self.patch_size
            .checked_mul(self.merge_size)
            .ok_or_else(|| PreprocessError::Settings("patch_size × merge_size overflows".into()))
    }

    /// The size an image of `size` is resized to.
    pub fn resized_size(&self, size: Size) -> Result<Size, PreprocessError> {
        Ok(smart_resize_with(
            size,
            self.factor()?,
            self.min_pixels,
            self.max_pixels,
        )?)
    }

    /// Resize, rescale, normalise and flatten one image.
    pub fn preprocess(&self, image: &RgbImage) -> Result<PixelValues, PreprocessError> {
        let size = self.resized_size(Size::new(image.width(), image.height()))?;
        let resized = if (size.width, size.height) == image.dimensions() {
            Cow::Borrowed(image)
        } else {
            Cow::Owned(resize_bicubic_pil(
                image,
                size.width,
                size.height,
                self.pillow,
            )?)
        };
        self.pixel_values(&resized)
    }

    /// Rescale, normalise and flatten an image already at its resized size
    /// (both sides multiples of [`Self::factor`]).
    pub fn pixel_values(&self, resized: &RgbImage) -> Result<PixelValues, PreprocessError> {
        let factor = self.factor()?;
        let size = Size::new(resized.width(), resized.height());
        if size.width == 0 || size.height == 0 {
            return Err(ResizeError::Empty(size).into());
        }
        if !size.width.is_multiple_of(factor) || !size.height.is_multiple_of(factor) {
            return Err(PreprocessError::NotAligned { size, factor });
        }
        let p = self.patch_size as usize;
        let m = self.merge_size as usize;
        let frames = self.temporal_patch_size as usize;
        let (grid_h, grid_w) = (size.height / self.patch_size, size.width / self.patch_size);
        let too_large = || PreprocessError::TooLarge(size);
        let rows = (grid_h as usize)
            .checked_mul(grid_w as usize)
            .ok_or_else(too_large)?;
        let cols = [3, frames, p, p]
            .into_iter()
            .try_fold(1usize, usize::checked_mul)
            .ok_or_else(too_large)?;
        let len = rows.checked_mul(cols).ok_or_else(too_large)?;
        let mut data = Vec::new();
        data.try_reserve_exact(len).map_err(|_| too_large())?;

        let levels = self.normalized_levels();
        let width = size.width as usize;
        let raw = resized.as_raw();
        for block_y in 0..grid_h as usize / m {
            for block_x in 0..grid_w as usize / m {
                for in_y in 0..m {
                    for in_x in 0..m {
                        let top = (block_y * m + in_y) * p;
                        let left = (block_x * m + in_x) * p;
                        for (c, level) in levels.iter().enumerate() {
                            let frame = data.len();
                            for y in top..top + p {
                                let row = &raw[(y * width + left) * 3..(y * width + left + p) * 3];
                                data.extend(row.chunks_exact(3).map(|px| level[px[c] as usize]));
                            }
                            for _ in 1..frames {
                                data.extend_from_within(frame..frame + p * p);
                            }
                        }
                    }
                }
            }
        }
        Ok(PixelValues {
            data,
            rows,
            cols,
            grid_thw: [1, grid_h, grid_w],
        })
    }

    /// Each channel's normalised value of every u8 level, computed in
    /// transformers' order and precisions.
    fn normalized_levels(&self) -> [[f32; 256]; 3] {
        let mut table = [[0.0; 256]; 3];
        for (c, levels) in table.iter_mut().enumerate() {
            let mean = self.image_mean[c] as f32;
            let std = self.image_std[c] as f32;
            for (v, out) in levels.iter_mut().enumerate() {
                let rescaled = (v as f64 * self.rescale_factor) as f32;
                *out = (rescaled - mean) / std;
            }
        }
        table
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::TRAINING_MAX_PIXELS;
    use image::Rgb;
    use proptest::prelude::*;

    /// Raw pixel values through: no rescale, mean 0, std 1.
    fn identity(
        patch_size: u32,
        merge_size: u32,
        temporal_patch_size: u32,
    ) -> Qwen2VlImageProcessor {
        Qwen2VlImageProcessor {
            min_pixels: 1,
            max_pixels: u64::MAX,
            patch_size,
            merge_size,
            temporal_patch_size,
            rescale_factor: 1.0,
            image_mean: [0.0; 3],
            image_std: [1.0; 3],
            pillow: PillowVersion::Pillow12,
        }
    }

    // A 4×2 image, patch 1, merge 2, 2 frames: merge blocks are 2×2 pixels,
    // left block first; in a block, row by row; per pixel the columns are
    // R R G G B B (channel, then frame). Pixel (x, y) holds R = 10y + x,
    // G = 100 + R, B = 200 + R.
    #[test]
    fn flattening_order_by_hand() {
        let img = RgbImage::from_fn(4, 2, |x, y| {
            let r = (10 * y + x) as u8;
            Rgb([r, 100 + r, 200 + r])
        });
        let pv = identity(1, 2, 2).pixel_values(&img).unwrap();
        assert_eq!((pv.rows, pv.cols, pv.grid_thw), (8, 6, [1, 2, 4]));
        let row = |r: f32| vec![r, r, 100.0 + r, 100.0 + r, 200.0 + r, 200.0 + r];
        let expected: Vec<f32> = [0.0, 1.0, 10.0, 11.0, 2.0, 3.0, 12.0, 13.0]
            .into_iter()
            .flat_map(row)
            .collect();
        assert_eq!(pv.data, expected);
    }

    // Within a patch: patch 2, merge 1, 1 frame on a 2×4 image (two
    // patches, top then bottom); per patch all R values row-major, then G, B.
    #[test]
    fn patch_contents_by_hand() {
        let img = RgbImage::from_fn(2, 4, |x, y| {
            let r = (10 * y + x) as u8;
            Rgb([r, 100 + r, 200 + r])
        });
        let pv = identity(2, 1, 1).pixel_values(&img).unwrap();
        assert_eq!((pv.rows, pv.cols, pv.grid_thw), (2, 12, [1, 2, 1]));
        let patch = |top: f32| {
            let r = [top, top + 1.0, top + 10.0, top + 11.0];
            [r, r.map(|v| v + 100.0), r.map(|v| v + 200.0)].concat()
        };
        assert_eq!(pv.data, [patch(0.0), patch(20.0)].concat());
    }

    // By hand: (255/255 − 0.48145466) / 0.26862954 = 1.9303361…,
    // (0 − 0.4578275) / 0.26130258 = −1.7520971…,
    // (128/255 − 0.40821073) / 0.27577711 = 0.3399486….
    #[test]
    fn clip_normalisation_by_hand() {
        let img = RgbImage::from_pixel(28, 28, Rgb([255, 0, 128]));
        let pv = Qwen2VlImageProcessor::new(TRAINING_MAX_PIXELS)
            .pixel_values(&img)
            .unwrap();
        assert_eq!((pv.rows, pv.cols, pv.grid_thw), (4, 1176, [1, 2, 2]));
        for row in pv.data.chunks_exact(pv.cols) {
            let (r, rest) = row.split_at(392);
            let (g, b) = rest.split_at(392);
            assert!(
                r.iter().all(|&v| (v - 1.930_336_1).abs() < 1e-6),
                "{}",
                r[0]
            );
            assert!(
                g.iter().all(|&v| (v + 1.752_097_1).abs() < 1e-6),
                "{}",
                g[0]
            );
            assert!(
                b.iter().all(|&v| (v - 0.339_948_6).abs() < 1e-6),
                "{}",
                b[0]
            );
        }
    }

    #[test]
    fn qwen25vl_defaults_resize_a_phone_screen_to_its_model_frame() {
        let p = Qwen2VlImageProcessor::new(TRAINING_MAX_PIXELS);
        assert_eq!(p.factor().unwrap(), 28);
        assert_eq!(
            p.resized_size(Size::new(720, 1280)).unwrap(),
            Size::new(728, 1288)
        );
    }

    #[test]
    fn bad_input_is_a_clear_error() {
        let p = Qwen2VlImageProcessor::new(TRAINING_MAX_PIXELS);
        let err = p.pixel_values(&RgbImage::new(28, 30)).unwrap_err();
        assert_eq!(
            err,
            PreprocessError::NotAligned {
                size: Size::new(28, 30),
                factor: 28
            }
        );
        assert!(err.to_string().contains("28x30"), "{err}");
        assert!(matches!(
            p.preprocess(&RgbImage::new(201, 1)),
            Err(PreprocessError::Size(ResizeError::AspectRatio { .. }))
        ));
        assert!(matches!(
            p.preprocess(&RgbImage::new(0, 10)),
            Err(PreprocessError::Size(ResizeError::Empty(_)))
        ));
        let zero_merge = Qwen2VlImageProcessor {
            merge_size: 0,
            ..p.clone()
        };
        let err = zero_merge.preprocess(&RgbImage::new(28, 28)).unwrap_err();
        assert!(err.to_string().contains("merge_size"), "{err}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn shapes_agree_and_every_frame_is_the_image(
            w in 1u32..120, h in 1u32..120, patch in 1u32..6, merge in 1u32..4, frames in 1u32..4,
            seed in any::<u8>()
        ) {
            let p = Qwen2VlImageProcessor {
                min_pixels: 16,
                max_pixels: 20_000,
                patch_size: patch,
                merge_size: merge,
                temporal_patch_size: frames,
                ..Qwen2VlImageProcessor::new(TRAINING_MAX_PIXELS)
            };
            let img = RgbImage::from_fn(w, h, |x, y| {
                Rgb([(x * 7) as u8 ^ seed, (y * 13) as u8, (x + y) as u8])
            });
            let size = p.resized_size(Size::new(w, h)).unwrap();
            let pv = p.preprocess(&img).unwrap();
            let [t, gh, gw] = pv.grid_thw;
            prop_assert_eq!((t, gh * patch, gw * patch), (1, size.height, size.width));
            prop_assert_eq!(pv.rows, (gh * gw) as usize);
            prop_assert_eq!(pv.cols, (3 * frames * patch * patch) as usize);
            prop_assert_eq!(pv.data.len(), pv.rows * pv.cols);
            let frame = (patch * patch) as usize;
            for channel in pv.data.chunks_exact(frame * frames as usize) {
                for copy in channel.chunks_exact(frame).skip(1) {
                    prop_assert_eq!(copy, &channel[..frame]);
                }
            }
        }
    }
}
