//! Export for ms-swift's GRPO (`swift rlhf --rlhf_type grpo`, ms-swift 3.x
//! and 4.x), so the BTL reward can be trained on many GPUs and nodes.
//!
//! ms-swift reads a JSONL dataset in its standard `messages` format: the
//! system and user turns (no assistant turn, the model generates it), with
//! `<image>` in the text where each image goes and `images` listing their
//! paths (absolute paths, as its docs recommend). Every other column is
//! handed, row by row, to reward functions as keyword arguments. So each
//! row carries:
//! - `messages`, `images`: the model input;
//! - `solution`, `bbox`, `image_sizes`, `max_pixels`: the official sample
//!   columns, for reward code written against the official format;
//! - `btl_sample`: the whole sample as one JSON string (ROIs and id
//!   included), which `scripts/ms-swift/btl_reward.py` hands to `btl score`
//!   unchanged. One string column keeps the nested, sometimes empty lists
//!   of a sample out of the dataset loader's type inference.
//!
//! The export directory holds `train.jsonl` and `images/`, a verbatim copy
//! of the samples' screenshots, so it can be moved to the training machines
//! as a whole; `dataset_root` says where it will be there.

use super::samples::{load_samples, sample_value};
use super::{Error, Result, create_dir, write_file};
use agent_core::protocol::prompt::IMAGE_PLACEHOLDER;
use agent_core::sample::Sample;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The dataset file in the export directory.
pub const DATASET_FILE: &str = "train.jsonl";
/// The screenshots' directory in the export directory.
pub const IMAGES_DIR: &str = "images";

/// How a dataset is exported.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportOptions {
    /// Where the export directory will be on the training machines; its
    /// absolute path here by default.
    pub dataset_root: Option<String>,
}

/// What an export wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportReport {
    pub rows: usize,
    pub dataset: PathBuf,
    pub images_dir: PathBuf,
}

/// One dataset row for `sample`, whose images will be at `images` (pure).
pub fn row(sample: &Sample, images: &[String]) -> Result<Value, String> {
    let marks: usize = sample
        .messages
        .iter()
        .map(|m| m.content.matches(IMAGE_PLACEHOLDER).count())
        .sum();
    if marks != images.len() {
        return Err(format!(
            "its messages hold {marks} {IMAGE_PLACEHOLDER} marks for {} images; ms-swift needs one per image",
            images.len()
        ));
    }
    let mut exported = sample.clone();
    exported.images = images.to_vec();
    let value = sample_value(&exported);
    Ok(json!({
        "messages": value["messages"],
        "images": value["images"],
        "solution": value["solution"],
        "bbox": value["bbox"],
        "image_sizes": value["image_sizes"],
        "max_pixels": value["max_pixels"],
        "btl_sample": value.to_string(),
    }))
}

/// Exports the sample file `samples_path` into the directory `out`:
/// `out/images/` first, then `out/train.jsonl`, each file atomically.
pub fn export_ms_swift(
    samples_path: &Path,
    out: &Path,
    options: &ExportOptions,
) -> Result<ExportReport> {
    let samples = load_samples(samples_path)?;
    let base = samples_path.parent().unwrap_or(Path::new(""));
    let images_dir = out.join(IMAGES_DIR);
    create_dir(&images_dir)?;
    let root = match &options.dataset_root {
        Some(root) => root.trim_end_matches('/').to_string(),
        None => std::fs::canonicalize(out)
            .map_err(|source| Error::Write {
                path: out.to_path_buf(),
                source,
            })?
            .to_string_lossy()
            .into_owned(),
    };
    let mut lines = String::new();
    for (index, sample) in samples.iter().enumerate() {
        let at_sample = |reason: String| Error::Sample {
            path: samples_path.to_path_buf(),
            index,
            reason,
        };
        let mut paths = Vec::new();
        for (j, image) in sample.images.iter().enumerate() {
            let source = base.join(image);
            let bytes = std::fs::read(&source)
                .map_err(|e| at_sample(format!("image {}: {e}", source.display())))?;
            let ext = source
                .extension()
                .map_or_else(|| "png".into(), |e| e.to_string_lossy().into_owned());
            let name = format!("{index:06}-{j}.{ext}");
            write_file(&images_dir.join(&name), &bytes)?;
            paths.push(format!("{root}/{IMAGES_DIR}/{name}"));
        }
        lines.push_str(&row(sample, &paths).map_err(at_sample)?.to_string());
        lines.push('\n');
    }
    let dataset = out.join(DATASET_FILE);
    write_file(&dataset, lines.as_bytes())?;
    Ok(ExportReport {
        rows: samples.len(),
        dataset,
        images_dir,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::tests::NAVIGATION;
    use agent_core::sample::parse_samples;

    #[test]
    fn a_row_carries_the_input_the_official_columns_and_the_whole_sample() {
        let sample = parse_samples(NAVIGATION).unwrap().remove(0);
        let row = row(&sample, &["/data/images/000000-0.png".into()]).unwrap();
        assert_eq!(row["images"], json!(["/data/images/000000-0.png"]));
        assert_eq!(row["messages"][1]["role"], "user");
        assert!(
            row["messages"][1]["content"]
                .as_str()
                .unwrap()
                .ends_with("<image>")
        );
        assert_eq!(row["bbox"], json!([614, 1094, 720, 1182]));
        assert_eq!(row["image_sizes"], json!([[720, 1280]]));
        assert_eq!(row["max_pixels"], 4_014_080);
        assert_eq!(row["solution"], sample.solution.as_str());
        let inner: Sample = serde_json::from_str(row["btl_sample"].as_str().unwrap()).unwrap();
        assert_eq!(
            inner,
            Sample {
                images: vec!["/data/images/000000-0.png".into()],
                ..sample
            }
        );
    }

    #[test]
    fn images_must_match_their_marks() {
        let sample = parse_samples(NAVIGATION).unwrap().remove(0);
        let err = row(&sample, &["a.png".into(), "b.png".into()]).unwrap_err();
        assert_eq!(
            err,
            "its messages hold 1 <image> marks for 2 images; ms-swift needs one per image"
        );
    }
}
