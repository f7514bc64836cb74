//! The phone's widget kit: theme colours, the build context [`Cx`] and
//! constructors for the standard Android views (TextView, Button, EditText,
//! Switch, SeekBar, toolbars, FABs, list rows, alert dialogs).
//!
//! Apps compose screens only from these, so every screen shares one look and
//! every view carries the class, ids and flags a real app's view would have.
//! Sizes are given in dp/sp and scaled by the configured density here.

use super::scene::{Align, Color, Element, Glyph, Look, Msg, Rect, Seek, TextLook};

pub(crate) const PRIMARY: Color = [0x67, 0x50, 0xA4, 255];
pub(crate) const ON_PRIMARY: Color = [255, 255, 255, 255];
pub(crate) const PRIMARY_CONTAINER: Color = [0xEA, 0xDD, 0xFF, 255];
pub(crate) const ON_PRIMARY_CONTAINER: Color = [0x21, 0x00, 0x5D, 255];
pub(crate) const SURFACE: Color = [0xFF, 0xFB, 0xFE, 255];
pub(crate) const SURFACE_BAR: Color = [0xF3, 0xED, 0xF7, 255];
pub(crate) const TEXT: Color = [0x1D, 0x1B, 0x20, 255];
pub(crate) const TEXT_2: Color = [0x49, 0x45, 0x4F, 255];
pub(crate) const HINT: Color = [0x79, 0x74, 0x7E, 255];
pub(crate) const OUTLINE: Color = [0x79, 0x74, 0x7E, 255];
pub(crate) const DIVIDER: Color = [0xE7, 0xE0, 0xEC, 255];
pub(crate) const SCRIM: Color = [0, 0, 0, 0x73];
pub(crate) const ERROR: Color = [0xB3, 0x26, 0x1E, 255];
pub(crate) const WHITE: Color = [255, 255, 255, 255];

/// What a screen builder needs to know besides app data.
pub(crate) struct Cx<'a> {
    /// Pixels per dp.
    pub scale: f32,
    /// The area the app may draw in: below the status bar, above the
    /// navigation bar and the keyboard.
    pub content: Rect,
    /// Resource id of the focused text field, if any.
    pub focus: Option<&'a str>,
    pub now_ms: u64,
}

impl Cx<'_> {
    pub fn dp(&self, v: f32) -> i32 {
        (v * self.scale).round() as i32
    }

    /// Text size in pixels (font scale is 1).
    pub fn sp(&self, v: f32) -> f32 {
        v * self.scale
    }
}

/// `package:id/name`.
pub(crate) fn rid(package: &str, name: &str) -> String {
    format!("{package}:id/{name}")
}

pub(crate) fn text_look(cx: &Cx, size_sp: f32, color: Color) -> TextLook {
    TextLook {
        size: cx.sp(size_sp),
        color,
        bold: false,
        align: Align::Start,
        valign: Align::Center,
        pad: 0,
        wrap: false,
        hint: false,
        cursor: false,
        shadow: false,
    }
}

/// A TextView.
pub(crate) fn label(rect: Rect, id: String, text: impl Into<String>, look: TextLook) -> Element {
    Element::new("android.widget.TextView", rect)
        .id(id)
        .text(text)
        .look(Look {
            text: Some(look),
            ..Look::default()
        })
}

/// A filled Button.
pub(crate) fn button(cx: &Cx, rect: Rect, id: String, text: &str, msg: Msg) -> Element {
    pill_button(cx, rect, id, text, msg, Some(PRIMARY))
}

/// A Button drawn as text only, as dialogs and toolbars use.
pub(crate) fn text_button(cx: &Cx, rect: Rect, id: String, text: &str, msg: Msg) -> Element {
    pill_button(cx, rect, id, text, msg, None)
}

/// A Material pill-shaped Button: bold centred text, on the primary colour
/// when `fill` is given, in it otherwise.
fn pill_button(
    cx: &Cx,
    rect: Rect,
    id: String,
    text: &str,
    msg: Msg,
    fill: Option<Color>,
) -> Element {
    let ink = if fill.is_some() { ON_PRIMARY } else { PRIMARY };
    let mut look = text_look(cx, 14.0, ink);
    look.bold = true;
    look.align = Align::Center;
    Element::new("android.widget.Button", rect)
        .id(id)
        .text(text)
        .on_tap(msg)
        .look(Look {
            fill,
            radius: rect.h() / 2,
            text: Some(look),
            ..Look::default()
        })
}

/// An ImageButton: no text, a content description, a drawn symbol.
pub(crate) fn icon_button(rect: Rect, id: String, desc: &str, glyph: Glyph, msg: Msg) -> Element {
    Element::new("android.widget.ImageButton", rect)
        .id(id)
        .desc(desc)
        .on_tap(msg)
        .look(Look {
            glyph,
            ..Look::default()
        })
}

pub(crate) fn symbol(cx: &Cx, text: &str, size_sp: f32, color: Color) -> Glyph {
    Glyph::Symbol {
        text: text.to_string(),
        size: cx.sp(size_sp),
        color,
    }
}

/// An EditText. Like Android's accessibility text, an empty field reports
/// its hint as its text.
pub(crate) fn edit_text(
    cx: &Cx,
    rect: Rect,
    id: String,
    value: &str,
    hint: &str,
    multiline: bool,
) -> Element {
    edit(cx, rect, id, value, hint, multiline, false)
}

/// An EditText whose contents are replaced by the first text typed after
/// focusing it, as a number picker's field is.
pub(crate) fn number_field(cx: &Cx, rect: Rect, id: String, value: &str) -> Element {
    let mut e = edit(cx, rect, id, value, "", false, true);
    if let Some(t) = e.look.text.as_mut() {
        t.size = cx.sp(40.0);
        t.align = Align::Center;
        t.pad = 0;
    }
    e
}

fn edit(
    cx: &Cx,
    rect: Rect,
    id: String,
    value: &str,
    hint: &str,
    multiline: bool,
    select_all: bool,
) -> Element {
    let focused = cx.focus == Some(id.as_str());
    let showing_hint = value.is_empty();
    let mut look = text_look(cx, 16.0, if showing_hint { HINT } else { TEXT });
    look.pad = cx.dp(16.0);
    look.wrap = multiline;
    look.valign = if multiline {
        Align::Start
    } else {
        Align::Center
    };
    look.hint = showing_hint;
    look.cursor = focused;
    let stroke = if focused {
        (PRIMARY, cx.dp(2.0))
    } else {
        (OUTLINE, cx.dp(1.0).max(1))
    };
    let mut e = Element::new("android.widget.EditText", rect)
        .id(id.clone())
        .text(if showing_hint { hint } else { value })
        .on_tap(Msg::Focus { id, select_all })
        .look(Look {
            fill: Some(WHITE),
            radius: cx.dp(4.0),
            stroke: Some(stroke),
            text: Some(look),
            ..Look::default()
        });
    e.focused = focused;
    e
}

/// A Switch named `name` (its content description), as an accessible app
/// labels a control that has no text of its own: TalkBack then reads what it
/// switches ("Wi-Fi", the alarm's time), not "switch" or its resource id.
/// Tapping it sends `msg`.
pub(crate) fn switch(rect: Rect, id: String, name: &str, on: bool, msg: Msg) -> Element {
    checkable("android.widget.Switch", rect, id, on, Glyph::Switch { on })
        .desc(name)
        .on_tap(msg)
}

/// A CheckBox showing a selection; the item around it takes the taps.
pub(crate) fn checkbox(rect: Rect, id: String, on: bool) -> Element {
    checkable(
        "android.widget.CheckBox",
        rect,
        id,
        on,
        Glyph::CheckBox { on },
    )
}

/// A two-state widget drawn as `glyph`, checked when `on`.
fn checkable(class: &'static str, rect: Rect, id: String, on: bool, glyph: Glyph) -> Element {
    let mut e = Element::new(class, rect).id(id).look(Look {
        glyph,
        ..Look::default()
    });
    e.checkable = true;
    e.checked = on;
    e
}

/// A SeekBar; a tap or a drag along it sends `make(value)`.
pub(crate) fn seekbar(
    cx: &Cx,
    rect: Rect,
    id: String,
    desc: &str,
    value: u32,
    max: u32,
    make: fn(u32) -> Msg,
) -> Element {
    let pad = cx.dp(12.0);
    let seek = Seek {
        value,
        max,
        pad,
        make,
    };
    let fraction = seek.fraction();
    let mut e = Element::new("android.widget.SeekBar", rect)
        .id(id)
        .desc(desc)
        .look(Look {
            glyph: Glyph::SeekBar { fraction, pad },
            ..Look::default()
        });
    e.seek = Some(seek);
    e
}

/// Height of a toolbar.
pub(crate) fn bar_height(cx: &Cx) -> i32 {
    cx.dp(64.0)
}

/// A toolbar at the top of the content area: an optional "Navigate up"
/// button (it acts as Back), a title, and action views placed from the
/// right edge in order.
pub(crate) fn app_bar(
    cx: &Cx,
    package: &str,
    title: &str,
    up: bool,
    actions: Vec<Element>,
) -> Element {
    let bar = cx.content.top(bar_height(cx));
    let mut left = bar.x1 + cx.dp(16.0);
    let mut children = Vec::new();
    if up {
        let r = Rect::xywh(
            bar.x1 + cx.dp(4.0),
            bar.y1 + cx.dp(8.0),
            cx.dp(48.0),
            cx.dp(48.0),
        );
        children.push(icon_button(
            r,
            String::new(),
            "Navigate up",
            symbol(cx, "←", 24.0, TEXT),
            Msg::Up,
        ));
        left = r.x2 + cx.dp(8.0);
    }
    let mut right = bar.x2 - cx.dp(8.0);
    let mut placed = Vec::new();
    for mut action in actions {
        let w = action.rect.w();
        let h = action.rect.h();
        let r = Rect::xywh(right - w, bar.y1 + (bar.h() - h) / 2, w, h);
        move_to(&mut action, r);
        right = r.x1 - cx.dp(4.0);
        placed.push(action);
    }
    let mut look = text_look(cx, 22.0, TEXT);
    look.pad = 0;
    children.push(label(
        Rect::new(left, bar.y1, right, bar.y2),
        rid(package, "toolbar_title"),
        title,
        look,
    ));
    children.extend(placed.into_iter().rev());
    Element::new("android.view.ViewGroup", bar)
        .id(rid(package, "toolbar"))
        .look(Look {
            fill: Some(SURFACE_BAR),
            ..Look::default()
        })
        .children(children)
}

/// Moves an element and its subtree so its rectangle becomes `to`'s origin.
fn move_to(e: &mut Element, to: Rect) {
    let (dx, dy) = (to.x1 - e.rect.x1, to.y1 - e.rect.y1);
    shift(e, dx, dy);
}

fn shift(e: &mut Element, dx: i32, dy: i32) {
    e.rect = Rect::new(
        e.rect.x1 + dx,
        e.rect.y1 + dy,
        e.rect.x2 + dx,
        e.rect.y2 + dy,
    );
    for c in &mut e.children {
        shift(c, dx, dy);
    }
}

/// A toolbar action button of the usual size, placed by [`app_bar`].
pub(crate) fn bar_icon(cx: &Cx, id: String, desc: &str, glyph: Glyph, msg: Msg) -> Element {
    icon_button(
        Rect::xywh(0, 0, cx.dp(48.0), cx.dp(48.0)),
        id,
        desc,
        glyph,
        msg,
    )
}

/// A toolbar text action ("Save"), placed by [`app_bar`].
pub(crate) fn bar_text_button(cx: &Cx, id: String, text: &str, msg: Msg) -> Element {
    button(
        cx,
        Rect::xywh(0, 0, cx.dp(80.0), cx.dp(40.0)),
        id,
        text,
        msg,
    )
}

/// The floating action button at the bottom right of the content area.
pub(crate) fn fab(cx: &Cx, id: String, desc: &str, msg: Msg) -> Element {
    let size = cx.dp(56.0);
    let margin = cx.dp(16.0);
    let r = Rect::xywh(
        cx.content.x2 - margin - size,
        cx.content.y2 - margin - size,
        size,
        size,
    );
    Element::new("android.widget.ImageButton", r)
        .id(id)
        .desc(desc)
        .on_tap(msg)
        .look(Look {
            fill: Some(PRIMARY_CONTAINER),
            radius: cx.dp(16.0),
            glyph: symbol(cx, "+", 28.0, ON_PRIMARY_CONTAINER),
            ..Look::default()
        })
}

/// A list row: optional leading badge, a title, an optional summary under
/// it and an optional trailing widget, with a divider below.
pub(crate) struct Row<'a> {
    pub id: String,
    pub title: &'a str,
    pub summary: Option<&'a str>,
    pub badge: Option<(Color, String)>,
    pub trailing: Option<Element>,
    pub on_tap: Option<Msg>,
}

pub(crate) fn row(cx: &Cx, rect: Rect, row: Row) -> Element {
    let pad = cx.dp(16.0);
    let mut left = rect.x1 + pad;
    let mut children = Vec::new();
    if let Some((color, letter)) = row.badge {
        let size = cx.dp(40.0);
        let r = Rect::xywh(left, rect.y1 + (rect.h() - size) / 2, size, size);
        children.push(Element::new("android.widget.ImageView", r).look(Look {
            glyph: Glyph::Badge {
                color,
                letter,
                size,
                top: false,
            },
            ..Look::default()
        }));
        left = r.x2 + pad;
    }
    let mut right = rect.x2 - pad;
    let trailing = row.trailing.map(|mut t| {
        let (w, h) = (t.rect.w(), t.rect.h());
        let r = Rect::xywh(right - w, rect.y1 + (rect.h() - h) / 2, w, h);
        move_to(&mut t, r);
        right = r.x1 - pad;
        t
    });
    let text_area = Rect::new(left, rect.y1, right, rect.y2);
    match row.summary {
        Some(summary) => {
            let half = rect.h() / 2;
            let title = Rect::new(left, rect.y1 + half - cx.dp(24.0), right, rect.y1 + half);
            let sub = Rect::new(left, rect.y1 + half, right, rect.y1 + half + cx.dp(22.0));
            children.push(label(
                title,
                "android:id/title".into(),
                row.title,
                text_look(cx, 16.0, TEXT),
            ));
            children.push(label(
                sub,
                "android:id/summary".into(),
                summary,
                text_look(cx, 14.0, TEXT_2),
            ));
        }
        None => children.push(label(
            text_area,
            "android:id/title".into(),
            row.title,
            text_look(cx, 16.0, TEXT),
        )),
    }
    children.extend(trailing);
    let mut e = Element::new("android.widget.LinearLayout", rect)
        .id(row.id)
        .look(Look {
            divider: Some(DIVIDER),
            ..Look::default()
        })
        .children(children);
    e.on_tap = row.on_tap;
    e
}

/// A modal alert dialog over the content area: the dimmed backdrop cancels
/// it when touched, as Android's AlertDialog does.
pub(crate) fn dialog(
    cx: &Cx,
    title: &str,
    message: &str,
    cancel: Msg,
    confirm: (&str, Msg),
) -> Element {
    let area = cx.content;
    let w = (area.w() - cx.dp(48.0)).min(cx.dp(400.0));
    let h = cx.dp(200.0);
    let card = area.centered(w, h);
    let inner = card.inset(cx.dp(24.0), cx.dp(24.0));
    let mut title_look = text_look(cx, 22.0, TEXT);
    title_look.valign = Align::Start;
    let mut msg_look = text_look(cx, 14.0, TEXT_2);
    msg_look.valign = Align::Start;
    msg_look.wrap = true;
    let bh = cx.dp(40.0);
    let bw = cx.dp(88.0);
    let buttons_y = inner.y2 - bh;
    let confirm_r = Rect::xywh(inner.x2 - bw, buttons_y, bw, bh);
    let cancel_r = Rect::xywh(confirm_r.x1 - cx.dp(8.0) - bw, buttons_y, bw, bh);
    let mut panel = Element::new("android.widget.LinearLayout", card)
        .id("android:id/parentPanel")
        .look(Look {
            fill: Some(SURFACE_BAR),
            radius: cx.dp(28.0),
            ..Look::default()
        })
        .child(label(
            inner.top(cx.dp(32.0)),
            "android:id/alertTitle".into(),
            title,
            title_look,
        ))
        .child(label(
            Rect::new(
                inner.x1,
                inner.y1 + cx.dp(44.0),
                inner.x2,
                buttons_y - cx.dp(8.0),
            ),
            "android:id/message".into(),
            message,
            msg_look,
        ))
        .child(text_button(
            cx,
            cancel_r,
            "android:id/button2".into(),
            "Cancel",
            cancel.clone(),
        ))
        .child(text_button(
            cx,
            confirm_r,
            "android:id/button1".into(),
            confirm.0,
            confirm.1,
        ));
    panel.opaque = true;
    let mut scrim = Element::new("android.widget.FrameLayout", area)
        .on_tap(cancel)
        .look(Look {
            fill: Some(SCRIM),
            ..Look::default()
        })
        .child(panel);
    scrim.opaque = true;
    scrim
}

/// An app's content root filling the content area with the app background.
pub(crate) fn content_root(cx: &Cx) -> Element {
    Element::new("android.widget.FrameLayout", cx.content)
        .id("android:id/content")
        .look(Look {
            fill: Some(SURFACE),
            ..Look::default()
        })
}

/// A vertical scroll container element for [`super::scene::Column::finish`].
pub(crate) fn scroller(class: &'static str, id: String) -> Element {
    Element::new(class, Rect::default()).id(id)
}
