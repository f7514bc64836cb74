//! The virtual phone itself: screens, apps, input and rendering of an
//! Android-like device, deterministic for a given seed.
//!
//! [`Phone`] is the whole device as one value. It has no wall clock and no
//! global randomness: its clock advances only through its own input
//! operations or [`Phone::advance_ms`], and its initial data come from
//! [`PhoneConfig::seed`], so the same seed and the same calls always give
//! the same pixels and the same UI tree.
//!
//! # Layout
//! - this file: [`Phone`], [`PhoneConfig`], [`Key`] and the public API.
//! - [`state`]: [`PhoneState`], the typed app data task checkers read.
//! - [`system`]: clock calendar, system properties, the `settings` store.
//! - `scene`: one frame as a tree of elements, from which the UI tree,
//!   the pixels and touch handling are all read.
//! - `widgets`: the theme and the standard views apps are built from.
//! - `render`: drawing and the bundled fonts.
//! - `system_ui`: status bar, navigation bar, on-screen keyboard.
//! - `launcher`: home screen and recent apps.
//! - `apps`: one file per app (settings, contacts, notes, clock, browser,
//!   gallery) and the interface the phone drives them through.

mod apps;
mod launcher;
mod render;
mod scene;
pub(crate) use scene::seek_value;
pub mod state;
pub mod system;
mod system_ui;
mod widgets;

#[cfg(test)]
mod tests;

pub use apps::browser::{SearchResult, search_results};
pub use state::{Alarm, BrowserState, Contact, MediaFile, Note, PhoneState, SettingsState};

use crate::device::ui::UiNode;
use apps::{AppId, Apps, Effect, Enter};
use image::RgbaImage;
use scene::{Element, Msg, Rect};
use std::collections::BTreeMap;
use widgets::Cx;

/// The sides a virtual phone's screen may have, in pixels.
pub const SIDES: std::ops::RangeInclusive<u32> = 64..=8192;

/// How a phone is built. Sizes are clamped to [`SIDES`] and density to
/// 80–960 dpi, so any config gives a usable screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhoneConfig {
    pub width: u32,
    pub height: u32,
    /// Dots per inch as `wm density` reports it (160 = 1 px per dp).
    pub density: u32,
    pub seed: u64,
}

impl Default for PhoneConfig {
    /// A Pixel-like 1080×2400 screen at 420 dpi.
    fn default() -> Self {
        Self {
            width: 1080,
            height: 2400,
            density: 420,
            seed: 0,
        }
    }
}

/// A key press, as `input keyevent` sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Key {
    Back,
    Home,
    Enter,
    Del,
    AppSwitch,
    /// Any other Android key code; letters, digits and a few punctuation
    /// keys type their character into the focused field.
    Other(u32),
}

/// Android key codes by name (`KeyEvent.KEYCODE_*`).
const KEY_NAMES: &[(&str, u32)] = &[
    ("HOME", 3),
    ("BACK", 4),
    ("CALL", 5),
    ("ENDCALL", 6),
    ("STAR", 17),
    ("POUND", 18),
    ("DPAD_UP", 19),
    ("DPAD_DOWN", 20),
    ("DPAD_LEFT", 21),
    ("DPAD_RIGHT", 22),
    ("DPAD_CENTER", 23),
    ("VOLUME_UP", 24),
    ("VOLUME_DOWN", 25),
    ("POWER", 26),
    ("CAMERA", 27),
    ("CLEAR", 28),
    ("COMMA", 55),
    ("PERIOD", 56),
    ("TAB", 61),
    ("SPACE", 62),
    ("ENTER", 66),
    ("DEL", 67),
    ("MINUS", 69),
    ("EQUALS", 70),
    ("AT", 77),
    ("PLUS", 81),
    ("MENU", 82),
    ("SEARCH", 84),
    ("ESCAPE", 111),
    ("FORWARD_DEL", 112),
    ("APP_SWITCH", 187),
    ("SLEEP", 223),
    ("WAKEUP", 224),
];

impl Key {
    pub fn from_keycode(code: u32) -> Key {
        match code {
            3 => Key::Home,
            4 => Key::Back,
            66 => Key::Enter,
            67 => Key::Del,
            187 => Key::AppSwitch,
            other => Key::Other(other),
        }
    }

    /// `KEYCODE_BACK`, `BACK`, `KEYCODE_A`, `KEYCODE_5` or a decimal code,
    /// as `input keyevent` accepts them; `None` for an unknown name.
    pub fn from_name(name: &str) -> Option<Key> {
        let bare = name.trim();
        if let Ok(code) = bare.parse::<u32>() {
            return Some(Key::from_keycode(code));
        }
        let upper = bare.to_ascii_uppercase();
        let bare = upper.strip_prefix("KEYCODE_").unwrap_or(&upper);
        if let Some(&(_, code)) = KEY_NAMES.iter().find(|(n, _)| *n == bare) {
            return Some(Key::from_keycode(code));
        }
        let mut chars = bare.chars();
        match (chars.next(), chars.next()) {
            (Some(c @ 'A'..='Z'), None) => Some(Key::Other(29 + (c as u32 - 'A' as u32))),
            (Some(c @ '0'..='9'), None) => Some(Key::Other(7 + (c as u32 - '0' as u32))),
            _ => None,
        }
    }

    /// The Android key code.
    pub fn keycode(self) -> u32 {
        match self {
            Key::Home => 3,
            Key::Back => 4,
            Key::Enter => 66,
            Key::Del => 67,
            Key::AppSwitch => 187,
            Key::Other(code) => code,
        }
    }

    /// The character the key types, for keys that type one.
    pub fn typed_char(self) -> Option<char> {
        match self.keycode() {
            code @ 7..=16 => char::from_digit(code - 7, 10),
            code @ 29..=54 => char::from_u32('a' as u32 + code - 29),
            17 => Some('*'),
            18 => Some('#'),
            55 => Some(','),
            56 => Some('.'),
            62 => Some(' '),
            69 => Some('-'),
            70 => Some('='),
            77 => Some('@'),
            81 => Some('+'),
            _ => None,
        }
    }
}

/// Simulated time each input takes, so the status-bar clock moves as an
/// agent works, identically on every run.
const TAP_MS: u64 = 120;
const KEY_MS: u64 = 80;
const TEXT_MS_PER_CHAR: u64 = 30;
const START_APP_MS: u64 = 600;

/// A press held at least this long is a long press (Android's
/// `ViewConfiguration` long-press timeout).
const LONG_PRESS_MS: u32 = 500;

/// Movement below this many dp is a tap, not a drag (touch slop).
const TOUCH_SLOP_DP: f32 = 8.0;

/// What fills the screen under the status bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Foreground {
    Launcher,
    /// The recent-apps screen, remembering what Back returns to.
    Recents(Option<AppId>),
    App(AppId),
}

/// The focused text field.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Focus {
    id: String,
    /// The next text typed replaces the field's contents.
    select_all: bool,
}

/// The whole virtual device.
#[derive(Debug, Clone)]
pub struct Phone {
    config: PhoneConfig,
    clock_ms: u64,
    state: PhoneState,
    props: BTreeMap<String, String>,
    apps: Apps,
    foreground: Foreground,
    /// Apps opened since the last "Clear all", least recent first.
    recents: Vec<AppId>,
    focus: Option<Focus>,
    keyboard: bool,
    /// `wm size` and `wm density` overrides of the panel's own values.
    size_override: Option<(u32, u32)>,
    density_override: Option<u32>,
}

impl Phone {
    pub fn new(config: PhoneConfig) -> Phone {
        let config = PhoneConfig {
            width: config.width.clamp(*SIDES.start(), *SIDES.end()),
            height: config.height.clamp(*SIDES.start(), *SIDES.end()),
            density: config.density.clamp(80, 960),
            seed: config.seed,
        };
        let clock_ms = system::boot_time_ms(config.seed);
        Phone {
            state: PhoneState::seeded(config.seed, clock_ms),
            props: system::default_props(&config),
            config,
            clock_ms,
            apps: Apps::default(),
            foreground: Foreground::Launcher,
            recents: Vec::new(),
            focus: None,
            keyboard: false,
            size_override: None,
            density_override: None,
        }
    }

    pub fn config(&self) -> &PhoneConfig {
        &self.config
    }

    /// The display's `(width, height)` in pixels now: `wm size`'s
    /// override or the panel's size, turned by the rotation. Screenshots,
    /// layout and input coordinates all use it, as on a device.
    pub fn size(&self) -> (u32, u32) {
        let (w, h) = self.upright_size();
        if self.rotation() % 2 == 1 {
            (h, w)
        } else {
            (w, h)
        }
    }

    /// The display's `(width, height)` held upright: `wm size`'s override
    /// or the panel's size, whatever the rotation.
    pub fn upright_size(&self) -> (u32, u32) {
        self.size_override
            .unwrap_or((self.config.width, self.config.height))
    }

    /// The panel's own size (`wm size`'s "Physical size").
    pub fn physical_size(&self) -> (u32, u32) {
        (self.config.width, self.config.height)
    }

    /// The density layout uses now: `wm density`'s override or the panel's.
    pub fn density(&self) -> u32 {
        self.density_override.unwrap_or(self.config.density)
    }

    pub fn physical_density(&self) -> u32 {
        self.config.density
    }

    pub fn size_override(&self) -> Option<(u32, u32)> {
        self.size_override
    }

    pub fn density_override(&self) -> Option<u32> {
        self.density_override
    }

    /// `wm size WxH` (`None`: `wm size reset`), within the sizes the
    /// phone renders.
    pub fn set_size_override(&mut self, size: Option<(u32, u32)>) {
        let side = |v: u32| v.clamp(*SIDES.start(), *SIDES.end());
        self.size_override = size.map(|(w, h)| (side(w), side(h)));
        self.sync_focus();
    }

    /// `wm density N` (`None`: `wm density reset`).
    pub fn set_density_override(&mut self, density: Option<u32>) {
        self.density_override = density.map(|d| d.clamp(72, 960));
        self.sync_focus();
    }

    /// The display's rotation in quarter turns (0–3). The phone has no
    /// orientation sensor, so it is `system user_rotation` while
    /// auto-rotate (`accelerometer_rotation`) is off, and upright when on.
    pub fn rotation(&self) -> u32 {
        if !self.rotation_locked() {
            return 0;
        }
        self.settings_get("system", "user_rotation")
            .and_then(|v| v.trim().parse::<u32>().ok())
            .filter(|r| *r < 4)
            .unwrap_or(0)
    }

    /// Whether auto-rotate is off (`system accelerometer_rotation` 0), so
    /// that `user_rotation` decides the rotation.
    pub fn rotation_locked(&self) -> bool {
        self.settings_get("system", "accelerometer_rotation")
            .as_deref()
            == Some("0")
    }

    /// The simulated clock, in milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        self.clock_ms
    }

    pub fn advance_ms(&mut self, ms: u64) {
        self.clock_ms = self.clock_ms.saturating_add(ms);
    }

    pub fn state(&self) -> &PhoneState {
        &self.state
    }

    /// For task set-up: the data apps show, changed directly. Screens
    /// showing a record that disappears fall back to their list.
    pub fn state_mut(&mut self) -> &mut PhoneState {
        &mut self.state
    }

    /// The screen as `uiautomator dump` reports it: one full-screen root
    /// whose children are the app's content, the status bar, the keyboard
    /// when shown, and the navigation bar.
    pub fn ui_tree(&self) -> UiNode {
        let scene = self.scene();
        let package = scene.package.unwrap_or_default();
        scene.to_node(scene.rect, package, 0).unwrap_or_default()
    }

    pub fn render(&self) -> RgbaImage {
        let (w, h) = self.size();
        render::render(&self.scene(), w, h)
    }

    pub fn tap(&mut self, x: i32, y: i32) {
        self.advance_ms(TAP_MS);
        self.press(x, y, false);
    }

    pub fn long_press(&mut self, x: i32, y: i32) {
        self.advance_ms(u64::from(LONG_PRESS_MS) + TAP_MS);
        self.press(x, y, true);
    }

    /// A finger moving from `(x1, y1)` to `(x2, y2)` in `duration_ms`. A
    /// swipe that barely moves is a tap, or a long press if held for 500 ms
    /// or more (`input swipe x y x y 800`); one that starts on a slider
    /// drags it; a mostly vertical one scrolls what is under its start,
    /// finger up revealing what is below.
    pub fn swipe(&mut self, x1: i32, y1: i32, x2: i32, y2: i32, duration_ms: u32) {
        self.advance_ms(u64::from(duration_ms));
        let (dx, dy) = (i64::from(x2) - i64::from(x1), i64::from(y2) - i64::from(y1));
        let slop = i64::from(self.dp(TOUCH_SLOP_DP));
        if dx.abs() < slop && dy.abs() < slop {
            self.press(x1, y1, duration_ms >= LONG_PRESS_MS);
            return;
        }
        let scene = self.scene();
        if let Some((e, _)) = scene.touch_target(x1, y1)
            && let Some(seek) = &e.seek
        {
            let msg = (seek.make)(seek.value_at(e.rect, x2));
            self.dispatch(msg);
            return;
        }
        if dy.abs() < dx.abs() {
            return;
        }
        if let Some((offset, max)) = scene.scroll_target(x1, y1).and_then(|e| e.scroll) {
            let target = (i64::from(offset) - dy).clamp(0, i64::from(max)) as i32;
            if let Foreground::App(app) = self.foreground {
                *self.apps.get_mut(app).scroll_mut() = target;
            }
        }
    }

    /// Types into the focused field, as `input text` does; without a
    /// focused field the text goes nowhere, as on Android.
    pub fn input_text(&mut self, text: &str) {
        self.advance_ms(TEXT_MS_PER_CHAR * text.chars().count() as u64);
        self.type_text(text);
    }

    pub fn key(&mut self, key: Key) {
        self.advance_ms(KEY_MS);
        self.press_key(key);
        self.sync_focus();
    }

    /// Opens an app, as `am start -n package/activity` or the launcher
    /// does. Without an activity the app resumes where it was left; with
    /// its launch activity (`.MainActivity` or the full class name) it
    /// starts over on its first page.
    pub fn start_app(&mut self, package: &str, activity: Option<&str>) -> Result<(), String> {
        self.advance_ms(START_APP_MS);
        if package == launcher::PKG {
            return match activity.map(|a| full_class(package, a)) {
                None => {
                    self.go_home();
                    Ok(())
                }
                Some(class) if class == launcher::HOME_ACTIVITY => {
                    self.go_home();
                    Ok(())
                }
                Some(class) => Err(format!(
                    "Activity class {{{package}/{class}}} does not exist."
                )),
            };
        }
        let app = AppId::from_package(package)
            .ok_or_else(|| format!("Package {package} is not installed."))?;
        if let Some(a) = activity {
            let class = full_class(package, a);
            if class != format!("{package}.{}", apps::MAIN_ACTIVITY) {
                return Err(format!(
                    "Activity class {{{package}/{class}}} does not exist."
                ));
            }
            self.apps.reset(app);
        }
        self.open(app);
        Ok(())
    }

    /// `am force-stop`: the app forgets its screens and drafts.
    pub fn force_stop(&mut self, package: &str) {
        if let Some(app) = AppId::from_package(package) {
            self.apps.reset(app);
            self.recents.retain(|a| *a != app);
            if self.foreground == Foreground::App(app) {
                self.go_home();
            }
        }
    }

    /// `pm clear`: the app stops and loses the data it keeps itself.
    /// Contacts, photos and settings live in system providers and stay.
    pub fn clear_data(&mut self, package: &str) {
        self.force_stop(package);
        match AppId::from_package(package) {
            Some(AppId::Notes) => self.state.notes.clear(),
            Some(AppId::Clock) => self.state.alarms.clear(),
            Some(AppId::Browser) => self.state.browser = Default::default(),
            _ => {}
        }
    }

    /// Every installed package, sorted, as `pm list packages` lists them;
    /// system packages among them (`android`, `com.android.systemui`, …)
    /// have no activity to start, as on a device.
    pub fn installed_packages(&self) -> Vec<String> {
        let mut all: Vec<String> = AppId::ALL.iter().map(|a| a.package().to_string()).collect();
        all.extend(
            [
                "android",
                "com.android.shell",
                system_ui::SYSTEMUI,
                system_ui::KEYBOARD,
                launcher::PKG,
            ]
            .map(String::from),
        );
        all.sort();
        all
    }

    /// The packages with a launcher icon, which `start_app(package, None)`
    /// and `monkey -p` can open, in launcher order.
    pub fn launchable_packages(&self) -> Vec<String> {
        AppId::ALL.iter().map(|a| a.package().to_string()).collect()
    }

    /// The focused window as `dumpsys window` names it:
    /// `com.btl.settings/com.btl.settings.MainActivity`.
    pub fn focused_window(&self) -> String {
        match self.foreground {
            Foreground::Launcher => format!("{}/{}", launcher::PKG, launcher::HOME_ACTIVITY),
            Foreground::Recents(_) => format!("{}/{}", launcher::PKG, launcher::RECENTS_ACTIVITY),
            Foreground::App(app) => {
                let pkg = app.package();
                format!("{pkg}/{pkg}.{}", self.apps.get(app).activity())
            }
        }
    }

    /// Whether the on-screen keyboard is up.
    pub fn keyboard_visible(&self) -> bool {
        self.keyboard
    }

    pub fn settings_get(&self, namespace: &str, key: &str) -> Option<String> {
        system::settings_get(&self.state.settings, namespace, key)
    }

    /// `settings put`. Keys backed by an app switch (see
    /// [`system::SETTINGS_KEYS`]) take integers and change the switch;
    /// other keys are stored as given; unknown namespaces are ignored.
    pub fn settings_put(&mut self, namespace: &str, key: &str, value: &str) {
        system::settings_put(&mut self.state.settings, namespace, key, value);
    }

    /// `settings list`: every key of a namespace with its value, by key.
    pub fn settings_list(&self, namespace: &str) -> Vec<(String, String)> {
        system::settings_list(&self.state.settings, namespace)
    }

    pub fn getprop(&self, key: &str) -> Option<String> {
        self.props.get(key).cloned()
    }

    /// Every system property, sorted by name.
    pub fn all_props(&self) -> Vec<(String, String)> {
        self.props
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// `setprop`: read-only (`ro.*`) properties cannot change once set.
    pub fn setprop(&mut self, key: &str, value: &str) -> Result<(), String> {
        if key.starts_with("ro.") && self.props.contains_key(key) {
            return Err(format!("Failed to set property '{key}' to '{value}'"));
        }
        self.props.insert(key.to_string(), value.to_string());
        Ok(())
    }

    fn dp(&self, v: f32) -> i32 {
        (v * self.scale()).round() as i32
    }

    fn scale(&self) -> f32 {
        self.density() as f32 / 160.0
    }

    /// The current frame: everything on screen, in drawing order.
    fn scene(&self) -> Element {
        let (w, h) = self.size();
        let (w, h) = (w as i32, h as i32);
        let screen = Rect::new(0, 0, w, h);
        let status_h = self.dp(system_ui::STATUS_BAR_DP);
        let nav_h = self.dp(system_ui::NAV_BAR_DP);
        let keyboard_h = if self.keyboard {
            // Never more than half the screen, whatever the density.
            self.dp(system_ui::KEYBOARD_DP).min(h / 2)
        } else {
            0
        };
        let content = Rect::new(0, status_h, w, (h - nav_h - keyboard_h).max(status_h));
        let cx = Cx {
            scale: self.scale(),
            content,
            focus: self.focus.as_ref().map(|f| f.id.as_str()),
            now_ms: self.clock_ms,
        };
        let (package, body, light) = match self.foreground {
            Foreground::Launcher => (launcher::PKG, launcher::home(&cx, screen, status_h), true),
            Foreground::Recents(_) => (
                launcher::PKG,
                launcher::recents(&cx, screen, status_h, &self.recents),
                true,
            ),
            Foreground::App(app) => (
                app.package(),
                self.apps.get(app).build(&cx, &self.state),
                false,
            ),
        };
        let mut root = Element::new("android.widget.FrameLayout", screen)
            .child(body)
            .child(system_ui::status_bar(
                &cx,
                screen.top(status_h),
                &self.state,
                self.clock_ms,
                light,
            ));
        if self.keyboard {
            let kb = Rect::new(0, content.y2, w, h - nav_h);
            root = root.child(system_ui::keyboard(&cx, kb));
        }
        root = root.child(system_ui::nav_bar(&cx, screen.bottom(nav_h), light));
        root.package = Some(package);
        root
    }

    /// A touch at `(x, y)`: a tap, or a long press when `long`. A long press
    /// on a view without a long-click action clicks it, as Android does.
    fn press(&mut self, x: i32, y: i32, long: bool) {
        let scene = self.scene();
        let msg = scene
            .touch_target(x, y)
            .and_then(|(e, _)| match (&e.seek, &e.on_long) {
                (Some(seek), _) => Some((seek.make)(seek.value_at(e.rect, x))),
                (None, Some(m)) if long => Some(m.clone()),
                _ => e.on_tap.clone(),
            });
        if let Some(msg) = msg {
            self.dispatch(msg);
        }
    }

    fn dispatch(&mut self, msg: Msg) {
        match msg {
            Msg::Focus { id, select_all } => {
                self.focus = Some(Focus { id, select_all });
                self.keyboard = true;
            }
            Msg::Key(key) => self.press_key(key),
            Msg::Up => {
                self.keyboard = false;
                self.press_key(Key::Back);
            }
            Msg::Type(c) => self.type_text(c.encode_utf8(&mut [0; 4])),
            Msg::Launch(app) | Msg::Resume(app) => self.open(app),
            Msg::ClearRecents => {
                for app in std::mem::take(&mut self.recents) {
                    self.apps.reset(app);
                }
                self.go_home();
            }
            Msg::App(m) => {
                if let Foreground::App(app) = self.foreground
                    && self.apps.update(app, m, &mut self.state, self.clock_ms)
                        == Effect::HideKeyboard
                {
                    self.blur();
                }
            }
        }
        self.sync_focus();
    }

    fn press_key(&mut self, key: Key) {
        match key {
            Key::Back if self.keyboard => self.keyboard = false,
            Key::Back => match self.foreground {
                Foreground::Launcher => {}
                Foreground::Recents(Some(app)) => self.open(app),
                Foreground::Recents(None) => self.go_home(),
                Foreground::App(app) => {
                    if !self.apps.get_mut(app).back() {
                        self.go_home();
                    }
                }
            },
            Key::Home => self.go_home(),
            Key::AppSwitch => {
                let back_to = match self.foreground {
                    Foreground::App(app) => Some(app),
                    Foreground::Recents(prev) => prev,
                    Foreground::Launcher => None,
                };
                self.blur();
                self.foreground = Foreground::Recents(back_to);
            }
            Key::Enter => self.enter(),
            Key::Del => {
                if let Some((field, focus)) = self.focused_field() {
                    if focus.select_all {
                        field.clear();
                    } else {
                        field.pop();
                    }
                }
                if let Some(f) = self.focus.as_mut() {
                    f.select_all = false;
                }
            }
            Key::Other(_) => {
                if let Some(c) = key.typed_char() {
                    self.type_text(c.encode_utf8(&mut [0; 4]));
                }
            }
        }
    }

    fn enter(&mut self) {
        let (Some(focus), Foreground::App(app)) = (self.focus.clone(), self.foreground) else {
            return;
        };
        match self
            .apps
            .get_mut(app)
            .enter(&focus.id, &mut self.state, self.clock_ms)
        {
            Enter::Newline => self.type_text("\n"),
            Enter::Next { id, select_all } => self.focus = Some(Focus { id, select_all }),
            Enter::Done => self.blur(),
        }
    }

    /// The focused field's text, with the focus it is reached through.
    fn focused_field(&mut self) -> Option<(&mut String, &Focus)> {
        let Foreground::App(app) = self.foreground else {
            return None;
        };
        let focus = self.focus.as_ref()?;
        let field = self.apps.get_mut(app).field_mut(&focus.id)?;
        Some((field, focus))
    }

    fn type_text(&mut self, text: &str) {
        if let Some((field, focus)) = self.focused_field() {
            if focus.select_all {
                field.clear();
            }
            field.push_str(text);
            if let Some(f) = self.focus.as_mut() {
                f.select_all = false;
            }
        }
    }

    fn open(&mut self, app: AppId) {
        self.blur();
        self.recents.retain(|a| *a != app);
        self.recents.push(app);
        self.foreground = Foreground::App(app);
    }

    fn go_home(&mut self) {
        self.blur();
        self.foreground = Foreground::Launcher;
    }

    fn blur(&mut self) {
        self.focus = None;
        self.keyboard = false;
    }

    /// Drops the focus when its field left the screen, and the keyboard
    /// with it.
    fn sync_focus(&mut self) {
        if self.focused_field().is_none() {
            self.blur();
        }
    }
}

/// `com.x.Foo` from `.Foo` or `com.x.Foo` (as `am start -n` accepts).
fn full_class(package: &str, activity: &str) -> String {
    match activity.strip_prefix('.') {
        Some(short) => format!("{package}.{short}"),
        None => activity.to_string(),
    }
}
