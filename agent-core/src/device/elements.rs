//! The screen as a text agent reads it: the accessibility tree flattened
//! into the [`ScreenElement`] lines profile `btl-screen-text` puts in the
//! prompt.
//!
//! The list follows TalkBack's reading of a screen: an element a finger can
//! use is one line, named by [`UiNode::label`] (a contact row is "Dmitri
//! King", an alarm's switch "07:30"), and the passive texts inside it are
//! no lines of their own; a text outside any such element is a line of its
//! own. The point of a line is the middle of the element's bounds in the
//! model frame, rounded as the oracle rounds its taps, so tapping a listed
//! element means copying its point. A keyboard is one line, "keyboard", and its editing
//! keys (Delete, Enter) one each: the others are typing, which the model
//! does with `Type`.

use super::ui::{MAX_LABEL_CHARS, UiNode};
use crate::protocol::prompt::ScreenElement;
use crate::protocol::{DevicePoint, FrameMap};
use std::collections::HashMap;

/// The most lines one screen gets, so a long dump cannot crowd out the
/// rest of the prompt; a phone screen holds about twenty.
pub const MAX_SCREEN_ELEMENTS: usize = 48;

/// The elements of `root` in document order, at most
/// [`MAX_SCREEN_ELEMENTS`]. Nodes of `keyboard_packages` are one
/// "keyboard" line and their editing keys; views outside the screen are
/// left out.
pub fn screen_elements<S: AsRef<str>>(
    root: &UiNode,
    frame: &FrameMap,
    keyboard_packages: &[S],
) -> Vec<ScreenElement> {
    let keyboard_packages: Vec<&str> = keyboard_packages.iter().map(AsRef::as_ref).collect();
    let mut walk = Walk {
        frame,
        keyboard_packages: &keyboard_packages,
        keyboard_listed: false,
        spans: HashMap::new(),
        receivers: Vec::new(),
        out: Vec::new(),
    };
    walk.number(root, 0);
    walk.node(root, false);
    walk.out
}

struct Walk<'a> {
    frame: &'a FrameMap,
    keyboard_packages: &'a [&'a str],
    keyboard_listed: bool,
    /// Each node's place in document order and the end of its subtree.
    spans: HashMap<*const UiNode, (usize, usize)>,
    /// The views that take a touch, in document order: where the
    /// last of them under a point starts, the finger lands.
    receivers: Vec<(usize, [i32; 4])>,
    out: Vec<ScreenElement>,
}

impl Walk<'_> {
    /// Numbers `node` and its subtree in document order from `next`;
    /// returns the number after the subtree.
    fn number(&mut self, node: &UiNode, next: usize) -> usize {
        if node.clickable || node.long_clickable {
            self.receivers.push((next, node.bounds));
        }
        let mut end = next + 1;
        for child in &node.children {
            end = self.number(child, end);
        }
        self.spans.insert(node, (next, end));
        end
    }

    /// Whether a view drawn later, outside `node`'s subtree (a dialog's
    /// scrim, a menu), takes the touch at its middle: Android dispatches a
    /// touch to the last touchable view under it, so such a node is out of
    /// the finger's reach and off the list.
    fn covered(&self, node: &UiNode) -> bool {
        let Some(&(_, end)) = self.spans.get(&std::ptr::from_ref(node)) else {
            return false;
        };
        let (x, y) = node.center();
        // Only views after the subtree can cover it, and any of them under
        // the point does: the last one under it starts later still.
        let after = self.receivers.partition_point(|&(start, _)| start < end);
        self.receivers[after..]
            .iter()
            .any(|(_, [x1, y1, x2, y2])| x >= *x1 && x < *x2 && y >= *y1 && y < *y2)
    }

    /// Lists `node` and its subtree; `spoken` when an ancestor's label
    /// already holds this node's words.
    fn node(&mut self, node: &UiNode, spoken: bool) {
        if self.out.len() >= MAX_SCREEN_ELEMENTS {
            return;
        }
        if self.keyboard_packages.contains(&node.package.as_str()) {
            if !self.keyboard_listed && self.listable(node) {
                self.keyboard_listed = true;
                self.push("keyboard".to_string(), node, None);
            }
            self.editing_keys(node);
            return;
        }
        let usable = node.clickable || node.long_clickable;
        let own = node.own_words();
        // Whether it is covered is asked only of a node that would be a
        // line: it is the costly question.
        if usable || node.checkable {
            if self.listable(node) {
                self.push(node.label(), node, node.checkable.then_some(node.checked));
            }
        } else if !spoken
            && let Some(words) = own
            && self.listable(node)
        {
            self.push(words.to_string(), node, None);
        }
        // A usable element speaks for the passive texts inside it: with
        // words of its own TalkBack reads those instead of the children's
        // (a gallery tile's description, not its caption again), without
        // them it reads the children's (`UiNode::label`). Either way they
        // are no lines of their own.
        let speaks = spoken || usable;
        for child in &node.children {
            self.node(child, speaks && !child.clickable && !child.long_clickable);
        }
    }

    /// The keys of a keyboard that `Type` cannot stand in for (Delete,
    /// Enter, Space): those a finger can use whose description is a word.
    fn editing_keys(&mut self, node: &UiNode) {
        for key in &node.children {
            if self.out.len() >= MAX_SCREEN_ELEMENTS {
                return;
            }
            let desc = key.content_desc.trim();
            if (key.clickable || key.long_clickable)
                && desc.chars().count() > 1
                && self.listable(key)
            {
                self.push(desc.to_string(), key, None);
            }
            self.editing_keys(key);
        }
    }

    /// On the screen and within a finger's reach.
    fn listable(&self, node: &UiNode) -> bool {
        self.on_screen(node) && !self.covered(node)
    }

    fn on_screen(&self, node: &UiNode) -> bool {
        let [x1, y1, x2, y2] = node.bounds;
        let (w, h) = (self.frame.device.width, self.frame.device.height);
        let w = i32::try_from(w).unwrap_or(i32::MAX);
        let h = i32::try_from(h).unwrap_or(i32::MAX);
        x2 > x1 && y2 > y1 && x2 > 0 && y2 > 0 && x1 < w && y1 < h
    }

    fn push(&mut self, label: String, node: &UiNode, checked: Option<bool>) {
        let (x, y) = node.center();
        let clamp = |v: i32, max: u32| {
            u32::try_from(v.max(0))
                .unwrap_or(0)
                .min(max.saturating_sub(1))
        };
        let point = self.frame.to_model_rounded(DevicePoint {
            x: clamp(x, self.frame.device.width),
            y: clamp(y, self.frame.device.height),
        });
        self.out.push(ScreenElement {
            label: label.chars().take(MAX_LABEL_CHARS).collect(),
            point,
            checked,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Point, Size};

    fn frame() -> FrameMap {
        FrameMap::new(Size::new(1080, 2400), 200_704).unwrap()
    }

    fn text(words: &str, bounds: [i32; 4]) -> UiNode {
        UiNode {
            text: words.into(),
            bounds,
            ..UiNode::default()
        }
    }

    const KEYBOARDS: [&str; 1] = ["com.btl.inputmethod"];
    /// A row names itself by its passive texts, its switch is a line of its
    /// own with its state, and the row's texts are not repeated.
    #[test]
    fn a_row_is_one_line_and_its_switch_another() {
        let row = UiNode {
            clickable: true,
            bounds: [0, 400, 1080, 600],
            children: vec![
                text("07:30", [40, 420, 400, 500]),
                text("Mon, Tue", [40, 500, 400, 580]),
                UiNode {
                    resource_id: "com.btl.clock:id/alarm_switch".into(),
                    checkable: true,
                    checked: true,
                    clickable: true,
                    bounds: [900, 450, 1040, 550],
                    ..UiNode::default()
                },
            ],
            ..UiNode::default()
        };
        let root = UiNode {
            bounds: [0, 0, 1080, 2400],
            children: vec![text("Alarms", [40, 200, 400, 300]), row],
            ..UiNode::default()
        };
        let elements = screen_elements(&root, &frame(), &KEYBOARDS);
        let labels: Vec<_> = elements.iter().map(|e| e.label.as_str()).collect();
        assert_eq!(labels, ["Alarms", "07:30, Mon, Tue", "alarm switch"]);
        assert_eq!(elements[2].checked, Some(true));
        assert_eq!(elements[1].checked, None);
        // The frame is 280 × 644 for 1080 × 2400 (smart_resize at 200,704
        // pixels): the row's middle (540, 500) is (140, 134.2) there.
        let f = frame();
        assert_eq!((f.model.width, f.model.height), (280, 644));
        assert_eq!(elements[1].point, Point::new(140.0, 134.0));
    }

    /// A tile described by its file name lists once, although its caption
    /// shows the name again: TalkBack reads the description, not the
    /// caption as well, so the name is one line a quote can find.
    #[test]
    fn a_described_tile_is_one_line_and_its_caption_none() {
        let tile = |name: &str, x: i32| UiNode {
            content_desc: name.into(),
            clickable: true,
            long_clickable: true,
            bounds: [x, 250, x + 340, 670],
            children: vec![text(name, [x, 600, x + 340, 670])],
            ..UiNode::default()
        };
        let root = UiNode {
            bounds: [0, 0, 1080, 2400],
            children: vec![
                text("Gallery", [40, 100, 400, 200]),
                tile("dog_03.jpg", 10),
                tile("coffee_04.jpg", 370),
            ],
            ..UiNode::default()
        };
        let elements = screen_elements(&root, &frame(), &KEYBOARDS);
        let labels: Vec<_> = elements.iter().map(|e| e.label.as_str()).collect();
        assert_eq!(labels, ["Gallery", "dog_03.jpg", "coffee_04.jpg"]);
        // The tile's middle (180, 460) is (46.7, 123.4) in the 280 × 644 frame.
        assert_eq!(elements[1].point, Point::new(47.0, 123.0));
    }

    #[test]
    fn a_keyboard_is_one_line_with_its_editing_keys_and_off_screen_views_none() {
        let key = |c: &str, desc: &str, x: i32| UiNode {
            package: "com.btl.inputmethod".into(),
            text: c.into(),
            content_desc: desc.into(),
            clickable: true,
            bounds: [x, 1800, x + 100, 1900],
            ..UiNode::default()
        };
        let keyboard = UiNode {
            package: "com.btl.inputmethod".into(),
            bounds: [0, 1600, 1080, 2400],
            children: vec![key("q", "", 0), key("w", "", 100), key("⌫", "Delete", 200)],
            ..UiNode::default()
        };
        let root = UiNode {
            bounds: [0, 0, 1080, 2400],
            children: vec![
                text("Below the screen", [0, 2500, 1080, 2600]),
                text("Empty", [10, 10, 10, 50]),
                keyboard,
            ],
            ..UiNode::default()
        };
        let elements = screen_elements(&root, &frame(), &KEYBOARDS);
        let labels: Vec<_> = elements.iter().map(|e| e.label.as_str()).collect();
        assert_eq!(labels, ["keyboard", "Delete"]);
    }

    /// A dialog's scrim takes every touch outside the dialog, so the rows
    /// under it are out of reach and off the list; the dialog's buttons
    /// are listed, and its title is the scrim's label.
    #[test]
    fn rows_under_a_dialog_are_left_out() {
        let row = |name: &str, y: i32| UiNode {
            clickable: true,
            bounds: [0, y, 1080, y + 200],
            children: vec![text(name, [40, y + 20, 600, y + 180])],
            ..UiNode::default()
        };
        let button = |name: &str, x: i32| UiNode {
            text: name.into(),
            clickable: true,
            bounds: [x, 1300, x + 200, 1400],
            ..UiNode::default()
        };
        let scrim = UiNode {
            clickable: true,
            bounds: [0, 0, 1080, 2400],
            children: vec![UiNode {
                bounds: [100, 1000, 980, 1450],
                children: vec![
                    text("Delete Dmitri King?", [150, 1050, 900, 1150]),
                    button("Cancel", 500),
                    button("Delete", 750),
                ],
                ..UiNode::default()
            }],
            ..UiNode::default()
        };
        let root = UiNode {
            bounds: [0, 0, 1080, 2400],
            children: vec![row("Alice Evans", 400), row("Dmitri King", 1200), scrim],
            ..UiNode::default()
        };
        let elements = screen_elements(&root, &frame(), &KEYBOARDS);
        let labels: Vec<_> = elements.iter().map(|e| e.label.as_str()).collect();
        assert_eq!(labels, ["Delete Dmitri King?", "Cancel", "Delete"]);
    }

    #[test]
    fn long_dumps_and_long_texts_are_cut() {
        let root = UiNode {
            bounds: [0, 0, 1080, 2400],
            children: (0..100)
                .map(|i| text(&"x".repeat(200), [0, i * 20, 1080, i * 20 + 20]))
                .collect(),
            ..UiNode::default()
        };
        let elements = screen_elements::<&str>(&root, &frame(), &[]);
        assert_eq!(elements.len(), MAX_SCREEN_ELEMENTS);
        assert!(
            elements
                .iter()
                .all(|e| e.label.chars().count() == MAX_LABEL_CHARS)
        );
    }

    /// A tree of up to a few dozen views on a small grid, some of them
    /// clickable, so that views overlap and cover one another often.
    fn tree() -> impl proptest::strategy::Strategy<Value = UiNode> {
        use proptest::prelude::*;
        let view = (0..8i32, 0..8i32, 1..6i32, 1..6i32, any::<bool>()).prop_map(
            |(x, y, w, h, clickable)| UiNode {
                bounds: [x, y, x + w, y + h],
                clickable,
                ..UiNode::default()
            },
        );
        view.prop_recursive(4, 48, 4, |inner| {
            (inner.clone(), proptest::collection::vec(inner, 0..4)).prop_map(
                |(mut node, children)| {
                    node.children = children;
                    node
                },
            )
        })
    }

    proptest::proptest! {
        /// Covered as Android decides it: the last view in document order
        /// that takes a touch at the node's middle lies after the node's
        /// subtree. Checked against that definition for every node.
        #[test]
        fn covered_is_the_last_receiver_under_the_middle_after_the_subtree(root in tree()) {
            let frame = frame();
            let mut walk = Walk {
                frame: &frame,
                keyboard_packages: &[],
                keyboard_listed: false,
                spans: HashMap::new(),
                receivers: Vec::new(),
                out: Vec::new(),
            };
            walk.number(&root, 0);
            let mut stack = vec![&root];
            while let Some(node) = stack.pop() {
                let (_, end) = walk.spans[&std::ptr::from_ref(node)];
                let (x, y) = node.center();
                let last = walk
                    .receivers
                    .iter()
                    .filter(|(_, [x1, y1, x2, y2])| x >= *x1 && x < *x2 && y >= *y1 && y < *y2)
                    .map(|&(start, _)| start)
                    .max();
                proptest::prop_assert_eq!(walk.covered(node), last.is_some_and(|start| start >= end));
                stack.extend(&node.children);
            }
        }
    }
}
