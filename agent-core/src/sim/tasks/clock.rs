//! Clock tasks: set an alarm (with or without a label), switch one on or
//! off, delete one.
//!
//! Set-ups that need an alarm to exist also store a decoy twelve hours
//! apart (07:30 for 19:30), the classic AM/PM slip, which checkers require
//! untouched.

use super::oracle::{self, List, Seek};
use super::values::Draw;
use super::{OracleStep, Task, loose_eq, pick_or_make};
use crate::device::ui::UiNode;
use crate::sim::phone::state::next_id;
use crate::sim::phone::{Alarm, Key, Phone, PhoneState};
use rand::RngExt;

const PKG: &str = "com.btl.clock";
const LABEL: &str = "Clock";

const LABELS: [&str; 8] = [
    "Gym",
    "Médicaments",
    "Take out the trash",
    "早起",
    "Café with Zoë",
    "School run",
    "Stand-up meeting",
    "Water the plants",
];

/// An alarm's label: one of the pool, or made up.
fn sample_label(rng: &mut Draw) -> String {
    pick_or_make(rng, &LABELS, |d| d.phrase(1..=3))
}

/// A time of day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Time {
    pub hour: u8,
    pub minute: u8,
}

impl Time {
    /// A time on a five-minute mark.
    fn sample(rng: &mut Draw) -> Time {
        Time {
            hour: rng.random_range(0..24),
            minute: rng.random_range(0..12) * 5,
        }
    }

    /// Twelve hours later.
    fn flipped(self) -> Time {
        Time {
            hour: (self.hour + 12) % 24,
            minute: self.minute,
        }
    }

    /// `07:30`, as the alarm list shows it.
    fn hhmm(self) -> String {
        format!("{:02}:{:02}", self.hour, self.minute)
    }

    fn alarm(self, state: &PhoneState) -> Option<&Alarm> {
        state.alarm_at(self.hour, self.minute)
    }
}

/// Replaces every alarm at `time` with one alarm.
pub(super) fn put_alarm(state: &mut PhoneState, time: Time, enabled: bool, label: &str) {
    remove_alarms(state, time);
    let id = next_id(state.alarms.iter().map(|a| a.id));
    state.alarms.push(Alarm {
        id,
        hour: time.hour,
        minute: time.minute,
        enabled,
        label: label.to_string(),
    });
}

fn remove_alarms(state: &mut PhoneState, time: Time) {
    state
        .alarms
        .retain(|a| (a.hour, a.minute) != (time.hour, time.minute));
}

fn finish_setup(phone: &mut Phone) {
    phone.force_stop(PKG);
    phone.key(Key::Home);
}

/// An alarm the checker expects exactly as it was set up.
struct Decoy {
    time: Time,
    enabled: bool,
}

impl Decoy {
    fn intact(&self, state: &PhoneState) -> bool {
        self.time
            .alarm(state)
            .is_some_and(|a| a.enabled == self.enabled)
    }
}

/// What the oracle drives an alarm towards.
enum Want<'a> {
    /// Present and on, with this label when one is given.
    Set(Option<&'a str>),
    /// Present, switched on or off.
    Switched(bool),
    Gone,
}

/// The oracle of every alarm task: the Clock app, then the alarm list or
/// the alarm editor, whichever is on screen.
fn alarm_oracle(screen: &UiNode, time: Time, want: Want) -> Option<OracleStep> {
    if !oracle::in_app(screen, PKG) {
        return Some(oracle::launch(screen, LABEL));
    }
    match List::find(screen, "alarm_list") {
        Some(list) => on_alarm_list(screen, &list, time, want),
        None => on_alarm_editor(screen, time, want),
    }
}

/// On the list: find the alarm (scrolling), then add, open or switch it;
/// `None` when the list already shows what is wanted.
fn on_alarm_list(screen: &UiNode, list: &List, time: Time, want: Want) -> Option<OracleStep> {
    let hhmm = time.hhmm();
    let what = format!("the {hhmm} alarm");
    let key = |n: &UiNode| oracle::text_of(n, "alarm_time").map(str::to_string);
    let item = match oracle::seek_sorted(list, key, &hhmm, &what) {
        Seek::Found(item) => item,
        Seek::Move(step) => return Some(*step),
        Seek::Absent => {
            return match want {
                Want::Set(_) => {
                    let add = screen.find_by_id("fab_add_alarm")?;
                    Some(oracle::tap(
                        screen,
                        add,
                        "Tap the add button to create an alarm.",
                    ))
                }
                Want::Switched(_) | Want::Gone => None,
            };
        }
    };
    let switch = item.find_by_id("alarm_switch")?;
    match want {
        Want::Gone => Some(oracle::tap(
            screen,
            item,
            format!("Open {what} to delete it."),
        )),
        Want::Set(Some(label)) if oracle::text_of(item, "alarm_label") != Some(label) => Some(
            oracle::tap(screen, item, format!("Open {what} to set its label.")),
        ),
        Want::Set(_) => {
            (!switch.checked).then(|| oracle::tap(screen, switch, format!("Switch {what} on.")))
        }
        Want::Switched(on) => (switch.checked != on).then(|| {
            let state = if on { "on" } else { "off" };
            oracle::tap(screen, switch, format!("Switch {what} {state}."))
        }),
    }
}

/// In the editor: fill in and save a new alarm (or the one wanted), delete
/// it, or leave an editor of another alarm.
fn on_alarm_editor(screen: &UiNode, time: Time, want: Want) -> Option<OracleStep> {
    let hhmm = time.hhmm();
    let what = format!("the {hhmm} alarm");
    let (Some(hour), Some(minute)) = (screen.find_by_id("hour"), screen.find_by_id("minute"))
    else {
        return Some(oracle::back("Go back to the alarm list."));
    };
    let new = oracle::toolbar_title(screen) == Some("Add alarm");
    let ours =
        hour.text == format!("{:02}", time.hour) && minute.text == format!("{:02}", time.minute);
    let cancel = |plan: &str| match screen.find_by_id("cancel_button") {
        Some(button) => oracle::tap(screen, button, plan),
        None => oracle::navigate_up(screen, plan),
    };
    match want {
        Want::Set(label) if new || ours => {
            if let Some(step) =
                oracle::fill_number(screen, hour, &format!("{:02}", time.hour), "hour")
            {
                return Some(step);
            }
            if let Some(step) =
                oracle::fill_number(screen, minute, &format!("{:02}", time.minute), "minutes")
            {
                return Some(step);
            }
            if let Some(label) = label {
                let field = screen.find_by_id("label_field")?;
                if let Some(step) = oracle::fill(screen, field, "Label", label, "label") {
                    return Some(step);
                }
            }
            let save = screen.find_by_id("save_button")?;
            Some(oracle::tap(
                screen,
                save,
                format!("Save the alarm for {hhmm}."),
            ))
        }
        Want::Gone if ours && !new => {
            let delete = screen.find_by_id("delete_button")?;
            Some(oracle::tap(screen, delete, format!("Delete {what}.")))
        }
        _ => Some(cancel("Cancel: this is not the alarm I need to edit.")),
    }
}

/// "Set an alarm for {hh:mm}."
pub(super) struct SetAlarm {
    time: Time,
}

impl SetAlarm {
    pub fn sample(rng: &mut Draw) -> SetAlarm {
        SetAlarm {
            time: Time::sample(rng),
        }
    }
}

impl Task for SetAlarm {
    fn name(&self) -> &'static str {
        "alarm_set"
    }

    fn goal(&self) -> String {
        format!("Set an alarm for {}.", self.time.hhmm())
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({ "time": self.time.hhmm() })
    }

    fn max_steps(&self) -> u32 {
        20
    }

    fn setup(&self, phone: &mut Phone) {
        remove_alarms(phone.state_mut(), self.time);
        finish_setup(phone);
    }

    fn is_successful(&self, state: &PhoneState) -> bool {
        self.time.alarm(state).is_some_and(|a| a.enabled)
    }

    fn oracle(&self, screen: &UiNode) -> Option<OracleStep> {
        alarm_oracle(screen, self.time, Want::Set(None))
    }
}

/// "Set an alarm for {hh:mm} labelled {label}."
pub(super) struct SetLabeledAlarm {
    time: Time,
    label: String,
}

impl SetLabeledAlarm {
    pub fn sample(rng: &mut Draw) -> SetLabeledAlarm {
        SetLabeledAlarm {
            time: Time::sample(rng),
            label: sample_label(rng),
        }
    }
}

impl Task for SetLabeledAlarm {
    fn name(&self) -> &'static str {
        "alarm_set_labeled"
    }

    fn goal(&self) -> String {
        format!(
            "Set an alarm for {} labelled \"{}\".",
            self.time.hhmm(),
            self.label
        )
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({ "time": self.time.hhmm(), "label": self.label })
    }

    fn max_steps(&self) -> u32 {
        25
    }

    fn setup(&self, phone: &mut Phone) {
        remove_alarms(phone.state_mut(), self.time);
        finish_setup(phone);
    }

    fn is_successful(&self, state: &PhoneState) -> bool {
        self.time
            .alarm(state)
            .is_some_and(|a| a.enabled && loose_eq(&a.label, &self.label))
    }

    fn oracle(&self, screen: &UiNode) -> Option<OracleStep> {
        alarm_oracle(screen, self.time, Want::Set(Some(&self.label)))
    }
}

/// "Turn on the {hh:mm} alarm" / "Turn off the {hh:mm} alarm".
pub(super) struct SwitchAlarm {
    time: Time,
    on: bool,
    label: String,
}

impl SwitchAlarm {
    pub fn sample(rng: &mut Draw, on: bool) -> SwitchAlarm {
        SwitchAlarm {
            time: Time::sample(rng),
            on,
            label: sample_label(rng),
        }
    }

    fn decoy(&self) -> Decoy {
        Decoy {
            time: self.time.flipped(),
            enabled: !self.on,
        }
    }
}

impl Task for SwitchAlarm {
    fn name(&self) -> &'static str {
        if self.on { "alarm_on" } else { "alarm_off" }
    }

    fn goal(&self) -> String {
        let state = if self.on { "on" } else { "off" };
        format!("Turn {state} the {} alarm.", self.time.hhmm())
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({ "time": self.time.hhmm(), "label": self.label })
    }

    fn max_steps(&self) -> u32 {
        12
    }

    fn setup(&self, phone: &mut Phone) {
        let state = phone.state_mut();
        put_alarm(state, self.time, !self.on, &self.label);
        put_alarm(state, self.decoy().time, !self.on, "");
        finish_setup(phone);
    }

    fn is_successful(&self, state: &PhoneState) -> bool {
        self.time.alarm(state).is_some_and(|a| a.enabled == self.on) && self.decoy().intact(state)
    }

    fn oracle(&self, screen: &UiNode) -> Option<OracleStep> {
        alarm_oracle(screen, self.time, Want::Switched(self.on))
    }
}

/// "Delete the {hh:mm} alarm."
pub(super) struct DeleteAlarm {
    time: Time,
    enabled: bool,
}

impl DeleteAlarm {
    pub fn sample(rng: &mut Draw) -> DeleteAlarm {
        DeleteAlarm {
            time: Time::sample(rng),
            enabled: rng.random_bool(0.5),
        }
    }

    fn decoy(&self) -> Decoy {
        Decoy {
            time: self.time.flipped(),
            enabled: self.enabled,
        }
    }
}

impl Task for DeleteAlarm {
    fn name(&self) -> &'static str {
        "alarm_delete"
    }

    fn goal(&self) -> String {
        format!("Delete the {} alarm.", self.time.hhmm())
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({ "time": self.time.hhmm(), "enabled": self.enabled })
    }

    fn max_steps(&self) -> u32 {
        15
    }

    fn setup(&self, phone: &mut Phone) {
        let state = phone.state_mut();
        put_alarm(state, self.time, self.enabled, "");
        put_alarm(state, self.decoy().time, self.enabled, "");
        finish_setup(phone);
    }

    fn is_successful(&self, state: &PhoneState) -> bool {
        self.time.alarm(state).is_none() && self.decoy().intact(state)
    }

    fn oracle(&self, screen: &UiNode) -> Option<OracleStep> {
        alarm_oracle(screen, self.time, Want::Gone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::tasks::tests::blank_state;

    const T0730: Time = Time {
        hour: 7,
        minute: 30,
    };

    fn state_with(alarms: &[(u8, u8, bool, &str)]) -> PhoneState {
        let mut state = blank_state();
        for &(hour, minute, enabled, label) in alarms {
            put_alarm(&mut state, Time { hour, minute }, enabled, label);
        }
        state
    }

    #[test]
    fn a_set_alarm_must_exist_at_that_time_and_be_on() {
        let task = SetAlarm { time: T0730 };
        assert!(task.is_successful(&state_with(&[(7, 30, true, "")])));
        for alarms in [
            vec![],
            vec![(7, 30, false, "")],
            vec![(19, 30, true, "")],
            vec![(7, 35, true, "")],
            vec![(30, 7, true, "")],
        ] {
            assert!(!task.is_successful(&state_with(&alarms)), "{alarms:?}");
        }
    }

    #[test]
    fn a_labelled_alarm_needs_its_label() {
        let task = SetLabeledAlarm {
            time: T0730,
            label: "Café with Zoë".into(),
        };
        assert!(task.is_successful(&state_with(&[(7, 30, true, "café with zoë ")])));
        assert!(!task.is_successful(&state_with(&[(7, 30, true, "")])));
        assert!(!task.is_successful(&state_with(&[(7, 30, true, "Cafe with Zoe")])));
        assert!(!task.is_successful(&state_with(&[(7, 30, false, "Café with Zoë")])));
    }

    #[test]
    fn switching_the_pm_alarm_instead_fails() {
        let off = SwitchAlarm {
            time: T0730,
            on: false,
            label: "Gym".into(),
        };
        assert!(off.is_successful(&state_with(&[(7, 30, false, "Gym"), (19, 30, true, "")])));
        assert!(!off.is_successful(&state_with(&[(7, 30, true, "Gym"), (19, 30, false, "")])));
        assert!(!off.is_successful(&state_with(&[(7, 30, false, "Gym"), (19, 30, false, "")])));
        assert!(
            !off.is_successful(&state_with(&[(19, 30, true, "")])),
            "deleted is not off"
        );
        let on = SwitchAlarm {
            time: T0730,
            on: true,
            label: "Gym".into(),
        };
        assert!(on.is_successful(&state_with(&[(7, 30, true, "Gym"), (19, 30, false, "")])));
        assert!(!on.is_successful(&state_with(&[(7, 30, true, "Gym"), (19, 30, true, "")])));
    }

    #[test]
    fn deleting_an_alarm_spares_the_other_one() {
        let task = DeleteAlarm {
            time: T0730,
            enabled: true,
        };
        assert!(task.is_successful(&state_with(&[(19, 30, true, "")])));
        assert!(!task.is_successful(&state_with(&[(7, 30, true, ""), (19, 30, true, "")])));
        assert!(!task.is_successful(&state_with(&[(7, 30, true, "")])));
        assert!(!task.is_successful(&state_with(&[])));
    }
}
