//! System UI drawn around every app: the status bar (clock, radios,
//! battery), the three-button navigation bar, and the on-screen keyboard.
//!
//! They belong to other packages than the app (`com.android.systemui`, the
//! keyboard's `com.btl.inputmethod`), as their windows do on a device, and
//! swallow touches that none of their buttons take.

use super::Key;
use super::scene::{Align, Color, Element, Glyph, Look, Msg, Rect};
use super::state::PhoneState;
use super::system::clock_hhmm;
use super::widgets::{Cx, SURFACE_BAR, TEXT, label, rid, symbol, text_look};

pub(crate) const SYSTEMUI: &str = "com.android.systemui";
pub(crate) const KEYBOARD: &str = "com.btl.inputmethod";

/// Heights in dp of the bars and the keyboard.
pub(crate) const STATUS_BAR_DP: f32 = 28.0;
pub(crate) const NAV_BAR_DP: f32 = 48.0;
pub(crate) const KEYBOARD_DP: f32 = 264.0;

/// The status bar; `light` draws white content for the wallpaper.
pub(crate) fn status_bar(
    cx: &Cx,
    rect: Rect,
    state: &PhoneState,
    now_ms: u64,
    light: bool,
) -> Element {
    let ink: Color = if light { [255, 255, 255, 255] } else { TEXT };
    let pad = cx.dp(16.0);
    let mut clock = text_look(cx, 14.0, ink);
    clock.bold = true;
    clock.shadow = light;
    let mut children = vec![label(
        Rect::new(rect.x1 + pad, rect.y1, rect.x1 + pad + cx.dp(64.0), rect.y2),
        rid(SYSTEMUI, "clock"),
        clock_hhmm(now_ms),
        clock,
    )];
    let icon = cx.dp(20.0);
    let mut right = rect.x2 - pad;
    let mut pct = text_look(cx, 13.0, ink);
    pct.align = Align::End;
    pct.shadow = light;
    let pct_r = Rect::new(right - cx.dp(36.0), rect.y1, right, rect.y2);
    right = pct_r.x1;
    let mut place = |glyph: Glyph, id: &str, desc: String| {
        let r = Rect::new(right - icon, rect.y1, right, rect.y2);
        right = r.x1 - cx.dp(4.0);
        Element::new("android.widget.ImageView", r)
            .id(rid(SYSTEMUI, id))
            .desc(desc)
            .look(Look {
                glyph,
                ..Look::default()
            })
    };
    let level = state.battery_level;
    let mut icons = vec![place(
        Glyph::Battery { level, color: ink },
        "battery",
        format!("Battery {level} percent."),
    )];
    let s = &state.settings;
    if s.wifi {
        icons.push(place(
            Glyph::Wifi { color: ink },
            "wifi_signal",
            "Wi-Fi signal full.".into(),
        ));
    }
    if s.bluetooth {
        icons.push(place(
            Glyph::Bluetooth { color: ink },
            "bluetooth",
            "Bluetooth on.".into(),
        ));
    }
    if s.airplane_mode {
        icons.push(place(
            symbol(cx, "✈", 15.0, ink),
            "airplane",
            "Airplane mode on.".into(),
        ));
    }
    children.extend(icons.into_iter().rev());
    children.push(label(
        pct_r,
        rid(SYSTEMUI, "battery_percentage"),
        format!("{level}%"),
        pct,
    ));
    system_bar(rect, "status_bar", light, children)
}

/// The navigation bar with Back, Home and Overview buttons.
pub(crate) fn nav_bar(cx: &Cx, rect: Rect, light: bool) -> Element {
    let ink: Color = if light {
        [255, 255, 255, 255]
    } else {
        [0x44, 0x47, 0x46, 255]
    };
    let w = cx.dp(72.0);
    let buttons = [
        ("back", "Back", "◁", Key::Back, 1),
        ("home", "Home", "○", Key::Home, 2),
        ("recent_apps", "Overview", "□", Key::AppSwitch, 3),
    ];
    let children = buttons.map(|(id, desc, sym, key, quarter)| {
        let cx_ = rect.x1 + rect.w() * quarter / 4;
        Element::new(
            "android.widget.ImageView",
            Rect::new(cx_ - w / 2, rect.y1, cx_ + w / 2, rect.y2),
        )
        .id(rid(SYSTEMUI, id))
        .desc(desc)
        .on_tap(Msg::Key(key))
        .look(Look {
            glyph: symbol(cx, sym, 20.0, ink),
            ..Look::default()
        })
    });
    system_bar(rect, "navigation_bar_frame", light, children)
}

/// A bar System UI draws over the apps: filled, unless `light` (over the
/// wallpaper); it swallows touches that miss its buttons either way.
fn system_bar(
    rect: Rect,
    id: &str,
    light: bool,
    children: impl IntoIterator<Item = Element>,
) -> Element {
    let mut bar = Element::new("android.widget.FrameLayout", rect)
        .id(rid(SYSTEMUI, id))
        .look(Look {
            fill: (!light).then_some(SURFACE_BAR),
            ..Look::default()
        })
        .children(children);
    bar.package = Some(SYSTEMUI);
    bar.opaque = true;
    bar
}

/// A key of the on-screen keyboard: id suffix, label, description, action
/// and width in percent of the keyboard.
struct KeySpec {
    id: String,
    label: String,
    desc: &'static str,
    msg: Msg,
    percent: i32,
    special: bool,
}

fn letter(c: char) -> KeySpec {
    KeySpec {
        id: format!("key_{c}"),
        label: c.to_string(),
        desc: "",
        msg: Msg::Type(c),
        percent: 10,
        special: false,
    }
}

/// The QWERTY keyboard: digits, three letter rows, and a bottom row with
/// comma, space, period and Enter. Its keys type like `input text` does.
pub(crate) fn keyboard(cx: &Cx, rect: Rect) -> Element {
    let special = |id: &str, label: &str, desc: &'static str, msg: Msg, percent: i32| KeySpec {
        id: id.to_string(),
        label: label.to_string(),
        desc,
        msg,
        percent,
        special: true,
    };
    let mut rows: Vec<Vec<KeySpec>> = ["1234567890", "qwertyuiop", "asdfghjkl", "zxcvbnm"]
        .iter()
        .map(|r| r.chars().map(letter).collect())
        .collect();
    if let Some(last) = rows.last_mut() {
        last.push(special("key_del", "⌫", "Delete", Msg::Key(Key::Del), 15));
    }
    rows.push(vec![
        special("key_comma", ",", "", Msg::Type(','), 10),
        KeySpec {
            id: "key_space".into(),
            label: String::new(),
            desc: "Space",
            msg: Msg::Type(' '),
            percent: 55,
            special: false,
        },
        special("key_period", ".", "", Msg::Type('.'), 10),
        special("key_enter", "↵", "Enter", Msg::Key(Key::Enter), 20),
    ]);
    let pad = cx.dp(6.0);
    let inner = rect.inset(pad, pad);
    let row_h = inner.h() / rows.len() as i32;
    let unit = inner.w() as f32 / 100.0;
    let mut keys = Vec::new();
    for (i, row) in rows.into_iter().enumerate() {
        let total: i32 = row.iter().map(|k| k.percent).sum();
        let mut x = inner.x1 as f32 + (100 - total) as f32 * unit / 2.0;
        let y = inner.y1 + row_h * i as i32;
        for k in row {
            let w = k.percent as f32 * unit;
            let r = Rect::new(x as i32, y, (x + w) as i32, y + row_h).inset(cx.dp(3.0), cx.dp(4.0));
            x += w;
            let mut look = text_look(cx, if k.special { 20.0 } else { 22.0 }, TEXT);
            look.align = Align::Center;
            keys.push(
                Element::new("android.widget.Button", r)
                    .id(rid(KEYBOARD, &k.id))
                    .text(k.label)
                    .desc(k.desc)
                    .on_tap(k.msg)
                    .look(Look {
                        fill: Some(if k.special {
                            [0xCB, 0xCF, 0xD6, 255]
                        } else {
                            [255, 255, 255, 255]
                        }),
                        radius: cx.dp(6.0),
                        text: Some(look),
                        ..Look::default()
                    }),
            );
        }
    }
    let mut kb = Element::new("android.widget.FrameLayout", rect)
        .id(rid(KEYBOARD, "keyboard_view"))
        .look(Look {
            fill: Some([0xE8, 0xEA, 0xED, 255]),
            ..Look::default()
        })
        .children(keys);
    kb.package = Some(KEYBOARD);
    kb.opaque = true;
    kb
}
