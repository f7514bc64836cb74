//! Export for ms-swift's GRPO (`swift rlhf --rlhf_type grpo`, ms-swift 3.x
//! and 4.x), so the BTL reward can be trained on many GPUs and nodes, and
//! for supervised fine-tuning elsewhere (ms-swift's `swift sft`, TRL's
//! `SFTTrainer`) on the answers `btl-train sft` learns.
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
//! An SFT row is `messages` with a third, assistant turn holding the
//! sample's canonical BTL answer (what `btl-train sft` trains on, in the
//! model frame of the sample's `max_pixels`), and `images`.
//!
//! The export directory holds `train.jsonl` and `images/`, a verbatim copy
//! of the samples' screenshots, so it can be moved to the training machines
//! as a whole; `dataset_root` says where it will be there.

use super::samples::{load_samples, sample_value};
use super::{Error, Result, create_dir};
use crate::sft::target_answer;
use agent_core::protocol::prompt::IMAGE_PLACEHOLDER;
use agent_core::sample::Sample;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The dataset file in the export directory.
pub const DATASET_FILE: &str = "train.jsonl";
/// The screenshots' directory in the export directory.
pub const IMAGES_DIR: &str = "images";
/// Written beside them: the mark of a directory whose `images/` and
/// `train.jsonl` an export made, and a later export may replace.
pub const EXPORT_MARK: &str = ".btl-data-export";

/// What the rows are for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Purpose {
    /// GRPO: the prompt and the columns reward code reads ([`row`]).
    #[default]
    Grpo,
    /// Supervised fine-tuning: the prompt and its canonical answer, with at
    /// most this many blink regions ([`sft_row`]).
    Sft { max_regions: usize },
}

/// How a dataset is exported.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportOptions {
    /// Where the export directory will be on the training machines; its
    /// absolute path here by default.
    pub dataset_root: Option<String>,
    pub purpose: Purpose,
    /// Replace an `images/` or `train.jsonl` in the export directory that
    /// no export made (no [`EXPORT_MARK`]); refused by default.
    pub replace_foreign: bool,
}

/// What an export wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportReport {
    pub rows: usize,
    pub dataset: PathBuf,
    pub images_dir: PathBuf,
}

/// Refuses a sample whose `<image>` marks don't match its images.
fn check_marks(sample: &Sample, images: &[String]) -> Result<(), String> {
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
    Ok(())
}

/// One GRPO dataset row for `sample`, whose images will be at `images` (pure).
pub fn row(sample: &Sample, images: &[String]) -> Result<Value, String> {
    check_marks(sample, images)?;
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

/// One SFT dataset row for `sample`, whose images will be at `images`: its
/// messages, then the answer `btl-train sft` would train on (pure). The
/// answer is a message too, where ms-swift would take an `<image>` (a
/// Plan quoting a screen label of that text) for another mark.
pub fn sft_row(sample: &Sample, images: &[String], max_regions: usize) -> Result<Value, String> {
    check_marks(sample, images)?;
    let answer =
        target_answer(sample, sample.max_pixels, max_regions).map_err(|e| e.to_string())?;
    if answer.contains(IMAGE_PLACEHOLDER) {
        return Err(format!(
            "its answer holds {IMAGE_PLACEHOLDER}, which ms-swift would take for an image mark: {answer:?}"
        ));
    }
    let mut messages: Vec<Value> = sample
        .messages
        .iter()
        .map(|m| json!({"role": m.role, "content": m.content}))
        .collect();
    messages.push(json!({"role": "assistant", "content": answer}));
    Ok(json!({"messages": messages, "images": images}))
}

/// Exports the sample file `samples_path` into the directory `out`:
/// `out/images/` and `out/train.jsonl` are made in a staging directory and
/// put in place of the previous export's only once every row is: a sample
/// that cannot be exported leaves the previous export as it was, its rows
/// still naming their own images. An export killed while it puts them in
/// place leaves the rest of that swap to the next export into `out`, which
/// carries it through first.
pub fn export_ms_swift(
    samples_path: &Path,
    out: &Path,
    options: &ExportOptions,
) -> Result<ExportReport> {
    let samples = load_samples(samples_path)?;
    let base = samples_path.parent().unwrap_or(Path::new(""));
    let images_dir = out.join(IMAGES_DIR);
    let dataset = out.join(DATASET_FILE);
    let written = |output: &Path, input: &Path| crate::atomic::writes_over(output, input);
    if [&images_dir, &dataset]
        .iter()
        .any(|output| written(output, samples_path))
    {
        return Err(Error::Usage(format!(
            "--out {}: the export would write over {}, which it reads; export elsewhere",
            out.display(),
            samples_path.display()
        )));
    }
    for (index, sample) in samples.iter().enumerate() {
        let mut sources = sample.images.iter().map(|image| base.join(image));
        if let Some(image) = sources.find(|image| written(&images_dir, image)) {
            return Err(Error::Sample {
                path: samples_path.to_path_buf(),
                index,
                reason: format!(
                    "image {} lies in {}, which the export replaces; export elsewhere",
                    image.display(),
                    images_dir.display()
                ),
            });
        }
    }
    let foreign = foreign_outputs(out);
    if !foreign.is_empty() && !options.replace_foreign {
        let names: Vec<String> = foreign.iter().map(|p| p.display().to_string()).collect();
        return Err(Error::Usage(format!(
            "--out {}: {} would be replaced, and the directory has no {EXPORT_MARK} (no export \
             made it, or one from before exports marked their directory); export elsewhere, or \
             give --force",
            out.display(),
            names.join(" and "),
        )));
    }
    create_dir(out)?;
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
    // The data layer's own error, kept while the staging helper reports
    // that its filling failed.
    let mut failed = None;
    let placed = crate::atomic::write_entries(out, |staging| {
        export_rows(samples_path, &samples, base, &root, options, staging).map_err(|e| {
            let message = e.to_string();
            failed = Some(e);
            crate::error::Error::Input(message)
        })
    });
    if let Err(e) = placed {
        return Err(failed.unwrap_or_else(|| match e {
            crate::error::Error::Io { path, source } => Error::Write { path, source },
            other => Error::Write {
                path: out.to_path_buf(),
                source: std::io::Error::other(other.to_string()),
            },
        }));
    }
    Ok(ExportReport {
        rows: samples.len(),
        dataset,
        images_dir,
    })
}

/// Refuses image bytes that are no image, or whose size is not the one
/// the sample gives it (`size`, its `image_sizes` entry): the sample's
/// coordinates are in that frame, and a trainer would teach them on
/// another picture.
fn check_image(bytes: &[u8], size: Option<&[u32; 2]>) -> Result<(), String> {
    let (width, height) = image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| e.to_string())?
        .into_dimensions()
        .map_err(|e| format!("not an image: {e}"))?;
    agent_core::sample::check_image_size(width, height, size)
}

/// Writes `staging/images/` and `staging/train.jsonl` for `samples`, the
/// rows naming their images under `root`.
fn export_rows(
    samples_path: &Path,
    samples: &[Sample],
    base: &Path,
    root: &str,
    options: &ExportOptions,
    staging: &Path,
) -> Result<()> {
    let images_dir = staging.join(IMAGES_DIR);
    create_dir(&images_dir)?;
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
            // Capped as a screenshot is: a sample naming /dev/zero would
            // otherwise be read until memory ran out.
            let bytes = agent_core::agent::trajectory::read_screenshot_file(&source)
                .map_err(|e| at_sample(format!("image {}: {e}", source.display())))?;
            check_image(&bytes, sample.image_sizes.get(j))
                .map_err(|e| at_sample(format!("image {}: {e}", source.display())))?;
            let ext = source
                .extension()
                .map_or_else(|| "png".into(), |e| e.to_string_lossy().into_owned());
            let name = format!("{index:06}-{j}.{ext}");
            std::fs::write(images_dir.join(&name), &bytes).map_err(|source| Error::Write {
                path: images_dir.join(&name),
                source,
            })?;
            paths.push(format!("{root}/{IMAGES_DIR}/{name}"));
        }
        let line = match options.purpose {
            Purpose::Grpo => row(sample, &paths),
            Purpose::Sft { max_regions } => sft_row(sample, &paths, max_regions),
        };
        lines.push_str(&line.map_err(at_sample)?.to_string());
        lines.push('\n');
    }
    let dataset = staging.join(DATASET_FILE);
    std::fs::write(&dataset, lines).map_err(|source| Error::Write {
        path: dataset,
        source,
    })?;
    let mark = staging.join(EXPORT_MARK);
    let note = "images/ and train.jsonl here are a `btl-train data export`'s; another export \
                into this directory replaces them\n";
    std::fs::write(&mark, note).map_err(|source| Error::Write { path: mark, source })
}

/// The outputs of an export into `out` that are already there but were
/// not made by an export (no [`EXPORT_MARK`]): a dataset or an images
/// directory of someone else's, which the export would replace.
fn foreign_outputs(out: &Path) -> Vec<PathBuf> {
    if out.join(EXPORT_MARK).exists() {
        return Vec::new();
    }
    [IMAGES_DIR, DATASET_FILE]
        .iter()
        .map(|name| out.join(name))
        .filter(|path| path.symlink_metadata().is_ok())
        .collect()
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
    fn an_sft_row_answers_the_prompt_with_the_samples_solution() {
        use agent_core::protocol::{BBox, Link, ParseMode, parse, parse_link_json};
        use agent_core::sample::RankedRoi;
        let mut sample = parse_samples(NAVIGATION).unwrap().remove(0);
        sample.solution = r#"[{"Plan": "Open the search box.", "Action": {"function": "Tap", "point_2d": [667, 1138]}}]"#.into();
        let roi = |x1, y1, x2, y2, priority| RankedRoi {
            bbox_2d: BBox::new(x1, y1, x2, y2),
            label: format!("region {priority}"),
            priority,
        };
        sample.rois = vec![
            roi(100.0, 200.0, 300.0, 420.0, 2),
            roi(0.0, 0.0, 720.0, 64.0, 1),
            roi(10.0, 10.0, 20.0, 20.0, 3),
        ];
        let row = sft_row(&sample, &["/data/images/000000-0.png".into()], 2).unwrap();
        assert_eq!(row["images"], json!(["/data/images/000000-0.png"]));
        let messages = row["messages"].as_array().unwrap();
        let roles: Vec<&str> = messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["system", "user", "assistant"]);
        assert_eq!(messages[1]["content"], sample.messages[1].content.as_str());
        let answer = parse(messages[2]["content"].as_str().unwrap(), ParseMode::Strict)
            .expect("the answer is canonical")
            .output;
        let (solution, _) = parse_link_json(&sample.solution, ParseMode::Strict).unwrap();
        assert_eq!(answer.think, "Open the search box.");
        assert_eq!(answer.link, solution);
        assert!(matches!(answer.link, Link::Action { .. }));
        // The two regions of highest priority, in that order, scaled from
        // the 720×1280 screenshot to the 728×1288 model frame (multiples of
        // 28) and rounded: 100·728/720 = 101.1, 200·1288/1280 = 201.25,
        // 300·728/720 = 303.3, 420·1288/1280 = 422.6, 64·1288/1280 = 64.4.
        let boxes: Vec<_> = answer.blink.iter().map(|r| r.bbox).collect();
        assert_eq!(
            boxes,
            [
                BBox::new(0.0, 0.0, 728.0, 64.0),
                BBox::new(101.0, 201.0, 303.0, 423.0)
            ]
        );
        assert_eq!(answer.blink[0].label, "region 1");
    }

    /// A Plan that quotes a label reading `<image>` would give ms-swift a
    /// mark without an image in the answer; the row is refused.
    #[test]
    fn an_answer_holding_an_image_mark_is_refused() {
        use agent_core::protocol::{Action, Link};
        let mut sample = parse_samples(NAVIGATION).unwrap().remove(0);
        sample.solution = Link::Action {
            plan: "Tap \"<image>\".".into(),
            action: Action::Back,
        }
        .to_json();
        let err = sft_row(&sample, &["a.png".into()], 2).unwrap_err();
        assert!(
            err.starts_with("its answer holds <image>, which ms-swift"),
            "{err}"
        );
        sample.solution = Link::Action {
            plan: "Tap \"<img>\".".into(),
            action: Action::Back,
        }
        .to_json();
        assert!(sft_row(&sample, &["a.png".into()], 2).is_ok());
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
