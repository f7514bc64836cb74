//! Settings (`com.btl.settings`): Wi-Fi, Bluetooth and airplane-mode
//! switches, Display with a brightness slider, Location, About phone, and a
//! list long enough that its end is below the fold.
//!
//! The switches edit [`SettingsState`](crate::sim::phone::SettingsState),
//! which also answers `settings get`, so the screen and the store agree.

use super::{App, AppMsg, Effect, Stack};
use crate::sim::phone::scene::{Align, Column, Element, Msg as SceneMsg, Rect};
use crate::sim::phone::state::PhoneState;
use crate::sim::phone::system;
use crate::sim::phone::widgets::{
    Cx, Row, TEXT, TEXT_2, app_bar, bar_height, content_root, label, rid, row, scroller, seekbar,
    switch, text_look,
};

pub(crate) const PKG: &str = "com.btl.settings";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Page {
    Main,
    Display,
    Location,
    About,
    /// A page that only describes a topic of [`TOPICS`].
    Topic(usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Msg {
    ToggleWifi,
    ToggleBluetooth,
    ToggleAirplane,
    ToggleLocation,
    SetBrightness(u32),
    Open(Page),
}

fn msg(m: Msg) -> SceneMsg {
    SceneMsg::App(AppMsg::Settings(m))
}

/// Entries of the main list after the switches: id, title, summary.
const TOPICS: [(&str, &str, &str); 10] = [
    (
        "sound",
        "Sound & vibration",
        "Volume, haptics, Do Not Disturb",
    ),
    (
        "notifications",
        "Notifications",
        "Notification history, conversations",
    ),
    ("apps", "Apps", "Recent apps, default apps"),
    ("storage", "Storage", "34% used - 84.2 GB free"),
    (
        "security",
        "Security & privacy",
        "App security, device lock",
    ),
    (
        "accounts",
        "Passwords & accounts",
        "Saved passwords, autofill",
    ),
    (
        "accessibility",
        "Accessibility",
        "Display, interaction, audio",
    ),
    (
        "wellbeing",
        "Digital Wellbeing",
        "Screen time, app timers, bedtime",
    ),
    ("battery", "Battery", "Battery usage, battery saver"),
    ("system", "System", "Languages, gestures, time, backup"),
];

#[derive(Debug, Clone)]
pub(crate) struct Settings {
    stack: Stack<Page>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            stack: Stack::new(Page::Main),
        }
    }
}

impl Settings {
    pub fn update(&mut self, m: Msg, data: &mut PhoneState) -> Effect {
        let s = &mut data.settings;
        match m {
            Msg::ToggleWifi => s.wifi = !s.wifi,
            Msg::ToggleBluetooth => s.bluetooth = !s.bluetooth,
            Msg::ToggleAirplane => s.airplane_mode = !s.airplane_mode,
            Msg::ToggleLocation => s.location = !s.location,
            Msg::SetBrightness(v) => s.brightness = v.min(255) as u8,
            Msg::Open(page) => self.stack.push(page),
        }
        Effect::None
    }

    fn main_page(&self, cx: &Cx, data: &PhoneState) -> Element {
        let s = &data.settings;
        let on_off = |on: bool| if on { "On" } else { "Off" };
        let switch_w = cx.dp(52.0);
        let switch_h = cx.dp(32.0);
        let toggle = |id: &str,
                      title: &'static str,
                      summary: &'static str,
                      on: bool,
                      m: Msg,
                      switch_id: &str| Row {
            id: rid(PKG, id),
            title,
            summary: Some(summary),
            badge: None,
            trailing: Some(switch(
                Rect::xywh(0, 0, switch_w, switch_h),
                rid(PKG, switch_id),
                title,
                on,
                msg(m.clone()),
            )),
            on_tap: Some(msg(m)),
        };
        let wifi_summary = if s.wifi {
            "Connected to BTL-Home"
        } else {
            "Off"
        };
        let mut rows = vec![
            toggle(
                "wifi_row",
                "Wi-Fi",
                wifi_summary,
                s.wifi,
                Msg::ToggleWifi,
                "wifi_switch",
            ),
            toggle(
                "bluetooth_row",
                "Bluetooth",
                on_off(s.bluetooth),
                s.bluetooth,
                Msg::ToggleBluetooth,
                "bluetooth_switch",
            ),
            toggle(
                "airplane_row",
                "Airplane mode",
                on_off(s.airplane_mode),
                s.airplane_mode,
                Msg::ToggleAirplane,
                "airplane_switch",
            ),
        ];
        let brightness = format!("Brightness {}%", percent(s.brightness));
        let link = |id: &str, title: &'static str, summary: String, page: Page| {
            (rid(PKG, id), title, summary, page)
        };
        let mut links = vec![
            link("display_row", "Display", brightness, Page::Display),
            link(
                "location_row",
                "Location",
                on_off(s.location).to_string(),
                Page::Location,
            ),
        ];
        links.extend(TOPICS.iter().enumerate().map(|(i, (id, title, summary))| {
            link(
                &format!("{id}_row"),
                title,
                summary.to_string(),
                Page::Topic(i),
            )
        }));
        links.push(link(
            "about_row",
            "About phone",
            system::MODEL.to_string(),
            Page::About,
        ));
        let root = content_root(cx);
        let bar = app_bar(cx, PKG, "Settings", false, Vec::new());
        let mut col = Column::new(cx.content.below(bar_height(cx)), self.stack.scroll());
        let h = cx.dp(72.0);
        for r in rows.drain(..) {
            let rect = col.next(h);
            col.push(row(cx, rect, r));
        }
        for (id, title, summary, page) in &links {
            let rect = col.next(h);
            col.push(row(
                cx,
                rect,
                Row {
                    id: id.clone(),
                    title,
                    summary: Some(summary),
                    badge: None,
                    trailing: None,
                    on_tap: Some(msg(Msg::Open(*page))),
                },
            ));
        }
        col.gap(cx.dp(16.0));
        let list = col.finish(scroller(
            "androidx.recyclerview.widget.RecyclerView",
            rid(PKG, "settings_list"),
        ));
        root.child(bar).child(list)
    }

    fn display_page(&self, cx: &Cx, data: &PhoneState) -> Element {
        let value = data.settings.brightness;
        let body = cx.content.below(bar_height(cx));
        let pad = cx.dp(16.0);
        let mut col = Column::new(body, self.stack.scroll());
        let title_r = col.next(cx.dp(48.0)).inset(pad, 0);
        let slider_r = col.next(cx.dp(48.0)).inset(cx.dp(4.0), 0);
        let value_r = col.next(cx.dp(32.0)).inset(pad, 0);
        let mut title = text_look(cx, 16.0, TEXT);
        title.bold = true;
        col.push(label(
            title_r,
            rid(PKG, "brightness_title"),
            "Brightness level",
            title,
        ));
        col.push(seekbar(
            cx,
            slider_r,
            rid(PKG, "brightness_seekbar"),
            "Brightness level",
            u32::from(value),
            255,
            |v| msg(Msg::SetBrightness(v)),
        ));
        col.push(label(
            value_r,
            rid(PKG, "brightness_value"),
            format!("{}%", percent(value)),
            text_look(cx, 14.0, TEXT_2),
        ));
        content_root(cx)
            .child(app_bar(cx, PKG, "Display", true, Vec::new()))
            .child(col.finish(scroller(
                "android.widget.ScrollView",
                rid(PKG, "display_settings"),
            )))
    }

    fn location_page(&self, cx: &Cx, data: &PhoneState) -> Element {
        let on = data.settings.location;
        let body = cx.content.below(bar_height(cx));
        let mut col = Column::new(body, self.stack.scroll());
        let r = col.next(cx.dp(72.0));
        col.push(row(
            cx,
            r,
            Row {
                id: rid(PKG, "location_toggle_row"),
                title: "Use location",
                summary: Some(if on { "On" } else { "Off" }),
                badge: None,
                trailing: Some(switch(
                    Rect::xywh(0, 0, cx.dp(52.0), cx.dp(32.0)),
                    rid(PKG, "location_switch"),
                    "Use location",
                    on,
                    msg(Msg::ToggleLocation),
                )),
                on_tap: Some(msg(Msg::ToggleLocation)),
            },
        ));
        content_root(cx)
            .child(app_bar(cx, PKG, "Location", true, Vec::new()))
            .child(col.finish(scroller(
                "android.widget.ScrollView",
                rid(PKG, "location_settings"),
            )))
    }

    fn about_page(&self, cx: &Cx, data: &PhoneState) -> Element {
        let device_name = data
            .settings
            .store
            .get("global")
            .and_then(|g| g.get("device_name"))
            .cloned()
            .unwrap_or_default();
        let facts = [
            ("device_name", "Device name", device_name),
            ("model", "Model", system::MODEL.to_string()),
            (
                "android_version",
                "Android version",
                system::ANDROID_VERSION.to_string(),
            ),
            ("build_number", "Build number", system::BUILD_ID.to_string()),
            (
                "battery_level",
                "Battery level",
                format!("{}%", data.battery_level),
            ),
        ];
        let mut col = Column::new(cx.content.below(bar_height(cx)), self.stack.scroll());
        for (id, title, value) in &facts {
            let r = col.next(cx.dp(72.0));
            col.push(row(
                cx,
                r,
                Row {
                    id: rid(PKG, id),
                    title,
                    summary: Some(value),
                    badge: None,
                    trailing: None,
                    on_tap: None,
                },
            ));
        }
        content_root(cx)
            .child(app_bar(cx, PKG, "About phone", true, Vec::new()))
            .child(col.finish(scroller(
                "android.widget.ScrollView",
                rid(PKG, "about_list"),
            )))
    }

    fn topic_page(&self, cx: &Cx, topic: usize) -> Element {
        let (_, title, summary) = TOPICS.get(topic).copied().unwrap_or(TOPICS[0]);
        let body = cx
            .content
            .below(bar_height(cx))
            .inset(cx.dp(16.0), cx.dp(16.0));
        let mut look = text_look(cx, 16.0, TEXT_2);
        look.wrap = true;
        look.valign = Align::Start;
        content_root(cx)
            .child(app_bar(cx, PKG, title, true, Vec::new()))
            .child(label(body, rid(PKG, "topic_summary"), summary, look))
    }
}

/// Brightness 0–255 as the percentage the slider label shows.
fn percent(v: u8) -> u32 {
    (u32::from(v) * 100 + 127) / 255
}

impl App for Settings {
    fn build(&self, cx: &Cx, data: &PhoneState) -> Element {
        match *self.stack.top() {
            Page::Main => self.main_page(cx, data),
            Page::Display => self.display_page(cx, data),
            Page::Location => self.location_page(cx, data),
            Page::About => self.about_page(cx, data),
            Page::Topic(i) => self.topic_page(cx, i),
        }
    }

    fn activity(&self) -> &'static str {
        match self.stack.top() {
            Page::Main => super::MAIN_ACTIVITY,
            _ => "SubSettings",
        }
    }

    fn back(&mut self) -> bool {
        self.stack.pop()
    }

    fn scroll_mut(&mut self) -> &mut i32 {
        self.stack.scroll_mut()
    }
}
