//! `released` mode: the official reward plugin's semantics.
//!
//! Every early `return 0.0` below stands for a place where the Python code
//! raises inside its `try` (a missing key, a wrong type, a failed unpacking)
//! or a test that is false. Bodies are read as Python's `json.loads` reads
//! them ([`pyjson`]: lone surrogates kept, nesting as deep as Python goes).
//!
//! Differences, each documented in the spec: the plugin's link pattern for
//! the format reward contains a stray U+00B7 (`js·on`) that makes that
//! reward always 0, and we use the evident `json`; Python's `json` reads
//! `NaN`, `Infinity` and numbers beyond `f64`, serde_json refuses them, so
//! such completions score 0 where Python might not; and Type's lower-casing
//! uses Rust's Unicode tables, newer than Python 3.11's Unicode 14, so a
//! letter given a lower-case form after Unicode 14 compares differently.
//!
//! Faithfulness has a price worth knowing: like the plugin, the blink and link
//! terms read the first fenced `<blink>`/`<link>` body anywhere in the text,
//! so a fenced link written inside `<think>` is the one scored. `paper` mode
//! reads the bodies from the template's own positions instead.

use super::indicator;
use super::pyjson;
use super::pyvalue::{self, eq, first4, unpack2};
use crate::protocol::{BBox, Size, smart_resize};
use crate::sample::Sample;
use regex::Regex;
use serde_json::Value;
use std::sync::LazyLock;

/// Python's `\s` on `str` also matches U+001C..U+001F; Rust's does not.
macro_rules! ws {
    () => {
        r"[\s\x1C-\x1F]*"
    };
}

static ENVELOPE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?s)^<blink>.*?</blink>",
        ws!(),
        r"<think>.*?</think>",
        ws!(),
        r"<link>.*?</link>"
    ))
    .expect("valid pattern")
});
static BLINK_BODY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)<blink>```json\n(.*?)\n```</blink>").expect("valid pattern"));
static LINK_BODY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)<link>```json\n(.*?)\n```</link>").expect("valid pattern"));

/// Distance threshold of the official click rule, in model-frame units
/// normalized per axis.
pub const CLICK_DISTANCE: f64 = 0.14;
/// IoU above which a blink box hits the target; two blink boxes at or above
/// it count as duplicates.
pub const IOU_THRESHOLD: f64 = 0.5;

/// `json.loads(re.search(pattern).group(1).strip())`.
fn body_json(pattern: &Regex, completion: &str) -> Option<Value> {
    let body = pattern.captures(completion)?.get(1)?.as_str();
    pyjson::loads(pyvalue::strip(body))
}

pub fn format(completion: &str) -> f64 {
    if !ENVELOPE.is_match(completion) {
        return 0.0;
    }
    // The plugin only `json.loads` the blink body: any JSON value passes.
    if body_json(&BLINK_BODY, completion).is_none() {
        return 0.0;
    }
    indicator(body_json(&LINK_BODY, completion).is_some_and(|link| plugin_link_check(&link)))
}

/// `len(link) == 1 and (("Plan" in link[0] and "Action" in link[0]) or
/// "point_2d" in link[0])` as Python evaluates it, `False` where it raises.
/// Only a one-item list gets past `len(link) == 1` and `link[0]`: a
/// one-character string's `link[0]` holds none of the names, a one-key
/// object's `link[0]` raises `KeyError`, and `len` of a number raises.
/// `in` is then a key test on an object, a substring test on a string and
/// an element test on a list, and raises on a number, a bool or null.
fn plugin_link_check(link: &Value) -> bool {
    let Some([item]) = link.as_array().map(Vec::as_slice) else {
        return false;
    };
    let contains = |name: &str| match item {
        Value::Object(keys) => Some(keys.contains_key(name)),
        Value::String(text) => Some(text.contains(name)),
        Value::Array(items) => Some(items.iter().any(|v| v.as_str() == Some(name))),
        _ => None,
    };
    // `and` and `or` stop early, as Python's do: `"Action" in` is not
    // evaluated when `"Plan" in` is false.
    match contains("Plan") {
        None => false,
        Some(true) if contains("Action") == Some(true) => true,
        Some(_) => contains("point_2d") == Some(true),
    }
}

pub fn blink(completion: &str, sample: &Sample) -> f64 {
    let Some(gt) = sample.gt_bbox() else {
        return 1.0;
    };
    let Some(Value::Array(items)) = body_json(&BLINK_BODY, completion) else {
        return 0.0;
    };
    let Some(boxes) = items
        .iter()
        .map(|item| item.as_object()?.get("bbox_2d").and_then(first4))
        .collect::<Option<Vec<_>>>()
    else {
        return 0.0;
    };
    let boxes: Vec<BBox> = boxes
        .into_iter()
        .map(|[a, b, c, d]| BBox::new(a, b, c, d))
        .collect();
    // The plugin runs NMS and compares lengths; nothing is suppressed exactly
    // when no two boxes overlap at IoU >= 0.5, which is what we test.
    if has_duplicates(&boxes) {
        return 0.0;
    }
    indicator(boxes.iter().any(|b| b.iou(&gt) > IOU_THRESHOLD))
}

pub fn link(completion: &str, sample: &Sample) -> f64 {
    body_json(&LINK_BODY, completion).map_or(0.0, |link| link_value(&link, sample, Rules::RELEASED))
}

/// Whether a link body, as an answer wrote it, passes the released link
/// rule against `sample` (the `btl` metrics preset, spec §5). Wait and
/// Finish, which the plugin predates, match on their type.
pub(crate) fn link_rule_holds(link: &Value, sample: &Sample) -> bool {
    let rules = Rules {
        extended_actions: true,
        ..Rules::RELEASED
    };
    link_value(link, sample, rules) > 0.0
}

/// Where `paper` mode relaxes the released link rule.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rules {
    pub swipe_ignores_case: bool,
    pub back_home_type_only: bool,
    pub tap_without_box_by_distance: bool,
    /// Wait and Finish (btl-extended) match on their type alone; the plugin
    /// predates them and scores them 0.
    pub extended_actions: bool,
}

impl Rules {
    pub const RELEASED: Rules = Rules {
        swipe_ignores_case: false,
        back_home_type_only: false,
        tap_without_box_by_distance: false,
        extended_actions: false,
    };
}

/// The link reward of a parsed `<link>` JSON value.
pub(super) fn link_value(link: &Value, sample: &Sample, rules: Rules) -> f64 {
    let Some(Value::Object(pred)) = link.as_array().and_then(|a| a.first()) else {
        return 0.0;
    };
    let gt = sample.solution_item();
    if let Some(point) = pred.get("point_2d") {
        return indicator(unpack2(point).is_some_and(|p| inside(p, sample.gt_bbox())));
    }
    let (Some(Value::Object(pred_action)), Some(Value::Object(gt_action))) =
        (pred.get("Action"), gt.get("Action"))
    else {
        return 0.0;
    };
    let (Some(function), Some(gt_function)) =
        (pred_action.get("function"), gt_action.get("function"))
    else {
        return 0.0;
    };
    if !eq(function, gt_function) {
        return 0.0;
    }
    let field = |name: &str| Some((pred_action.get(name)?, gt_action.get(name)?));
    let ok = match function.as_str().unwrap_or_default() {
        "Tap" | "LongPress" => {
            let Some(p) = pred_action.get("point_2d").and_then(unpack2) else {
                return 0.0;
            };
            let bbox = sample.gt_bbox();
            let in_box = inside(p, bbox) || (rules.tap_without_box_by_distance && bbox.is_none());
            in_box
                && gt_action
                    .get("point_2d")
                    .and_then(unpack2)
                    .is_some_and(|g| close_enough(p, g, sample.image_size(), sample.max_pixels))
        }
        "Swipe" => field("direction").is_some_and(|(p, g)| match (p, g) {
            (Value::String(p), Value::String(g)) if rules.swipe_ignores_case => {
                p.to_lowercase() == g.to_lowercase()
            }
            _ => eq(p, g),
        }),
        "Type" => field("text").is_some_and(|(p, g)| match (p, g) {
            (Value::String(p), Value::String(g)) => pyvalue::token_f1(p, g) >= 0.5,
            _ => false,
        }),
        "Back" | "Home" => {
            rules.back_home_type_only
                || eq(
                    &Value::Object(pred_action.clone()),
                    &Value::Object(gt_action.clone()),
                )
        }
        "Wait" | "Finish" => rules.extended_actions,
        _ => false,
    };
    indicator(ok)
}

/// `bbox_determination`: strictly inside; no box means the test raises.
fn inside([x, y]: [f64; 2], bbox: Option<BBox>) -> bool {
    bbox.is_some_and(|b| b.x1 < x && x < b.x2 && b.y1 < y && y < b.y2)
}

/// `position_determination`: distance below 0.14 after dividing x by the
/// resized width and y by the resized height, in the plugin's operation order.
fn close_enough([px, py]: [f64; 2], [gx, gy]: [f64; 2], image: Size, max_pixels: u64) -> bool {
    normalized_distance([px, py], [gx, gy], image, max_pixels).is_some_and(|d| d < CLICK_DISTANCE)
}

/// Distance between two model-frame points, each axis divided by the
/// resized size; `None` when the image cannot be resized.
pub(crate) fn normalized_distance(
    [px, py]: [f64; 2],
    [gx, gy]: [f64; 2],
    image: Size,
    max_pixels: u64,
) -> Option<f64> {
    let resized = smart_resize(image, max_pixels).ok()?;
    let (w, h) = (f64::from(resized.width), f64::from(resized.height));
    let (dx, dy) = (gx / w - px / w, gy / h - py / h);
    Some((dx * dx + dy * dy).sqrt())
}

/// Whether any two boxes overlap at IoU ≥ 0.5, or at an IoU that is NaN: the
/// plugin's NMS keeps a box only if `iou < threshold`, which is false for NaN.
/// (Two boxes whose areas overflow to infinity, such as
/// `[-1e308, -1e308, 1e308, 1e308]` twice, have union inf + inf − inf = NaN.)
fn has_duplicates(boxes: &[BBox]) -> bool {
    boxes.iter().enumerate().any(|(i, a)| {
        boxes[i + 1..].iter().any(|b| {
            let iou = a.iou(b);
            iou >= IOU_THRESHOLD || iou.is_nan()
        })
    })
}
