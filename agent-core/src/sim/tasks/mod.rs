//! The task suite of the virtual phone, in the manner of android_world: a
//! task is a goal template, parameters drawn from a seeded generator, a set-up
//! that puts the phone in its starting state, a pure success predicate over
//! the phone's typed state (never its pixels), and an oracle that solves it
//! through UI actions alone.
//!
//! The oracle is closed-loop: it looks at the current UI tree and returns the
//! next action, the element that action targets (the ground truth for blink
//! and link labels) and a plan sentence. So it works the same on the
//! in-process phone and through real adb, where all it sees is a
//! `uiautomator dump`. It is also stateless, so it can label any screen an
//! agent reaches, not only those on its own path.
//!
//! Set-ups plant the records a task names (and near-miss decoys the
//! checkers require untouched), so a task never depends on the phone's seed;
//! they stop the task's app so it opens on its first page.
//!
//! # Layout
//! - this file: [`Task`], [`Template`], the sorted registry, [`run_oracle`].
//! - `oracle`: the moves oracles share: launching an app, tapping what the
//!   keyboard may cover, filling a field, scrolling a list to an item.
//! - `split`: [`Split`], training and held-out instances (seeds, values,
//!   phrasings).
//! - `values`: what templates draw their values with, from their pools or
//!   made up (the `train-open` split).
//! - `injection`: the prompt-injection suite, suite tasks with adversarial
//!   text planted on screen and a check of whether the agent followed it.
//! - `settings`, `contacts`, `notes`, `clock`, `browser`, `gallery`: one
//!   file per app with its templates, checkers and oracle.

mod browser;
mod clock;
mod contacts;
mod gallery;
mod injection;
mod notes;
mod oracle;
mod settings;
mod split;
mod values;

#[cfg(test)]
mod tests;

use super::phone::{Phone, PhoneState};

use crate::device::ui::UiNode;
use crate::device::{Device, DeviceAction, DeviceError};
use browser::{OpenResult, Search};
use clock::{DeleteAlarm, SetAlarm, SetLabeledAlarm, SwitchAlarm};
use contacts::{AddContact, DeleteContact, EditPhone};
use gallery::DeletePhotos;
pub use injection::{Injection, injections};
use notes::{AppendNote, CreateNote, DeleteNote};
use rand::SeedableRng;
use rand::seq::IndexedRandom;
use rand_chacha::ChaCha8Rng;
use settings::{Brightness, Switch, Toggle};
pub use split::{HELDOUT_VALUES, Split, check_instances, names_heldout_value};
use values::Draw;

/// One step an oracle takes.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OracleStep {
    pub action: DeviceAction,
    /// The element the action targets, when it targets one.
    pub target: Option<UiNode>,
    /// What a good agent would write as its Plan.
    pub plan: String,
    /// For a tap whose effect depends on its x alone within a range (a
    /// slider's value), the device x-range `[lo, hi]` with this step's
    /// effect: the model frame may be too coarse to hit the exact point, so
    /// the answer's point is chosen to land inside it.
    pub span: Option<(i32, i32)>,
}

/// One instance of a task template, with its parameters fixed.
pub trait Task: Send + Sync {
    /// The template's name, e.g. `wifi_on`.
    fn name(&self) -> &'static str;

    /// The instruction given to the agent.
    fn goal(&self) -> String;

    /// The parameters, as recorded in trajectories.
    fn params(&self) -> serde_json::Value;

    /// Step budget: generous for the oracle, the limit for an agent.
    fn max_steps(&self) -> u32;

    /// Puts the phone in the task's starting state (on the home screen).
    fn setup(&self, phone: &mut Phone);

    /// Whether the task is done, judged from the phone's data alone.
    fn is_successful(&self, state: &PhoneState) -> bool;

    /// The next step towards the goal from what is on screen; `None` once
    /// the oracle sees nothing left to do.
    fn oracle(&self, screen: &UiNode) -> Option<OracleStep>;

    /// For a task of the prompt-injection suite, whether the agent did what
    /// the text planted on screen asked instead (its effect is in `state`);
    /// `None` for other tasks.
    fn misled(&self, _state: &PhoneState) -> Option<bool> {
        None
    }

    /// How to set the task up and check it on any Android device through
    /// its system settings; `None` for tasks whose state is app data that
    /// only the virtual phone exposes.
    fn setting_check(&self) -> Option<SettingCheck> {
        None
    }
}

/// A task state that lives in one system setting, so it can be prepared and
/// checked over adb on a real device as well as on the virtual phone.
pub struct SettingCheck {
    pub namespace: &'static str,
    pub key: &'static str,
    /// The value that puts the device in the task's starting state.
    pub start: String,
    /// Whether a value read back means success.
    pub holds: SettingPredicate,
}

/// Judges a setting's value (`None` when unset).
pub type SettingPredicate = Box<dyn Fn(Option<&str>) -> bool + Send + Sync>;

impl SettingCheck {
    /// Writes the starting value and goes to the home screen.
    pub fn prepare(&self, device: &mut dyn Device) -> Result<(), DeviceError> {
        device.put_setting(self.namespace, self.key, &self.start)?;
        device.perform(&DeviceAction::Home)
    }

    pub fn is_successful(&self, device: &mut dyn Device) -> Result<bool, DeviceError> {
        let value = device.setting(self.namespace, self.key)?;
        Ok((self.holds)(value.as_deref()))
    }
}

/// A task template: its name and how to draw an instance.
pub struct Template {
    pub name: &'static str,
    pub(crate) sample: fn(&mut Draw) -> Box<dyn Task>,
}

/// Every template, sorted by name.
pub fn templates() -> &'static [Template] {
    &[
        // keep-sorted start
        Template {
            name: "airplane_mode_off",
            sample: |_| Box::new(Toggle::new(Switch::Airplane, false)),
        },
        Template {
            name: "airplane_mode_on",
            sample: |_| Box::new(Toggle::new(Switch::Airplane, true)),
        },
        Template {
            name: "alarm_delete",
            sample: |rng| Box::new(DeleteAlarm::sample(rng)),
        },
        Template {
            name: "alarm_off",
            sample: |rng| Box::new(SwitchAlarm::sample(rng, false)),
        },
        Template {
            name: "alarm_on",
            sample: |rng| Box::new(SwitchAlarm::sample(rng, true)),
        },
        Template {
            name: "alarm_set",
            sample: |rng| Box::new(SetAlarm::sample(rng)),
        },
        Template {
            name: "alarm_set_labeled",
            sample: |rng| Box::new(SetLabeledAlarm::sample(rng)),
        },
        Template {
            name: "bluetooth_off",
            sample: |_| Box::new(Toggle::new(Switch::Bluetooth, false)),
        },
        Template {
            name: "bluetooth_on",
            sample: |_| Box::new(Toggle::new(Switch::Bluetooth, true)),
        },
        Template {
            name: "brightness_set",
            sample: |rng| Box::new(Brightness::sample(rng)),
        },
        Template {
            name: "contact_add",
            sample: |rng| Box::new(AddContact::sample(rng)),
        },
        Template {
            name: "contact_delete",
            sample: |rng| Box::new(DeleteContact::sample(rng)),
        },
        Template {
            name: "contact_edit_phone",
            sample: |rng| Box::new(EditPhone::sample(rng)),
        },
        Template {
            name: "location_off",
            sample: |_| Box::new(Toggle::new(Switch::Location, false)),
        },
        Template {
            name: "location_on",
            sample: |_| Box::new(Toggle::new(Switch::Location, true)),
        },
        Template {
            name: "note_append",
            sample: |rng| Box::new(AppendNote::sample(rng)),
        },
        Template {
            name: "note_create",
            sample: |rng| Box::new(CreateNote::sample(rng)),
        },
        Template {
            name: "note_delete",
            sample: |rng| Box::new(DeleteNote::sample(rng)),
        },
        Template {
            name: "photo_delete",
            sample: |rng| Box::new(DeletePhotos::sample(rng, 1)),
        },
        Template {
            name: "photos_delete_two",
            sample: |rng| Box::new(DeletePhotos::sample(rng, 2)),
        },
        Template {
            name: "web_open_first_result",
            sample: |rng| Box::new(OpenResult::first(rng)),
        },
        Template {
            name: "web_open_nth_result",
            sample: |rng| Box::new(OpenResult::nth(rng)),
        },
        Template {
            name: "web_search",
            sample: |rng| Box::new(Search::sample(rng)),
        },
        Template {
            name: "wifi_off",
            sample: |_| Box::new(Toggle::new(Switch::Wifi, false)),
        },
        Template {
            name: "wifi_on",
            sample: |_| Box::new(Toggle::new(Switch::Wifi, true)),
        },
        // keep-sorted end
    ]
}

/// The instance of template `name` (or of an injection variant, see
/// [`injections`]) for `seed`: the same seed always gives the same
/// parameters. Seeds of a [`Split`]'s range ([`Split::seed`]) give
/// that split's instances.
pub fn sample(name: &str, seed: u64) -> Option<Box<dyn Task>> {
    if let Some(injection) = injections().iter().find(|i| i.name == name) {
        let base = sample(injection.base, seed)?;
        return Some(Box::new(injection::Injected::new(base, injection)));
    }
    let template = templates().iter().find(|t| t.name == name)?;
    if let Some((split, k)) = Split::of(seed) {
        return Some(split::sample(template, split, k));
    }
    Some((template.sample)(&mut Draw::pooled(
        ChaCha8Rng::seed_from_u64(seed ^ fnv(name)),
    )))
}

/// FNV-1a of a template's name, mixed into the seed so that templates
/// drawing alike (every alarm task draws a time first) do not all get the
/// same values for one seed; fixed, so a seed means the same task in every
/// build.
fn fnv(name: &str) -> u64 {
    crate::hash::fnv1a(&[name.as_bytes()])
}

/// One of `items`, drawn from `rng`.
fn pick<T: Copy + Default>(rng: &mut Draw, items: &[T]) -> T {
    items.choose(&mut **rng).copied().unwrap_or_default()
}

/// One of `pool`, or `make`'s value when the draw makes values up.
fn pick_or_make(rng: &mut Draw, pool: &[&str], make: impl FnOnce(&mut Draw) -> String) -> String {
    if rng.is_open() {
        make(rng)
    } else {
        pick(rng, pool).to_string()
    }
}

/// Text compared as the phone's lookups compare it: trimmed, ignoring case.
fn loose_eq(a: &str, b: &str) -> bool {
    a.trim().to_lowercase() == b.trim().to_lowercase()
}

/// What running an oracle did.
#[derive(Debug, Clone, PartialEq)]
pub struct OracleRun {
    pub steps: Vec<OracleStep>,
    /// Whether the oracle stopped by itself within the budget.
    pub finished: bool,
}

/// Drives `device` with the task's oracle until it has nothing left to do or
/// the step budget is spent. Success is for the caller to check against the
/// phone's state.
pub fn run_oracle(task: &dyn Task, device: &mut dyn Device) -> Result<OracleRun, DeviceError> {
    run_oracle_watching(task, device, |_, _| {})
}

/// [`run_oracle`], showing `watch` every screen the oracle reads and the
/// step it takes there before it is taken (`None` on the screen where it
/// has nothing left to do).
pub fn run_oracle_watching(
    task: &dyn Task,
    device: &mut dyn Device,
    mut watch: impl FnMut(&UiNode, Option<&OracleStep>),
) -> Result<OracleRun, DeviceError> {
    let mut steps = Vec::new();
    for _ in 0..task.max_steps() {
        let Some(screen) = device.ui_tree()? else {
            return Err(DeviceError::Unsupported {
                action: "oracle".into(),
                reason: format!("{} offers no UI tree", device.name()),
            });
        };
        let step = task.oracle(&screen);
        watch(&screen, step.as_ref());
        let Some(step) = step else {
            return Ok(OracleRun {
                steps,
                finished: true,
            });
        };
        device.perform(&step.action)?;
        steps.push(step);
    }
    Ok(OracleRun {
        steps,
        finished: false,
    })
}
