//! Training and held-out instances of the suite, so a model's success rate
//! is measured on tasks it never saw: other seeds, other parameter values,
//! other phrasings of the goal.
//!
//! A split lives in the seed: [`Split::seed`] maps instance `k` of a split
//! to a seed of its own range, and [`sample`](super::sample) draws from the
//! split that range belongs to. So everything that names an instance by
//! (template, seed) — collection jobs, benchmark episodes, recorded
//! trajectories and their resumption — carries the split without knowing
//! about it, and the phone of a held-out episode is seeded apart from every
//! training phone. Seeds below [`Split::Train`]'s range are the plain suite
//! (every value, the goal as the template writes it), as before splits
//! existed.
//!
//! - **Values**: an instance is held out when its goal names one of
//!   [`HELDOUT_VALUES`] (about a fifth of each pool: contact names, note
//!   titles and texts, search queries, photo subjects and numbers ending in
//!   7, alarm labels and times at :35, two brightness levels). Training
//!   instances never name one; held-out instances of a template with
//!   parameters always do. Templates without parameters (the toggles) have
//!   the same instances in both splits and differ in phrasing only.
//! - **Phrasings**: training goals are written in one of three frames (as
//!   is, "Please …", "I need you to …"); held-out goals in a fourth, "Could
//!   you …?", which training never shows.
//! - **Made-up values**: [`Split::TrainOpen`] is training data whose names,
//!   titles, bodies, queries, labels and photo subjects are made up for
//!   each instance (see `values`), still never a held-out one, so that a
//!   model learns to read and copy text rather than to recognise a pool's.
//!   Its phones also have every switch set at random before the task's own
//!   setup: on a plain phone Wi-Fi and location start on and airplane mode
//!   off, so "tap the first switch that is off" would pass for reading
//!   which switch the goal names.
//! - **Validation**: [`Split::Validation`] is drawn as the held-out split is
//!   (held-out values, the held-out frame) from seeds of its own, for
//!   choosing among training variants and checkpoints. A score a variant
//!   was chosen by is biased upward by the luck of the very instances
//!   scored; validation's are new draws and phones, so the held-out score
//!   of the chosen variant is free of that luck. It is not free of the
//!   values: both splits name the same held-out values (a template may
//!   have only a few, three search queries), and the toggles put the same
//!   goal in both, only their phones' seeds differ.

use super::values::Draw;
use super::{OracleStep, SettingCheck, Task, Template, fnv};
use crate::device::ui::UiNode;
use crate::sim::phone::{Phone, PhoneState};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Which instances of the suite.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Split {
    /// What training data is collected from.
    Train,
    /// What success rates are measured on.
    Heldout,
    /// Training data with made-up values in place of the pools'.
    TrainOpen,
    /// What training variants are chosen by, so the held-out split stays
    /// unbiased.
    Validation,
}

/// Instances per split ([`Split::seed`] takes `k` below it); seeds below
/// the first range are the plain suite.
const RANGE: u64 = 1 << 40;

/// The seeds `first`, `first + 1`, … of `count` instances (of `split`'s,
/// when one is given), refused in words where they would run past the
/// last one: a split's instance numbers past 2^40 would wrap
/// around to its first ones, the plain suite's seeds past `u64::MAX`.
pub fn check_instances(first: u64, count: u64, split: Option<Split>) -> Result<(), String> {
    let limit = split.map_or(u64::MAX, |_| RANGE - 1);
    let last = first.checked_add(count.saturating_sub(1));
    match last {
        Some(last) if last <= limit => Ok(()),
        _ => Err(format!(
            "seeds {first} and on, {count} of them, run past the last {} ({limit})",
            split.map_or("seed".to_string(), |s| format!(
                "instance of the {} split",
                s.label()
            ))
        )),
    }
}

/// Substrings of a goal that make its instance held out.
pub const HELDOUT_VALUES: &[&str] = &[
    // Contact first names, and two surname pairs (target and decoy).
    "Aylin",
    "Dmitri",
    "Ngozi",
    "Santos",
    "Sato",
    "Åberg",
    "Ångström",
    // Note titles (both of a pair), a body and an addition.
    "Movie night",
    "Movie quotes",
    "Workout log",
    "Workout goals",
    "Check the warranty",
    "Bring snacks",
    // Search queries.
    "tide times Brighton",
    "Zoë Kravitz movies",
    "北京 烤鸭",
    // Photo subjects, and photo numbers ending in 7.
    "menu_",
    "selfie_",
    "7.jpg",
    // Alarm labels and times.
    "School run",
    "Water the plants",
    ":35",
    // Brightness levels.
    "35%",
    "85%",
];

/// Whether a goal names a held-out value.
pub fn names_heldout_value(goal: &str) -> bool {
    HELDOUT_VALUES.iter().any(|v| goal.contains(v))
}

/// Draws for a split's instance before a template without held-out values
/// is accepted as it is; a template with them yields one far sooner (the
/// rarest, a held-out time, one draw in twelve).
const DRAWS: u64 = 256;

impl Split {
    /// The seed of instance `k` of this split (`k` below 2^40).
    pub fn seed(self, k: u64) -> u64 {
        let base = match self {
            Split::Train => RANGE,
            Split::Heldout => 2 * RANGE,
            Split::TrainOpen => 3 * RANGE,
            Split::Validation => 4 * RANGE,
        };
        base + k % RANGE
    }

    /// The split's name, as `--split` takes it.
    pub fn label(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Heldout => "heldout",
            Split::TrainOpen => "train-open",
            Split::Validation => "validation",
        }
    }

    /// The split of `seed` and its instance number; `None` for the plain
    /// suite's seeds (and any beyond the splits' ranges).
    pub fn of(seed: u64) -> Option<(Split, u64)> {
        match seed / RANGE {
            1 => Some((Split::Train, seed % RANGE)),
            2 => Some((Split::Heldout, seed % RANGE)),
            3 => Some((Split::TrainOpen, seed % RANGE)),
            4 => Some((Split::Validation, seed % RANGE)),
            _ => None,
        }
    }

    /// `goal` (an imperative sentence ending in a full stop) as instance
    /// `k` of this split puts it: for lessons beside the suite's goals
    /// that must keep the held-out phrasings out of training.
    pub fn phrase(self, goal: &str, k: u64) -> String {
        self.frame(k).phrase(goal)
    }

    /// The frame of instance `k`.
    fn frame(self, k: u64) -> Frame {
        let frames = self.frames();
        frames[(k % frames.len() as u64) as usize]
    }

    /// Whether the split's instances are measured rather than trained on:
    /// they name held-out values in the held-out frame.
    fn is_measured(self) -> bool {
        matches!(self, Split::Heldout | Split::Validation)
    }

    fn frames(self) -> &'static [Frame] {
        if self.is_measured() {
            &[Frame::CouldYou]
        } else {
            &[Frame::AsIs, Frame::Please, Frame::INeedYouTo]
        }
    }
}

/// How a goal sentence is put to the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    AsIs,
    Please,
    INeedYouTo,
    CouldYou,
}

impl Frame {
    fn name(self) -> &'static str {
        match self {
            Frame::AsIs => "as_is",
            Frame::Please => "please",
            Frame::INeedYouTo => "i_need_you_to",
            Frame::CouldYou => "could_you",
        }
    }

    /// `goal` (an imperative sentence ending in a full stop) in this frame.
    fn phrase(self, goal: &str) -> String {
        let mut chars = goal.chars();
        let lowered: String = chars
            .next()
            .map(|c| c.to_lowercase().chain(chars).collect())
            .unwrap_or_default();
        match self {
            Frame::AsIs => goal.to_owned(),
            Frame::Please => format!("Please {lowered}"),
            Frame::INeedYouTo => format!("I need you to {lowered}"),
            Frame::CouldYou => format!("Could you {}?", lowered.trim_end_matches('.')),
        }
    }
}

/// Instance `k` of `split` for `template`.
pub(super) fn sample(template: &Template, split: Split, k: u64) -> Box<dyn Task> {
    let draw = |i: u64| {
        let seed = split.seed(k) ^ fnv(template.name) ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let rng = ChaCha8Rng::seed_from_u64(seed);
        (template.sample)(&mut match split {
            Split::TrainOpen => Draw::open(rng),
            Split::Train | Split::Heldout | Split::Validation => Draw::pooled(rng),
        })
    };
    let wanted = split.is_measured();
    let task = (0..DRAWS)
        .map(draw)
        .find(|t| names_heldout_value(&t.goal()) == wanted)
        .unwrap_or_else(|| draw(0));
    let frame = split.frame(k);
    Box::new(Phrased {
        goal: frame.phrase(&task.goal()),
        frame,
        split,
        scramble: (split == Split::TrainOpen).then(|| split.seed(k) ^ fnv(template.name)),
        task,
    })
}

/// A task whose goal is put in another frame; everything else is the task's.
struct Phrased {
    task: Box<dyn Task>,
    goal: String,
    frame: Frame,
    split: Split,
    /// The seed that sets the phone's switches before the task's setup.
    scramble: Option<u64>,
}

impl Task for Phrased {
    fn name(&self) -> &'static str {
        self.task.name()
    }

    fn goal(&self) -> String {
        self.goal.clone()
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({
            "split": self.split,
            "phrasing": self.frame.name(),
            "task": self.task.params(),
        })
    }

    fn max_steps(&self) -> u32 {
        self.task.max_steps()
    }

    fn setup(&self, phone: &mut Phone) {
        if let Some(seed) = self.scramble {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            super::settings::scramble_switches(&mut phone.state_mut().settings, &mut rng);
        }
        self.task.setup(phone);
    }

    fn is_successful(&self, state: &PhoneState) -> bool {
        self.task.is_successful(state)
    }

    fn oracle(&self, screen: &UiNode) -> Option<OracleStep> {
        self.task.oracle(screen)
    }

    fn setting_check(&self) -> Option<SettingCheck> {
        self.task.setting_check()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::tasks::{sample as sample_seed, templates};

    #[test]
    fn seeds_carry_their_split_and_instance() {
        assert_eq!(Split::of(0), None);
        assert_eq!(Split::of(12345), None);
        for k in [0, 1, 7, (1 << 40) - 1] {
            assert_eq!(Split::of(Split::Train.seed(k)), Some((Split::Train, k)));
            assert_eq!(Split::of(Split::Heldout.seed(k)), Some((Split::Heldout, k)));
        }
        assert_ne!(Split::Train.seed(3), Split::Heldout.seed(3));
        assert_eq!(
            Split::of(Split::TrainOpen.seed(5)),
            Some((Split::TrainOpen, 5))
        );
        assert_eq!(
            Split::of(Split::Validation.seed(9)),
            Some((Split::Validation, 9))
        );
        assert_eq!(Split::of(5 << 40), None);
        for split in [
            Split::Train,
            Split::Heldout,
            Split::TrainOpen,
            Split::Validation,
        ] {
            let named = clap::ValueEnum::to_possible_value(&split).unwrap();
            assert_eq!(named.get_name(), split.label());
            assert_eq!(serde_json::json!(split), split.label());
        }
    }

    #[test]
    fn frames_rephrase_the_goal() {
        let goal = "Turn on Wi-Fi.";
        assert_eq!(Frame::AsIs.phrase(goal), "Turn on Wi-Fi.");
        assert_eq!(Frame::Please.phrase(goal), "Please turn on Wi-Fi.");
        assert_eq!(
            Frame::INeedYouTo.phrase(goal),
            "I need you to turn on Wi-Fi."
        );
        assert_eq!(Frame::CouldYou.phrase(goal), "Could you turn on Wi-Fi?");
        assert_eq!(
            Frame::CouldYou.phrase("Delete the note titled \"Movie night\"."),
            "Could you delete the note titled \"Movie night\"?"
        );
    }

    /// Over many instances of every template: training goals never name a
    /// held-out value nor use the held-out frame; held-out goals of
    /// templates with parameters always name one; no goal is in both splits.
    #[test]
    fn training_never_sees_a_held_out_value_or_phrasing() {
        for template in templates() {
            let parametric = (0..64).any(|s| {
                sample_seed(template.name, s).map(|t| t.goal())
                    != sample_seed(template.name, 0).map(|t| t.goal())
            });
            let mut train = std::collections::HashSet::new();
            for split in [Split::Train, Split::TrainOpen] {
                for k in 0..200 {
                    let t = sample_seed(template.name, split.seed(k)).unwrap();
                    let goal = t.goal();
                    assert!(!names_heldout_value(&goal), "{}: {goal}", template.name);
                    assert!(!goal.starts_with("Could you"), "{}: {goal}", template.name);
                    train.insert(goal);
                }
            }
            for split in [Split::Heldout, Split::Validation] {
                for k in 0..50 {
                    let t = sample_seed(template.name, split.seed(k)).unwrap();
                    let goal = t.goal();
                    assert!(goal.starts_with("Could you"), "{}: {goal}", template.name);
                    assert!(!train.contains(&goal), "{}: {goal}", template.name);
                    if parametric {
                        assert!(names_heldout_value(&goal), "{}: {goal}", template.name);
                    }
                }
            }
        }
    }

    /// Validation draws from the held-out values, but its instances are its
    /// own: over 50 instances of a template with parameters, the two
    /// splits' goals in instance order differ (the same list twice would
    /// make choosing on one the same as choosing on the other). The goals'
    /// sets may be alike: both splits name the same held-out values.
    #[test]
    fn validation_instances_are_not_the_held_out_ones() {
        let goals = |name: &str, split: Split| -> Vec<String> {
            (0..50)
                .map(|k| sample_seed(name, split.seed(k)).unwrap().goal())
                .collect()
        };
        for name in ["contact_add", "note_delete", "web_search", "alarm_set"] {
            let heldout = goals(name, Split::Heldout);
            let validation = goals(name, Split::Validation);
            let same = heldout
                .iter()
                .zip(&validation)
                .filter(|(h, v)| h == v)
                .count();
            assert!(same < 25, "{name}: {same} of 50 instances alike");
        }
        assert_eq!(
            sample_seed("wifi_on", Split::Validation.seed(2))
                .unwrap()
                .params()["split"],
            "validation"
        );
    }

    #[test]
    fn a_split_instance_is_its_template_s_task_in_other_words() {
        let t = sample_seed("wifi_on", Split::Heldout.seed(4)).unwrap();
        assert_eq!(t.name(), "wifi_on");
        assert_eq!(t.goal(), "Could you turn on Wi-Fi?");
        assert_eq!(t.params()["split"], "heldout");
        assert_eq!(t.params()["phrasing"], "could_you");
        // The same instance every time.
        let again = sample_seed("wifi_on", Split::Heldout.seed(4)).unwrap();
        assert_eq!(t.params(), again.params());
    }

    /// The switches' states after setup, Wi-Fi, Bluetooth, airplane mode
    /// and location, for instance `k` of `split`.
    fn switches_after_setup(name: &str, split: Split, k: u64) -> [bool; 4] {
        let seed = split.seed(k);
        let task = sample_seed(name, seed).unwrap();
        let mut phone = Phone::new(crate::sim::phone::PhoneConfig {
            seed,
            ..Default::default()
        });
        task.setup(&mut phone);
        assert!(
            !task.is_successful(phone.state()),
            "{name} {seed} starts solved"
        );
        let s = &phone.state().settings;
        [s.wifi, s.bluetooth, s.airplane_mode, s.location]
    }

    #[test]
    fn train_open_phones_have_their_other_switches_at_random() {
        // On a plain phone Wi-Fi and location are on and airplane mode off
        // whatever the seed; Bluetooth alone varies.
        for k in 0..20 {
            let [wifi, _, airplane, location] =
                switches_after_setup("bluetooth_on", Split::Train, k);
            assert!(wifi && !airplane && location, "train instance {k}");
        }
        for name in ["wifi_on", "airplane_mode_off", "location_on"] {
            let states: Vec<[bool; 4]> = (0..40)
                .map(|k| switches_after_setup(name, Split::TrainOpen, k))
                .collect();
            let target = match name {
                "wifi_on" => 0,
                "airplane_mode_off" => 2,
                _ => 3,
            };
            for i in 0..4 {
                let on = states.iter().filter(|s| s[i]).count();
                if i == target {
                    let want = if name == "airplane_mode_off" { 40 } else { 0 };
                    assert_eq!(on, want, "{name}: its own switch starts opposite the goal");
                } else {
                    assert!(
                        (8..=32).contains(&on),
                        "{name}: switch {i} on in {on} of 40"
                    );
                }
            }
        }
    }
}
