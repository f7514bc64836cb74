//! Ground truth for blink rewards, read from the UI tree a step observed: the
//! element an action targeted, and the ranked regions of interest (ROIs)
//! that `paper`-mode rewards match a model's blink against.
//!
//! # The target
//! A Tap or LongPress targets the element the touch reached: the last
//! interactive node (clickable or long-clickable) in document order whose
//! bounds hold the device point. A `uiautomator` dump lists views in drawing
//! order and Android hands a touch to the topmost view under the finger, so
//! this is the view that received the tap; among nested views it is the
//! innermost, hence the smallest. Taking the last rather than simply the
//! smallest matters where windows overlap: a tap on a dialog's button must
//! not be credited to a smaller switch drawn underneath. A point over no
//! interactive node falls back to the last node of any kind under it, except
//! nodes covering most of the screen (windows, backgrounds), which mark no
//! element.
//!
//! # The ranking
//! Rank 1 is the target (when the action has one). Ranks 2..λ (or 1..λ
//! without a target) go to the other candidates, ordered by, in turn:
//! 1. relevance: the share of the element's words (text, content
//!    description and resource-id name) that occur in the goal or the
//!    step's Plan, highest first;
//! 2. interactivity: clickable, long-clickable, checkable, focusable or
//!    scrollable elements before passive ones;
//! 3. nearness to the target (distance between centres), nearest first,
//!    when there is a target;
//! 4. document order.
//!
//! Candidates are nodes that are visible on the screen, cover less than
//! half of it, are no thin sliver (each side at least 2% of the screen's
//! shorter side: a list row scrolled almost out of view is nothing to look
//! at), and carry a label or are interactive (bare layout containers are
//! not regions anyone looks at). A candidate whose box overlaps an
//! already chosen ROI at IoU ≥ 0.5 is passed over: the reward treats such
//! boxes as the same region, and a model trained to blink at both would be
//! blinking twice at one thing.
//!
//! Words are lower-cased runs of letters and digits of two or more
//! characters, plus each whitespace-separated chunk with its punctuation
//! removed (so "Wi-Fi" also gives "wifi", which matches `wifi_switch`), less
//! a few function words that carry no meaning on their own.
//!
//! Boxes are in original screen pixels, clipped to the screen, like the
//! sample's `bbox`.

use crate::device::ui::UiNode;
use crate::protocol::{BBox, DevicePoint, Size};
use crate::sample::RankedRoi;
use std::collections::BTreeSet;

/// Regions of interest the paper's blink reward ranks (λ).
pub const DEFAULT_LAMBDA: usize = 5;

/// Nodes covering at least this share of the screen are containers, not
/// elements.
const MAX_SCREEN_SHARE: f64 = 0.5;

/// Sides shorter than this share of the screen's shorter side make a
/// sliver, not a region.
const MIN_SIDE_SHARE: f64 = 0.02;

/// Two boxes at or above this IoU are one region to the reward.
const DUPLICATE_IOU: f64 = 0.5;

const FUNCTION_WORDS: [&str; 21] = [
    "an", "and", "or", "the", "to", "of", "in", "into", "on", "at", "by", "for", "with", "from",
    "my", "your", "its", "is", "it", "this", "that",
];

/// The element a touch at `at` reached (see the module docs), or `None`
/// when nothing but screen-sized containers lies under the point.
pub fn target_element(tree: &UiNode, at: DevicePoint, screen: Size) -> Option<&UiNode> {
    let (x, y) = (
        i32::try_from(at.x).unwrap_or(i32::MAX),
        i32::try_from(at.y).unwrap_or(i32::MAX),
    );
    let under: Vec<&UiNode> = tree.iter().filter(|n| n.contains(x, y)).collect();
    under
        .iter()
        .rev()
        .find(|n| n.clickable || n.long_clickable)
        .or_else(|| under.iter().rev().find(|n| !covers_screen(n, screen)))
        .copied()
}

/// The node's bounds clipped to the screen, in pixels; `None` when nothing
/// of it is on screen.
pub fn screen_box(node: &UiNode, screen: Size) -> Option<BBox> {
    let [x1, y1, x2, y2] = node.bounds.map(f64::from);
    let (w, h) = (f64::from(screen.width), f64::from(screen.height));
    let b = BBox::new(x1.max(0.0), y1.max(0.0), x2.min(w), y2.min(h));
    (b.x1 < b.x2 && b.y1 < b.y2).then_some(b)
}

fn covers_screen(node: &UiNode, screen: Size) -> bool {
    screen_box(node, screen).is_some_and(|b| b.area() >= MAX_SCREEN_SHARE * screen.pixels() as f64)
}

fn is_interactive(node: &UiNode) -> bool {
    node.clickable || node.long_clickable || node.checkable || node.focusable || node.scrollable
}

/// The words of `text` (see the module docs).
fn words(text: &str) -> BTreeSet<String> {
    let lower = text.to_lowercase();
    let runs = lower
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_string);
    let chunks = lower
        .split_whitespace()
        .map(|chunk| chunk.chars().filter(|c| c.is_alphanumeric()).collect());
    runs.chain(chunks)
        .filter(|w: &String| w.chars().count() >= 2 && !FUNCTION_WORDS.contains(&w.as_str()))
        .collect()
}

/// Share of the node's words found among `query`; 0 for a node without words.
fn relevance(node: &UiNode, query: &BTreeSet<String>) -> f64 {
    let own = words(&format!(
        "{} {} {}",
        node.text,
        node.content_desc,
        node.id_name().replace('_', " ")
    ));
    if own.is_empty() {
        return 0.0;
    }
    own.intersection(query).count() as f64 / own.len() as f64
}

/// The ranked ROIs of one step: the target first (when given), then up to
/// `lambda` in all, as the module docs describe. `goal` and `plan` are the
/// text the relevance is measured against.
pub fn rank_rois(
    tree: &UiNode,
    target: Option<&UiNode>,
    screen: Size,
    goal: &str,
    plan: &str,
    lambda: usize,
) -> Vec<RankedRoi> {
    let query = words(&format!("{goal} {plan}"));
    let mut chosen: Vec<(BBox, String)> = target
        .and_then(|t| Some((screen_box(t, screen)?, t.label())))
        .into_iter()
        .collect();
    let target_centre = chosen.first().map(|(b, _)| b.center());
    struct Candidate<'a> {
        node: &'a UiNode,
        bbox: BBox,
        relevance: f64,
        interactive: bool,
        distance: f64,
        order: usize,
    }
    let mut candidates: Vec<Candidate> = tree
        .iter()
        .enumerate()
        .filter(|(_, n)| !target.is_some_and(|t| std::ptr::eq(*n, t)))
        .filter_map(|(order, node)| {
            let bbox = screen_box(node, screen)?;
            let labelled = [&node.text, &node.content_desc, &node.resource_id]
                .iter()
                .any(|s| !s.trim().is_empty());
            let min_side = MIN_SIDE_SHARE * f64::from(screen.width.min(screen.height));
            let sliver = (bbox.x2 - bbox.x1).min(bbox.y2 - bbox.y1) < min_side;
            let keep =
                (labelled || is_interactive(node)) && !sliver && !covers_screen(node, screen);
            keep.then(|| Candidate {
                node,
                bbox,
                relevance: relevance(node, &query),
                interactive: is_interactive(node),
                distance: target_centre.map_or(0.0, |c| {
                    let m = bbox.center();
                    (m.x - c.x).hypot(m.y - c.y)
                }),
                order,
            })
        })
        .collect();
    candidates.sort_by(|a, b| {
        b.relevance
            .total_cmp(&a.relevance)
            .then(b.interactive.cmp(&a.interactive))
            .then(a.distance.total_cmp(&b.distance))
            .then(a.order.cmp(&b.order))
    });
    for c in candidates {
        if chosen.len() >= lambda {
            break;
        }
        if chosen.iter().all(|(b, _)| b.iou(&c.bbox) < DUPLICATE_IOU) {
            chosen.push((c.bbox, c.node.label()));
        }
    }
    chosen.truncate(lambda);
    chosen
        .into_iter()
        .zip(1..)
        .map(|((bbox_2d, label), priority)| RankedRoi {
            bbox_2d,
            label,
            priority,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SCREEN: Size = Size {
        width: 1000,
        height: 2000,
    };

    fn node(text: &str, bounds: [i32; 4], clickable: bool) -> UiNode {
        UiNode {
            text: text.into(),
            bounds,
            clickable,
            focusable: clickable,
            enabled: true,
            ..UiNode::default()
        }
    }

    fn root(children: Vec<UiNode>) -> UiNode {
        UiNode {
            class: "android.widget.FrameLayout".into(),
            bounds: [0, 0, 1000, 2000],
            enabled: true,
            children,
            ..UiNode::default()
        }
    }

    fn at(x: u32, y: u32) -> DevicePoint {
        DevicePoint { x, y }
    }

    /// A settings row (clickable) holding its title and a switch (clickable).
    fn settings_screen() -> UiNode {
        let mut switch = node("", [850, 300, 950, 400], true);
        switch.resource_id = "com.btl.settings:id/wifi_switch".into();
        switch.checkable = true;
        let row = UiNode {
            children: vec![node("Wi-Fi", [50, 300, 400, 400], false), switch],
            ..node("", [0, 280, 1000, 420], true)
        };
        root(vec![row])
    }

    #[test]
    fn the_target_is_the_innermost_clickable_under_the_point() {
        let tree = settings_screen();
        let t = target_element(&tree, at(900, 350), SCREEN).unwrap();
        assert_eq!(t.bounds, [850, 300, 950, 400], "the switch");
        // On the title, the row takes the touch (the text is not clickable).
        let t = target_element(&tree, at(200, 350), SCREEN).unwrap();
        assert_eq!(t.bounds, [0, 280, 1000, 420], "the row");
    }

    #[test]
    fn a_dialog_drawn_later_takes_the_touch_from_a_smaller_view_beneath() {
        let under = node("Delete", [100, 900, 200, 960], true);
        let dialog = UiNode {
            children: vec![node("OK", [50, 850, 950, 1000], true)],
            ..node("", [0, 800, 1000, 1100], false)
        };
        let tree = root(vec![under, dialog]);
        let t = target_element(&tree, at(150, 930), SCREEN).unwrap();
        assert_eq!(t.text, "OK");
    }

    #[test]
    fn without_clickables_the_innermost_element_is_the_target_but_never_the_screen() {
        let tree = root(vec![node("Hello", [100, 100, 300, 150], false)]);
        assert_eq!(
            target_element(&tree, at(200, 120), SCREEN).unwrap().text,
            "Hello"
        );
        assert_eq!(target_element(&tree, at(500, 1500), SCREEN), None);
    }

    #[test]
    fn points_on_the_far_edges_are_outside() {
        let tree = root(vec![node("B", [100, 100, 200, 200], true)]);
        assert_eq!(target_element(&tree, at(200, 150), SCREEN), None);
        assert_eq!(
            target_element(&tree, at(100, 100), SCREEN).unwrap().text,
            "B"
        );
    }

    #[test]
    fn words_split_join_and_drop_function_words() {
        let w: Vec<String> = words("Turn on the Wi-Fi, then Save!").into_iter().collect();
        assert_eq!(w, ["fi", "save", "then", "turn", "wi", "wifi"]);
    }

    /// The target, then the relevant text, then the other clickables by
    /// distance to the target; containers, blanks and a near copy of the
    /// target are left out.
    #[test]
    fn ranking_by_hand() {
        let mut tree = settings_screen();
        tree.children.extend([
            // Relevance 0, clickable; centre (500, 1050), so
            // sqrt(400² + 700²) = 806 px from the switch's centre (900, 350).
            node("Bluetooth", [0, 1000, 1000, 1100], true),
            // Relevance 0, clickable; centre (500, 150): distance
            // sqrt(400² + 200²) = 447, nearer than Bluetooth.
            node("Search settings", [0, 100, 1000, 200], true),
            // Relevance 3/4: "wi", "fi" and "wifi" are in the query, "display" is not.
            node("Wi-Fi display", [0, 1500, 1000, 1600], false),
            // Unlabelled and passive: a layout box, never a region.
            node("", [0, 1700, 1000, 1800], false),
            // Labelled but covering the screen's bottom 60%.
            node("Panel", [0, 800, 1000, 2000], false),
            // Same box as the switch (IoU 1): the same region.
            node("Wi-Fi switch", [850, 300, 950, 400], false),
            // 10 px high, below 2% of the shorter side (20 px): a sliver.
            node("Wi-Fi sliver", [0, 1990, 1000, 2000], true),
        ]);
        let target = target_element(&tree, at(900, 350), SCREEN).unwrap();
        let rois = rank_rois(
            &tree,
            Some(target),
            SCREEN,
            "Turn on Wi-Fi",
            "Tap the Wi-Fi switch.",
            6,
        );
        let got: Vec<(&str, u32)> = rois
            .iter()
            .map(|r| (r.label.as_str(), r.priority))
            .collect();
        assert_eq!(
            got,
            [
                ("wifi switch", 1),
                // "Wi-Fi": words {wi, fi, wifi}, all in the query.
                ("Wi-Fi", 2),
                // "Wi-Fi display": 3 of its 4 words.
                ("Wi-Fi display", 3),
                // The row (clickable, no text of its own) and the switch
                // overlap at IoU 100·100 / (1000·140) < 0.5, so it stays;
                // it is interactive with relevance 0 (its own words, none)
                // and nearest (centre (500, 350), 400 px). Its label is its
                // child's text, as TalkBack speaks the row.
                ("Wi-Fi", 4),
                ("Search settings", 5),
                ("Bluetooth", 6),
            ]
        );
        assert_eq!(rois[0].bbox_2d, BBox::new(850.0, 300.0, 950.0, 400.0));
    }

    #[test]
    fn lambda_caps_the_list_and_without_a_target_ranks_start_at_one() {
        let tree = settings_screen();
        let target = target_element(&tree, at(900, 350), SCREEN);
        let one = rank_rois(&tree, target, SCREEN, "Turn on Wi-Fi", "", 1);
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].label, "wifi switch");
        let free = rank_rois(&tree, None, SCREEN, "Turn on Wi-Fi", "", 5);
        assert_eq!(free[0].label, "Wi-Fi");
        assert_eq!(free[0].priority, 1);
    }

    #[test]
    fn boxes_are_clipped_to_the_screen() {
        let tree = root(vec![node("Edge", [-20, 1950, 300, 2100], true)]);
        let rois = rank_rois(&tree, None, SCREEN, "", "", 5);
        assert_eq!(rois[0].bbox_2d, BBox::new(0.0, 1950.0, 300.0, 2000.0));
        let off = root(vec![node("Gone", [1000, 0, 1200, 50], true)]);
        assert!(rank_rois(&off, None, SCREEN, "", "", 5).is_empty());
    }

    fn arb_node() -> impl Strategy<Value = UiNode> {
        (
            -50i32..1000,
            -50i32..2000,
            1i32..600,
            1i32..900,
            any::<bool>(),
            prop::sample::select(vec!["", "Wi-Fi", "Save", "Search", "OK"]),
        )
            .prop_map(|(x, y, w, h, clickable, text)| node(text, [x, y, x + w, y + h], clickable))
    }

    proptest! {
        #[test]
        fn ranks_are_consecutive_distinct_regions_led_by_the_target(
            nodes in prop::collection::vec(arb_node(), 0..30),
            px in 0u32..1000,
            py in 0u32..2000,
            lambda in 1usize..8,
        ) {
            let tree = root(nodes);
            let target = target_element(&tree, at(px, py), SCREEN);
            let rois = rank_rois(&tree, target, SCREEN, "Turn on Wi-Fi", "Tap Save", lambda);
            prop_assert!(rois.len() <= lambda);
            for (i, r) in rois.iter().enumerate() {
                prop_assert_eq!(r.priority as usize, i + 1);
                prop_assert!(r.bbox_2d.x1 >= 0.0 && r.bbox_2d.x2 <= 1000.0);
                prop_assert!(r.bbox_2d.y1 >= 0.0 && r.bbox_2d.y2 <= 2000.0);
                for other in &rois[i + 1..] {
                    prop_assert!(r.bbox_2d.iou(&other.bbox_2d) < DUPLICATE_IOU);
                }
            }
            if let Some(t) = target.and_then(|t| screen_box(t, SCREEN)) {
                prop_assert_eq!(rois[0].bbox_2d, t);
            }
        }
    }
}
