//! The moves every oracle is built from: reading a `uiautomator` tree the
//! way an agent would (which app is in front, which dialog is open, what a
//! field holds, whether a list goes on below) and turning an element into
//! the device action aimed at it.
//!
//! Everything here reads the UI tree alone, never the phone, so the same
//! oracle drives the in-process phone and a device behind adb. Oracles are
//! stateless: each step is decided from the screen in front of them, which
//! lets them pick up from any screen an agent left behind.

use super::OracleStep;
use crate::device::ui::UiNode;
use crate::device::{DeviceAction, SWIPE_MS};
use crate::protocol::DevicePoint;

const LAUNCHER_ICON: &str = "com.btl.launcher:id/icon";
const KEYBOARD: &str = "com.btl.inputmethod:id/keyboard_view";
const DELETE_KEY: &str = "com.btl.inputmethod:id/key_del";

/// Views that swallow touches although nothing about them is clickable:
/// windows and dialog panels.
const OPAQUE: [&str; 4] = [
    KEYBOARD,
    "android:id/parentPanel",
    "com.android.systemui:id/status_bar",
    "com.android.systemui:id/navigation_bar_frame",
];

pub(super) fn step(
    action: DeviceAction,
    target: Option<&UiNode>,
    plan: impl Into<String>,
) -> OracleStep {
    OracleStep {
        action,
        target: target.cloned(),
        plan: plan.into(),
        span: None,
    }
}

fn point(x: i32, y: i32) -> DevicePoint {
    DevicePoint {
        x: u32::try_from(x).unwrap_or(0),
        y: u32::try_from(y).unwrap_or(0),
    }
}

/// What a finger at `(x, y)` lands on, as Android dispatches touches: the
/// last touchable view in drawing order (document order) under the finger.
fn touched(screen: &UiNode, x: i32, y: i32) -> Option<&UiNode> {
    screen
        .iter()
        .filter(|n| {
            n.contains(x, y)
                && (n.clickable || n.long_clickable || OPAQUE.contains(&n.resource_id.as_str()))
        })
        .last()
}

/// Whether a touch at the centre of `node` (a node of `screen`) reaches it,
/// rather than the keyboard, a dialog or a button drawn over it.
pub(super) fn reachable(screen: &UiNode, node: &UiNode) -> bool {
    let (x, y) = node.center();
    touched(screen, x, y).is_some_and(|hit| std::ptr::eq(hit, node))
}

pub(super) fn keyboard_up(screen: &UiNode) -> bool {
    screen.find_by_id(KEYBOARD).is_some()
}

fn hide_keyboard() -> OracleStep {
    step(
        DeviceAction::Back,
        None,
        "Hide the keyboard, which covers what I need to tap.",
    )
}

/// A tap at the centre of `node`; when the keyboard covers it, hiding the
/// keyboard comes first.
pub(super) fn tap(screen: &UiNode, node: &UiNode, plan: impl Into<String>) -> OracleStep {
    if keyboard_up(screen) && !reachable(screen, node) {
        return hide_keyboard();
    }
    let (x, y) = node.center();
    step(DeviceAction::Tap { at: point(x, y) }, Some(node), plan)
}

/// A tap at `(x, y)` on a slider `node`, where any x in `span` has the
/// same effect (see [`OracleStep::span`]).
pub(super) fn tap_on_slider(
    node: &UiNode,
    (x, y): (i32, i32),
    span: (i32, i32),
    plan: impl Into<String>,
) -> OracleStep {
    OracleStep {
        span: Some(span),
        ..step(DeviceAction::Tap { at: point(x, y) }, Some(node), plan)
    }
}

pub(super) fn long_press(screen: &UiNode, node: &UiNode, plan: impl Into<String>) -> OracleStep {
    if keyboard_up(screen) && !reachable(screen, node) {
        return hide_keyboard();
    }
    let (x, y) = node.center();
    step(
        DeviceAction::LongPress { at: point(x, y) },
        Some(node),
        plan,
    )
}

pub(super) fn back(plan: impl Into<String>) -> OracleStep {
    step(DeviceAction::Back, None, plan)
}

pub(super) fn type_text(text: &str, plan: impl Into<String>) -> OracleStep {
    step(
        DeviceAction::Type {
            text: text.to_string(),
        },
        None,
        plan,
    )
}

/// Whether `package`'s window is in front.
pub(super) fn in_app(screen: &UiNode, package: &str) -> bool {
    screen.package == package
}

/// The way into the app labelled `label`: its launcher icon, or the home
/// screen first when the launcher is not showing.
pub(super) fn launch(screen: &UiNode, label: &str) -> OracleStep {
    match screen.find(|n| n.resource_id == LAUNCHER_ICON && n.text == label) {
        Some(icon) => tap(screen, icon, format!("Open the {label} app.")),
        None => step(
            DeviceAction::Home,
            None,
            format!("Go to the home screen to open {label}."),
        ),
    }
}

/// Leaves the current page with the toolbar's "Navigate up", which works
/// even while the keyboard is up; Back where there is none.
pub(super) fn navigate_up(screen: &UiNode, plan: impl Into<String>) -> OracleStep {
    match screen.find(|n| n.content_desc == "Navigate up" && n.clickable) {
        Some(up) => tap(screen, up, plan),
        None => back(plan),
    }
}

/// The text of the first node with resource id `id` in `node`'s subtree.
pub(super) fn text_of<'a>(node: &'a UiNode, id: &str) -> Option<&'a str> {
    node.find_by_id(id).map(|n| n.text.as_str())
}

/// The title of the page's toolbar.
pub(super) fn toolbar_title(screen: &UiNode) -> Option<&str> {
    text_of(screen, "toolbar_title")
}

/// An open alert dialog.
pub(super) struct Dialog<'a> {
    pub title: &'a str,
    pub message: &'a str,
    pub confirm: &'a UiNode,
    pub cancel: &'a UiNode,
}

pub(super) fn dialog(screen: &UiNode) -> Option<Dialog<'_>> {
    Some(Dialog {
        title: text_of(screen, "android:id/alertTitle")?,
        message: text_of(screen, "android:id/message").unwrap_or_default(),
        confirm: screen.find_by_id("android:id/button1")?,
        cancel: screen.find_by_id("android:id/button2")?,
    })
}

/// The next step to make the text field `field` hold `want`, or `None`
/// when it does. `hint` is what the field shows when empty (an empty
/// EditText reports its hint as its text); `what` names the field in plans.
///
/// Text is only ever appended at the end, as the phone's fields do, so a
/// field whose text is not a prefix of `want` is cleared one character at
/// a time with the keyboard's delete key.
pub(super) fn fill(
    screen: &UiNode,
    field: &UiNode,
    hint: &str,
    want: &str,
    what: &str,
) -> Option<OracleStep> {
    let current = if field.text == hint {
        ""
    } else {
        field.text.as_str()
    };
    if current == want {
        return None;
    }
    if !field.focused {
        return Some(tap(screen, field, format!("Tap the {what} field.")));
    }
    if let Some(rest) = want.strip_prefix(current) {
        let plan = if current.is_empty() {
            format!("Type \"{rest}\" into the {what} field.")
        } else {
            format!("Type \"{rest}\" at the end of the {what} field.")
        };
        return Some(type_text(rest, plan));
    }
    Some(match screen.find_by_id(DELETE_KEY) {
        Some(del) => tap(
            screen,
            del,
            format!("Delete the old text of the {what} field with the keyboard's delete key."),
        ),
        None => tap(screen, field, format!("Tap the {what} field to edit it.")),
    })
}

/// The next step to make a number picker's field hold `want`, or `None`
/// when it does. Focusing such a field selects its contents, so the text
/// typed right after replaces them.
pub(super) fn fill_number(
    screen: &UiNode,
    field: &UiNode,
    want: &str,
    what: &str,
) -> Option<OracleStep> {
    if field.text == want {
        return None;
    }
    if field.focused && keyboard_up(screen) {
        // A longer value means something was typed after the selection was
        // replaced; focusing the field again selects it all once more.
        if field.text.chars().count() > want.chars().count() {
            return Some(hide_keyboard());
        }
        return Some(type_text(want, format!("Type {want} as the {what}.")));
    }
    Some(tap(
        screen,
        field,
        format!("Tap the {what} to replace {}.", field.text),
    ))
}

/// A scrolling list on screen and the items it shows.
pub(super) struct List<'a> {
    pub node: &'a UiNode,
    /// The visible items, top to bottom.
    pub items: Vec<&'a UiNode>,
}

impl<'a> List<'a> {
    pub fn find(screen: &'a UiNode, id: &str) -> Option<List<'a>> {
        let node = screen.find_by_id(id)?;
        Some(List {
            node,
            items: node.children.iter().collect(),
        })
    }

    fn height(node: &UiNode) -> i32 {
        node.bounds[3] - node.bounds[1]
    }

    /// Whether `item` is cut by the list's edge: shorter than the tallest
    /// item, as every list here has items of one height.
    pub fn clipped(&self, item: &UiNode) -> bool {
        let full = self.items.iter().map(|i| Self::height(i)).max();
        full.is_some_and(|full| Self::height(item) < full)
    }

    /// Whether the list shows its end: every list here leaves more space
    /// after its last item than between two items, so empty space at the
    /// bottom larger than any gap between rows means nothing follows.
    pub fn at_end(&self) -> bool {
        if !self.node.scrollable {
            return true;
        }
        let Some(bottom) = self.items.iter().map(|i| i.bounds[3]).max() else {
            return true;
        };
        let gap = self
            .items
            .windows(2)
            .map(|w| w[1].bounds[1] - w[0].bounds[3])
            .max()
            .unwrap_or(0)
            .max(0);
        self.node.bounds[3] - bottom > gap
    }

    /// A swipe over half the list: `down` reveals what is below.
    pub fn scroll(&self, down: bool, plan: impl Into<String>) -> OracleStep {
        let [x1, y1, x2, y2] = self.node.bounds;
        let x = x1 + (x2 - x1) / 2;
        let (upper, lower) = (y1 + (y2 - y1) / 4, y2 - (y2 - y1) / 4);
        let (from, to) = if down { (lower, upper) } else { (upper, lower) };
        step(
            DeviceAction::Swipe {
                from: point(x, from),
                to: point(x, to),
                duration_ms: SWIPE_MS,
            },
            None,
            plan,
        )
    }

    /// Scrolls a clipped `item` fully into view.
    pub fn reveal(&self, item: &UiNode, what: &str) -> OracleStep {
        let down = item.bounds[1] > self.node.bounds[1];
        let way = if down { "down" } else { "up" };
        self.scroll(down, format!("Scroll {way} to see {what} fully."))
    }
}

/// Where a looked-for list item is.
pub(super) enum Seek<'a> {
    /// On screen, fully visible.
    Found(&'a UiNode),
    /// Not in the list at all.
    Absent,
    /// Elsewhere in the list: this step scrolls towards it.
    Move(Box<OracleStep>),
}

/// Looks for the item whose key is `target` in a list sorted by key (keys
/// compared as the app sorts them), scrolling towards where it would be.
/// It is absent when its neighbours show without it.
///
/// A target that would sort before every item is looked for above as long
/// as the list scrolls, so tasks keep an item that sorts first in place.
pub(super) fn seek_sorted<'a>(
    list: &List<'a>,
    key: impl Fn(&UiNode) -> Option<String>,
    target: &str,
    what: &str,
) -> Seek<'a> {
    let keyed: Vec<(&'a UiNode, String)> = list
        .items
        .iter()
        .filter_map(|i| Some((*i, key(i)?)))
        .collect();
    if let Some((item, _)) = keyed.iter().find(|(_, k)| k == target) {
        return found(list, item, what);
    }
    let scrolls = list.node.scrollable;
    match (keyed.first(), keyed.last()) {
        (Some((_, first)), _) if target < first.as_str() && scrolls => {
            moving(list.scroll(false, format!("Scroll up to look for {what}.")))
        }
        (_, Some((_, last))) if target > last.as_str() && !list.at_end() => {
            moving(list.scroll(true, format!("Scroll down to look for {what}.")))
        }
        (None, _) if !list.at_end() => {
            moving(list.scroll(true, format!("Scroll down to look for {what}.")))
        }
        _ => Seek::Absent,
    }
}

/// Looks for an item matching `is_target` in an unsorted list by scanning
/// down; it is absent once the end shows without it. The scan starts where
/// the list is, which after a task's set-up is its top.
pub(super) fn seek_down<'a>(
    list: &List<'a>,
    is_target: impl Fn(&UiNode) -> bool,
    what: &str,
) -> Seek<'a> {
    match list.items.iter().find(|i| is_target(i)) {
        Some(item) => found(list, item, what),
        None if list.at_end() => Seek::Absent,
        None => moving(list.scroll(true, format!("Scroll down to look for {what}."))),
    }
}

fn moving<'a>(step: OracleStep) -> Seek<'a> {
    Seek::Move(Box::new(step))
}

fn found<'a>(list: &List<'a>, item: &'a UiNode, what: &str) -> Seek<'a> {
    if list.clipped(item) {
        moving(list.reveal(item, what))
    } else {
        Seek::Found(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, bounds: [i32; 4], clickable: bool) -> UiNode {
        UiNode {
            resource_id: id.to_string(),
            class: "android.view.View".into(),
            enabled: true,
            clickable,
            bounds,
            ..UiNode::default()
        }
    }

    fn with(mut parent: UiNode, children: Vec<UiNode>) -> UiNode {
        parent.children = children;
        parent
    }

    fn list(rows: &[[i32; 2]], scrollable: bool) -> UiNode {
        let mut l = with(
            node("app:id/list", [0, 100, 100, 1000], false),
            rows.iter()
                .map(|&[y1, y2]| node("app:id/item", [0, y1, 100, y2], true))
                .collect(),
        );
        l.scrollable = scrollable;
        l
    }

    #[test]
    fn a_tap_under_the_keyboard_hides_it_first() {
        let screen = with(
            node("", [0, 0, 100, 1000], false),
            vec![
                node("app:id/save", [0, 0, 100, 100], true),
                node("app:id/low", [0, 800, 100, 900], true),
                with(
                    node(KEYBOARD, [0, 700, 100, 1000], false),
                    vec![node(DELETE_KEY, [0, 900, 50, 1000], true)],
                ),
            ],
        );
        let save = screen.find_by_id("save").unwrap();
        let low = screen.find_by_id("low").unwrap();
        let del = screen.find_by_id(DELETE_KEY).unwrap();
        assert!(reachable(&screen, save) && reachable(&screen, del));
        assert!(!reachable(&screen, low), "under the keyboard window");
        assert_eq!(tap(&screen, low, "x").action, DeviceAction::Back);
        let step = tap(&screen, save, "Save.");
        assert_eq!(step.action, DeviceAction::Tap { at: point(50, 50) });
        assert_eq!(step.target.as_ref(), Some(save));
    }

    #[test]
    fn a_list_ends_where_more_space_is_left_than_between_rows() {
        let rows = |r: &[[i32; 2]], s| {
            let l = list(r, s);
            List::find(&with(node("", [0, 0, 100, 1000], false), vec![l]), "list")
                .unwrap()
                .at_end()
        };
        assert!(
            !rows(&[[100, 500], [500, 900], [900, 1000]], true),
            "runs past the edge"
        );
        assert!(
            rows(&[[100, 500], [500, 800]], true),
            "space after the last row"
        );
        assert!(
            !rows(&[[100, 480], [500, 880], [900, 980]], true),
            "edge inside a row gap"
        );
        assert!(
            rows(&[[100, 480], [500, 880]], true),
            "more space than a row gap"
        );
        assert!(
            rows(&[[100, 500], [500, 900], [900, 1000]], false),
            "nothing to scroll"
        );
    }

    #[test]
    fn sorted_seeking_scrolls_towards_the_key_and_knows_absence() {
        let screen = with(
            node("", [0, 0, 100, 1000], false),
            vec![list(&[[100, 400], [400, 700], [700, 1000]], true)],
        );
        let l = List::find(&screen, "list").unwrap();
        let keys = ["bob", "dan", "eve"];
        let key = |n: &UiNode| {
            let i = l.items.iter().position(|i| std::ptr::eq(*i, n))?;
            Some(keys[i].to_string())
        };
        assert!(matches!(seek_sorted(&l, key, "dan", "Dan"), Seek::Found(n) if n.bounds[1] == 400));
        assert!(matches!(seek_sorted(&l, key, "cat", "Cat"), Seek::Absent));
        let swipe = |s: Seek| match s {
            Seek::Move(step) => match step.action {
                DeviceAction::Swipe { from, to, .. } => from.y > to.y,
                other => panic!("{other:?}"),
            },
            _ => panic!("expected a scroll"),
        };
        assert!(
            !swipe(seek_sorted(&l, key, "amy", "Amy")),
            "up for an earlier key"
        );
        assert!(
            swipe(seek_sorted(&l, key, "zed", "Zed")),
            "down for a later key"
        );
    }

    #[test]
    fn filling_types_appends_or_deletes_what_does_not_fit() {
        let field = |text: &str, focused: bool| {
            let mut f = node("app:id/name", [0, 0, 100, 100], true);
            f.text = text.into();
            f.focused = focused;
            f
        };
        let screen = |f: UiNode| {
            with(
                node("", [0, 0, 100, 1000], false),
                vec![
                    f,
                    with(
                        node(KEYBOARD, [0, 700, 100, 1000], false),
                        vec![node(DELETE_KEY, [0, 900, 50, 1000], true)],
                    ),
                ],
            )
        };
        let fill_with = |text: &str, focused: bool| {
            let s = screen(field(text, focused));
            let f = s.find_by_id("name").unwrap();
            fill(&s, f, "Name", "Zoë", "name").map(|step| step.action)
        };
        assert_eq!(fill_with("Zoë", true), None);
        assert!(matches!(
            fill_with("Name", false),
            Some(DeviceAction::Tap { .. })
        ));
        assert_eq!(
            fill_with("Name", true),
            Some(DeviceAction::Type {
                text: "Zoë".into()
            }),
            "the hint is no text"
        );
        assert_eq!(
            fill_with("Zo", true),
            Some(DeviceAction::Type { text: "ë".into() })
        );
        assert_eq!(
            fill_with("Zoe", true),
            Some(DeviceAction::Tap { at: point(25, 950) }),
            "the delete key"
        );
    }
}
