//! The accessibility view of a screen: [`UiNode`], the tree `uiautomator
//! dump` prints, with its XML writer and a tolerant XML reader.
//!
//! The same type serves both sides of the wire: the virtual phone builds it
//! from its widgets, and the host parses real devices' dumps into it. The
//! reader therefore keeps attributes this phone never writes (`drawing-order`,
//! `hint`, `NAF`, …) in [`UiNode::extra`] and ignores elements it does not
//! know, so a real dump parses and writes back attribute for attribute.

use quick_xml::XmlVersion;
use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// The class of the synthetic root [`parse_uiautomator_xml`] returns when a
/// dump holds several top-level windows (status bar, app, keyboard…);
/// [`to_uiautomator_xml`] writes such a root's children as top-level nodes.
pub const HIERARCHY_CLASS: &str = "hierarchy";

/// One `<node>` of a `uiautomator dump`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct UiNode {
    /// Position among its siblings, as uiautomator numbers them.
    pub index: u32,
    pub text: String,
    /// `package:id/name`, empty when the view has no id.
    pub resource_id: String,
    pub class: String,
    pub package: String,
    pub content_desc: String,
    pub checkable: bool,
    pub checked: bool,
    pub clickable: bool,
    pub enabled: bool,
    pub focusable: bool,
    pub focused: bool,
    pub scrollable: bool,
    pub long_clickable: bool,
    pub password: bool,
    pub selected: bool,
    /// `[x1, y1, x2, y2]` in screen pixels, the visible part of the view.
    pub bounds: [i32; 4],
    /// Attributes a device wrote that have no field above, in document order.
    pub extra: Vec<(String, String)>,
    pub children: Vec<UiNode>,
}

/// The longest label [`UiNode::label`] composes from a node's descendants,
/// in characters: what the decoding grammar admits for a blink region's
/// label, so a model trained on these labels can write them.
pub const MAX_LABEL_CHARS: usize = 48;

impl UiNode {
    /// What a person would call the element: its text, its description,
    /// else (for one a finger can use) the texts of its passive descendants
    /// joined with ", " as TalkBack speaks a clickable row without text of
    /// its own (a contact row is "Dmitri King", not "contact item"), as many
    /// as fit [`MAX_LABEL_CHARS`]; else the name part of its resource id,
    /// else its class.
    pub fn label(&self) -> String {
        if let Some(own) = self.own_words() {
            return own.to_string();
        }
        if self.clickable || self.long_clickable {
            let mut spoken = String::new();
            self.speak_children(&mut spoken);
            if !spoken.is_empty() {
                return spoken;
            }
        }
        match self.id_name() {
            "" => self
                .class
                .rsplit('.')
                .next()
                .unwrap_or_default()
                .to_string(),
            name => name.replace('_', " "),
        }
    }

    /// Its text, else its description, trimmed; `None` when both are blank.
    pub(crate) fn own_words(&self) -> Option<&str> {
        [&self.text, &self.content_desc]
            .into_iter()
            .map(|s| s.trim())
            .find(|s| !s.is_empty())
    }

    /// The name part of its resource id (`wifi_switch` of
    /// `com.android.settings:id/wifi_switch`); empty without an id.
    pub fn id_name(&self) -> &str {
        self.resource_id.rsplit('/').next().unwrap_or_default()
    }

    /// Appends the descendants' [`own_words`](Self::own_words) to `spoken`,
    /// in document order, until the next would take it past
    /// [`MAX_LABEL_CHARS`]; returns false once that happened. A clickable
    /// descendant is an element of its own (a row's switch, a dialog's
    /// button) and is left out with its subtree.
    fn speak_children(&self, spoken: &mut String) -> bool {
        for child in self
            .children
            .iter()
            .filter(|c| !c.clickable && !c.long_clickable)
        {
            if let Some(text) = child.own_words() {
                let sep = if spoken.is_empty() { "" } else { ", " };
                if spoken.chars().count() + sep.len() + text.chars().count() > MAX_LABEL_CHARS {
                    return false;
                }
                spoken.push_str(sep);
                spoken.push_str(text);
            }
            if !child.speak_children(spoken) {
                return false;
            }
        }
        true
    }

    /// The point a finger aims at: the middle of the bounds, rounded
    /// toward the first edge. Worked in `i64`, since a dump's bounds may
    /// span the whole `i32` range; the middle lies between the edges, so
    /// it is an `i32` again.
    pub fn center(&self) -> (i32, i32) {
        let mid = |a: i32, b: i32| {
            let (a, b) = (i64::from(a), i64::from(b));
            (a + (b - a) / 2) as i32
        };
        let [x1, y1, x2, y2] = self.bounds;
        (mid(x1, x2), mid(y1, y2))
    }

    /// The area of the bounds in square pixels (negative when one side is
    /// inverted), saturating: the sides of a dump's bounds may each be up to
    /// 2^32, whose square `i64` does not hold.
    pub fn area(&self) -> i64 {
        let [x1, y1, x2, y2] = self.bounds.map(i64::from);
        (x2 - x1).saturating_mul(y2 - y1)
    }

    pub fn contains(&self, x: i32, y: i32) -> bool {
        let [x1, y1, x2, y2] = self.bounds;
        x >= x1 && x < x2 && y >= y1 && y < y2
    }

    /// This node and all its descendants, parents before children.
    pub fn iter(&self) -> impl Iterator<Item = &UiNode> {
        let mut stack = vec![self];
        std::iter::from_fn(move || {
            let node = stack.pop()?;
            stack.extend(node.children.iter().rev());
            Some(node)
        })
    }

    /// The first node, in document order, that satisfies `pred`.
    pub fn find(&self, pred: impl Fn(&UiNode) -> bool) -> Option<&UiNode> {
        self.iter().find(|n| pred(n))
    }

    /// Every node, in document order, that satisfies `pred`.
    pub fn find_all(&self, pred: impl Fn(&UiNode) -> bool) -> Vec<&UiNode> {
        self.iter().filter(|n| pred(n)).collect()
    }

    /// The first node whose resource id is `id`, given either in full
    /// (`com.btl.settings:id/wifi_switch`) or as the part after `:id/`.
    pub fn find_by_id(&self, id: &str) -> Option<&UiNode> {
        self.find(|n| n.has_id(id))
    }

    /// The first node whose text is exactly `text`.
    pub fn find_by_text(&self, text: &str) -> Option<&UiNode> {
        self.find(|n| n.text == text)
    }

    /// The first node whose content description is exactly `desc`.
    pub fn find_by_desc(&self, desc: &str) -> Option<&UiNode> {
        self.find(|n| n.content_desc == desc)
    }

    /// Whether the resource id is `id`, in full or after its `:id/`.
    pub fn has_id(&self, id: &str) -> bool {
        self.resource_id == id
            || self
                .resource_id
                .split_once(":id/")
                .is_some_and(|(_, name)| name == id)
    }
}

/// Why a `uiautomator dump` could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UiXmlError {
    /// The text is not well-formed XML.
    #[error("malformed XML: {0}")]
    Xml(String),
    /// There is no `<hierarchy>` element.
    #[error("no <hierarchy> element in the dump")]
    NoHierarchy,
    /// The hierarchy holds no `<node>`.
    #[error("the hierarchy has no nodes")]
    Empty,
    /// A known attribute has a value of the wrong shape.
    #[error("attribute {name}=\"{value}\" is malformed")]
    BadAttribute { name: String, value: String },
    /// Nodes are nested deeper than [`MAX_UI_DEPTH`].
    #[error("nodes nested deeper than {MAX_UI_DEPTH} levels, at byte {at} of the dump")]
    TooDeep { at: u64 },
    /// The dump holds more than [`MAX_UI_NODES`] nodes.
    #[error("more than {MAX_UI_NODES} nodes, at byte {at} of the dump")]
    TooMany { at: u64 },
    /// Elements of any name are nested deeper than [`MAX_XML_DEPTH`].
    #[error("elements nested deeper than {MAX_XML_DEPTH} levels, at byte {at} of the dump")]
    ElementsTooDeep { at: u64 },
    /// A node has more than [`MAX_EXTRA_ATTRIBUTES`] attributes besides
    /// the ones [`UiNode`] has fields for.
    #[error(
        "a node with more than {MAX_EXTRA_ATTRIBUTES} attributes besides uiautomator's own, \
         at byte {at} of the dump"
    )]
    TooManyAttributes { at: u64 },
}

/// The deepest nesting of nodes a dump may have. Real screens stay far
/// shallower (Android lint's TooDeepLayout warns past 10 levels); the cap
/// keeps every recursive walk of a tree, its drop included, within the
/// stack when a dump is hostile.
pub const MAX_UI_DEPTH: usize = 256;

/// The most nodes a dump may have. A phone screen holds a few hundred, a
/// long web page a few thousand; the cap bounds the work of reading a
/// screen (which views cover which, `device::elements`) when a dump is
/// hostile.
pub const MAX_UI_NODES: usize = 20_000;

/// The deepest nesting of elements of any name, unknown wrappers around
/// nodes included: the XML reader keeps every open element's name and an
/// index to it, several times the three bytes of a tag such as `<x>`.
pub const MAX_XML_DEPTH: usize = 2 * MAX_UI_DEPTH;

/// The most attributes a node may have besides the 17 [`UiNode`] has
/// fields for: newer Android adds a few (`drawing-order`, `hint`,
/// `display-id`, …), and a node of thousands would cost some twenty times
/// their bytes in memory. Known attributes are not counted, so a dump
/// written back, which spells all 17 out, reads again.
pub const MAX_EXTRA_ATTRIBUTES: usize = 64;

/// The dump `uiautomator dump` writes for `root`: one line, the XML
/// declaration Android's serializer emits, then `<hierarchy rotation="0">`.
pub fn to_uiautomator_xml(root: &UiNode) -> String {
    let mut out = String::from(
        "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"0\">",
    );
    if root.class == HIERARCHY_CLASS {
        for window in &root.children {
            write_node(window, &mut out);
        }
    } else {
        write_node(root, &mut out);
    }
    out.push_str("</hierarchy>");
    out
}

fn write_node(node: &UiNode, out: &mut String) {
    let index = node.index.to_string();
    let bounds = format!(
        "[{},{}][{},{}]",
        node.bounds[0], node.bounds[1], node.bounds[2], node.bounds[3]
    );
    let flag = |b: bool| if b { "true" } else { "false" };
    let mut tag = BytesStart::new("node");
    let (text, resource_id, class, package, desc) = (
        xml_chars(&node.text),
        xml_chars(&node.resource_id),
        xml_chars(&node.class),
        xml_chars(&node.package),
        xml_chars(&node.content_desc),
    );
    // Values go through quick-xml's attribute escaping, which also encodes
    // newlines and tabs as character references, as Android's serializer does.
    for (name, value) in [
        ("index", index.as_str()),
        ("text", &text),
        ("resource-id", &resource_id),
        ("class", &class),
        ("package", &package),
        ("content-desc", &desc),
        ("checkable", flag(node.checkable)),
        ("checked", flag(node.checked)),
        ("clickable", flag(node.clickable)),
        ("enabled", flag(node.enabled)),
        ("focusable", flag(node.focusable)),
        ("focused", flag(node.focused)),
        ("scrollable", flag(node.scrollable)),
        ("long-clickable", flag(node.long_clickable)),
        ("password", flag(node.password)),
        ("selected", flag(node.selected)),
        ("bounds", &bounds),
    ] {
        tag.push_attribute((name, value));
    }
    for (name, value) in &node.extra {
        tag.push_attribute((name.as_str(), xml_chars(value).as_ref()));
    }
    out.push('<');
    out.push_str(&tag);
    if node.children.is_empty() {
        out.push_str(" />");
        return;
    }
    out.push('>');
    for child in &node.children {
        write_node(child, out);
    }
    out.push_str("</node>");
}

/// `s` with the characters XML cannot carry replaced by `.`, as
/// uiautomator's dumper does (`stripInvalidXMLChars`), so any text a field
/// holds still gives a well-formed dump.
fn xml_chars(s: &str) -> Cow<'_, str> {
    let bad = |c: char| {
        matches!(c as u32,
            0x0..=0x8 | 0xB | 0xC | 0xE..=0x1F | 0x7F..=0x84 | 0x86..=0x9F | 0xFDD0..=0xFDDF)
            || (c as u32 & 0xFFFE) == 0xFFFE
    };
    if s.chars().any(bad) {
        Cow::Owned(s.chars().map(|c| if bad(c) { '.' } else { c }).collect())
    } else {
        Cow::Borrowed(s)
    }
}

/// Reads a `uiautomator dump` back into nodes.
///
/// Text around the document is ignored, so `uiautomator dump /dev/tty`
/// output with its trailing "UI hierchary dumped to" line parses. A dump
/// with one top-level node returns that node; with several (newer Android
/// dumps every window) it returns a synthetic [`HIERARCHY_CLASS`] root whose
/// children are the windows and whose bounds enclose them.
pub fn parse_uiautomator_xml(xml: &str) -> Result<UiNode, UiXmlError> {
    let start = xml
        .find("<?xml")
        .or_else(|| xml.find("<hierarchy"))
        .ok_or(UiXmlError::NoHierarchy)?;
    let end = xml
        .rfind("</hierarchy>")
        .map(|i| i + "</hierarchy>".len())
        .filter(|&e| e > start)
        .unwrap_or(xml.len());
    let mut reader = Reader::from_str(&xml[start..end]);
    // The path from the hierarchy down to the node being read.
    let mut open: Vec<UiNode> = Vec::new();
    let mut windows: Vec<UiNode> = Vec::new();
    let mut seen_hierarchy = false;
    let too_deep = |reader: &Reader<&[u8]>| UiXmlError::TooDeep {
        at: start as u64 + reader.buffer_position(),
    };
    let mut nodes = 0usize;
    let mut count = |reader: &Reader<&[u8]>| {
        nodes += 1;
        match nodes > MAX_UI_NODES {
            true => Err(UiXmlError::TooMany {
                at: start as u64 + reader.buffer_position(),
            }),
            false => Ok(()),
        }
    };
    // Depth of elements that are neither `hierarchy` nor `node`; their
    // content is skipped so unknown wrappers cannot misplace nodes.
    let mut unknown_depth = 0usize;
    let mut depth = 0usize;
    let node_from = |tag: &BytesStart, reader: &Reader<&[u8]>| {
        node_from_tag(tag).map_err(|e| match e {
            UiXmlError::TooManyAttributes { .. } => UiXmlError::TooManyAttributes {
                at: start as u64 + reader.buffer_position(),
            },
            e => e,
        })
    };
    loop {
        let event = reader
            .read_event()
            .map_err(|e| UiXmlError::Xml(e.to_string()))?;
        match &event {
            Event::Start(_) if depth == MAX_XML_DEPTH => {
                return Err(UiXmlError::ElementsTooDeep {
                    at: start as u64 + reader.buffer_position(),
                });
            }
            Event::Start(_) => depth += 1,
            Event::End(_) => depth = depth.saturating_sub(1),
            _ => {}
        }
        match event {
            Event::Start(_) if unknown_depth > 0 => unknown_depth += 1,
            Event::Empty(_) if unknown_depth > 0 => {}
            Event::Start(tag) => match tag.name().as_ref() {
                "hierarchy" => seen_hierarchy = true,
                "node" if open.len() == MAX_UI_DEPTH => return Err(too_deep(&reader)),
                "node" => {
                    count(&reader)?;
                    open.push(node_from(&tag, &reader)?);
                }
                _ => unknown_depth = 1,
            },
            Event::Empty(tag) => match tag.name().as_ref() {
                "hierarchy" => seen_hierarchy = true,
                "node" if open.len() == MAX_UI_DEPTH => return Err(too_deep(&reader)),
                "node" => {
                    count(&reader)?;
                    attach(node_from(&tag, &reader)?, &mut open, &mut windows);
                }
                _ => {}
            },
            Event::End(_) if unknown_depth > 0 => unknown_depth -= 1,
            Event::End(tag) => {
                if tag.name().as_ref() == "node"
                    && let Some(node) = open.pop()
                {
                    attach(node, &mut open, &mut windows);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    // A dump cut short still yields the nodes read so far.
    while let Some(node) = open.pop() {
        attach(node, &mut open, &mut windows);
    }
    if !seen_hierarchy {
        return Err(UiXmlError::NoHierarchy);
    }
    match windows.len() {
        0 => Err(UiXmlError::Empty),
        1 => Ok(windows.remove(0)),
        _ => {
            let bounds = windows.iter().fold(windows[0].bounds, |[a, b, c, d], w| {
                [
                    a.min(w.bounds[0]),
                    b.min(w.bounds[1]),
                    c.max(w.bounds[2]),
                    d.max(w.bounds[3]),
                ]
            });
            Ok(UiNode {
                class: HIERARCHY_CLASS.to_string(),
                enabled: true,
                bounds,
                children: windows,
                ..UiNode::default()
            })
        }
    }
}

fn attach(node: UiNode, open: &mut [UiNode], windows: &mut Vec<UiNode>) {
    match open.last_mut() {
        Some(parent) => parent.children.push(node),
        None => windows.push(node),
    }
}

fn node_from_tag(tag: &BytesStart) -> Result<UiNode, UiXmlError> {
    let mut node = UiNode {
        enabled: true,
        ..UiNode::default()
    };
    for attr in tag.attributes().with_checks(false) {
        let attr = attr.map_err(|e| UiXmlError::Xml(e.to_string()))?;
        let name = attr.key.as_ref();
        let value = attr
            .normalized_value(XmlVersion::Implicit1_0)
            .map_err(|e| UiXmlError::Xml(e.to_string()))?
            .into_owned();
        let bad = || UiXmlError::BadAttribute {
            name: name.to_string(),
            value: value.clone(),
        };
        let flag = |v: &str| match v {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(bad()),
        };
        match name {
            "index" => node.index = value.trim().parse().map_err(|_| bad())?,
            "text" => node.text = value,
            "resource-id" => node.resource_id = value,
            "class" => node.class = value,
            "package" => node.package = value,
            "content-desc" => node.content_desc = value,
            "checkable" => node.checkable = flag(&value)?,
            "checked" => node.checked = flag(&value)?,
            "clickable" => node.clickable = flag(&value)?,
            "enabled" => node.enabled = flag(&value)?,
            "focusable" => node.focusable = flag(&value)?,
            "focused" => node.focused = flag(&value)?,
            "scrollable" => node.scrollable = flag(&value)?,
            "long-clickable" => node.long_clickable = flag(&value)?,
            "password" => node.password = flag(&value)?,
            "selected" => node.selected = flag(&value)?,
            "bounds" => node.bounds = parse_bounds(&value).ok_or_else(bad)?,
            // The caller knows where the tag ends.
            _ if node.extra.len() == MAX_EXTRA_ATTRIBUTES => {
                return Err(UiXmlError::TooManyAttributes { at: 0 });
            }
            _ => node.extra.push((name.to_string(), value)),
        }
    }
    Ok(node)
}

/// `[x1,y1][x2,y2]` into `[x1, y1, x2, y2]`.
fn parse_bounds(value: &str) -> Option<[i32; 4]> {
    let inner = value.trim().strip_prefix('[')?.strip_suffix(']')?;
    let (a, b) = inner.split_once("][")?;
    let pair = |s: &str| -> Option<(i32, i32)> {
        let (x, y) = s.split_once(',')?;
        Some((x.trim().parse().ok()?, y.trim().parse().ok()?))
    };
    let ((x1, y1), (x2, y2)) = (pair(a)?, pair(b)?);
    Some([x1, y1, x2, y2])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(text: &str, bounds: [i32; 4]) -> UiNode {
        UiNode {
            text: text.to_string(),
            class: "android.widget.TextView".into(),
            package: "com.example".into(),
            enabled: true,
            bounds,
            ..UiNode::default()
        }
    }

    /// The middle and area of bounds spanning the whole `i32` range, worked
    /// by hand: (2^31 − 1 − (−2^31)) / 2 = 2^31 − 1 (truncated), and
    /// −2^31 + that = −1; 4,294,967,295 · 3,000 = 12,884,901,885,000; the
    /// square of 4,294,967,295 is above `i64::MAX`, which the area stops at.
    #[test]
    fn the_middle_and_area_of_the_widest_bounds() {
        let node = |bounds| UiNode {
            bounds,
            ..UiNode::default()
        };
        let wide = node([i32::MIN, 0, i32::MAX, 3000]);
        assert_eq!(wide.center(), (-1, 1500));
        assert_eq!(wide.area(), 12_884_901_885_000);
        let whole = node([i32::MIN, i32::MIN, i32::MAX, i32::MAX]);
        assert_eq!(whole.center(), (-1, -1));
        assert_eq!(whole.area(), i64::MAX);
        assert_eq!(node([1, -3, 4, 0]).center(), (2, -2));
        assert_eq!(node([10, 0, 0, 5]).area(), -50);
    }

    #[test]
    fn labels_fall_back_from_text_to_description_to_spoken_children_to_id_to_class() {
        let mut n = node("", [0, 0, 1, 1]);
        n.class = "android.widget.ImageButton".into();
        assert_eq!(n.label(), "ImageButton");
        n.resource_id = "com.btl.contacts:id/contact_item".into();
        assert_eq!(n.label(), "contact item");
        // A row's children speak for it only when a finger can use it.
        n.children = vec![node(" D ", [0, 0, 1, 1]), node("", [0, 0, 1, 1]), {
            let mut name = node("", [0, 0, 1, 1]);
            name.content_desc = "Dmitri King".into();
            name
        }];
        assert_eq!(n.label(), "contact item");
        n.clickable = true;
        assert_eq!(n.label(), "D, Dmitri King");
        // Texts are taken while the label stays within 48 characters:
        // "D, Dmitri King" has 14, so a text of 33 more after ", " makes 49,
        // one too many, and one of 32 (characters, not bytes) just fits.
        n.children.push(node(&"x".repeat(33), [0, 0, 1, 1]));
        assert_eq!(n.label(), "D, Dmitri King");
        n.children.pop();
        n.children.push(node(&"é".repeat(32), [0, 0, 1, 1]));
        assert_eq!(n.label(), format!("D, Dmitri King, {}", "é".repeat(32)));
        // A clickable child is an element of its own, unspoken with what
        // it holds; a passive child's own children are spoken.
        n.children.pop();
        let mut switch = node("On", [0, 0, 1, 1]);
        switch.clickable = true;
        let mut summary = node("", [0, 0, 1, 1]);
        summary.children = vec![node("Home", [0, 0, 1, 1])];
        n.children.extend([switch, summary]);
        assert_eq!(n.label(), "D, Dmitri King, Home");
        n.content_desc = "Delete".into();
        assert_eq!(n.label(), "Delete");
        n.text = " Save ".into();
        assert_eq!(n.label(), "Save");
    }

    #[test]
    fn a_dump_nested_past_the_cap_is_refused_where_it_goes_too_deep() {
        let dump = |depth: usize, last: &str| {
            let head = "<hierarchy rotation=\"0\">";
            let open = r#"<node bounds="[0,0][1,1]">"#;
            let mut xml = format!("junk{head}{}{last}", open.repeat(depth - 1));
            xml.push_str(&"</node>".repeat(depth - 1));
            xml.push_str("</hierarchy>");
            xml
        };
        let leaf = r#"<node bounds="[0,0][1,1]" />"#;
        let mut deepest = parse_uiautomator_xml(&dump(MAX_UI_DEPTH, leaf)).unwrap();
        for _ in 1..MAX_UI_DEPTH {
            deepest = deepest.children.remove(0);
        }
        assert!(deepest.children.is_empty());
        // One level more, as an empty tag (28 bytes) or an open one (26):
        // the offending tag ends after "junk", the 24-byte hierarchy tag,
        // 256 open tags of 26 bytes and itself.
        for (last, len) in [(leaf, 28), (r#"<node bounds="[0,0][1,1]"></node>"#, 26)] {
            match parse_uiautomator_xml(&dump(MAX_UI_DEPTH + 1, last)) {
                Err(UiXmlError::TooDeep { at }) => {
                    assert_eq!(at, 4 + 24 + 256 * 26 + len, "{last}");
                }
                other => panic!("{last}: {other:?}"),
            }
        }
        // A million levels (what a hostile dump would send to overflow the
        // stack) are refused the same way.
        assert!(matches!(
            parse_uiautomator_xml(&dump(1_000_000, leaf)),
            Err(UiXmlError::TooDeep { .. })
        ));
    }

    /// 20,000 sibling nodes are read; one more is refused where its tag
    /// ends: after "x", the 24-byte hierarchy tag and 20,001 tags of 28
    /// bytes.
    #[test]
    fn a_dump_of_more_nodes_than_the_cap_is_refused_where_it_passes_it() {
        let leaf = r#"<node bounds="[0,0][1,1]" />"#;
        assert_eq!(leaf.len(), 28);
        let dump = |n: usize| format!("x<hierarchy rotation=\"0\">{}</hierarchy>", leaf.repeat(n));
        let root = parse_uiautomator_xml(&dump(MAX_UI_NODES)).unwrap();
        assert_eq!(root.children.len(), MAX_UI_NODES);
        assert_eq!(
            parse_uiautomator_xml(&dump(MAX_UI_NODES + 1)),
            Err(UiXmlError::TooMany {
                at: 1 + 24 + 20_001 * 28
            })
        );
    }

    /// Unknown elements nested past [`MAX_XML_DEPTH`], and a node of
    /// more than [`MAX_EXTRA_ATTRIBUTES`] unknown attributes, are refused where
    /// they pass the cap; at the caps they are read.
    #[test]
    fn unknown_nesting_and_attributes_past_their_caps_are_refused() {
        let head = "<hierarchy rotation=\"0\">";
        let wrapped = |depth: usize| {
            format!(
                "{head}{}<node bounds=\"[0,0][1,1]\" />{}</hierarchy>",
                "<x>".repeat(depth),
                "</x>".repeat(depth)
            )
        };
        // The hierarchy is one of the open elements.
        assert!(matches!(
            parse_uiautomator_xml(&wrapped(MAX_XML_DEPTH - 1)),
            Err(UiXmlError::Empty)
        ));
        assert_eq!(
            parse_uiautomator_xml(&wrapped(MAX_XML_DEPTH)),
            Err(UiXmlError::ElementsTooDeep {
                at: (24 + 3 * MAX_XML_DEPTH) as u64
            })
        );
        let node = |n: usize| {
            let extra: String = (0..n).map(|i| format!(" a{i}=\"\"")).collect();
            format!("{head}<node bounds=\"[0,0][1,1]\"{extra} /></hierarchy>")
        };
        let read = parse_uiautomator_xml(&node(MAX_EXTRA_ATTRIBUTES)).unwrap();
        assert_eq!(read.extra.len(), MAX_EXTRA_ATTRIBUTES);
        // Written back with all 17 known attributes spelt out, it reads again.
        assert_eq!(parse_uiautomator_xml(&to_uiautomator_xml(&read)), Ok(read));
        let xml = node(MAX_EXTRA_ATTRIBUTES + 1);
        assert_eq!(
            parse_uiautomator_xml(&xml),
            Err(UiXmlError::TooManyAttributes {
                at: xml.find(" />").unwrap() as u64 + 3
            })
        );
    }

    #[test]
    fn xml_escapes_special_characters_and_round_trips() {
        let mut root = node("", [0, 0, 1080, 2400]);
        root.class = "android.widget.FrameLayout".into();
        root.children = vec![
            UiNode {
                index: 0,
                content_desc: "Tom & \"Jerry\" <3 'x'".into(),
                checkable: true,
                checked: true,
                clickable: true,
                ..node("a < b > c & d", [0, 0, 10, 20])
            },
            UiNode {
                index: 1,
                resource_id: "com.example:id/body".into(),
                ..node("line one\nline two\ttab · Zoë 東京", [-5, 10, 1085, 2400])
            },
        ];
        let xml = to_uiautomator_xml(&root);
        assert!(xml.starts_with(
            "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"0\"><node index=\"0\" text=\"\" resource-id=\"\" class=\"android.widget.FrameLayout\""
        ));
        assert!(xml.contains("text=\"a &lt; b &gt; c &amp; d\""), "{xml}");
        assert!(
            xml.contains("content-desc=\"Tom &amp; &quot;Jerry&quot; &lt;3 &apos;x&apos;\""),
            "{xml}"
        );
        assert!(xml.contains("line one&#10;line two&#9;tab"), "{xml}");
        assert!(xml.contains("bounds=\"[-5,10][1085,2400]\" />"), "{xml}");
        assert!(xml.ends_with("</node></hierarchy>"));
        assert_eq!(parse_uiautomator_xml(&xml), Ok(root.clone()));
        // Characters XML cannot carry become '.', as uiautomator writes them.
        root.children[0].text = "a\u{1}b\u{1b}c\u{ffff}".into();
        let parsed = parse_uiautomator_xml(&to_uiautomator_xml(&root)).unwrap();
        assert_eq!(parsed.children[0].text, "a.b.c.");
    }

    /// The shape of an Android 14 emulator's `uiautomator dump /dev/tty`: every
    /// window at top level, attributes this phone never writes (`drawing-order`,
    /// `hint`, `display-id`, `NAF`), and the tool's message after the document.
    const REAL_DUMP: &str = concat!(
        "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>",
        "<hierarchy rotation=\"0\">",
        "<node index=\"0\" text=\"\" resource-id=\"\" class=\"android.widget.FrameLayout\" package=\"com.android.systemui\" ",
        "content-desc=\"\" checkable=\"false\" checked=\"false\" clickable=\"false\" enabled=\"true\" focusable=\"false\" ",
        "focused=\"false\" scrollable=\"false\" long-clickable=\"false\" password=\"false\" selected=\"false\" ",
        "bounds=\"[0,0][1080,136]\" drawing-order=\"0\" hint=\"\" display-id=\"0\">",
        "<node index=\"0\" text=\"12:04\" resource-id=\"com.android.systemui:id/clock\" class=\"android.widget.TextView\" ",
        "package=\"com.android.systemui\" content-desc=\"12:04 PM\" checkable=\"false\" checked=\"false\" clickable=\"false\" ",
        "enabled=\"true\" focusable=\"false\" focused=\"false\" scrollable=\"false\" long-clickable=\"false\" password=\"false\" ",
        "selected=\"false\" bounds=\"[58,37][166,99]\" drawing-order=\"2\" hint=\"\" display-id=\"0\" />",
        "</node>",
        "<node index=\"0\" text=\"\" resource-id=\"\" class=\"android.widget.FrameLayout\" package=\"com.google.android.apps.messaging\" ",
        "content-desc=\"\" checkable=\"false\" checked=\"false\" clickable=\"false\" enabled=\"true\" focusable=\"false\" ",
        "focused=\"false\" scrollable=\"false\" long-clickable=\"false\" password=\"false\" selected=\"false\" ",
        "bounds=\"[0,0][1080,2400]\" drawing-order=\"0\" hint=\"\" display-id=\"0\">",
        "<node index=\"0\" text=\"Text message\" resource-id=\"com.google.android.apps.messaging:id/compose_message_text\" ",
        "class=\"android.widget.EditText\" package=\"com.google.android.apps.messaging\" content-desc=\"\" checkable=\"false\" ",
        "checked=\"false\" clickable=\"true\" enabled=\"true\" focusable=\"true\" focused=\"true\" scrollable=\"false\" ",
        "long-clickable=\"true\" password=\"false\" selected=\"false\" bounds=\"[173,2144][868,2270]\" drawing-order=\"3\" ",
        "hint=\"Text message\" display-id=\"0\" />",
        "<node NAF=\"true\" index=\"1\" text=\"\" resource-id=\"\" class=\"android.widget.ImageButton\" ",
        "package=\"com.google.android.apps.messaging\" content-desc=\"\" checkable=\"false\" checked=\"false\" clickable=\"true\" ",
        "enabled=\"true\" focusable=\"true\" focused=\"false\" scrollable=\"false\" long-clickable=\"false\" password=\"false\" ",
        "selected=\"false\" bounds=\"[0,2144][126,2270]\" drawing-order=\"1\" hint=\"\" display-id=\"0\" />",
        "</node>",
        "</hierarchy>",
        "UI hierchary dumped to: /dev/tty\n",
    );

    #[test]
    fn a_real_multi_window_dump_parses_with_unknown_attributes_kept() {
        let root = parse_uiautomator_xml(REAL_DUMP).unwrap();
        assert_eq!(root.class, HIERARCHY_CLASS);
        assert_eq!(root.bounds, [0, 0, 1080, 2400]);
        assert_eq!(root.children.len(), 2);
        let field = root.find_by_id("compose_message_text").unwrap();
        assert!(field.focused && field.clickable && field.long_clickable);
        assert_eq!(field.center(), (520, 2207));
        assert_eq!(
            field.extra,
            [
                ("drawing-order", "3"),
                ("hint", "Text message"),
                ("display-id", "0")
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
        );
        let naf = root
            .find(|n| n.class == "android.widget.ImageButton")
            .unwrap();
        assert_eq!(naf.extra[0], ("NAF".to_string(), "true".to_string()));
        assert_eq!(root.find_by_text("12:04").unwrap().content_desc, "12:04 PM");
        // Writing it back and reading again changes nothing.
        assert_eq!(parse_uiautomator_xml(&to_uiautomator_xml(&root)), Ok(root));
    }

    #[test]
    fn malformed_dumps_are_errors_not_panics() {
        assert_eq!(
            parse_uiautomator_xml("ERROR: null root node"),
            Err(UiXmlError::NoHierarchy)
        );
        assert_eq!(
            parse_uiautomator_xml("<hierarchy rotation=\"0\"></hierarchy>"),
            Err(UiXmlError::Empty)
        );
        assert_eq!(
            parse_uiautomator_xml("<hierarchy><node bounds=\"[0,0][1,\" /></hierarchy>"),
            Err(UiXmlError::BadAttribute {
                name: "bounds".into(),
                value: "[0,0][1,".into()
            })
        );
        assert!(matches!(
            parse_uiautomator_xml("<hierarchy><node clickable=\"yes\" /></hierarchy>"),
            Err(UiXmlError::BadAttribute { .. })
        ));
        assert!(matches!(
            parse_uiautomator_xml("<hierarchy><node text=\"a&bogus;\" /></hierarchy>"),
            Err(UiXmlError::Xml(_))
        ));
        // A dump cut off mid-way still yields what was read.
        let cut = "<hierarchy rotation=\"0\"><node index=\"0\" text=\"a\" bounds=\"[0,0][5,5]\"><node text=\"b\" />";
        let root = parse_uiautomator_xml(cut).unwrap();
        assert_eq!(root.children[0].text, "b");
    }
}
