//! Image preprocessing against its golden references, bit for bit: Pillow's
//! `Image.resize((w, h), resample=BICUBIC, reducing_gap=None)` (Pillow 12.2.0
//! and 13.0.0) and transformers' `Qwen2VLImageProcessorPil(min_pixels=…,
//! max_pixels=…, patch_size=…, merge_size=…,
//! temporal_patch_size=…).preprocess(image)` (transformers 5.23.0, Pillow 13.0.0).
//!
//! Fixtures: tests/data/preprocess, written by
//! scripts/make-preprocess-reference/run; reference.json names every case,
//! its input PNG and its expected files.

use agent_core::model::preprocess::{PillowVersion, Qwen2VlImageProcessor, resize_bicubic_pil};
use agent_core::protocol::Size;
use image::RgbImage;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Deserialize)]
struct Reference {
    format: String,
    versions: Versions,
    inputs: BTreeMap<String, Input>,
    resize: Vec<ResizeSet>,
    processor: Vec<ProcessorCase>,
}

#[derive(Deserialize)]
struct Versions {
    pillow: String,
}

#[derive(Deserialize)]
struct ResizeSet {
    pillow: String,
    cases: Vec<ResizeCase>,
}

#[derive(Deserialize)]
struct Input {
    file: String,
    width: u32,
    height: u32,
}

#[derive(Deserialize)]
struct ResizeCase {
    input: String,
    width: u32,
    height: u32,
    expected: String,
}

#[derive(Deserialize)]
struct ProcessorCase {
    name: String,
    input: String,
    config: ProcessorConfig,
    resized: Resized,
    pixel_values: PixelValuesFile,
    image_grid_thw: [u32; 3],
}

#[derive(Deserialize)]
struct ProcessorConfig {
    min_pixels: u64,
    max_pixels: u64,
    patch_size: u32,
    merge_size: u32,
    temporal_patch_size: u32,
}

#[derive(Deserialize)]
struct Resized {
    width: u32,
    height: u32,
    file: String,
}

#[derive(Deserialize)]
struct PixelValuesFile {
    rows: usize,
    cols: usize,
    file: String,
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/preprocess")
        .join(name)
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).unwrap_or_else(|e| panic!("read {name}: {e}"))
}

fn reference() -> Reference {
    let r: Reference = serde_json::from_slice(&read("reference.json")).expect("reference.json");
    assert_eq!(r.format, "btl-preprocess-reference/1");
    r
}

fn pillow(version: &str) -> PillowVersion {
    match version.split('.').next() {
        Some("12") => PillowVersion::Pillow12,
        Some("13") => PillowVersion::Pillow13,
        _ => panic!("no PillowVersion for Pillow {version}"),
    }
}

fn input(r: &Reference, name: &str) -> RgbImage {
    let meta = &r.inputs[name];
    let img = image::open(fixture(&meta.file))
        .unwrap_or_else(|e| panic!("decode {}: {e}", meta.file))
        .to_rgb8();
    assert_eq!(img.dimensions(), (meta.width, meta.height), "{}", meta.file);
    img
}

/// `None` when equal; else the first differing pixel and the largest
/// difference, in words.
fn pixel_mismatch(got: &RgbImage, want: &[u8]) -> Option<String> {
    if got.as_raw() == want {
        return None;
    }
    if got.as_raw().len() != want.len() {
        return Some(format!(
            "{} bytes, expected {}",
            got.as_raw().len(),
            want.len()
        ));
    }
    let diffs = || {
        got.as_raw()
            .iter()
            .zip(want)
            .enumerate()
            .filter(|(_, (a, b))| a != b)
    };
    let (i, (a, b)) = diffs().next()?;
    let px = i / 3;
    let (x, y) = (px % got.width() as usize, px / got.width() as usize);
    let max = diffs().map(|(_, (a, b))| a.abs_diff(*b)).max().unwrap_or(0);
    Some(format!(
        "{} of {} values differ; first at x={x} y={y} channel {}: {a}, Pillow {b}; max difference {max}",
        diffs().count(),
        want.len(),
        i % 3
    ))
}

#[test]
fn bicubic_resize_equals_pillow_12_and_13() {
    let r = reference();
    let versions: Vec<_> = r.resize.iter().map(|s| pillow(&s.pillow)).collect();
    assert_eq!(versions, [PillowVersion::Pillow13, PillowVersion::Pillow12]);
    let mut failures = Vec::new();
    for set in &r.resize {
        assert!(set.cases.len() >= 15, "Pillow {}: every case", set.pillow);
        for case in &set.cases {
            let src = input(&r, &case.input);
            let got =
                resize_bicubic_pil(&src, case.width, case.height, pillow(&set.pillow)).unwrap();
            assert_eq!(got.dimensions(), (case.width, case.height));
            if let Some(m) = pixel_mismatch(&got, &read(&case.expected)) {
                failures.push(format!("Pillow {} {}: {m}", set.pillow, case.expected));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn processor(c: &ProcessorConfig, pillow: PillowVersion) -> Qwen2VlImageProcessor {
    Qwen2VlImageProcessor {
        min_pixels: c.min_pixels,
        max_pixels: c.max_pixels,
        patch_size: c.patch_size,
        merge_size: c.merge_size,
        temporal_patch_size: c.temporal_patch_size,
        pillow,
        // rescale_factor, image_mean and image_std: transformers' defaults.
        ..Qwen2VlImageProcessor::new(c.max_pixels)
    }
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    assert_eq!(bytes.len() % 4, 0);
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

#[test]
fn qwen2vl_pixel_values_equal_transformers() {
    let r = reference();
    assert!(
        r.processor.len() >= 6,
        "the fixture lists every processor case"
    );
    let mut failures = Vec::new();
    for case in &r.processor {
        let name = &case.name;
        let src = input(&r, &case.input);
        let p = processor(&case.config, pillow(&r.versions.pillow));
        let size = p
            .resized_size(Size::new(src.width(), src.height()))
            .unwrap();
        assert_eq!(
            size,
            Size::new(case.resized.width, case.resized.height),
            "{name}: smart_resize"
        );
        let resized = resize_bicubic_pil(&src, size.width, size.height, p.pillow).unwrap();
        if let Some(m) = pixel_mismatch(&resized, &read(&case.resized.file)) {
            failures.push(format!("{name}: resized pixels: {m}"));
        }

        let got = p.preprocess(&src).unwrap();
        let want = f32s(&read(&case.pixel_values.file));
        assert_eq!(got.grid_thw, case.image_grid_thw, "{name}: image_grid_thw");
        assert_eq!(
            (got.rows, got.cols),
            (case.pixel_values.rows, case.pixel_values.cols),
            "{name}: shape"
        );
        assert_eq!(got.data.len(), want.len(), "{name}: length");
        let first = got
            .data
            .iter()
            .zip(&want)
            .position(|(a, b)| a.to_bits() != b.to_bits());
        if let Some(i) = first {
            let count = got
                .data
                .iter()
                .zip(&want)
                .filter(|(a, b)| a.to_bits() != b.to_bits())
                .count();
            failures.push(format!(
                "{name}: {count} pixel values differ; first at row {} col {}: {:e}, transformers {:e}",
                i / got.cols,
                i % got.cols,
                got.data[i],
                want[i]
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
