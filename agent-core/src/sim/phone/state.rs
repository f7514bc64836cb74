//! What is true on the phone, apart from what is on screen: [`PhoneState`],
//! the typed data of every app, and its seeded initial contents.
//!
//! Task checkers read this through pure predicates (`state.settings.wifi`,
//! `state.contacts`, …), so it is plain data with public fields and no
//! behaviour beyond lookups. The screens in `apps/` render and edit it; the
//! navigation state (which screen, scroll offsets, drafts) lives with them,
//! not here, because no task should depend on how a screen was reached.

use rand::seq::{IndexedRandom, SliceRandom};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Everything the apps know, readable by task predicates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhoneState {
    pub settings: SettingsState,
    /// In creation order; the Contacts app lists them by name.
    pub contacts: Vec<Contact>,
    /// In creation order; the Notes app lists the last modified first.
    pub notes: Vec<Note>,
    /// In creation order; the Clock app lists them by time of day.
    pub alarms: Vec<Alarm>,
    pub browser: BrowserState,
    /// The photos in `/sdcard/Pictures`, as the Gallery app shows them.
    pub files: Vec<MediaFile>,
    /// Percent, shown in the status bar and in Settings › Battery.
    pub battery_level: u8,
}

/// The Settings app's switches and the `settings` store behind them.
///
/// The typed fields are the single source of truth for their `settings`
/// keys (see [`SETTINGS_KEYS`](super::system::SETTINGS_KEYS)); `store` holds
/// every other key, by namespace then key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettingsState {
    /// `global wifi_on`.
    pub wifi: bool,
    /// `global bluetooth_on`.
    pub bluetooth: bool,
    /// `global airplane_mode_on`. Independent of the radios, so a task can
    /// ask for any combination.
    pub airplane_mode: bool,
    /// `secure location_mode` (3 when on, 0 when off).
    pub location: bool,
    /// `system screen_brightness`, 0–255.
    pub brightness: u8,
    pub store: BTreeMap<String, BTreeMap<String, String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contact {
    pub id: u32,
    pub name: String,
    pub phone: String,
    pub email: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Note {
    pub id: u32,
    pub title: String,
    pub body: String,
    /// Simulated clock time of the last save.
    pub modified_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alarm {
    pub id: u32,
    /// 0–23.
    pub hour: u8,
    /// 0–59.
    pub minute: u8,
    pub enabled: bool,
    pub label: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct BrowserState {
    /// The last query submitted, trimmed.
    pub last_query: Option<String>,
    /// Every query submitted, oldest first.
    pub searches: Vec<String>,
    /// Every page opened, oldest first.
    pub visited: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MediaFile {
    /// File name, e.g. `sunset_03.jpg`.
    pub name: String,
    /// Absolute path on the phone, under `/sdcard/Pictures`.
    pub path: String,
    pub size_bytes: u64,
    /// Simulated clock time the photo was taken.
    pub taken_ms: u64,
}

impl PhoneState {
    pub fn contact(&self, id: u32) -> Option<&Contact> {
        self.contacts.iter().find(|c| c.id == id)
    }

    pub fn note(&self, id: u32) -> Option<&Note> {
        self.notes.iter().find(|n| n.id == id)
    }

    pub fn alarm(&self, id: u32) -> Option<&Alarm> {
        self.alarms.iter().find(|a| a.id == id)
    }

    pub fn file(&self, name: &str) -> Option<&MediaFile> {
        self.files.iter().find(|f| f.name == name)
    }

    /// The contact whose name is `name`, ignoring case and outer spaces.
    pub fn contact_named(&self, name: &str) -> Option<&Contact> {
        let name = loose(name);
        self.contacts.iter().find(|c| loose(&c.name) == name)
    }

    /// The first note titled `title`, ignoring case and outer spaces.
    pub fn note_titled(&self, title: &str) -> Option<&Note> {
        let title = loose(title);
        self.notes.iter().find(|n| loose(&n.title) == title)
    }

    /// The first alarm set for `hour:minute`.
    pub fn alarm_at(&self, hour: u8, minute: u8) -> Option<&Alarm> {
        self.alarms
            .iter()
            .find(|a| a.hour == hour && a.minute == minute)
    }

    /// Seeded initial contents: the same seed always gives the same phone.
    pub(crate) fn seeded(seed: u64, now_ms: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        Self {
            settings: SettingsState {
                wifi: true,
                bluetooth: rng.random_bool(0.5),
                airplane_mode: false,
                location: true,
                brightness: rng.random_range(60..=200),
                store: super::system::default_settings_store(seed),
            },
            contacts: seed_contacts(&mut rng),
            notes: seed_notes(&mut rng, now_ms),
            alarms: seed_alarms(&mut rng),
            browser: BrowserState::default(),
            files: seed_files(&mut rng, now_ms),
            battery_level: rng.random_range(35..=98),
        }
    }
}

/// Text as compared by the lookups: trimmed, Unicode-lowercased.
fn loose(s: &str) -> String {
    s.trim().to_lowercase()
}

/// The next free id in a list of records.
pub(crate) fn next_id(ids: impl Iterator<Item = u32>) -> u32 {
    ids.max().map_or(1, |m| m.saturating_add(1))
}

/// The first names of the contacts a phone starts with.
pub(crate) const SEEDED_FIRST_NAMES: &[&str] = &[
    "Alice", "Bruno", "Chloé", "Daniel", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas",
    "Kavya", "Liam", "Maya", "Noah", "Olga", "Pedro", "Quinn", "Rosa", "Sami", "Tara", "Umar",
    "Vera", "Wen", "Yusuf", "Zoe",
];

const LAST_NAMES: &[&str] = &[
    "Anders", "Baker", "Costa", "Dubois", "Evans", "Fischer", "García", "Hansen", "Ito", "Jensen",
    "Kowalski", "Lopez", "Müller", "Nakamura", "Okafor", "Patel", "Rossi", "Silva", "Tanaka",
    "Weber",
];

/// Enough contacts that the list runs past the first screen.
fn seed_contacts(rng: &mut ChaCha8Rng) -> Vec<Contact> {
    let mut firsts: Vec<&str> = SEEDED_FIRST_NAMES.to_vec();
    firsts.shuffle(rng);
    firsts
        .into_iter()
        .take(18)
        .zip(1u32..)
        .map(|(first, id)| {
            let last = LAST_NAMES.choose(rng).copied().unwrap_or("Smith");
            let ascii = |s: &str| -> String {
                s.chars()
                    .map(|c| match c {
                        'é' => 'e',
                        'í' => 'i',
                        'ü' => 'u',
                        c => c.to_ascii_lowercase(),
                    })
                    .collect()
            };
            Contact {
                id,
                name: format!("{first} {last}"),
                phone: format!(
                    "+1 555-{:03}-{:04}",
                    rng.random_range(100..1000),
                    rng.random_range(0..10000)
                ),
                email: format!("{}.{}@example.com", ascii(first), ascii(last)),
            }
        })
        .collect()
}

fn seed_notes(rng: &mut ChaCha8Rng, now_ms: u64) -> Vec<Note> {
    const NOTES: &[(&str, &str)] = &[
        ("Groceries", "Milk, eggs, spinach, coffee beans, lemons"),
        (
            "Meeting notes",
            "Discuss Q3 roadmap.\nAsk about the budget review.",
        ),
        (
            "Book ideas",
            "A lighthouse keeper who collects lost letters.",
        ),
        ("Packing list", "Passport, charger, umbrella, hiking boots"),
        (
            "Gift ideas",
            "Mom: scarf. Dad: jazz vinyl. Sam: board game.",
        ),
    ];
    let mut picked: Vec<&(&str, &str)> = NOTES.iter().collect();
    picked.shuffle(rng);
    picked
        .into_iter()
        .take(3)
        .zip(1u32..)
        .map(|(&(title, body), id)| Note {
            id,
            title: title.to_string(),
            body: body.to_string(),
            modified_ms: now_ms.saturating_sub(u64::from(id) * 3_600_000),
        })
        .collect()
}

fn seed_alarms(rng: &mut ChaCha8Rng) -> Vec<Alarm> {
    vec![
        Alarm {
            id: 1,
            hour: 6,
            minute: [0, 15, 30, 45].choose(rng).copied().unwrap_or(0),
            enabled: true,
            label: "Work".to_string(),
        },
        Alarm {
            id: 2,
            hour: 9,
            minute: 0,
            enabled: false,
            label: "Weekend".to_string(),
        },
    ]
}

/// Enough photos that the grid runs past the first screen.
fn seed_files(rng: &mut ChaCha8Rng, now_ms: u64) -> Vec<MediaFile> {
    const SUBJECTS: &[&str] = &[
        "beach",
        "sunset",
        "cat",
        "birthday",
        "mountain",
        "receipt",
        "whiteboard",
        "dog",
        "coffee",
        "garden",
        "city",
        "concert",
        "lake",
        "forest",
        "snow",
        "family",
    ];
    let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
    (0..21u64)
        .map(|i| {
            let subject = SUBJECTS.choose(rng).copied().unwrap_or("photo");
            let n = counts.entry(subject).or_insert(0);
            *n += 1;
            let name = format!("{subject}_{:02}.jpg", *n);
            MediaFile {
                path: format!("/sdcard/Pictures/{name}"),
                name,
                size_bytes: rng.random_range(800_000..4_500_000),
                taken_ms: now_ms.saturating_sub((21 - i) * 86_400_000),
            }
        })
        .collect()
}
