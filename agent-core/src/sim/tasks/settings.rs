//! Settings tasks: the Wi-Fi, Bluetooth, airplane-mode and location
//! switches, and the display brightness.

use super::oracle::{self, List};
use super::values::Draw;
use super::{OracleStep, SettingCheck, Task};
use crate::device::ui::UiNode;
use crate::sim::phone::{Key, Phone, PhoneState, SettingsState, seek_value};
use rand::RngExt;

const PKG: &str = "com.btl.settings";
const LABEL: &str = "Settings";

/// The rows of the main Settings list, top to bottom, so an oracle knows
/// which way to scroll for one it cannot see.
const ROWS: [&str; 16] = [
    "wifi_row",
    "bluetooth_row",
    "airplane_row",
    "display_row",
    "location_row",
    "sound_row",
    "notifications_row",
    "apps_row",
    "storage_row",
    "security_row",
    "accounts_row",
    "accessibility_row",
    "wellbeing_row",
    "battery_row",
    "system_row",
    "about_row",
];

/// A setting with an on/off switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Switch {
    Wifi,
    Bluetooth,
    Airplane,
    /// On its own page, behind the Location row.
    Location,
}

impl Switch {
    fn label(self) -> &'static str {
        match self {
            Switch::Wifi => "Wi-Fi",
            Switch::Bluetooth => "Bluetooth",
            Switch::Airplane => "airplane mode",
            Switch::Location => "location",
        }
    }

    fn row(self) -> &'static str {
        match self {
            Switch::Wifi => "wifi_row",
            Switch::Bluetooth => "bluetooth_row",
            Switch::Airplane => "airplane_row",
            Switch::Location => "location_row",
        }
    }

    fn switch_id(self) -> &'static str {
        match self {
            Switch::Wifi => "wifi_switch",
            Switch::Bluetooth => "bluetooth_switch",
            Switch::Airplane => "airplane_switch",
            Switch::Location => "location_switch",
        }
    }

    fn get(self, s: &SettingsState) -> bool {
        match self {
            Switch::Wifi => s.wifi,
            Switch::Bluetooth => s.bluetooth,
            Switch::Airplane => s.airplane_mode,
            Switch::Location => s.location,
        }
    }

    /// The Android system setting behind the switch.
    fn setting(self) -> (&'static str, &'static str) {
        match self {
            Switch::Wifi => ("global", "wifi_on"),
            Switch::Bluetooth => ("global", "bluetooth_on"),
            Switch::Airplane => ("global", "airplane_mode_on"),
            Switch::Location => ("secure", "location_mode"),
        }
    }

    fn set(self, s: &mut SettingsState, on: bool) {
        match self {
            Switch::Wifi => s.wifi = on,
            Switch::Bluetooth => s.bluetooth = on,
            Switch::Airplane => s.airplane_mode = on,
            Switch::Location => s.location = on,
        }
    }
}

/// Sets every switch at random, so that which switches are off says nothing
/// about which one a goal names; a task's own setup then puts its switch in
/// place.
pub(super) fn scramble_switches(settings: &mut SettingsState, rng: &mut impl rand::Rng) {
    for switch in [
        Switch::Wifi,
        Switch::Bluetooth,
        Switch::Airplane,
        Switch::Location,
    ] {
        switch.set(settings, rng.random_bool(0.5));
    }
}

/// The Settings page in front.
enum Page<'a> {
    Main(List<'a>),
    Location(&'a UiNode),
    Display { bar: &'a UiNode, value: &'a str },
    Other,
}

fn page(screen: &UiNode) -> Page<'_> {
    if let Some(list) = List::find(screen, "settings_list") {
        return Page::Main(list);
    }
    if let Some(switch) = screen.find_by_id("location_switch") {
        return Page::Location(switch);
    }
    match (
        screen.find_by_id("brightness_seekbar"),
        oracle::text_of(screen, "brightness_value"),
    ) {
        (Some(bar), Some(value)) => Page::Display { bar, value },
        _ => Page::Other,
    }
}

/// The main list's row `id`, fully in view, or the scroll that brings it.
fn main_row<'a>(list: &List<'a>, id: &str, what: &str) -> Result<&'a UiNode, Box<OracleStep>> {
    let index = |n: &UiNode| ROWS.iter().position(|r| n.has_id(r));
    if let Some(row) = list.items.iter().copied().find(|n| n.has_id(id)) {
        return if list.clipped(row) {
            Err(Box::new(list.reveal(row, what)))
        } else {
            Ok(row)
        };
    }
    let want = ROWS.iter().position(|r| *r == id);
    let below = list
        .items
        .iter()
        .filter_map(|n| index(n))
        .max()
        .is_none_or(|last| want > Some(last));
    let way = if below { "down" } else { "up" };
    Err(Box::new(
        list.scroll(below, format!("Scroll {way} to find {what}.")),
    ))
}

fn back_to_main() -> OracleStep {
    oracle::back("Go back to the main Settings list.")
}

fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}

/// "Turn on Wi-Fi", "Turn off location", …
pub(super) struct Toggle {
    switch: Switch,
    on: bool,
}

impl Toggle {
    pub fn new(switch: Switch, on: bool) -> Toggle {
        Toggle { switch, on }
    }
}

impl Task for Toggle {
    fn name(&self) -> &'static str {
        match (self.switch, self.on) {
            (Switch::Wifi, true) => "wifi_on",
            (Switch::Wifi, false) => "wifi_off",
            (Switch::Bluetooth, true) => "bluetooth_on",
            (Switch::Bluetooth, false) => "bluetooth_off",
            (Switch::Airplane, true) => "airplane_mode_on",
            (Switch::Airplane, false) => "airplane_mode_off",
            (Switch::Location, true) => "location_on",
            (Switch::Location, false) => "location_off",
        }
    }

    fn goal(&self) -> String {
        format!("Turn {} {}.", on_off(self.on), self.switch.label())
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({})
    }

    fn max_steps(&self) -> u32 {
        12
    }

    fn setup(&self, phone: &mut Phone) {
        self.switch.set(&mut phone.state_mut().settings, !self.on);
        phone.force_stop(PKG);
        phone.key(Key::Home);
    }

    fn is_successful(&self, state: &PhoneState) -> bool {
        self.switch.get(&state.settings) == self.on
    }

    fn setting_check(&self) -> Option<SettingCheck> {
        let (namespace, key) = self.switch.setting();
        let want = self.on;
        Some(SettingCheck {
            namespace,
            key,
            // Location is a mode (0 off, 3 high accuracy); the rest are 0/1.
            start: match (self.switch, want) {
                (Switch::Location, false) => "3",
                (_, false) => "1",
                (_, true) => "0",
            }
            .to_string(),
            holds: Box::new(move |value| {
                let on = value
                    .and_then(|v| v.trim().parse::<i64>().ok())
                    .is_some_and(|v| v != 0);
                value.is_some() && on == want
            }),
        })
    }

    fn oracle(&self, screen: &UiNode) -> Option<OracleStep> {
        if !oracle::in_app(screen, PKG) {
            return Some(oracle::launch(screen, LABEL));
        }
        let label = self.switch.label();
        let want = on_off(self.on);
        let flip = |switch: &UiNode| {
            (switch.checked != self.on).then(|| {
                oracle::tap(
                    screen,
                    switch,
                    format!("Tap the {label} switch to turn it {want}."),
                )
            })
        };
        match page(screen) {
            Page::Main(list) => {
                let row = match main_row(&list, self.switch.row(), label) {
                    Ok(row) => row,
                    Err(step) => return Some(*step),
                };
                if self.switch == Switch::Location {
                    // The row's summary tells whether location is on.
                    let summary = oracle::text_of(row, "android:id/summary")?;
                    return (!summary.eq_ignore_ascii_case(want))
                        .then(|| oracle::tap(screen, row, "Open the Location settings."));
                }
                flip(row.find_by_id(self.switch.switch_id())?)
            }
            Page::Location(switch) if self.switch == Switch::Location => flip(switch),
            _ => Some(back_to_main()),
        }
    }
}

/// Brightness 0–255 as the percentage Settings shows.
pub(super) fn brightness_percent(v: u8) -> u32 {
    (u32::from(v) * 100 + 127) / 255
}

/// The x-range around `x` on a brightness track (from `start`, `track`
/// pixels long) whose taps all show `percent`%, as the slider reads taps.
fn percent_span(x: i32, start: i32, track: i32, percent: u32) -> (i32, i32) {
    let shows = |x: i32| {
        let value = seek_value(i64::from(x - start), i64::from(track), 255);
        brightness_percent(u8::try_from(value).unwrap_or(u8::MAX)) == percent
    };
    let (mut lo, mut hi) = (x, x);
    while lo > start && shows(lo - 1) {
        lo -= 1;
    }
    while hi < start + track && shows(hi + 1) {
        hi += 1;
    }
    (lo, hi)
}

/// The brightness value shown as `percent`%, the middle of those that are.
fn brightness_value(percent: u32) -> u32 {
    (percent * 255 + 50) / 100
}

/// Far from the target, so one stray tap cannot solve the task.
fn start_percent(target: u32) -> u32 {
    if target >= 50 { 20 } else { 80 }
}

/// "Set the display brightness to 40%."
pub(super) struct Brightness {
    percent: u32,
}

impl Brightness {
    pub fn sample(rng: &mut Draw) -> Brightness {
        Brightness {
            percent: rng.random_range(1..=19) * 5,
        }
    }
}

impl Task for Brightness {
    fn name(&self) -> &'static str {
        "brightness_set"
    }

    fn goal(&self) -> String {
        format!("Set the display brightness to {}%.", self.percent)
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({ "percent": self.percent })
    }

    fn max_steps(&self) -> u32 {
        12
    }

    fn setup(&self, phone: &mut Phone) {
        let value = u8::try_from(brightness_value(start_percent(self.percent))).unwrap_or(u8::MAX);
        phone.state_mut().settings.brightness = value;
        phone.force_stop(PKG);
        phone.key(Key::Home);
    }

    fn is_successful(&self, state: &PhoneState) -> bool {
        brightness_percent(state.settings.brightness) == self.percent
    }

    fn setting_check(&self) -> Option<SettingCheck> {
        let percent = self.percent;
        Some(SettingCheck {
            namespace: "system",
            key: "screen_brightness",
            start: brightness_value(start_percent(percent)).to_string(),
            holds: Box::new(move |value| {
                value
                    .and_then(|v| v.trim().parse::<u8>().ok())
                    .is_some_and(|v| brightness_percent(v) == percent)
            }),
        })
    }

    fn oracle(&self, screen: &UiNode) -> Option<OracleStep> {
        if !oracle::in_app(screen, PKG) {
            return Some(oracle::launch(screen, LABEL));
        }
        let want = format!("{}%", self.percent);
        match page(screen) {
            Page::Main(list) => {
                let row = match main_row(&list, "display_row", "Display") {
                    Ok(row) => row,
                    Err(step) => return Some(*step),
                };
                let summary = oracle::text_of(row, "android:id/summary")?;
                (!summary.ends_with(&format!(" {want}")))
                    .then(|| oracle::tap(screen, row, "Open the Display settings."))
            }
            Page::Display { bar, value } => {
                if value == want {
                    return None;
                }
                // The track is inset from the bar's ends by a quarter of its
                // height (12 of 48 dp), as Android's SeekBar thumb padding.
                let [x1, y1, x2, y2] = bar.bounds;
                let pad = (y2 - y1) / 4;
                let track = (x2 - x1 - 2 * pad).max(1);
                let v = i32::try_from(brightness_value(self.percent)).unwrap_or(255);
                let x = x1 + pad + (v * track + 127) / 255;
                Some(oracle::tap_on_slider(
                    bar,
                    (x, y1 + (y2 - y1) / 2),
                    percent_span(x, x1 + pad, track, self.percent),
                    format!("Tap the brightness slider at {want} of its length."),
                ))
            }
            _ => Some(back_to_main()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::tasks::tests::blank_state;

    /// The Display page's bar [11, 368, 1069, 494] at 1080 wide: pad 31,
    /// track 996 from x 42. The slider shows 50% for values 127 and 128
    /// ((v·100 + 127) div 255 = 50); a tap at position p gives
    /// (255p + 498) div 996, which is 127 from p = 495 (126,723 div 996) to
    /// 128 at p = 501 (128,253 div 996) and 129 at 502 (128,508 div 996),
    /// 126 at 494: x = 42 + p spans 537–543.
    #[test]
    fn a_slider_percent_spans_every_x_that_shows_it() {
        assert_eq!(percent_span(542, 42, 996, 50), (537, 543));
        // The ends of the track stop the search.
        assert_eq!(percent_span(42, 42, 996, 0).0, 42);
        assert_eq!(percent_span(1038, 42, 996, 100).1, 1038);
    }

    #[test]
    fn a_toggle_is_done_only_when_its_own_switch_is_in_place() {
        let task = Toggle::new(Switch::Wifi, true);
        let mut state = blank_state();
        assert!(!task.is_successful(&state), "Wi-Fi starts off");
        state.settings.bluetooth = true;
        state.settings.airplane_mode = true;
        assert!(!task.is_successful(&state), "other radios do not count");
        state.settings.wifi = true;
        assert!(task.is_successful(&state));
        let off = Toggle::new(Switch::Location, false);
        state.settings.location = true;
        assert!(!off.is_successful(&state));
        state.settings.location = false;
        assert!(off.is_successful(&state));
    }

    #[test]
    fn brightness_must_show_the_exact_percentage() {
        let task = Brightness { percent: 40 };
        let mut state = blank_state();
        for (value, ok) in [
            (102, true),
            (101, true),
            (103, true),
            (99, false),
            (105, false),
        ] {
            state.settings.brightness = value;
            assert_eq!(task.is_successful(&state), ok, "brightness {value}");
        }
    }

    #[test]
    fn every_target_percentage_has_a_value_showing_it() {
        for percent in 0..=100 {
            let v = u8::try_from(brightness_value(percent)).unwrap();
            assert_eq!(brightness_percent(v), percent);
        }
    }
}
