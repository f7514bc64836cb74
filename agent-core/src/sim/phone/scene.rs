//! One frame of the screen as a tree of [`Element`]s: the single source from
//! which the UI tree, the pixels and touch handling are all derived.
//!
//! Every screen is rebuilt from state for each question asked of it
//! (`ui_tree`, `render`, a tap), so what the agent sees in the dump, what
//! is drawn and what a finger hits can never drift apart: they are three
//! readings of the same elements with the same clipped bounds.

use super::Key;
use super::apps::{AppId, AppMsg};
use crate::device::ui::UiNode;

pub(crate) type Color = [u8; 4];

/// A pixel rectangle, `x1,y1` inclusive and `x2,y2` exclusive, as Android
/// bounds are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Rect {
    pub x1: i32,
    pub y1: i32,
    pub x2: i32,
    pub y2: i32,
}

impl Rect {
    pub const fn new(x1: i32, y1: i32, x2: i32, y2: i32) -> Rect {
        Rect { x1, y1, x2, y2 }
    }

    pub fn xywh(x: i32, y: i32, w: i32, h: i32) -> Rect {
        Rect::new(x, y, x.saturating_add(w), y.saturating_add(h))
    }

    pub fn w(&self) -> i32 {
        self.x2 - self.x1
    }

    pub fn h(&self) -> i32 {
        self.y2 - self.y1
    }

    pub fn is_empty(&self) -> bool {
        self.x2 <= self.x1 || self.y2 <= self.y1
    }

    pub fn contains(&self, x: i32, y: i32) -> bool {
        x >= self.x1 && x < self.x2 && y >= self.y1 && y < self.y2
    }

    pub fn intersect(&self, o: Rect) -> Rect {
        Rect::new(
            self.x1.max(o.x1),
            self.y1.max(o.y1),
            self.x2.min(o.x2),
            self.y2.min(o.y2),
        )
    }

    /// The rectangle shrunk by `dx` on the left and right, `dy` on top and
    /// bottom.
    pub fn inset(&self, dx: i32, dy: i32) -> Rect {
        Rect::new(self.x1 + dx, self.y1 + dy, self.x2 - dx, self.y2 - dy)
    }

    pub fn center(&self) -> (i32, i32) {
        (self.x1 + self.w() / 2, self.y1 + self.h() / 2)
    }

    /// The top `h` pixels.
    pub fn top(&self, h: i32) -> Rect {
        Rect::new(self.x1, self.y1, self.x2, (self.y1 + h).min(self.y2))
    }

    /// The bottom `h` pixels.
    pub fn bottom(&self, h: i32) -> Rect {
        Rect::new(self.x1, (self.y2 - h).max(self.y1), self.x2, self.y2)
    }

    /// Everything below the top `h` pixels.
    pub fn below(&self, h: i32) -> Rect {
        Rect::new(self.x1, (self.y1 + h).min(self.y2), self.x2, self.y2)
    }

    pub fn left(&self, w: i32) -> Rect {
        Rect::new(self.x1, self.y1, (self.x1 + w).min(self.x2), self.y2)
    }

    pub fn right(&self, w: i32) -> Rect {
        Rect::new((self.x2 - w).max(self.x1), self.y1, self.x2, self.y2)
    }

    /// A `w`×`h` rectangle centred in this one.
    pub fn centered(&self, w: i32, h: i32) -> Rect {
        let (cx, cy) = self.center();
        Rect::xywh(cx - w / 2, cy - h / 2, w, h)
    }

    fn bounds(&self) -> [i32; 4] {
        [self.x1, self.y1, self.x2, self.y2]
    }
}

/// What touching an element asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Msg {
    /// Focus the text field with this resource id; `select_all` makes the
    /// next typed text replace its contents, as a number picker does.
    Focus {
        id: String,
        select_all: bool,
    },
    /// A navigation-bar button or keyboard key.
    Key(Key),
    /// A toolbar's "Navigate up" or a Cancel button: leaves the page even
    /// while the keyboard is up, where Back would only hide the keyboard.
    Up,
    /// A keyboard key that types a character.
    Type(char),
    Launch(AppId),
    /// Leave the recent-apps screen for an app.
    Resume(AppId),
    ClearRecents,
    App(AppMsg),
}

/// The value in `0..=max` a slider takes for a touch `pos` pixels along its
/// track of `track` pixels (clamped to the track): the nearest one.
pub(crate) fn seek_value(pos: i64, track: i64, max: u32) -> u32 {
    let track = track.max(1);
    let pos = pos.clamp(0, track);
    ((pos * i64::from(max) + track / 2) / track) as u32
}

/// A slider: a tap or drag at `x` maps to a value in `0..=max`.
#[derive(Debug, Clone)]
pub(crate) struct Seek {
    pub value: u32,
    pub max: u32,
    /// Horizontal padding of the track inside the element.
    pub pad: i32,
    pub make: fn(u32) -> Msg,
}

impl Seek {
    pub fn value_at(&self, rect: Rect, x: i32) -> u32 {
        let track = i64::from(rect.w() - 2 * self.pad);
        seek_value(
            i64::from(x) - i64::from(rect.x1 + self.pad),
            track,
            self.max,
        )
    }

    pub fn fraction(&self) -> f32 {
        if self.max == 0 {
            0.0
        } else {
            self.value as f32 / self.max as f32
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Align {
    #[default]
    Start,
    Center,
    End,
}

/// How an element's own text is drawn.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TextLook {
    /// Pixel size of the em square.
    pub size: f32,
    pub color: Color,
    pub bold: bool,
    pub align: Align,
    pub valign: Align,
    /// Inner horizontal padding.
    pub pad: i32,
    /// Wrap onto several lines instead of ellipsizing one.
    pub wrap: bool,
    /// The text is a field's hint, shown because the field is empty: the
    /// cursor then sits before it.
    pub hint: bool,
    /// Draw a text cursor after the text (focused field).
    pub cursor: bool,
    /// A soft dark shadow, for text over the wallpaper.
    pub shadow: bool,
}

/// Vector content drawn inside an element, under its text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Glyph {
    None,
    Switch {
        on: bool,
    },
    CheckBox {
        on: bool,
    },
    SeekBar {
        fraction: f32,
        pad: i32,
    },
    /// A coloured disc with a letter, in a square of `size` at the top
    /// centre (launcher) or centred (avatars, list icons).
    Badge {
        color: Color,
        letter: String,
        size: i32,
        top: bool,
    },
    /// A text symbol centred in the element (`+`, `←`, `✓`, `◁`).
    Symbol {
        text: String,
        size: f32,
        color: Color,
    },
    /// A trash can, drawn because the font has none.
    Trash {
        color: Color,
    },
    /// A magnifier, drawn because the font has none.
    Magnifier {
        color: Color,
    },
    Wifi {
        color: Color,
    },
    /// The Bluetooth rune, drawn because the font has none.
    Bluetooth {
        color: Color,
    },
    Battery {
        level: u8,
        color: Color,
    },
    /// A seeded landscape standing in for a photo.
    Photo {
        seed: u64,
    },
}

/// How an element is painted; text comes from the element itself.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Look {
    pub fill: Option<Color>,
    /// Vertical gradient end colour when `fill` is set.
    pub gradient: Option<Color>,
    pub radius: i32,
    pub stroke: Option<(Color, i32)>,
    /// A hairline along the bottom edge.
    pub divider: Option<Color>,
    pub glyph: Glyph,
    pub text: Option<TextLook>,
}

impl Default for Look {
    fn default() -> Self {
        Look {
            fill: None,
            gradient: None,
            radius: 0,
            stroke: None,
            divider: None,
            glyph: Glyph::None,
            text: None,
        }
    }
}

/// One view: its accessibility attributes, its paint and what touching it
/// does. `rect` is where it is laid out; what shows (and what the dump
/// reports) is `rect` clipped by its ancestors.
#[derive(Debug, Clone)]
pub(crate) struct Element {
    pub class: &'static str,
    pub id: String,
    pub text: String,
    pub desc: String,
    /// Set on window roots; descendants inherit it.
    pub package: Option<&'static str>,
    pub rect: Rect,
    pub enabled: bool,
    pub checkable: bool,
    pub checked: bool,
    pub focused: bool,
    pub selected: bool,
    pub look: Look,
    pub on_tap: Option<Msg>,
    pub on_long: Option<Msg>,
    pub seek: Option<Seek>,
    /// For a scroll container: the current offset and the largest.
    pub scroll: Option<(i32, i32)>,
    /// Swallows touches that no descendant takes, as a window or dialog
    /// does; without it touches fall through to what lies beneath.
    pub opaque: bool,
    pub children: Vec<Element>,
}

impl Element {
    pub fn new(class: &'static str, rect: Rect) -> Element {
        Element {
            class,
            id: String::new(),
            text: String::new(),
            desc: String::new(),
            package: None,
            rect,
            enabled: true,
            checkable: false,
            checked: false,
            focused: false,
            selected: false,
            look: Look::default(),
            on_tap: None,
            on_long: None,
            seek: None,
            scroll: None,
            opaque: false,
            children: Vec::new(),
        }
    }

    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.text = text.into();
        self
    }

    pub fn desc(mut self, desc: impl Into<String>) -> Self {
        self.desc = desc.into();
        self
    }

    pub fn look(mut self, look: Look) -> Self {
        self.look = look;
        self
    }

    pub fn on_tap(mut self, msg: Msg) -> Self {
        self.on_tap = Some(msg);
        self
    }

    pub fn on_long(mut self, msg: Msg) -> Self {
        self.on_long = Some(msg);
        self
    }

    pub fn child(mut self, child: Element) -> Self {
        self.children.push(child);
        self
    }

    pub fn children(mut self, children: impl IntoIterator<Item = Element>) -> Self {
        self.children.extend(children);
        self
    }

    fn clickable(&self) -> bool {
        self.on_tap.is_some() || self.seek.is_some()
    }

    fn touchable(&self) -> bool {
        self.clickable() || self.on_long.is_some()
    }

    /// The accessibility tree of this element, clipped to `clip`; `None`
    /// when nothing of it shows.
    pub fn to_node(&self, clip: Rect, package: &str, index: u32) -> Option<UiNode> {
        let visible = self.rect.intersect(clip);
        if visible.is_empty() {
            return None;
        }
        let package = self.package.unwrap_or(package);
        let mut children = Vec::new();
        for child in &self.children {
            if let Some(node) = child.to_node(visible, package, children.len() as u32) {
                children.push(node);
            }
        }
        let clickable = self.clickable();
        Some(UiNode {
            index,
            text: self.text.clone(),
            resource_id: self.id.clone(),
            class: self.class.to_string(),
            package: package.to_string(),
            content_desc: self.desc.clone(),
            checkable: self.checkable,
            checked: self.checked,
            clickable,
            enabled: self.enabled,
            focusable: clickable || self.focused,
            focused: self.focused,
            scrollable: self.scroll.is_some_and(|(_, max)| max > 0),
            long_clickable: self.on_long.is_some(),
            password: false,
            selected: self.selected,
            bounds: visible.bounds(),
            extra: Vec::new(),
            children,
        })
    }

    /// The element a finger at `(x, y)` reaches among those `want` accepts,
    /// searching the topmost first as Android's touch dispatch does.
    pub fn hit(&self, clip: Rect, x: i32, y: i32, want: &dyn Fn(&Element) -> bool) -> Hit<'_> {
        let visible = self.rect.intersect(clip);
        if !visible.contains(x, y) {
            return Hit::Miss;
        }
        for child in self.children.iter().rev() {
            match child.hit(visible, x, y, want) {
                Hit::Miss => continue,
                found => return found,
            }
        }
        if want(self) && self.enabled {
            Hit::Target(self, visible)
        } else if self.opaque || (want(self) && !self.enabled) {
            Hit::Blocked
        } else {
            Hit::Miss
        }
    }

    /// The element a tap or long press at `(x, y)` acts on.
    pub fn touch_target(&self, x: i32, y: i32) -> Option<(&Element, Rect)> {
        match self.hit(self.rect, x, y, &Element::touchable) {
            Hit::Target(e, r) => Some((e, r)),
            Hit::Blocked | Hit::Miss => None,
        }
    }

    /// The scroll container a drag starting at `(x, y)` moves.
    pub fn scroll_target(&self, x: i32, y: i32) -> Option<&Element> {
        match self.hit(self.rect, x, y, &|e: &Element| {
            e.scroll.is_some_and(|(_, max)| max > 0)
        }) {
            Hit::Target(e, _) => Some(e),
            Hit::Blocked | Hit::Miss => None,
        }
    }
}

pub(crate) enum Hit<'a> {
    Target(&'a Element, Rect),
    Blocked,
    Miss,
}

/// Lays out a vertical scrolling list: items are placed one under another,
/// shifted up by the scroll offset, and those entirely out of view dropped,
/// as a RecyclerView recycles them.
pub(crate) struct Column {
    viewport: Rect,
    offset: i32,
    cursor: i32,
    items: Vec<Element>,
}

impl Column {
    pub fn new(viewport: Rect, offset: i32) -> Column {
        Column {
            viewport,
            offset: offset.max(0),
            cursor: 0,
            items: Vec::new(),
        }
    }

    /// The rectangle of the next item of height `h`, full width.
    pub fn next(&mut self, h: i32) -> Rect {
        let top = self.viewport.y1 + self.cursor - self.offset;
        self.cursor += h;
        Rect::new(self.viewport.x1, top, self.viewport.x2, top + h)
    }

    /// Leaves `h` pixels of empty space.
    pub fn gap(&mut self, h: i32) {
        self.cursor += h;
    }

    pub fn push(&mut self, item: Element) {
        self.items.push(item);
    }

    /// The container, given an element for its class, id and look. The
    /// offset is clamped here because only now is the content height known;
    /// callers pass the stored offset and get the effective one back.
    pub fn finish(self, container: Element) -> Element {
        let max = (self.cursor - self.viewport.h()).max(0);
        let clamped = self.offset.min(max);
        let shift = self.offset - clamped;
        let viewport = self.viewport;
        let items = self.items.into_iter().filter_map(|mut item| {
            if shift != 0 {
                shift_y(&mut item, shift);
            }
            (!item.rect.intersect(viewport).is_empty()).then_some(item)
        });
        Element {
            rect: viewport,
            scroll: Some((clamped, max)),
            ..container
        }
        .children(items)
    }
}

fn shift_y(e: &mut Element, dy: i32) {
    e.rect.y1 += dy;
    e.rect.y2 += dy;
    for c in &mut e.children {
        shift_y(c, dy);
    }
}
