//! Tests of the reward (spec §4): the test vectors of spec §8, hand-computed
//! cases for every branch of both modes, and properties over arbitrary text.
//!
//! Every expected value comes from the spec or from the hand calculation in
//! the comment beside it, never from running the code. Facts used throughout:
//! - navigation sample: 720×1280 (w×h), GT Tap [663, 1135], GT box
//!   [614, 1094, 720, 1182] (106 wide, 88 high, area 9328);
//! - its model frame: smart_resize(720×1280) = 728×1288 (spec §3), so the
//!   click distance divides x by 728 and y by 1288;
//! - grounding sample: 2560×1440, GT point [1266, 1229], box
//!   [392, 1211, 2141, 1247].

use super::{RewardBreakdown, RewardMode, Weights, score};
use crate::protocol::BBox;
use crate::sample::{RankedRoi, Sample, parse_samples};
use proptest::prelude::*;
use std::sync::LazyLock;

const NAVIGATION: &str =
    include_str!("../../../tests/data/btl-ui-examples/navigation_meta_format.json");
const GROUNDING: &str =
    include_str!("../../../tests/data/btl-ui-examples/grounding_meta_format.json");

/// The navigation GT box as a one-item blink list.
const GT_BLINK: &str = r#"[{"bbox_2d": [614, 1094, 720, 1182], "label": "Los Angeles result"}]"#;
/// The GT Tap of the navigation sample.
const GT_TAP: &str = r#"{"function": "Tap", "point_2d": [663, 1135]}"#;

fn navigation() -> Sample {
    parse_samples(NAVIGATION)
        .expect("the official navigation example parses")
        .remove(0)
}

fn grounding() -> Sample {
    parse_samples(GROUNDING)
        .expect("the official grounding example parses")
        .remove(0)
}

/// The navigation sample with another GT action (`solution`), box kept.
fn navigation_with_gt(action: &str) -> Sample {
    let mut sample = navigation();
    sample.solution = format!(r#"[{{"Action": {action}}}]"#);
    sample
}

/// The canonical completion of spec §2: `blink` is the JSON list inside the
/// blink fence, `action` the JSON object of the single link item.
fn canonical(blink: &str, action: &str) -> String {
    format!(
        "<blink>```json\n{blink}\n```</blink>\n<think> The Los Angeles result is at the bottom right; tap it. </think>\n<link>```json\n[{{\"Plan\": \"Tap the Los Angeles result.\", \"Action\": {action}}}]\n```</link>"
    )
}

/// The canonical completion with the GT box as blink and the given action.
fn with_action(action: &str) -> String {
    canonical(GT_BLINK, action)
}

fn tap(x: i32, y: i32) -> String {
    format!(r#"{{"function": "Tap", "point_2d": [{x}, {y}]}}"#)
}

/// A canonical grounding completion pointing at `[x, y]`.
fn grounding_completion(x: i32, y: i32) -> String {
    format!(
        "<blink>```json\n[{{\"bbox_2d\": [392, 1211, 2141, 1247], \"label\": \"Slide Notes\"}}]\n```</blink>\n<think> The Slide Notes bar spans the bottom. </think>\n<link>```json\n[{{\"point_2d\": [{x}, {y}]}}]\n```</link>"
    )
}

fn released(sample: &Sample, completion: &str) -> RewardBreakdown {
    score(sample, completion, RewardMode::Released, Weights::default())
}

fn paper(sample: &Sample, completion: &str) -> RewardBreakdown {
    score(sample, completion, RewardMode::Paper, Weights::default())
}

fn roi(bbox: [f64; 4], priority: u32) -> RankedRoi {
    let [x1, y1, x2, y2] = bbox;
    RankedRoi {
        bbox_2d: BBox::new(x1, y1, x2, y2),
        label: format!("region of rank {priority}"),
        priority,
    }
}

fn assert_close(actual: f64, expected: f64) {
    assert!(
        (actual - expected).abs() < 1e-12,
        "expected {expected}, got {actual}"
    );
}

// ---------------------------------------------------------------------------
// Spec §8 test vectors (released mode)
// ---------------------------------------------------------------------------

// Vector 1. Blink: the one box equals the GT box, IoU 1 > 0.5, no other box
// to duplicate it. Link: Tap == Tap; 614 < 663 < 720 and 1094 < 1135 < 1182;
// distance 0 < 0.14. Format: envelope, blink list with bbox_2d, one link item
// with Plan and Action (spec §4).
#[test]
fn vector_canonical_completion_with_the_gt_box_and_gt_tap_scores_one_everywhere() {
    let completion = "<blink>```json\n[{\"bbox_2d\": [614, 1094, 720, 1182], \"label\": \"Los Angeles, CA, USA\"}]\n```</blink>\n<think> The first search result is Los Angeles; tap it. </think>\n<link>```json\n[{\"Plan\": \"Tap the Los Angeles result.\", \"Action\": {\"function\": \"Tap\", \"point_2d\": [663, 1135]}}]\n```</link>";
    let r = released(&navigation(), completion);
    assert_eq!((r.format, r.blink, r.link), (1.0, 1.0, 1.0));
}

// Vector 2. The blink pattern needs "\n```</blink>"; "\n ```</blink>" has a
// space in between, so the pattern finds nothing: blink 0 (and format 0).
// The link part is untouched: link 1.
#[test]
fn vector_space_before_the_closing_blink_fence_zeroes_blink_but_not_link() {
    let completion = with_action(GT_TAP).replace("\n```</blink>", "\n ```</blink>");
    let r = released(&navigation(), &completion);
    assert_eq!((r.blink, r.link), (0.0, 1.0));
    assert_eq!(r.format, 0.0);
}

fn none_blink_completion() -> String {
    format!(
        "<blink>None</blink>\n<think> Nothing to observe. </think>\n<link>```json\n[{{\"Plan\": \"Tap the result.\", \"Action\": {GT_TAP}}}]\n```</link>"
    )
}

// Vector 3. `None` has no ```json fence, so the blink does not parse: 0.
// Link as in vector 1: 1.
#[test]
fn vector_none_blink_scores_zero_blink_and_full_link() {
    let r = released(&navigation(), &none_blink_completion());
    assert_eq!((r.blink, r.link), (0.0, 1.0));
}

// Vector 3 with GT bbox []: an empty GT box gives blink 1 whatever was
// predicted. The link Tap then has no box to be inside: 0.
#[test]
fn vector_none_blink_scores_full_blink_when_the_gt_box_is_empty() {
    let mut sample = navigation();
    sample.bbox = vec![];
    let r = released(&sample, &none_blink_completion());
    assert_eq!((r.blink, r.link), (1.0, 0.0));
}

// Vector 4. Boxes [614,1094,720,1182] and [620,1100,720,1182]:
// intersection = (720-620)·(1182-1100) = 100·82 = 8200;
// areas 9328 and 8200; union = 9328 + 8200 - 8200 = 9328;
// IoU = 8200/9328 ≈ 0.879 ≥ 0.5 → duplicates → blink 0, although the first
// box is the GT box.
#[test]
fn vector_two_blink_boxes_with_iou_at_least_half_score_zero_blink() {
    let completion = canonical(
        r#"[{"bbox_2d": [614, 1094, 720, 1182], "label": "result"}, {"bbox_2d": [620, 1100, 720, 1182], "label": "result text"}]"#,
        GT_TAP,
    );
    assert_eq!(released(&navigation(), &completion).blink, 0.0);
}

// Vector 5. Tap [700, 1100]: 614 < 700 < 720, 1094 < 1100 < 1182 (inside);
// dx = (663-700)/728 = -0.0508, dy = (1135-1100)/1288 = 0.0272,
// distance = sqrt(0.00258 + 0.00074) ≈ 0.0576 < 0.14 → 1.
#[test]
fn vector_tap_inside_the_box_near_the_target_scores_one() {
    assert_eq!(
        released(&navigation(), &with_action(&tap(700, 1100))).link,
        1.0
    );
}

// Vector 6. Tap [720, 1100]: x = 720 = x2, and the test is strict → 0.
#[test]
fn vector_tap_on_the_box_edge_scores_zero() {
    assert_eq!(
        released(&navigation(), &with_action(&tap(720, 1100))).link,
        0.0
    );
}

// Vector 7. GT bbox []: the inside test has no box (Python's unpacking
// raises) → 0, even for the exact GT point.
#[test]
fn vector_tap_without_a_gt_box_scores_zero() {
    let mut sample = navigation();
    sample.bbox = vec![];
    assert_eq!(released(&sample, &with_action(GT_TAP)).link, 0.0);
}

// Vector 8a. "up" == "up" → 1.
#[test]
fn vector_swipe_up_matches_gt_swipe_up() {
    let sample = navigation_with_gt(r#"{"function": "Swipe", "direction": "up"}"#);
    let completion = with_action(r#"{"function": "Swipe", "direction": "up"}"#);
    assert_eq!(released(&sample, &completion).link, 1.0);
}

// Vector 8b. "Up" != "up" (case-sensitive string equality) → 0.
#[test]
fn vector_swipe_capital_up_does_not_match_gt_swipe_up() {
    let sample = navigation_with_gt(r#"{"function": "Swipe", "direction": "up"}"#);
    let completion = with_action(r#"{"function": "Swipe", "direction": "Up"}"#);
    assert_eq!(released(&sample, &completion).link, 0.0);
}

// Vector 9a. {los, angeles, ca} vs {los, angeles}: common 2,
// precision 2/3, recall 1, F1 = 2·(2/3)/(5/3) = 0.8 ≥ 0.5 → 1.
#[test]
fn vector_type_with_one_extra_token_matches() {
    let sample = navigation_with_gt(r#"{"function": "Type", "text": "los angeles"}"#);
    let completion = with_action(r#"{"function": "Type", "text": "Los Angeles CA"}"#);
    assert_eq!(released(&sample, &completion).link, 1.0);
}

// Vector 9b. {angeles} vs {los, angeles}: precision 1, recall 1/2,
// F1 = 2·(1/2)/(3/2) = 2/3 ≥ 0.5 → 1.
#[test]
fn vector_type_with_half_the_tokens_matches() {
    let sample = navigation_with_gt(r#"{"function": "Type", "text": "Los Angeles"}"#);
    let completion = with_action(r#"{"function": "Type", "text": "Angeles"}"#);
    assert_eq!(released(&sample, &completion).link, 1.0);
}

// Vector 9c. {la} vs {los, angeles}: no common token, F1 = 0 → 0.
#[test]
fn vector_type_with_no_common_token_fails() {
    let sample = navigation_with_gt(r#"{"function": "Type", "text": "Los Angeles"}"#);
    let completion = with_action(r#"{"function": "Type", "text": "LA"}"#);
    assert_eq!(released(&sample, &completion).link, 0.0);
}

// Vector 10. {"function": "Back", "point_2d": [1, 2]} != {"function": "Back"}
// (the dicts have different key sets) → 0.
#[test]
fn vector_back_with_an_extra_key_does_not_match_back() {
    let sample = navigation_with_gt(r#"{"function": "Back"}"#);
    let completion = with_action(r#"{"function": "Back", "point_2d": [1, 2]}"#);
    assert_eq!(released(&sample, &completion).link, 0.0);
}

// Vector 11. Grounding point [2000, 1230]: 392 < 2000 < 2141 and
// 1211 < 1230 < 1247 → 1.
#[test]
fn vector_grounding_point_inside_the_box_scores_one() {
    assert_eq!(
        released(&grounding(), &grounding_completion(2000, 1230)).link,
        1.0
    );
}

// ---------------------------------------------------------------------------
// Released format
// ---------------------------------------------------------------------------

// The pattern is anchored only at the start: anything after </link> is free.
#[test]
fn released_format_allows_trailing_text() {
    let completion = with_action(GT_TAP) + "\nThat is all.<|im_end|>";
    assert_eq!(released(&navigation(), &completion).format, 1.0);
}

// re.match anchors at position 0: a leading word, or even a leading space or
// newline, fails the envelope → 0.
#[test]
fn released_format_rejects_leading_text() {
    let sample = navigation();
    for prefix in ["Answer:\n", " ", "\n"] {
        let completion = format!("{prefix}{}", with_action(GT_TAP));
        assert_eq!(
            released(&sample, &completion).format,
            0.0,
            "prefix {prefix:?}"
        );
    }
}

// No <think>…</think> between blink and link: the envelope fails → 0.
#[test]
fn released_format_rejects_a_missing_think() {
    let completion = with_action(GT_TAP).replace(
        "<think> The Los Angeles result is at the bottom right; tap it. </think>\n",
        "",
    );
    assert!(!completion.contains("<think>"));
    assert_eq!(released(&navigation(), &completion).format, 0.0);
}

// Think before blink: the text no longer starts with <blink> → 0.
#[test]
fn released_format_rejects_tags_out_of_order() {
    let completion = format!(
        "<think> first </think>\n<blink>```json\n{GT_BLINK}\n```</blink>\n<link>```json\n[{{\"Plan\": \"p\", \"Action\": {GT_TAP}}}]\n```</link>"
    );
    assert_eq!(released(&navigation(), &completion).format, 0.0);
}

// len(link) == 2 != 1 → format 0. The link reward reads only link[0], which
// is the GT tap → link 1.
#[test]
fn released_format_rejects_a_link_with_two_items_but_link_reads_the_first() {
    let completion = format!(
        "<blink>```json\n{GT_BLINK}\n```</blink>\n<think> t </think>\n<link>```json\n[{{\"Plan\": \"a\", \"Action\": {GT_TAP}}}, {{\"Plan\": \"b\", \"Action\": {{\"function\": \"Back\"}}}}]\n```</link>"
    );
    let r = released(&navigation(), &completion);
    assert_eq!((r.format, r.link), (0.0, 1.0));
}

// The item has Action but no Plan, and no point_2d → format 0. The link
// reward does not look at Plan → link 1.
#[test]
fn released_format_rejects_a_link_item_without_plan() {
    let completion = format!(
        "<blink>```json\n{GT_BLINK}\n```</blink>\n<think> t </think>\n<link>```json\n[{{\"Action\": {GT_TAP}}}]\n```</link>"
    );
    let r = released(&navigation(), &completion);
    assert_eq!((r.format, r.link), (0.0, 1.0));
}

// The plugin only runs json.loads on the blink body (spec §4, corrected):
// items without bbox_2d, an object, a string or a number all parse → format
// 1. The blink term indexes x["bbox_2d"] for each item and raises on all of
// them → blink 0 (GT box non-empty).
#[test]
fn released_format_accepts_any_json_blink_body_and_blink_scores_it_0() {
    for body in [
        r#"[{"label": "Los Angeles result"}]"#,
        r#"{"bbox_2d": [614, 1094, 720, 1182]}"#,
        r#""[614, 1094, 720, 1182]""#,
        "3",
        "null",
    ] {
        let r = released(&navigation(), &canonical(body, GT_TAP));
        assert_eq!((r.format, r.blink, r.link), (1.0, 0.0, 1.0), "{body}");
    }
    // Not JSON at all: json.loads raises → 0.
    let r = released(&navigation(), &canonical("[{bbox_2d: 1}]", GT_TAP));
    assert_eq!(r.format, 0.0);
}

/// A completion whose link body is `link` (any text) and blink is the GT box.
fn with_link_body(link: &str) -> String {
    format!(
        "<blink>```json\n{GT_BLINK}\n```</blink>\n<think> t </think>\n<link>```json\n{link}\n```</link>"
    )
}

// len(link) == 1 and (("Plan" in link[0] and "Action" in link[0]) or
// "point_2d" in link[0]) with Python's `in`. The link term then does
// `"point_2d" in pred` and indexes pred["point_2d"] or pred["Action"], which
// raises TypeError on a string or a list → link 0 for all of these.
#[test]
fn released_format_tests_non_object_link_items_as_python_does() {
    let cases = [
        // A string item: substring tests.
        (r#"["Plan: tap. Action: Tap"]"#, 1.0),
        (r#"["my point_2d"]"#, 1.0),
        (r#"["Plan only"]"#, 0.0),
        (r#"["plan action"]"#, 0.0),
        // A list item: element tests (== on each element).
        (r#"[["Plan", "Action"]]"#, 1.0),
        (r#"[[1, "point_2d"]]"#, 1.0),
        (r#"[["Plan", "Actions"]]"#, 0.0),
        (r#"[["Plan and Action"]]"#, 0.0),
        (r#"[[["Plan"], ["Action"]]]"#, 0.0),
        // `in` on a number, a bool or None raises TypeError.
        ("[3]", 0.0),
        ("[true]", 0.0),
        ("[null]", 0.0),
        // len("P") == 1 but "P"[0] is "P", holding none of the names.
        (r#""P""#, 0.0),
        // A one-key object: len 1, but link[0] raises KeyError.
        (r#"{"Plan": 1}"#, 0.0),
        // Two items: len 2.
        (r#"["Plan Action", "x"]"#, 0.0),
        // len(5) raises.
        ("5", 0.0),
    ];
    for (link, format) in cases {
        let r = released(&navigation(), &with_link_body(link));
        assert_eq!((r.format, r.link), (format, 0.0), "{link}");
    }
}

// json.loads keeps lone surrogates: "\ud800" is a one-character str. A blink
// label or a Plan holding one parses → format 1, blink 1, link 1.
#[test]
fn released_mode_reads_lone_surrogates_as_python_does() {
    let blink = r#"[{"bbox_2d": [614, 1094, 720, 1182], "label": "\ud800 result"}]"#;
    let completion = format!(
        "<blink>```json\n{blink}\n```</blink>\n<think> t </think>\n<link>```json\n[{{\"Plan\": \"\\udc00\", \"Action\": {GT_TAP}}}]\n```</link>"
    );
    let r = released(&navigation(), &completion);
    assert_eq!((r.format, r.blink, r.link), (1.0, 1.0, 1.0));
}

// Type text with lone surrogates: Python's str.lower() and split() leave
// them as they are, and sets compare them by code point.
// pred "\ud800 go" vs GT "\ud800 go": tokens equal → F1 1 → link 1.
// pred "\ud800 go" vs GT "\ud801 go": common {"go"}, P = R = 1/2 → F1 0.5
// ≥ 0.5 → 1. pred "\ud800" vs GT "\ud801": no common token → 0.
// pred "\ud800" vs GT "\U0010f000" (a real private-use character, which a
// stand-in must never equal) → 0.
#[test]
fn released_type_text_compares_lone_surrogates_by_code_point() {
    for (pred, gt, link) in [
        (r"\ud800 go", r"\ud800 go", 1.0),
        (r"\ud800 go", r"\ud801 go", 1.0),
        (r"\ud800", r"\ud801", 0.0),
        (r"\ud800", r"\udbfc\udc00", 0.0),
        (r"\udbff\udfff", r"\udbff\udfff", 1.0),
    ] {
        let sample = navigation_with_gt(&format!(r#"{{"function": "Type", "text": "{gt}"}}"#));
        let completion = with_action(&format!(r#"{{"function": "Type", "text": "{pred}"}}"#));
        assert_eq!(released(&sample, &completion).link, link, "{pred} vs {gt}");
    }
}

// Python's json.loads recurses up to its recursion limit: 994 levels from a
// top-level call in Python 3.11.7 (measured), so a blink label nested 990
// deep parses → format 1; 2,000 levels raise RecursionError → format 0.
#[test]
fn released_mode_reads_nesting_as_deep_as_python() {
    let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let blink = |n: usize| {
        format!(
            r#"[{{"bbox_2d": [614, 1094, 720, 1182], "label": {}}}]"#,
            nested(n)
        )
    };
    let r = released(&navigation(), &canonical(&blink(990), GT_TAP));
    assert_eq!((r.format, r.blink, r.link), (1.0, 1.0, 1.0));
    let r = released(&navigation(), &canonical(&blink(2000), GT_TAP));
    assert_eq!((r.format, r.blink), (0.0, 0.0));
}

// `None` is not inside a ```json fence, so the blink body pattern fails → 0.
#[test]
fn released_format_rejects_a_none_blink() {
    assert_eq!(
        released(&navigation(), &none_blink_completion()).format,
        0.0
    );
}

// `[]` is a JSON list all of whose (zero) items have bbox_2d → 1.
#[test]
fn released_format_accepts_an_empty_blink_list() {
    assert_eq!(
        released(&navigation(), &canonical("[]", GT_TAP)).format,
        1.0
    );
}

// The single link item has point_2d → format 1.
#[test]
fn released_format_accepts_a_grounding_point_item() {
    assert_eq!(
        released(&grounding(), &grounding_completion(2000, 1230)).format,
        1.0
    );
}

// \s* between the tags matches "\n  \n".
#[test]
fn released_format_accepts_blank_lines_between_tags() {
    let completion = with_action(GT_TAP)
        .replace("</blink>\n<think>", "</blink>\n  \n<think>")
        .replace("</think>\n<link>", "</think>\n  \n<link>");
    assert_eq!(released(&navigation(), &completion).format, 1.0);
}

// Python's \s on str matches U+001F (str.isspace is true for U+001C..U+001F),
// so a unit separator between the tags is whitespace → 1.
#[test]
fn released_format_accepts_a_unit_separator_between_tags() {
    let completion = with_action(GT_TAP)
        .replace("</blink>\n<think>", "</blink>\u{1f}<think>")
        .replace("</think>\n<link>", "</think>\u{1f}\n<link>");
    assert_eq!(released(&navigation(), &completion).format, 1.0);
}

// ---------------------------------------------------------------------------
// Released blink
// ---------------------------------------------------------------------------

// `if not bbox: reward = 1.0` comes before any parsing.
#[test]
fn released_blink_is_one_for_garbage_when_the_gt_box_is_empty() {
    let mut sample = navigation();
    sample.bbox = vec![];
    for completion in ["", "garbage", "<blink>```json\n{not json\n```</blink>"] {
        assert_eq!(released(&sample, completion).blink, 1.0, "{completion:?}");
    }
}

// No predicted box, so no box has IoU > 0.5 with the GT box → 0.
#[test]
fn released_blink_is_zero_for_an_empty_list() {
    assert_eq!(released(&navigation(), &canonical("[]", GT_TAP)).blink, 0.0);
}

// [0,0,10,10] and [0,0,10,5]: intersection 10·5 = 50, union 100 + 50 - 50 =
// 100, IoU = 0.5; NMS keeps a box only if IoU < 0.5, so one is suppressed
// → duplicates → 0, although the third box is the GT box (IoU 1).
// Same with the GT box and its top half [614,1094,720,1138]: intersection
// 106·44 = 4664, union 9328 + 4664 - 4664 = 9328, IoU = 0.5 → 0.
#[test]
fn released_blink_is_zero_when_two_boxes_overlap_at_exactly_half() {
    let sample = navigation();
    let completion = canonical(
        r#"[{"bbox_2d": [0, 0, 10, 10]}, {"bbox_2d": [0, 0, 10, 5]}, {"bbox_2d": [614, 1094, 720, 1182]}]"#,
        GT_TAP,
    );
    assert_eq!(released(&sample, &completion).blink, 0.0);
    let completion = canonical(
        r#"[{"bbox_2d": [614, 1094, 720, 1182]}, {"bbox_2d": [614, 1094, 720, 1138]}]"#,
        GT_TAP,
    );
    assert_eq!(released(&sample, &completion).blink, 0.0);
}

// The GT box and [614,1094,720,1137]: intersection 106·43 = 4558, union 9328,
// IoU = 4558/9328 ≈ 0.489 < 0.5 → both kept; the GT box has IoU 1 → 1.
#[test]
fn released_blink_keeps_boxes_overlapping_just_under_half() {
    let completion = canonical(
        r#"[{"bbox_2d": [614, 1094, 720, 1182]}, {"bbox_2d": [614, 1094, 720, 1137]}]"#,
        GT_TAP,
    );
    assert_eq!(released(&navigation(), &completion).blink, 1.0);
}

// [614,1094,720,1138] vs GT: IoU = 4664/9328 = 0.5, not > 0.5 → 0.
// [614,1094,720,1139] vs GT: intersection 106·45 = 4770, union 9328,
// IoU ≈ 0.511 > 0.5 → 1.
#[test]
fn released_blink_needs_iou_strictly_above_half_with_the_gt_box() {
    let sample = navigation();
    let half = canonical(r#"[{"bbox_2d": [614, 1094, 720, 1138]}]"#, GT_TAP);
    assert_eq!(released(&sample, &half).blink, 0.0);
    let above = canonical(r#"[{"bbox_2d": [614, 1094, 720, 1139]}]"#, GT_TAP);
    assert_eq!(released(&sample, &above).blink, 1.0);
}

// A far box [0,0,10,10] (IoU 0 with everything) next to the GT box: no
// duplicates, and one box has IoU 1 → 1.
#[test]
fn released_blink_counts_any_matching_box_among_several() {
    let completion = canonical(
        r#"[{"bbox_2d": [0, 0, 10, 10], "label": "back"}, {"bbox_2d": [614, 1094, 720, 1182], "label": "result"}]"#,
        GT_TAP,
    );
    assert_eq!(released(&navigation(), &completion).blink, 1.0);
}

// The Python IoU reads box[0..3] only; a fifth number is ignored → IoU 1 → 1.
#[test]
fn released_blink_ignores_numbers_after_the_fourth() {
    let completion = canonical(r#"[{"bbox_2d": [614, 1094, 720, 1182, 7]}]"#, GT_TAP);
    assert_eq!(released(&navigation(), &completion).blink, 1.0);
}

// A string box: `box[2] - box[0]` is str - str, a TypeError → 0. Three
// numbers: box[3] is an IndexError → 0.
#[test]
fn released_blink_is_zero_for_a_box_that_is_not_four_numbers() {
    let sample = navigation();
    for blink in [
        r#"[{"bbox_2d": "614, 1094, 720, 1182"}]"#,
        r#"[{"bbox_2d": "[614, 1094, 720, 1182]"}]"#,
        r#"[{"bbox_2d": [614, 1094, 720]}]"#,
        r#"[{"bbox_2d": [614, 1094, "720", 1182]}]"#,
    ] {
        assert_eq!(
            released(&sample, &canonical(blink, GT_TAP)).blink,
            0.0,
            "{blink}"
        );
    }
}

// Two boxes [-1e308, -1e308, 1e308, 1e308] (JSON floats): in Python each
// side is 1e308 - (-1e308) = inf, area inf·inf = inf, intersection inf,
// union = inf + inf - inf = NaN, `union != 0` is true, IoU = inf/NaN = NaN.
// NMS keeps a box only if `iou < 0.5`, which is false for NaN, so one is
// suppressed and the lengths differ → 0, even though the third box is the GT
// box (its IoU with the huge boxes is 9328/inf = 0, so it is kept).
#[test]
fn released_blink_treats_overflowing_boxes_as_duplicates_like_python_nms() {
    let completion = canonical(
        r#"[{"bbox_2d": [-1e308, -1e308, 1e308, 1e308]}, {"bbox_2d": [-1e308, -1e308, 1e308, 1e308]}, {"bbox_2d": [614, 1094, 720, 1182]}]"#,
        GT_TAP,
    );
    assert_eq!(released(&navigation(), &completion).blink, 0.0);
}

// ---------------------------------------------------------------------------
// Released link
// ---------------------------------------------------------------------------

// GT LongPress [663, 1135]: LongPress [700, 1100] is inside and ≈ 0.0576 away
// (vector 5) → 1; LongPress [720, 1100] is on the edge → 0.
#[test]
fn long_press_follows_the_tap_rule() {
    let sample = navigation_with_gt(r#"{"function": "LongPress", "point_2d": [663, 1135]}"#);
    let near = with_action(r#"{"function": "LongPress", "point_2d": [700, 1100]}"#);
    assert_eq!(released(&sample, &near).link, 1.0);
    let edge = with_action(r#"{"function": "LongPress", "point_2d": [720, 1100]}"#);
    assert_eq!(released(&sample, &edge).link, 0.0);
}

// "Tap" != "LongPress" → 0 even at the GT point.
#[test]
fn tap_against_a_gt_long_press_scores_zero() {
    let sample = navigation_with_gt(r#"{"function": "LongPress", "point_2d": [663, 1135]}"#);
    assert_eq!(released(&sample, &with_action(GT_TAP)).link, 0.0);
}

// Each edge of [614, 1094, 720, 1182] is outside: x = 614, y = 1094, y = 1182.
#[test]
fn tap_on_any_box_edge_scores_zero() {
    let sample = navigation();
    for (x, y) in [(614, 1135), (663, 1094), (663, 1182), (720, 1182)] {
        assert_eq!(
            released(&sample, &with_action(&tap(x, y))).link,
            0.0,
            "[{x}, {y}]"
        );
    }
}

/// The navigation sample with a GT box covering the whole screen, so that
/// only the distance rule can fail.
fn navigation_with_big_box() -> Sample {
    let mut sample = navigation();
    sample.bbox = vec![0.0, 0.0, 720.0, 1280.0];
    sample
}

// Inside the big box; 0.14·728 = 101.92 px along x.
// Tap [561, 1135]: dx = 102/728 ≈ 0.14011, dy = 0 → not < 0.14 → 0.
// Tap [562, 1135]: dx = 101/728 ≈ 0.13874 < 0.14 → 1.
#[test]
fn tap_just_beyond_the_click_distance_along_x_scores_zero_inside_the_box() {
    let sample = navigation_with_big_box();
    assert_eq!(released(&sample, &with_action(&tap(561, 1135))).link, 0.0);
    assert_eq!(released(&sample, &with_action(&tap(562, 1135))).link, 1.0);
}

// 0.14·1288 = 180.32 px along y (y is divided by the resized height).
// Tap [663, 954]: dy = 181/1288 ≈ 0.14053 → 0.
// Tap [663, 955]: dy = 180/1288 ≈ 0.13975 → 1.
#[test]
fn tap_just_beyond_the_click_distance_along_y_scores_zero_inside_the_box() {
    let sample = navigation_with_big_box();
    assert_eq!(released(&sample, &with_action(&tap(663, 954))).link, 0.0);
    assert_eq!(released(&sample, &with_action(&tap(663, 955))).link, 1.0);
}

// `x, y = pos` with three numbers raises → 0.
#[test]
fn tap_point_with_three_numbers_scores_zero() {
    let completion = with_action(r#"{"function": "Tap", "point_2d": [663, 1135, 0]}"#);
    assert_eq!(released(&navigation(), &completion).link, 0.0);
}

// Tokens keep their punctuation (no stripping), GT {los, angeles}:
// "Los Angeles!" → {los, angeles!}: common 1, p = 1/2, r = 1/2,
// F1 = 2·(1/4)/1 = 0.5 ≥ 0.5 → 1;
// "Los, Angeles." → {los,, angeles.}: common 0 → F1 0 → 0.
#[test]
fn type_keeps_punctuation_attached_to_tokens() {
    let sample = navigation_with_gt(r#"{"function": "Type", "text": "Los Angeles"}"#);
    let half = with_action(r#"{"function": "Type", "text": "Los Angeles!"}"#);
    assert_eq!(released(&sample, &half).link, 1.0);
    let none = with_action(r#"{"function": "Type", "text": "Los, Angeles."}"#);
    assert_eq!(released(&sample, &none).link, 0.0);
}

// A non-string text: `.lower()` raises → 0.
#[test]
fn type_with_a_number_for_text_scores_zero() {
    let sample = navigation_with_gt(r#"{"function": "Type", "text": "90027"}"#);
    let completion = with_action(r#"{"function": "Type", "text": 90027}"#);
    assert_eq!(released(&sample, &completion).link, 0.0);
}

// GT "up": "UP" != "up" → 0; "down" != "up" → 0.
#[test]
fn swipe_direction_is_compared_case_sensitively() {
    let sample = navigation_with_gt(r#"{"function": "Swipe", "direction": "up"}"#);
    for direction in ["UP", "down"] {
        let completion = with_action(&format!(
            r#"{{"function": "Swipe", "direction": "{direction}"}}"#
        ));
        assert_eq!(released(&sample, &completion).link, 0.0, "{direction}");
    }
}

// Python dict equality ignores key order:
// {"function": "Home", "note": "x"} == {"note": "x", "function": "Home"} → 1.
#[test]
fn home_objects_compare_regardless_of_key_order() {
    let sample = navigation_with_gt(r#"{"function": "Home", "note": "x"}"#);
    let completion = with_action(r#"{"note": "x", "function": "Home"}"#);
    assert_eq!(released(&sample, &completion).link, 1.0);
}

// Plain Back vs Back → 1.
#[test]
fn back_matches_back() {
    let sample = navigation_with_gt(r#"{"function": "Back"}"#);
    assert_eq!(
        released(&sample, &with_action(r#"{"function": "Back"}"#)).link,
        1.0
    );
}

// Python: 1 == 1.0 (and True == 1), so {"function": "Back", "times": 1} equals
// {"times": 1.0, "function": "Back"} → 1; "1" != 1 → 0.
#[test]
fn back_objects_compare_numbers_as_python_does() {
    let sample = navigation_with_gt(r#"{"function": "Back", "times": 1}"#);
    for (times, expected) in [("1.0", 1.0), ("true", 1.0), ("\"1\"", 0.0), ("2", 0.0)] {
        let completion = with_action(&format!(r#"{{"times": {times}, "function": "Back"}}"#));
        assert_eq!(
            released(&sample, &completion).link,
            expected,
            "times = {times}"
        );
    }
}

// GT Home with an extra key: the prediction lacks it → the dicts differ → 0.
#[test]
fn home_missing_a_gt_key_does_not_match() {
    let sample = navigation_with_gt(r#"{"function": "Home", "note": "x"}"#);
    assert_eq!(
        released(&sample, &with_action(r#"{"function": "Home"}"#)).link,
        0.0
    );
}

// "tap" != "Tap", "Type" != "Tap", "Home" != "Back" → 0.
#[test]
fn function_names_must_match_exactly() {
    let sample = navigation();
    for action in [
        r#"{"function": "tap", "point_2d": [663, 1135]}"#,
        r#"{"function": "Type", "text": "Los Angeles"}"#,
    ] {
        assert_eq!(
            released(&sample, &with_action(action)).link,
            0.0,
            "{action}"
        );
    }
    let back = navigation_with_gt(r#"{"function": "Back"}"#);
    assert_eq!(
        released(&back, &with_action(r#"{"function": "Home"}"#)).link,
        0.0
    );
}

// Box [392, 1211, 2141, 1247]; every edge is outside.
#[test]
fn grounding_point_on_the_box_edge_scores_zero() {
    let sample = grounding();
    for (x, y) in [(392, 1230), (2141, 1230), (2000, 1211), (2000, 1247)] {
        assert_eq!(
            released(&sample, &grounding_completion(x, y)).link,
            0.0,
            "[{x}, {y}]"
        );
    }
}

// Grounding checks the box only: [400, 1230] is inside (392 < 400 < 2141,
// 1211 < 1230 < 1247) though (1266-400)/2548 ≈ 0.34 from the GT point → 1.
#[test]
fn grounding_ignores_the_distance_to_the_gt_point() {
    assert_eq!(
        released(&grounding(), &grounding_completion(400, 1230)).link,
        1.0
    );
}

// A navigation step answered with a bare point: `"point_2d" in pred` takes
// the grounding branch, and [663, 1135] is inside the GT box → 1.
#[test]
fn bare_point_inside_the_navigation_box_scores_like_grounding() {
    let completion = format!(
        "<blink>```json\n{GT_BLINK}\n```</blink>\n<think> t </think>\n<link>```json\n[{{\"point_2d\": [663, 1135]}}]\n```</link>"
    );
    assert_eq!(released(&navigation(), &completion).link, 1.0);
}

// A navigation answer to a grounding sample: gt["Action"] raises → 0.
#[test]
fn navigation_answer_to_a_grounding_sample_scores_zero() {
    let completion = canonical("[]", r#"{"function": "Tap", "point_2d": [2000, 1230]}"#);
    assert_eq!(released(&grounding(), &completion).link, 0.0);
}

// The plugin has no Wait/Finish branch: equal functions, no reward → 0.
#[test]
fn wait_and_finish_score_zero_in_released_mode() {
    for action in [r#"{"function": "Wait"}"#, r#"{"function": "Finish"}"#] {
        let sample = navigation_with_gt(action);
        assert_eq!(
            released(&sample, &with_action(action)).link,
            0.0,
            "{action}"
        );
    }
}

// ---------------------------------------------------------------------------
// Weights
// ---------------------------------------------------------------------------

// Blink box [0,0,10,10] misses the GT box (IoU 0), everything else is right:
// f = 1, b = 0, l = 1; total = 0.1·1 + 0.3·0 + 0.6·1 = 0.7.
#[test]
fn default_weights_are_a_tenth_three_tenths_and_six_tenths() {
    let completion = canonical(r#"[{"bbox_2d": [0, 0, 10, 10]}]"#, GT_TAP);
    let r = released(&navigation(), &completion);
    assert_eq!((r.format, r.blink, r.link), (1.0, 0.0, 1.0));
    assert_close(r.total, 0.7);
}

// All three terms 1: 0.1 + 0.3 + 0.6 = 1.
#[test]
fn full_marks_total_one_with_default_weights() {
    assert_close(released(&navigation(), &with_action(GT_TAP)).total, 1.0);
}

// f = 1, b = 0, l = 1 as above. Unit weights (the paper's Eq. 3): 1 + 0 + 1 =
// 2. Weights 0.5 / 2 / 4: 0.5·1 + 2·0 + 4·1 = 4.5.
#[test]
fn custom_weights_scale_each_term() {
    let sample = navigation();
    let completion = canonical(r#"[{"bbox_2d": [0, 0, 10, 10]}]"#, GT_TAP);
    let unit = Weights {
        format: 1.0,
        blink: 1.0,
        link: 1.0,
    };
    assert_close(
        score(&sample, &completion, RewardMode::Released, unit).total,
        2.0,
    );
    let custom = Weights {
        format: 0.5,
        blink: 2.0,
        link: 4.0,
    };
    assert_close(
        score(&sample, &completion, RewardMode::Released, custom).total,
        4.5,
    );
}

#[test]
fn reward_mode_parses_its_two_names() {
    assert_eq!("released".parse::<RewardMode>(), Ok(RewardMode::Released));
    assert_eq!("paper".parse::<RewardMode>(), Ok(RewardMode::Paper));
    assert!("Paper".parse::<RewardMode>().is_err());
    assert_eq!(RewardMode::default(), RewardMode::Released);
}

// ---------------------------------------------------------------------------
// Paper format
// ---------------------------------------------------------------------------

#[test]
fn paper_format_accepts_the_canonical_completion() {
    assert_eq!(paper(&navigation(), &with_action(GT_TAP)).format, 1.0);
}

// Blink may be None, empty, or an empty list.
#[test]
fn paper_format_accepts_an_empty_blink() {
    let sample = navigation();
    assert_eq!(paper(&sample, &none_blink_completion()).format, 1.0);
    let empty = none_blink_completion().replace("<blink>None</blink>", "<blink></blink>");
    assert_eq!(paper(&sample, &empty).format, 1.0);
    let bare_list = none_blink_completion().replace("<blink>None</blink>", "<blink>[]</blink>");
    assert_eq!(paper(&sample, &bare_list).format, 1.0);
    assert_eq!(paper(&sample, &canonical("[]", GT_TAP)).format, 1.0);
}

// x1 = x2 = 10 (zero width), then y1 = 20 > y2 = 5 → 0.
#[test]
fn paper_format_rejects_a_box_whose_first_corner_is_not_above_left() {
    let sample = navigation();
    for blink in [
        r#"[{"bbox_2d": [10, 0, 10, 5]}]"#,
        r#"[{"bbox_2d": [0, 20, 10, 5]}]"#,
    ] {
        assert_eq!(
            paper(&sample, &canonical(blink, GT_TAP)).format,
            0.0,
            "{blink}"
        );
    }
}

// "every box has 4 numbers": five numbers, three numbers, or a string → 0.
#[test]
fn paper_format_rejects_a_box_that_is_not_four_numbers() {
    let sample = navigation();
    for blink in [
        r#"[{"bbox_2d": [614, 1094, 720, 1182, 7]}]"#,
        r#"[{"bbox_2d": [614, 1094, 720]}]"#,
        r#"[{"bbox_2d": "614, 1094, 720, 1182"}]"#,
    ] {
        assert_eq!(
            paper(&sample, &canonical(blink, GT_TAP)).format,
            0.0,
            "{blink}"
        );
    }
}

// Whitespace inside the fences: "```json  [...]  ```" in both tags → 1; the
// released vector 2 ("\n ```</blink>") is also fine in paper mode.
#[test]
fn paper_format_allows_whitespace_inside_the_fence() {
    let sample = navigation();
    let completion = format!(
        "<blink>```json  {GT_BLINK}  ```</blink>\n<think> t </think>\n<link>```json  [{{\"Plan\": \"p\", \"Action\": {GT_TAP}}}]  ```</link>"
    );
    assert_eq!(paper(&sample, &completion).format, 1.0);
    let spaced = with_action(GT_TAP).replace("\n```</blink>", "\n ```</blink>");
    assert_eq!(paper(&sample, &spaced).format, 1.0);
}

// Whitespace between a tag and its fence → 1.
#[test]
fn paper_format_allows_whitespace_inside_the_tags() {
    let completion = with_action(GT_TAP)
        .replace("<blink>```", "<blink>\n  ```")
        .replace("```</blink>", "```\n</blink>")
        .replace("<link>```", "<link> \n```")
        .replace("```</link>", "``` </link>");
    assert_eq!(paper(&navigation(), &completion).format, 1.0);
}

// The template is still strict: no think → 0; a two-item link → 0.
#[test]
fn paper_format_is_strict_about_the_template() {
    let sample = navigation();
    let no_think = with_action(GT_TAP).replace(
        "<think> The Los Angeles result is at the bottom right; tap it. </think>\n",
        "",
    );
    assert_eq!(paper(&sample, &no_think).format, 0.0);
    let two = format!(
        "<blink>```json\n{GT_BLINK}\n```</blink>\n<think> t </think>\n<link>```json\n[{{\"Plan\": \"a\", \"Action\": {GT_TAP}}}, {{\"Plan\": \"b\", \"Action\": {GT_TAP}}}]\n```</link>"
    );
    assert_eq!(paper(&sample, &two).format, 0.0);
}

// ---------------------------------------------------------------------------
// Paper blink (ranked regions, s(k) = (5 - k + 1) / 5)
// ---------------------------------------------------------------------------

/// The navigation sample with three ranked regions: rank 1 the GT box,
/// rank 2 [0,0,100,100], rank 3 [200,200,400,300]; all pairwise disjoint.
fn navigation_with_rois() -> Sample {
    let mut sample = navigation();
    sample.rois = vec![
        roi([614.0, 1094.0, 720.0, 1182.0], 1),
        roi([0.0, 0.0, 100.0, 100.0], 2),
        roi([200.0, 200.0, 400.0, 300.0], 3),
    ];
    sample
}

// P = ∅ and G = ∅ (bbox [], no rois) → 1.
#[test]
fn paper_blink_is_one_with_no_prediction_and_no_gt_regions() {
    let mut sample = navigation();
    sample.bbox = vec![];
    assert_eq!(paper(&sample, &none_blink_completion()).blink, 1.0);
}

// P = ∅, G ≠ ∅, GT action Type has no target point → 1 (None or []).
#[test]
fn paper_blink_is_one_with_no_prediction_when_the_gt_action_is_type() {
    let mut sample = navigation_with_gt(r#"{"function": "Type", "text": "Los Angeles"}"#);
    sample.rois = vec![roi([100.0, 80.0, 620.0, 140.0], 1)];
    assert_eq!(paper(&sample, &none_blink_completion()).blink, 1.0);
    assert_eq!(paper(&sample, &canonical("[]", GT_TAP)).blink, 1.0);
}

// P = ∅, G ≠ ∅, GT action Tap has a target point → 0.
#[test]
fn paper_blink_is_zero_with_no_prediction_when_the_gt_action_is_tap() {
    assert_eq!(
        paper(&navigation_with_rois(), &none_blink_completion()).blink,
        0.0
    );
}

// P ≠ ∅, G = ∅ → 0 ("0 otherwise").
#[test]
fn paper_blink_is_zero_with_predictions_but_no_gt_regions() {
    let mut sample = navigation();
    sample.bbox = vec![];
    assert_eq!(paper(&sample, &with_action(GT_TAP)).blink, 0.0);
}

// Predicting the rank-1 region exactly: IoU 1 ≥ 0.5 → s(1) = 5/5 = 1.
#[test]
fn paper_blink_scores_one_for_matching_rank_one() {
    assert_eq!(
        paper(&navigation_with_rois(), &with_action(GT_TAP)).blink,
        1.0
    );
}

// Predicting only the rank-3 region: IoU 1 with rank 3, 0 with ranks 1 and 2
// → s(3) = (5 - 3 + 1)/5 = 3/5 = 0.6.
#[test]
fn paper_blink_scores_three_fifths_for_matching_only_rank_three() {
    let completion = canonical(
        r#"[{"bbox_2d": [200, 200, 400, 300], "label": "r3"}]"#,
        GT_TAP,
    );
    assert_eq!(paper(&navigation_with_rois(), &completion).blink, 0.6);
}

// Six regions listed out of order with priorities 7, 1, 2, 3, 4, 5: the five
// best (1..5) are kept, so predicting only the priority-7 box matches nothing
// and scores 0, while predicting the priority-5 box scores s(5) = 1/5.
#[test]
fn paper_blink_keeps_the_five_best_priorities_whatever_the_order() {
    let mut sample = navigation();
    let far = |i: f64| [10.0 + 100.0 * i, 10.0, 60.0 + 100.0 * i, 60.0];
    sample.rois = vec![
        roi(far(6.0), 7),
        roi(far(0.0), 1),
        roi(far(1.0), 2),
        roi(far(2.0), 3),
        roi(far(3.0), 4),
        roi(far(4.0), 5),
    ];
    let only_seven = canonical(r#"[{"bbox_2d": [610, 10, 660, 60]}]"#, GT_TAP);
    assert_eq!(paper(&sample, &only_seven).blink, 0.0);
    let only_five = canonical(r#"[{"bbox_2d": [410, 10, 460, 60]}]"#, GT_TAP);
    assert_close(paper(&sample, &only_five).blink, 0.2);
}

// Ranks 1 and 3 both predicted: max(s(1), s(3)) = max(1, 0.6) = 1.
#[test]
fn paper_blink_takes_the_best_matched_rank() {
    let completion = canonical(
        r#"[{"bbox_2d": [200, 200, 400, 300]}, {"bbox_2d": [614, 1094, 720, 1182]}]"#,
        GT_TAP,
    );
    assert_eq!(paper(&navigation_with_rois(), &completion).blink, 1.0);
}

// A prediction overlapping rank 1 at IoU 0.5 exactly ([614,1094,720,1138],
// see the released blink case) counts (IoU ≥ τ) → 1; the released rule needs
// > 0.5 for the same box.
#[test]
fn paper_blink_counts_a_match_at_iou_exactly_half() {
    let completion = canonical(r#"[{"bbox_2d": [614, 1094, 720, 1138]}]"#, GT_TAP);
    assert_eq!(paper(&navigation_with_rois(), &completion).blink, 1.0);
}

// G1 = [0,0,10,10] (rank 1), G2 = [0,0,6,10] (rank 2);
// P1 = [0,0,8,10], P2 = [6,0,10,10]. All share y ∈ [0,10]:
//   IoU(P1,G1) = 80 / (80 + 100 - 80)  = 0.8
//   IoU(P1,G2) = 60 / (80 + 60 - 60)   = 0.75
//   IoU(P2,G1) = 40 / (40 + 100 - 40)  = 0.4
//   IoU(P2,G2) = 0 (they touch at x = 6)
// Greedy (best pair first) takes P1–G1 (0.8), then P2–G2 (0): rank 1 is
// matched and greedy would give s(1) = 1.
// Hungarian maximizes the total: P1–G1 + P2–G2 = 0.8, P1–G2 + P2–G1 = 1.15,
// so it pairs P1–G2 (0.75 ≥ 0.5, matched) and P2–G1 (0.4 < 0.5, not
// matched): reward s(2) = (5 - 2 + 1)/5 = 0.8.
#[test]
fn paper_blink_uses_the_optimal_assignment_not_greedy_matching() {
    let mut sample = navigation();
    sample.rois = vec![
        roi([0.0, 0.0, 10.0, 10.0], 1),
        roi([0.0, 0.0, 6.0, 10.0], 2),
    ];
    let completion = canonical(
        r#"[{"bbox_2d": [0, 0, 8, 10], "label": "P1"}, {"bbox_2d": [6, 0, 10, 10], "label": "P2"}]"#,
        GT_TAP,
    );
    assert_eq!(paper(&sample, &completion).blink, 0.8);
}

// One GT region of rank 2, three predictions of which the middle one is
// exact: that pair (IoU 1) is the assignment → s(2) = 4/5 = 0.8.
#[test]
fn paper_blink_handles_more_predictions_than_gt_regions() {
    let mut sample = navigation();
    sample.rois = vec![roi([0.0, 0.0, 10.0, 10.0], 2)];
    let completion = canonical(
        r#"[{"bbox_2d": [20, 20, 30, 30]}, {"bbox_2d": [0, 0, 10, 10]}, {"bbox_2d": [40, 40, 50, 50]}]"#,
        GT_TAP,
    );
    assert_eq!(paper(&sample, &completion).blink, 0.8);
}

// Without rois, the GT box is the target element, rank 1: predicting it
// gives s(1) = 1; predicting a disjoint box gives no match → 0.
#[test]
fn paper_blink_falls_back_to_the_gt_box_at_rank_one() {
    let sample = navigation();
    assert_eq!(paper(&sample, &with_action(GT_TAP)).blink, 1.0);
    let miss = canonical(r#"[{"bbox_2d": [0, 0, 10, 10]}]"#, GT_TAP);
    assert_eq!(paper(&sample, &miss).blink, 0.0);
}

// A malformed blink (box with x1 > x2) → 0.
#[test]
fn paper_blink_is_zero_for_a_malformed_blink() {
    let completion = canonical(r#"[{"bbox_2d": [720, 1094, 614, 1182]}]"#, GT_TAP);
    assert_eq!(paper(&navigation_with_rois(), &completion).blink, 0.0);
}

// f = 1, b = s(3) = 0.6, l = 1: total = 0.1 + 0.3·0.6 + 0.6 = 0.88.
#[test]
fn paper_total_uses_the_fractional_blink() {
    let completion = canonical(r#"[{"bbox_2d": [200, 200, 400, 300]}]"#, GT_TAP);
    assert_close(paper(&navigation_with_rois(), &completion).total, 0.88);
}

// ---------------------------------------------------------------------------
// Paper link
// ---------------------------------------------------------------------------

// Directions compare case-insensitively: "Up" vs "up" → 1 ("down" still 0).
#[test]
fn paper_link_swipe_ignores_case() {
    let sample = navigation_with_gt(r#"{"function": "Swipe", "direction": "up"}"#);
    let up = with_action(r#"{"function": "Swipe", "direction": "Up"}"#);
    assert_eq!(paper(&sample, &up).link, 1.0);
    let down = with_action(r#"{"function": "Swipe", "direction": "down"}"#);
    assert_eq!(paper(&sample, &down).link, 0.0);
}

// Back needs only the type: an extra point_2d key → 1 (vector 10 gives 0 in
// released mode).
#[test]
fn paper_link_back_ignores_extra_keys() {
    let sample = navigation_with_gt(r#"{"function": "Back"}"#);
    let completion = with_action(r#"{"function": "Back", "point_2d": [1, 2]}"#);
    assert_eq!(paper(&sample, &completion).link, 1.0);
}

// GT bbox []: the distance rule alone. Tap [700, 1100] is ≈ 0.0576 away → 1;
// Tap [561, 1135] is 102/728 ≈ 0.14011 away → 0.
#[test]
fn paper_link_tap_without_a_gt_box_uses_distance_alone() {
    let mut sample = navigation();
    sample.bbox = vec![];
    assert_eq!(paper(&sample, &with_action(&tap(700, 1100))).link, 1.0);
    assert_eq!(paper(&sample, &with_action(&tap(561, 1135))).link, 0.0);
}

// With a GT box, the inside test still applies: [720, 1100] is on the edge → 0.
#[test]
fn paper_link_tap_with_a_gt_box_still_needs_to_be_inside() {
    assert_eq!(
        paper(&navigation(), &with_action(&tap(720, 1100))).link,
        0.0
    );
    assert_eq!(
        paper(&navigation(), &with_action(&tap(700, 1100))).link,
        1.0
    );
}

// Type follows the released rule: "LA" vs "Los Angeles" → F1 0 → 0.
#[test]
fn paper_link_type_uses_the_released_f1_rule() {
    let sample = navigation_with_gt(r#"{"function": "Type", "text": "Los Angeles"}"#);
    let completion = with_action(r#"{"function": "Type", "text": "LA"}"#);
    assert_eq!(paper(&sample, &completion).link, 0.0);
}

// ---------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------

/// Pieces of completions, so that random concatenations reach the patterns.
const FRAGMENTS: &[&str] = &[
    "<blink>",
    "</blink>",
    "<think>",
    "</think>",
    "<link>",
    "</link>",
    "```json\n",
    "\n```",
    "```json",
    "```",
    "[",
    "]",
    "{",
    "}",
    ", ",
    ": ",
    "{\"bbox_2d\": [1,2,3,4]}",
    "{\"bbox_2d\": [614, 1094, 720, 1182]}",
    "{\"bbox_2d\": [614, 1094, 720, 1138]}",
    "{\"bbox_2d\": [-1e308, -1e308, 1e308, 1e308]}",
    "{\"bbox_2d\": [4, 3, 2, 1, 0]}",
    "\"bbox_2d\"",
    "\"label\": \"x\"",
    "\"Plan\": \"p\"",
    "\"Action\"",
    "{\"function\": \"Tap\", \"point_2d\": [663, 1135]}",
    "{\"function\": \"Swipe\", \"direction\": \"Up\"}",
    "{\"function\": \"Type\", \"text\": \"Los Angeles\"}",
    "{\"function\": \"Back\"}",
    "{\"function\": \"Wait\"}",
    "\"point_2d\"",
    "[663, 1135]",
    "{\"point_2d\": [2000, 1230]}",
    "None",
    "null",
    "true",
    "1e999",
    "\n",
    " ",
    "\u{1f}",
    "é",
    "\\",
    "\"",
];

/// Samples that reach every branch: both official samples, a GT box of `[]`,
/// ranked regions, and GT actions without a point.
static SAMPLES: LazyLock<Vec<Sample>> = LazyLock::new(|| {
    let mut no_box = navigation();
    no_box.bbox = vec![];
    let mut typed = navigation_with_gt(r#"{"function": "Type", "text": "Los Angeles"}"#);
    typed.rois = vec![roi([1.0, 2.0, 3.0, 4.0], 1)];
    let mut many = navigation_with_rois();
    many.rois.push(roi([1.0, 2.0, 3.0, 4.0], 9));
    many.rois.push(roi([0.0, 0.0, 0.0, 0.0], 0));
    vec![
        navigation(),
        grounding(),
        no_box,
        navigation_with_rois(),
        many,
        typed,
        navigation_with_gt(r#"{"function": "Swipe", "direction": "up"}"#),
        navigation_with_gt(r#"{"function": "Back"}"#),
    ]
});

fn sample() -> impl Strategy<Value = &'static Sample> {
    (0..SAMPLES.len()).prop_map(|i| &SAMPLES[i])
}

/// Arbitrary text, fragment soup, and canonical completions with random
/// boxes and taps.
fn completion() -> impl Strategy<Value = String> {
    let coord = || -20i32..1400;
    let boxes =
        proptest::collection::vec((coord(), coord(), coord(), coord()), 0..5).prop_map(|boxes| {
            let items: Vec<String> = boxes
                .iter()
                .map(|(a, b, c, d)| format!(r#"{{"bbox_2d": [{a}, {b}, {c}, {d}]}}"#))
                .collect();
            format!("[{}]", items.join(", "))
        });
    prop_oneof![
        ".*",
        proptest::collection::vec(proptest::sample::select(FRAGMENTS), 0..40)
            .prop_map(|parts| parts.concat()),
        (boxes, coord(), coord()).prop_map(|(blink, x, y)| canonical(&blink, &tap(x, y))),
    ]
}

fn mode() -> impl Strategy<Value = RewardMode> {
    prop_oneof![Just(RewardMode::Released), Just(RewardMode::Paper)]
}

proptest! {
    #[test]
    fn released_iou_of_boxes_with_positive_area_is_between_zero_and_one(
        a in (-1e6f64..1e6, -1e6f64..1e6, 1e-6f64..1e6, 1e-6f64..1e6),
        b in (-1e6f64..1e6, -1e6f64..1e6, 1e-6f64..1e6, 1e-6f64..1e6),
    ) {
        let a = BBox::new(a.0, a.1, a.0 + a.2, a.1 + a.3);
        let b = BBox::new(b.0, b.1, b.0 + b.2, b.1 + b.3);
        let iou = a.iou(&b);
        prop_assert!((0.0..=1.0).contains(&iou), "IoU {iou} of {a:?} and {b:?}");
    }

    #[test]
    fn total_is_the_weighted_sum_of_the_terms(
        sample in sample(),
        text in completion(),
        mode in mode(),
        (format, blink, link) in (0.0f64..10.0, 0.0f64..10.0, 0.0f64..10.0),
    ) {
        let weights = Weights { format, blink, link };
        let r = score(sample, &text, mode, weights);
        let expected = format * r.format + blink * r.blink + link * r.link;
        prop_assert!((r.total - expected).abs() < 1e-9, "{r:?} with {weights:?}");
    }

    #[test]
    fn released_terms_are_zero_or_one(sample in sample(), text in completion()) {
        let r = released(sample, &text);
        for term in [r.format, r.blink, r.link] {
            prop_assert!(term == 0.0 || term == 1.0, "{r:?}");
        }
    }

    #[test]
    fn paper_terms_are_between_zero_and_one(sample in sample(), text in completion()) {
        let r = paper(sample, &text);
        for term in [r.format, r.blink, r.link] {
            prop_assert!((0.0..=1.0).contains(&term), "{r:?}");
        }
        prop_assert!(r.format == 0.0 || r.format == 1.0);
        prop_assert!(r.link == 0.0 || r.link == 1.0);
    }

    #[test]
    fn scoring_never_panics(sample in sample(), text in completion(), mode in mode()) {
        let r = score(sample, &text, mode, Weights::default());
        prop_assert!(r.total.is_finite());
    }
}

/// A screenshot the model sees scaled down: 1080×2400 at 200,704 pixels is
/// 280×644 (spec §3), the GT box [0, 667, 270, 909] (the Settings icon) is
/// [0, 179.0, 70, 243.9] there. The oracle's answer, written in that frame
/// (Tap [35, 211], the box as its blink), earns every term; compared with
/// the box in screen pixels, as the plugin would, it earned no blink and no
/// link, since the point lies outside [0, 667, 270, 909] and the boxes do
/// not overlap.
#[test]
fn answers_at_a_scaled_down_frame_are_judged_in_that_frame() {
    let mut sample = navigation();
    sample.image_sizes = vec![[1080, 2400]];
    sample.max_pixels = 200_704;
    sample.bbox = vec![0.0, 667.0, 270.0, 909.0];
    sample.solution = r#"[{"Action": {"function": "Tap", "point_2d": [35, 211]}}]"#.into();
    let answer = canonical(
        r#"[{"bbox_2d": [0, 179, 70, 244], "label": "Settings"}]"#,
        &tap(35, 211),
    );
    let r = released(&sample, &answer);
    assert_eq!((r.format, r.blink, r.link), (1.0, 1.0, 1.0));
    // Written in screen pixels instead (Tap [135, 786], the box unscaled),
    // it misses in the model frame: 135 > 70, and the boxes do not meet.
    let r = released(&sample, &canonical(GT_BLINK, &tap(135, 786)));
    assert_eq!((r.blink, r.link), (0.0, 0.0));
}
