//! The screenshot a benchmark feeds the model, shared by the examples.

use agent_core::model::preprocess::{PillowVersion, resize_bicubic_pil};
use agent_core::protocol::{Size, smart_resize};
use anyhow::Context;
use std::path::Path;

/// The image at `path`: as it is, or resized to the model frame of
/// `max_pixels` with the agent's resampling.
pub fn load(path: &Path, max_pixels: Option<u64>) -> anyhow::Result<image::RgbImage> {
    let image = image::open(path)
        .with_context(|| format!("reading {}", path.display()))?
        .to_rgb8();
    let Some(max_pixels) = max_pixels else {
        return Ok(image);
    };
    let frame = smart_resize(Size::new(image.width(), image.height()), max_pixels)?;
    Ok(resize_bicubic_pil(
        &image,
        frame.width,
        frame.height,
        PillowVersion::Pillow12,
    )?)
}
