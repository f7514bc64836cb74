//! Training and evaluation samples in the official BTL-UI JSON format (spec
//! §6), and the JSONL lines that pair a sample with a model completion.
//!
//! Reading is pure (text in, values out) so the CLI owns the file I/O and the
//! error messages still name the line: each sample is read from its own slice
//! of the file, and errors inside it are shifted to file lines.
//!
//! Making a sample is pure too: [`state::state_sample`] builds the sample of
//! one screen from its prompt, a teacher's answer and the UI tree, with the
//! target element and ranked ROIs of [`rois`].

pub mod rois;
pub mod state;

use crate::protocol::{BBox, Size, smart_resize};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::HashMap;
use thiserror::Error;

/// One official-format sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Our optional identifier; completions may refer to it instead of the index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Image paths, relative to the sample file. The grounding example names
    /// this key `image`.
    #[serde(alias = "image")]
    pub images: Vec<String>,
    /// `[[width, height]]` of the original screenshot.
    pub image_sizes: Vec<[u32; 2]>,
    #[serde(default = "default_max_pixels")]
    pub max_pixels: u64,
    pub messages: Vec<Message>,
    /// The ground-truth link, as a JSON string: `[{"Action": {...}}]` or
    /// `[{"point_2d": [x, y]}]`.
    pub solution: String,
    /// Ground-truth box of the target element in original pixels, `[]` if none.
    pub bbox: Vec<f64>,
    /// Ours: ranked regions of interest for `paper`-mode blink rewards.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rois: Vec<RankedRoi>,
}

fn default_max_pixels() -> u64 {
    crate::protocol::TRAINING_MAX_PIXELS
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

/// A ground-truth region with its priority rank (1 = the action's target).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankedRoi {
    pub bbox_2d: BBox,
    #[serde(default)]
    pub label: String,
    pub priority: u32,
}

impl Sample {
    /// Size of the original screenshot.
    pub fn image_size(&self) -> Size {
        let [w, h] = self.image_sizes[0];
        Size::new(w, h)
    }

    /// The sample as answers are judged against it: with its boxes (`bbox`,
    /// `rois`) in the model frame when `max_pixels` scales the screenshot
    /// down, as it is otherwise.
    ///
    /// The boxes are in the screenshot's pixels, answers in the model frame.
    /// The official reward plugin compares the two as they are, which is
    /// right when the model frame is the screenshot's own size up to
    /// smart_resize's rounding to 28 — phone screens at BTL-UI's 4,014,080
    /// pixels. Scaled down (e.g. 1080×2400 at 200,704 pixels is 280×644), no
    /// answer could land in its box, so the boxes are scaled with the
    /// screenshot; where the plugin's comparison is meaningful it stays
    /// exactly the plugin's.
    pub fn judged(&self) -> Cow<'_, Sample> {
        let Some(&[w, h]) = self.image_sizes.first() else {
            return Cow::Borrowed(self);
        };
        let size = Size::new(w, h);
        let (Ok(model), Ok(own)) = (
            smart_resize(size, self.max_pixels),
            smart_resize(size, u64::MAX),
        ) else {
            return Cow::Borrowed(self);
        };
        if model == own {
            return Cow::Borrowed(self);
        }
        let (sx, sy) = (
            f64::from(model.width) / f64::from(w),
            f64::from(model.height) / f64::from(h),
        );
        let scale = |b: BBox| BBox::new(b.x1 * sx, b.y1 * sy, b.x2 * sx, b.y2 * sy);
        let mut out = self.clone();
        if let Some(b) = self.gt_bbox() {
            let b = scale(b);
            out.bbox = vec![b.x1, b.y1, b.x2, b.y2];
        }
        for roi in &mut out.rois {
            roi.bbox_2d = scale(roi.bbox_2d);
        }
        Cow::Owned(out)
    }

    /// The ground-truth box, `None` when the sample has `[]`.
    pub fn gt_bbox(&self) -> Option<BBox> {
        match self.bbox[..] {
            [x1, y1, x2, y2] => Some(BBox::new(x1, y1, x2, y2)),
            _ => None,
        }
    }

    /// The first item of the solution list, as the reward code reads it
    /// (`json.loads(solution)[0]`, with Python's reading of the JSON).
    pub fn solution_item(&self) -> Value {
        crate::reward::pyjson::loads(&self.solution)
            .and_then(|v| v.get(0).cloned())
            .unwrap_or(Value::Null)
    }

    /// Whether this is a grounding sample (`point_2d` at the top of the solution).
    pub fn is_grounding(&self) -> bool {
        self.solution_item().get("point_2d").is_some()
    }

    /// The checks the reward code relies on, so scoring never meets a
    /// malformed sample.
    fn validate(&self) -> Result<(), String> {
        if self.image_sizes.is_empty() {
            return Err("\"image_sizes\" is empty".into());
        }
        if self.image_sizes[0].contains(&0) {
            return Err("\"image_sizes\" has a zero side".into());
        }
        // No frame fits under Qwen's minimum: every point would be judged
        // in a frame that does not exist, and score 0 without a word.
        if self.max_pixels < crate::protocol::MIN_PIXELS {
            return Err(format!(
                "\"max_pixels\" is {}, under Qwen2.5-VL's minimum of {}",
                self.max_pixels,
                crate::protocol::MIN_PIXELS
            ));
        }
        // No side bound, unlike a device's screen: a full-page web capture
        // is tall and narrow.
        let [w, h] = self.image_sizes[0];
        if !crate::device::within_screen_pixels(w, h) {
            return Err(format!(
                "\"image_sizes\" {w}x{h} is more than the {} pixels btl reads of one \
                 screenshot",
                crate::device::MAX_SCREEN_PIXELS
            ));
        }
        if let Err(e) = crate::protocol::smart_resize(self.image_size(), self.max_pixels) {
            return Err(format!("\"image_sizes\" fits no model frame: {e}"));
        }
        if !matches!(self.bbox.len(), 0 | 4) {
            return Err(format!(
                "\"bbox\" must be [] or [x1, y1, x2, y2], found {} numbers",
                self.bbox.len()
            ));
        }
        let solution: Value = serde_json::from_str(&self.solution)
            .map_err(|e| format!("\"solution\" is not JSON: {e}"))?;
        match solution.get(0) {
            Some(Value::Object(item))
                if item.contains_key("Action") || item.contains_key("point_2d") =>
            {
                Ok(())
            }
            _ => Err(
                "\"solution\" must be a JSON list whose first item has \"Action\" or \"point_2d\""
                    .into(),
            ),
        }
    }
}

/// Refuses an image of `width` × `height` (as its header gives them) that
/// is not the size its sample gives it (`given`, its `image_sizes`
/// entry): the sample's coordinates are in that frame, and would be read
/// or taught on another picture.
pub fn check_image_size(width: u32, height: u32, given: Option<&[u32; 2]>) -> Result<(), String> {
    match given {
        Some(&[w, h]) if (w, h) != (width, height) => Err(format!(
            "it is {width}×{height} but the sample says {w}×{h}: its coordinates would not match"
        )),
        _ => Ok(()),
    }
}

/// Where in an input file something went wrong.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("line {line}: {reason}")]
pub struct InputError {
    pub line: usize,
    pub reason: String,
}

/// Reads the contents of an official-format sample file (a JSON list).
pub fn parse_samples(text: &str) -> Result<Vec<Sample>, InputError> {
    let raws: Vec<&RawValue> = serde_json::from_str(text).map_err(|e| InputError {
        line: e.line(),
        reason: format!("not a JSON list of samples: {e}"),
    })?;
    raws.into_iter()
        .enumerate()
        .map(|(index, raw)| {
            // Counted only for an error: counting for every sample is
            // quadratic in the file's size.
            let first_line = || line_of(text, raw.get());
            let sample: Sample = serde_json::from_str(raw.get()).map_err(|e| {
                // serde's position counts from the sample's start; the
                // file's line replaces it.
                let text = e.to_string();
                let at = format!(" at line {} column {}", e.line(), e.column());
                InputError {
                    line: first_line() + e.line().saturating_sub(1),
                    reason: format!(
                        "sample {index}: {}",
                        text.strip_suffix(&at).unwrap_or(&text)
                    ),
                }
            })?;
            sample.validate().map_err(|reason| InputError {
                line: first_line(),
                reason: format!("sample {index}: {reason}"),
            })?;
            Ok(sample)
        })
        .collect()
}

/// 1-based line at which `part`, a slice of `text`, starts.
fn line_of(text: &str, part: &str) -> usize {
    let offset = (part.as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// How a completion names its sample: by index in the file or by `id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SampleRef {
    Index(usize),
    Id(String),
}

impl std::fmt::Display for SampleRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Index(i) => write!(f, "{i}"),
            Self::Id(id) => write!(f, "\"{id}\""),
        }
    }
}

/// One line of a completions (or predictions) JSONL file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletionLine {
    pub sample: SampleRef,
    pub completion: String,
}

/// A completion resolved to the index of its sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub line: usize,
    pub sample_ref: SampleRef,
    pub sample: usize,
    pub completion: String,
}

/// What is wrong with a completions line serde refused with `e`: an
/// untagged [`SampleRef`] reports only that no variant matched, so a
/// `sample` that is neither an index nor a string is named here.
fn completion_error(line: &str, e: serde_json::Error) -> String {
    let sample = serde_json::from_str::<Value>(line)
        .ok()
        .and_then(|v| v.get("sample").cloned());
    match sample {
        Some(Value::String(_)) | None => e.to_string(),
        Some(Value::Number(n)) if n.is_u64() => e.to_string(),
        Some(other) => format!(
            "\"sample\" is {other}: it must be an index (a whole number, 0 or more) or a \
             sample's id (a string)"
        ),
    }
}

/// Reads a completions JSONL file against the samples it refers to. Blank
/// lines are skipped.
pub fn parse_completions(text: &str, samples: &[Sample]) -> Result<Vec<Completion>, InputError> {
    // Each id's first sample, and its second where two share it.
    let mut by_id: HashMap<&str, (usize, Option<usize>)> = HashMap::new();
    for (i, sample) in samples.iter().enumerate() {
        if let Some(id) = sample.id.as_deref() {
            by_id
                .entry(id)
                .and_modify(|(_, second)| {
                    second.get_or_insert(i);
                })
                .or_insert((i, None));
        }
    }
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            let line = i + 1;
            let parsed: CompletionLine = serde_json::from_str(l).map_err(|e| InputError {
                line,
                reason: format!(
                    "expected {{\"sample\": <index or id>, \"completion\": \"<text>\"}}: {}",
                    completion_error(l, e)
                ),
            })?;
            let sample = match &parsed.sample {
                SampleRef::Index(i) => (*i < samples.len()).then_some(*i),
                SampleRef::Id(id) => match by_id.get(id.as_str()) {
                    Some(&(first, Some(second))) => {
                        return Err(InputError {
                            line,
                            reason: format!(
                                "sample {} is ambiguous: samples {first} and {second} both have that id",
                                parsed.sample
                            ),
                        });
                    }
                    found => found.map(|&(first, _)| first),
                },
            }
            .ok_or_else(|| InputError {
                line,
                reason: format!(
                    "sample {} does not exist ({} samples)",
                    parsed.sample,
                    samples.len()
                ),
            })?;
            Ok(Completion {
                line,
                sample_ref: parsed.sample,
                sample,
                completion: parsed.completion,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAVIGATION: &str =
        include_str!("../../tests/data/btl-ui-examples/navigation_meta_format.json");
    const GROUNDING: &str =
        include_str!("../../tests/data/btl-ui-examples/grounding_meta_format.json");

    #[test]
    fn reads_the_official_examples() {
        let nav = parse_samples(NAVIGATION).unwrap();
        assert_eq!(nav.len(), 1);
        assert_eq!(nav[0].image_size(), Size::new(720, 1280));
        assert_eq!(
            nav[0].gt_bbox(),
            Some(BBox::new(614.0, 1094.0, 720.0, 1182.0))
        );
        assert_eq!(nav[0].max_pixels, 4_014_080);
        assert!(!nav[0].is_grounding());
        let ground = parse_samples(GROUNDING).unwrap();
        assert_eq!(ground[0].images, ["examples/images/123226.png"]);
        assert!(ground[0].is_grounding());
    }

    /// 1080×2400 at 200,704 pixels is seen as 280×644 (spec §3: β = 3.594,
    /// ⌊1080/β/28⌋·28 = 280, ⌊2400/β/28⌋·28 = 644): the boxes scale by
    /// 280/1080 and 644/2400. At 4,014,080 the frame is 1092×2408, the
    /// screenshot's own size rounded to 28, and nothing changes.
    #[test]
    fn judged_scales_boxes_only_into_a_scaled_down_frame() {
        let mut sample = parse_samples(NAVIGATION).unwrap().remove(0);
        sample.image_sizes = vec![[1080, 2400]];
        sample.bbox = vec![0.0, 667.0, 270.0, 909.0];
        sample.rois = vec![RankedRoi {
            bbox_2d: BBox::new(540.0, 0.0, 1080.0, 1200.0),
            label: "right half, top".into(),
            priority: 1,
        }];
        assert!(matches!(sample.judged(), Cow::Borrowed(_)));
        sample.max_pixels = 200_704;
        let judged = sample.judged();
        // 667·644/2400 = 429,548/2400 = 178.97833, 909·644/2400 = 243.915;
        // 270·280/1080 = 70.
        let b = judged.gt_bbox().unwrap();
        assert_eq!((b.x1, b.x2), (0.0, 70.0));
        assert!((b.y1 - 178.978_333).abs() < 1e-5 && (b.y2 - 243.915).abs() < 1e-9);
        assert_eq!(judged.rois[0].bbox_2d, BBox::new(140.0, 0.0, 280.0, 322.0));
        assert_eq!(
            (&judged.solution, judged.max_pixels),
            (&sample.solution, sample.max_pixels)
        );
    }

    #[test]
    fn errors_name_the_line() {
        let text = "[\n{\"images\": [], \"image_sizes\": [[1, 1]], \"messages\": [],\n \"solution\": 5, \"bbox\": []}\n]";
        let err = parse_samples(text).unwrap_err();
        assert_eq!(err.line, 3);
        assert!(
            err.reason
                .starts_with("sample 0: invalid type: integer `5`"),
            "{err}"
        );

        let text = "[{\"images\": [], \"image_sizes\": [[1, 1]], \"messages\": [], \"max_pixels\": 3135,\n \"solution\": \"[{\\\"point_2d\\\": [1, 1]}]\", \"bbox\": []}]";
        let err = parse_samples(text).unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 1: sample 0: \"max_pixels\" is 3135, under Qwen2.5-VL's minimum of 3136"
        );

        // A screenshot 201 times as tall as wide fits no model frame
        // (smart_resize refuses a ratio above 200): a right answer would
        // score 0 without a word.
        let sized = |w: u32, h: u32| {
            format!(
                "[{{\"images\": [], \"image_sizes\": [[{w}, {h}]], \"messages\": [], \
                 \"solution\": \"[{{\\\"point_2d\\\": [1, 1]}}]\", \"bbox\": []}}]"
            )
        };
        assert!(parse_samples(&sized(80, 16_000)).is_ok());
        assert_eq!(
            parse_samples(&sized(80, 16_080)).unwrap_err().to_string(),
            "line 1: sample 0: \"image_sizes\" fits no model frame: image size 80x16080 has \
             aspect ratio 201.0, above the model's limit of 200"
        );
        // A full-page web capture is taller than any screen, and fine.
        assert!(parse_samples(&sized(1280, 20_000)).is_ok());
        assert_eq!(
            parse_samples(&sized(5793, 5793)).unwrap_err().to_string(),
            "line 1: sample 0: \"image_sizes\" 5793x5793 is more than the 33554432 pixels btl \
             reads of one screenshot"
        );

        let text = "[{\"images\": [], \"image_sizes\": [[1, 1]], \"messages\": [],\n \"solution\": \"[]\", \"bbox\": [1]}]";
        let err = parse_samples(text).unwrap_err();
        assert_eq!(err.line, 1);
        assert!(err.reason.contains("\"bbox\" must be []"), "{err}");
    }

    #[test]
    fn a_sample_that_is_no_index_nor_id_is_named() {
        let samples = parse_samples(NAVIGATION).unwrap();
        for sample in ["-1", "1.5", "99999999999999999999999", "null", "[0]"] {
            let text = format!("{{\"sample\": {sample}, \"completion\": \"a\"}}");
            let e = parse_completions(&text, &samples).unwrap_err().to_string();
            assert!(
                e.contains("it must be an index (a whole number, 0 or more) or a sample's id"),
                "{sample}: {e}"
            );
        }
        let e = parse_completions("{\"sample\": 0}", &samples)
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing field `completion`"), "{e}");
    }

    #[test]
    fn completions_refer_by_index_or_id() {
        let mut samples = parse_samples(NAVIGATION).unwrap();
        samples[0].id = Some("nav-1".into());
        let text = "{\"sample\": 0, \"completion\": \"a\"}\n\n{\"sample\": \"nav-1\", \"completion\": \"b\"}\n";
        let c = parse_completions(text, &samples).unwrap();
        assert_eq!((c[0].line, c[0].sample), (1, 0));
        assert_eq!(
            (c[1].line, c[1].sample, c[1].completion.as_str()),
            (3, 0, "b")
        );
        let err = parse_completions("{\"sample\": 4, \"completion\": \"\"}", &samples).unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 1: sample 4 does not exist (1 samples)"
        );
        let err = parse_completions("{\"sample\": 0}", &samples).unwrap_err();
        assert!(err.reason.contains("missing field `completion`"), "{err}");
        // Two samples with one id: naming it is ambiguous, their indices not.
        let mut twice = vec![samples[0].clone(), samples[0].clone(), samples[0].clone()];
        twice[1].id = Some("other".into());
        let err =
            parse_completions("{\"sample\": \"nav-1\", \"completion\": \"\"}", &twice).unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 1: sample \"nav-1\" is ambiguous: samples 0 and 2 both have that id"
        );
        let c = parse_completions(
            "{\"sample\": \"other\", \"completion\": \"\"}\n{\"sample\": 2, \"completion\": \"\"}",
            &twice,
        )
        .unwrap();
        assert_eq!((c[0].sample, c[1].sample), (1, 2));
    }
}
