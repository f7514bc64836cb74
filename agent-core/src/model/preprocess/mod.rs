//! Image preprocessing that reproduces what Qwen2.5-VL saw in training.
//!
//! - [`bicubic`]: [`resize_bicubic_pil`], Pillow's BICUBIC resize, bit for bit,
//!   as Pillow 12 or 13 does it ([`PillowVersion`]).
//! - [`qwen2vl`]: [`Qwen2VlImageProcessor`], transformers' Qwen2-VL image
//!   processor (PIL backend): resize, rescale, normalise, patch flattening,
//!   `image_grid_thw`.
//!
//! Pure: no I/O. The golden tests against Pillow and transformers are in
//! `tests/preprocess.rs`, with fixtures from `scripts/make-preprocess-reference`.

pub mod bicubic;
pub mod qwen2vl;

pub use bicubic::{PillowVersion, ResampleError, resize_bicubic_pil};
pub use qwen2vl::{
    OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, PixelValues, PreprocessError, Qwen2VlImageProcessor,
};
