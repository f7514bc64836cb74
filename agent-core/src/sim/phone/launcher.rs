//! The launcher (`com.btl.launcher`): the home screen with a clock widget
//! and the app icons, and the recent-apps screen that Overview opens.
//!
//! Icons are TextViews with the label as text and content description, as
//! Launcher3's icons are, so an agent finds an app by its name.

use super::apps::AppId;
use super::scene::{Align, Element, Glyph, Look, Msg, Rect};
use super::system::{clock_date, clock_hhmm};
use super::widgets::{Cx, button, label, rid, text_look};

pub(crate) const PKG: &str = "com.btl.launcher";
pub(crate) const HOME_ACTIVITY: &str = "com.btl.launcher.Launcher";
pub(crate) const RECENTS_ACTIVITY: &str = "com.btl.launcher.RecentsActivity";

/// Icons per row.
const COLUMNS: i32 = 4;

/// The home screen over the whole display; `top` is where the status bar
/// ends.
pub(crate) fn home(cx: &Cx, screen: Rect, top: i32) -> Element {
    let white = [255, 255, 255, 255];
    let mut time = text_look(cx, 64.0, white);
    time.align = Align::Center;
    time.shadow = true;
    let mut date = text_look(cx, 18.0, white);
    date.align = Align::Center;
    date.shadow = true;
    let clock_r = Rect::new(screen.x1, top + cx.dp(40.0), screen.x2, top + cx.dp(130.0));
    let date_r = Rect::new(screen.x1, clock_r.y2, screen.x2, clock_r.y2 + cx.dp(32.0));
    let cell_w = screen.w() / COLUMNS;
    let icon = cx.dp(60.0);
    // Icon, a small gap, the label; rows further apart than that.
    let cell_h = icon + cx.dp(32.0);
    let pitch = cell_h + cx.dp(24.0);
    let grid_top = date_r.y2 + cx.dp(64.0);
    let icons = AppId::ALL.iter().enumerate().map(|(i, app)| {
        let (col, row) = (i as i32 % COLUMNS, i as i32 / COLUMNS);
        let r = Rect::xywh(
            screen.x1 + col * cell_w,
            grid_top + row * pitch,
            cell_w,
            cell_h,
        );
        let mut look = text_look(cx, 13.0, white);
        look.align = Align::Center;
        look.valign = Align::End;
        look.shadow = true;
        let name = app.label();
        Element::new("android.widget.TextView", r)
            .id(rid(PKG, "icon"))
            .text(name)
            .desc(name)
            .on_tap(Msg::Launch(*app))
            .look(Look {
                glyph: Glyph::Badge {
                    color: app.color(),
                    letter: name.chars().next().map(String::from).unwrap_or_default(),
                    size: icon,
                    top: true,
                },
                text: Some(look),
                ..Look::default()
            })
    });
    Element::new("android.widget.FrameLayout", screen)
        .id(rid(PKG, "workspace"))
        .look(Look {
            fill: Some([0x2B, 0x3A, 0x67, 255]),
            gradient: Some([0x8E, 0x5B, 0x8F, 255]),
            ..Look::default()
        })
        .child(label(
            clock_r,
            rid(PKG, "clock_widget"),
            clock_hhmm(cx.now_ms),
            time,
        ))
        .child(label(date_r, rid(PKG, "date"), clock_date(cx.now_ms), date))
        .children(icons)
}

/// The recent-apps screen over the whole display, under the bars: one card
/// per app, most recent first, and "Clear all" above the navigation bar.
pub(crate) fn recents(cx: &Cx, screen: Rect, top: i32, apps: &[AppId]) -> Element {
    let white = [255, 255, 255, 255];
    let pad = cx.dp(16.0);
    let mut title = text_look(cx, 22.0, white);
    title.bold = true;
    let title_r = Rect::new(
        screen.x1 + pad,
        top + cx.dp(8.0),
        screen.x2 - pad,
        top + cx.dp(64.0),
    );
    let mut root = Element::new("android.widget.FrameLayout", screen)
        .id(rid(PKG, "overview"))
        .look(Look {
            fill: Some([0x20, 0x21, 0x24, 255]),
            ..Look::default()
        })
        .child(label(
            title_r,
            rid(PKG, "overview_title"),
            "Recent apps",
            title,
        ));
    let card_h = cx.dp(96.0);
    for (i, app) in apps.iter().rev().enumerate() {
        let y = title_r.y2 + cx.dp(8.0) + i as i32 * (card_h + cx.dp(12.0));
        let card = Rect::new(screen.x1 + pad, y, screen.x2 - pad, y + card_h);
        let badge = cx.dp(48.0);
        let mut name = text_look(cx, 18.0, [0x1D, 0x1B, 0x20, 255]);
        name.pad = cx.dp(88.0);
        root = root.child(
            Element::new("android.widget.FrameLayout", card)
                .id(rid(PKG, "task_card"))
                .desc(app.label())
                .text(app.label())
                .on_tap(Msg::Resume(*app))
                .look(Look {
                    fill: Some([0xF3, 0xED, 0xF7, 255]),
                    radius: cx.dp(20.0),
                    text: Some(name),
                    ..Look::default()
                })
                .child(
                    Element::new(
                        "android.widget.ImageView",
                        Rect::xywh(card.x1 + pad, card.y1 + (card_h - badge) / 2, badge, badge),
                    )
                    .look(Look {
                        glyph: Glyph::Badge {
                            color: app.color(),
                            letter: app
                                .label()
                                .chars()
                                .next()
                                .map(String::from)
                                .unwrap_or_default(),
                            size: badge,
                            top: false,
                        },
                        ..Look::default()
                    }),
                ),
        );
    }
    if apps.is_empty() {
        let mut look = text_look(cx, 16.0, [0xC4, 0xC7, 0xC5, 255]);
        look.align = Align::Center;
        root = root.child(label(
            cx.content,
            rid(PKG, "empty_recents"),
            "No recent items",
            look,
        ));
    } else {
        let w = cx.dp(128.0);
        let r = Rect::xywh(
            screen.x1 + (screen.w() - w) / 2,
            cx.content.y2 - cx.dp(72.0),
            w,
            cx.dp(44.0),
        );
        root = root.child(button(
            cx,
            r,
            rid(PKG, "clear_all"),
            "Clear all",
            Msg::ClearRecents,
        ));
    }
    root
}
