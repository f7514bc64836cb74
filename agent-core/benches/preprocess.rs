//! Screenshot preprocessing: the Pillow-exact BICUBIC resize of a 1080×2400
//! screenshot to its model frame, against the `image` crate's CatmullRom
//! resize (what `LlamaPolicy` used before) in the same group, so criterion's
//! times read as a ratio; and the whole `pixel_values` computation.
//!
//! Two frames: BTL-UI's training `max_pixels` (1092×2408, a slight
//! upscale) and transformers' default 1,003,520 (672×1484, a downscale for
//! which Pillow 13 runs the vertical pass first). Before timing, it prints
//! how far CatmullRom lands from Pillow on this screenshot.
//!
//! Run with `cargo bench -p agent-core --bench preprocess`.

use agent_core::model::preprocess::{PillowVersion, Qwen2VlImageProcessor, resize_bicubic_pil};
use agent_core::protocol::{Size, TRAINING_MAX_PIXELS, smart_resize};
use criterion::{Criterion, criterion_group, criterion_main};
use image::imageops::FilterType;
use image::{Rgb, RgbImage};
use std::hint::black_box;

/// A phone-like screen: flat bars and cards with sharp edges, a gradient
/// header, and text-like stripes of noise.
fn screenshot() -> RgbImage {
    RgbImage::from_fn(1080, 2400, |x, y| {
        let noise =
            ((u64::from(x) * 2_654_435_761) ^ (u64::from(y) * 40_503)).wrapping_mul(0x9E37_79B9);
        let n = (noise >> 24) as u8;
        match y {
            0..80 => Rgb([20, 20, 20]),
            80..400 => Rgb([(x * 255 / 1080) as u8, 90, (y - 80) as u8 / 2 + 60]),
            _ if (y / 120) % 2 == 0 && (60..1020).contains(&x) => {
                if (y % 120) < 40 && (x / 8) % 3 != 0 {
                    Rgb([n / 4, n / 4, n / 4 + 30])
                } else {
                    Rgb([250, 250, 252])
                }
            }
            _ => Rgb([235, 236, 240]),
        }
    })
}

fn max_level_difference(a: &RgbImage, b: &RgbImage) -> u8 {
    a.as_raw()
        .iter()
        .zip(b.as_raw())
        .map(|(x, y)| x.abs_diff(*y))
        .max()
        .unwrap_or(0)
}

fn bench_resize(c: &mut Criterion) {
    let shot = screenshot();
    let device = Size::new(shot.width(), shot.height());
    for (label, max_pixels) in [("training", TRAINING_MAX_PIXELS), ("hf_default", 1_003_520)] {
        let frame = smart_resize(device, max_pixels).expect("a phone screen has a model frame");
        let (w, h) = (frame.width, frame.height);

        // Not timed: what the exact resize changes.
        let catmull = image::imageops::resize(&shot, w, h, FilterType::CatmullRom);
        for pillow in [PillowVersion::Pillow12, PillowVersion::Pillow13] {
            let exact = resize_bicubic_pil(&shot, w, h, pillow).expect("resizable");
            eprintln!(
                "{label} {device} -> {frame}: CatmullRom differs from {pillow:?} by up to {} levels",
                max_level_difference(&catmull, &exact)
            );
        }

        let mut group = c.benchmark_group(format!("resize_{label}_{device}_to_{frame}"));
        group.sample_size(20);
        group.bench_function("pil_bicubic_pillow12", |b| {
            b.iter(|| resize_bicubic_pil(black_box(&shot), w, h, PillowVersion::Pillow12))
        });
        group.bench_function("pil_bicubic_pillow13", |b| {
            b.iter(|| resize_bicubic_pil(black_box(&shot), w, h, PillowVersion::Pillow13))
        });
        group.bench_function("image_catmullrom", |b| {
            b.iter(|| image::imageops::resize(black_box(&shot), w, h, FilterType::CatmullRom))
        });
        let processor = Qwen2VlImageProcessor::new(max_pixels);
        group.bench_function("qwen2vl_pixel_values", |b| {
            b.iter(|| processor.preprocess(black_box(&shot)))
        });
        group.finish();
    }
}

criterion_group!(benches, bench_resize);
criterion_main!(benches);
