//! `paper` mode: §3.3 of the BTL-UI paper, with the constants the paper leaves
//! open fixed by the spec.
//!
//! Blink: the ground truth is up to λ = 5 regions ranked 1..λ (rank 1 is the
//! action's target); predicted regions are matched to them by the Hungarian
//! algorithm on IoU, a pair counts when IoU ≥ τ = 0.5, and the reward is the
//! best rank score s(k) = (λ − k + 1) / λ among matched ground-truth regions.
//! Format and link are the released rules, strict about template and content
//! but not about whitespace inside the tags; bodies are read by serde_json
//! (no lone surrogates, at most 128 levels), not as Python reads them.

use super::indicator;
use super::pyvalue::{self, number};
use super::released::{self, IOU_THRESHOLD, Rules};
use crate::protocol::BBox;
use crate::sample::Sample;
use pathfinding::kuhn_munkres::kuhn_munkres;
use pathfinding::matrix::Matrix;
use regex::Regex;
use serde_json::Value;
use std::sync::LazyLock;

/// Most ground-truth regions per sample (λ).
pub const MAX_ROIS: usize = 5;

static ENVELOPE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?s)^<blink>(.*?)</blink>[\s\x1C-\x1F]*<think>.*?</think>[\s\x1C-\x1F]*<link>(.*?)</link>")
        .expect("valid pattern")
});
static FENCED_JSON: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)^```json\s*(.*?)\s*```$").expect("valid pattern"));

const RULES: Rules = Rules {
    swipe_ignores_case: true,
    back_home_type_only: true,
    tap_without_box_by_distance: true,
    extended_actions: true,
};

/// The blink and link bodies of a completion that fits the template.
fn bodies(completion: &str) -> Option<(&str, &str)> {
    let caps = ENVELOPE.captures(completion)?;
    Some((
        pyvalue::strip(caps.get(1)?.as_str()),
        pyvalue::strip(caps.get(2)?.as_str()),
    ))
}

fn fenced_json(body: &str) -> Option<Value> {
    let inner = FENCED_JSON.captures(body)?.get(1)?.as_str();
    serde_json::from_str(inner).ok()
}

/// The predicted boxes: a blink written `None`, `[]` or left empty has none; `None` overall when the
/// blink is malformed (not fenced JSON, not a list, a box that is not four
/// numbers with x1 < x2 and y1 < y2).
fn predicted_boxes(blink: &str) -> Option<Vec<BBox>> {
    if matches!(blink, "" | "None" | "[]") {
        return Some(Vec::new());
    }
    let Value::Array(items) = fenced_json(blink)? else {
        return None;
    };
    items
        .iter()
        .map(|item| {
            let coords = item.get("bbox_2d")?.as_array()?;
            let [x1, y1, x2, y2] = coords.as_slice() else {
                return None;
            };
            let b = BBox::new(number(x1)?, number(y1)?, number(x2)?, number(y2)?);
            (b.x1 < b.x2 && b.y1 < b.y2).then_some(b)
        })
        .collect()
}

pub fn format(completion: &str) -> f64 {
    let Some((blink, link)) = bodies(completion) else {
        return 0.0;
    };
    indicator(
        predicted_boxes(blink).is_some()
            && fenced_json(link).is_some_and(|l| link_has_one_item(&l)),
    )
}

pub fn link(completion: &str, sample: &Sample) -> f64 {
    bodies(completion)
        .and_then(|(_, link)| fenced_json(link))
        .map_or(0.0, |link| released::link_value(&link, sample, RULES))
}

pub fn blink(completion: &str, sample: &Sample) -> f64 {
    let Some(predicted) = bodies(completion).and_then(|(blink, _)| predicted_boxes(blink)) else {
        return 0.0;
    };
    let truth = ranked_truth(sample);
    match (predicted.is_empty(), truth.is_empty()) {
        (true, true) => 1.0,
        (true, false) => indicator(!has_target_point(sample)),
        (false, true) => 0.0,
        (false, false) => best_matched_rank_score(&predicted, &truth),
    }
}

/// Ground-truth regions with their ranks: the sample's `rois` (the λ best
/// priorities), or else its target box at rank 1.
fn ranked_truth(sample: &Sample) -> Vec<(BBox, usize)> {
    if sample.rois.is_empty() {
        return sample.gt_bbox().map(|b| (b, 1)).into_iter().collect();
    }
    let mut rois: Vec<_> = sample
        .rois
        .iter()
        .map(|r| (r.bbox_2d, r.priority as usize))
        .collect();
    rois.sort_by_key(|&(_, priority)| priority);
    rois.truncate(MAX_ROIS);
    // Ranks outside 1..=λ (a priority 0, or a gap such as 1, 2, 9) are
    // pulled onto the scale so s(k) stays in (0, 1].
    rois.into_iter()
        .map(|(b, p)| (b, p.clamp(1, MAX_ROIS)))
        .collect()
}

/// Whether the ground-truth action points at an element (Tap, LongPress or a
/// grounding point); Type, Swipe, Back, Home, Wait and Finish do not.
fn has_target_point(sample: &Sample) -> bool {
    let gt = sample.solution_item();
    gt.get("point_2d").is_some()
        || matches!(
            gt.get("Action")
                .and_then(|a| a.get("function"))
                .and_then(Value::as_str),
            Some("Tap" | "LongPress")
        )
}

/// s(k) = (λ − k + 1) / λ.
fn rank_score(rank: usize) -> f64 {
    (MAX_ROIS - rank + 1) as f64 / MAX_ROIS as f64
}

/// IoU scaled to integers for the assignment (the solver needs a total
/// order); 1e9 steps keep near-ties apart while sums stay far from overflow.
const IOU_SCALE: f64 = 1e9;

fn best_matched_rank_score(predicted: &[BBox], truth: &[(BBox, usize)]) -> f64 {
    // The solver wants no more rows than columns, so the shorter side is rows.
    let transpose = predicted.len() > truth.len();
    let (rows, cols) = if transpose {
        (truth.len(), predicted.len())
    } else {
        (predicted.len(), truth.len())
    };
    let iou = |r: usize, c: usize| {
        let (p, t) = if transpose { (c, r) } else { (r, c) };
        predicted[p].iou(&truth[t].0)
    };
    let weights = Matrix::from_fn(rows, cols, |(r, c)| (iou(r, c) * IOU_SCALE).round() as i64);
    let (_, assignment) = kuhn_munkres(&weights);
    assignment
        .iter()
        .enumerate()
        .filter(|&(r, &c)| iou(r, c) >= IOU_THRESHOLD)
        .map(|(r, &c)| rank_score(truth[if transpose { r } else { c }].1))
        .fold(0.0, f64::max)
}

/// Exactly one item, an object with `Plan` and `Action`, or with
/// `point_2d`. Stricter than the plugin's Python test (see `released`),
/// which a string or a list holding those names also passes: paper mode
/// checks content, so its link must be the object the grammar defines.
fn link_has_one_item(link: &Value) -> bool {
    match link.as_array().map(Vec::as_slice) {
        Some([Value::Object(item)]) => {
            (item.contains_key("Plan") && item.contains_key("Action"))
                || item.contains_key("point_2d")
        }
        _ => false,
    }
}
