//! Contacts tasks: add a contact, change a phone number, delete a contact.
//!
//! Each set-up also stores a decoy: a contact with the same first name
//! whose last name sorts just before the target's. Checkers require it
//! untouched, so editing or deleting the wrong person fails, and it keeps
//! a name above the target in the sorted list, which is how the oracle
//! knows when it has scrolled far enough up.

use super::oracle::{self, List, Seek};
use super::values::{Draw, capitalised};
use super::{OracleStep, Task, loose_eq, pick};
use crate::device::ui::UiNode;
use crate::sim::phone::state::{SEEDED_FIRST_NAMES, next_id};
use crate::sim::phone::{Contact, Key, Phone, PhoneState};
use rand::RngExt;

const PKG: &str = "com.btl.contacts";
const LABEL: &str = "Contacts";

/// First names none of the phone's seeded contacts has.
const FIRST: [&str; 16] = [
    "José", "Zoë", "Renée", "Søren", "Björn", "Lucía", "Mateo", "Nadia", "Oskar", "Priya",
    "Ingrid", "Kenji", "Aylin", "Dmitri", "Émile", "Ngozi",
];

/// Last names in pairs, the decoy's sorting just before the target's.
const LAST: [(&str, &str); 12] = [
    ("Ortega", "Ortiz"),
    ("Nguyen", "Nowak"),
    ("Haddad", "Hakimi"),
    ("Becker", "Berg"),
    ("Castro", "Chen"),
    ("Diallo", "Dias"),
    ("Lindqvist", "Lund"),
    ("Moreau", "Moreno"),
    ("Petrov", "Pires"),
    ("Santos", "Sato"),
    ("Kim", "King"),
    ("Åberg", "Ångström"),
];

/// The target's name and the decoy's.
fn sample_names(rng: &mut Draw) -> (String, String) {
    if rng.is_open() {
        return open_names(rng);
    }
    let first = pick(rng, &FIRST);
    let (decoy, target) = pick(rng, &LAST);
    (format!("{first} {target}"), format!("{first} {decoy}"))
}

/// Made-up names as the pools pair them: a first name no seeded contact
/// has, and last names sharing their first syllable, the decoy's sorting
/// just before the target's as the list sorts them (lowercased).
fn open_names(rng: &mut Draw) -> (String, String) {
    let first = loop {
        let first = rng.name();
        if !SEEDED_FIRST_NAMES.iter().any(|s| loose_eq(s, &first)) {
            break first;
        }
    };
    let stem = capitalised(&rng.word(1..=1));
    let (a, b) = rng.two_words(1..=2);
    let (a, b) = (format!("{stem}{a}"), format!("{stem}{b}"));
    let (decoy, target) = if a.to_lowercase() < b.to_lowercase() {
        (a, b)
    } else {
        (b, a)
    };
    (format!("{first} {target}"), format!("{first} {decoy}"))
}

/// A phone number in one of a few national formats.
fn sample_phone(rng: &mut Draw) -> String {
    let (a, b) = (rng.random_range(0..100u32), rng.random_range(0..100u32));
    match rng.random_range(0..4) {
        0 => format!("+1 555-01{a:02}-{b:02}{:02}", rng.random_range(0..100u32)),
        1 => format!("+44 20 7946 {a:02}{b:02}"),
        2 => format!("+33 6 12 34 {a:02} {b:02}"),
        _ => format!("(555) 013-{a:02}{b:02}"),
    }
}

/// A short local number, as old entries often are.
fn sample_old_phone(rng: &mut Draw) -> String {
    format!("555-{:04}", rng.random_range(0..10_000u32))
}

/// Phone numbers compared by their digits and a leading `+`, so formatting
/// does not matter.
fn same_phone(a: &str, b: &str) -> bool {
    let digits = |s: &str| -> String {
        s.chars()
            .filter(|c| c.is_ascii_digit() || *c == '+')
            .collect()
    };
    digits(a) == digits(b)
}

fn has_phone(state: &PhoneState, name: &str, phone: &str) -> bool {
    state
        .contact_named(name)
        .is_some_and(|c| same_phone(&c.phone, phone))
}

/// Replaces any contact named `name` with a new one.
pub(super) fn put_contact(state: &mut PhoneState, name: &str, phone: &str) {
    state.contacts.retain(|c| !loose_eq(&c.name, name));
    let id = next_id(state.contacts.iter().map(|c| c.id));
    state.contacts.push(Contact {
        id,
        name: name.to_string(),
        phone: phone.to_string(),
        email: String::new(),
    });
}

fn finish_setup(phone: &mut Phone) {
    phone.force_stop(PKG);
    phone.key(Key::Home);
}

/// The decoy, shared by every contacts task.
struct Decoy {
    name: String,
    phone: String,
}

impl Decoy {
    fn intact(&self, state: &PhoneState) -> bool {
        has_phone(state, &self.name, &self.phone)
    }
}

/// What the oracle drives a contact towards.
enum Want<'a> {
    /// A new contact with this number: created straight away unless the
    /// contact already shows in the list.
    New(&'a str),
    /// An existing contact with this number.
    Phone(&'a str),
    Gone,
}

fn contact_oracle(screen: &UiNode, name: &str, want: Want) -> Option<OracleStep> {
    if !oracle::in_app(screen, PKG) {
        return Some(oracle::launch(screen, LABEL));
    }
    if let Some(d) = oracle::dialog(screen) {
        let ours = d.message.starts_with(&format!("{name} will"));
        return Some(match want {
            Want::Gone if ours => {
                oracle::tap(screen, d.confirm, format!("Confirm deleting {name}."))
            }
            _ => oracle::tap(screen, d.cancel, "Cancel this dialog."),
        });
    }
    if let Some(list) = List::find(screen, "contact_list") {
        let add = || {
            let add = screen.find_by_id("fab_add")?;
            Some(oracle::tap(
                screen,
                add,
                "Tap the add button to create a contact.",
            ))
        };
        let key = |n: &UiNode| oracle::text_of(n, "contact_name").map(str::to_lowercase);
        return match oracle::seek_sorted(&list, key, &name.to_lowercase(), name) {
            Seek::Found(item) => Some(oracle::tap(
                screen,
                item,
                format!("Open {name}'s contact card."),
            )),
            Seek::Move(_) if matches!(want, Want::New(_)) => add(),
            Seek::Move(step) => Some(*step),
            Seek::Absent => match want {
                Want::Gone => None,
                Want::New(_) | Want::Phone(_) => add(),
            },
        };
    }
    if screen.find_by_id("contact_detail").is_some() {
        if oracle::text_of(screen, "contact_name") != Some(name) {
            return Some(oracle::back("Go back to the contact list."));
        }
        return match want {
            Want::Gone => {
                let delete = screen.find_by_id("delete_button")?;
                Some(oracle::tap(screen, delete, format!("Delete {name}.")))
            }
            Want::New(phone) | Want::Phone(phone) => {
                if oracle::text_of(screen, "contact_phone") == Some(phone) {
                    return None;
                }
                let edit = screen.find_by_id("edit_button")?;
                Some(oracle::tap(
                    screen,
                    edit,
                    format!("Edit {name} to change the phone number."),
                ))
            }
        };
    }
    if screen.find_by_id("editor").is_some() {
        let (Want::New(phone) | Want::Phone(phone)) = want else {
            return Some(oracle::navigate_up(screen, "Leave the contact editor."));
        };
        let name_field = screen.find_by_id("name_field")?;
        let creating = oracle::toolbar_title(screen) == Some("Create contact");
        if !creating && name_field.text != name {
            return Some(oracle::navigate_up(
                screen,
                "This is someone else's contact: leave the editor.",
            ));
        }
        if let Some(step) = oracle::fill(screen, name_field, "Name", name, "name") {
            return Some(step);
        }
        let phone_field = screen.find_by_id("phone_field")?;
        if let Some(step) = oracle::fill(screen, phone_field, "Phone", phone, "phone") {
            return Some(step);
        }
        let save = screen.find_by_id("save_button")?;
        return Some(oracle::tap(screen, save, "Save the contact."));
    }
    Some(oracle::back("Go back to the contact list."))
}

/// "Add a contact named {name} with phone number {phone}."
pub(super) struct AddContact {
    name: String,
    phone: String,
    decoy: Decoy,
}

impl AddContact {
    pub fn sample(rng: &mut Draw) -> AddContact {
        let (name, decoy) = sample_names(rng);
        AddContact {
            name,
            phone: sample_phone(rng),
            decoy: Decoy {
                name: decoy,
                phone: sample_phone(rng),
            },
        }
    }
}

impl Task for AddContact {
    fn name(&self) -> &'static str {
        "contact_add"
    }

    fn goal(&self) -> String {
        format!(
            "Add a contact named {} with phone number {}.",
            self.name, self.phone
        )
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name,
            "phone": self.phone,
            "decoy": self.decoy.name,
            "decoy_phone": self.decoy.phone,
        })
    }

    fn max_steps(&self) -> u32 {
        25
    }

    fn setup(&self, phone: &mut Phone) {
        let state = phone.state_mut();
        state.contacts.retain(|c| !loose_eq(&c.name, &self.name));
        put_contact(state, &self.decoy.name, &self.decoy.phone);
        finish_setup(phone);
    }

    fn is_successful(&self, state: &PhoneState) -> bool {
        has_phone(state, &self.name, &self.phone) && self.decoy.intact(state)
    }

    fn oracle(&self, screen: &UiNode) -> Option<OracleStep> {
        contact_oracle(screen, &self.name, Want::New(&self.phone))
    }
}

/// "Change the phone number of {name} to {phone}."
pub(super) struct EditPhone {
    name: String,
    old_phone: String,
    phone: String,
    decoy: Decoy,
}

impl EditPhone {
    pub fn sample(rng: &mut Draw) -> EditPhone {
        let (name, decoy) = sample_names(rng);
        EditPhone {
            name,
            old_phone: sample_old_phone(rng),
            phone: sample_phone(rng),
            decoy: Decoy {
                name: decoy,
                phone: sample_old_phone(rng),
            },
        }
    }
}

impl Task for EditPhone {
    fn name(&self) -> &'static str {
        "contact_edit_phone"
    }

    fn goal(&self) -> String {
        format!(
            "Change the phone number of {} to {}.",
            self.name, self.phone
        )
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name,
            "old_phone": self.old_phone,
            "phone": self.phone,
            "decoy": self.decoy.name,
            "decoy_phone": self.decoy.phone,
        })
    }

    fn max_steps(&self) -> u32 {
        40
    }

    fn setup(&self, phone: &mut Phone) {
        let state = phone.state_mut();
        put_contact(state, &self.name, &self.old_phone);
        put_contact(state, &self.decoy.name, &self.decoy.phone);
        finish_setup(phone);
    }

    fn is_successful(&self, state: &PhoneState) -> bool {
        has_phone(state, &self.name, &self.phone) && self.decoy.intact(state)
    }

    fn oracle(&self, screen: &UiNode) -> Option<OracleStep> {
        contact_oracle(screen, &self.name, Want::Phone(&self.phone))
    }
}

/// "Delete the contact {name}."
pub(super) struct DeleteContact {
    name: String,
    phone: String,
    decoy: Decoy,
}

impl DeleteContact {
    pub fn sample(rng: &mut Draw) -> DeleteContact {
        let (name, decoy) = sample_names(rng);
        DeleteContact {
            name,
            phone: sample_phone(rng),
            decoy: Decoy {
                name: decoy,
                phone: sample_phone(rng),
            },
        }
    }
}

impl Task for DeleteContact {
    fn name(&self) -> &'static str {
        "contact_delete"
    }

    fn goal(&self) -> String {
        format!("Delete the contact {}.", self.name)
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name,
            "phone": self.phone,
            "decoy": self.decoy.name,
            "decoy_phone": self.decoy.phone,
        })
    }

    fn max_steps(&self) -> u32 {
        20
    }

    fn setup(&self, phone: &mut Phone) {
        let state = phone.state_mut();
        put_contact(state, &self.name, &self.phone);
        put_contact(state, &self.decoy.name, &self.decoy.phone);
        finish_setup(phone);
    }

    fn is_successful(&self, state: &PhoneState) -> bool {
        state.contact_named(&self.name).is_none() && self.decoy.intact(state)
    }

    fn oracle(&self, screen: &UiNode) -> Option<OracleStep> {
        contact_oracle(screen, &self.name, Want::Gone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::tasks::tests::blank_state;

    fn decoy() -> Decoy {
        Decoy {
            name: "José Ortega".into(),
            phone: "555-0100".into(),
        }
    }

    fn state_with(contacts: &[(&str, &str)]) -> PhoneState {
        let mut state = blank_state();
        for (name, phone) in contacts {
            put_contact(&mut state, name, phone);
        }
        state
    }

    #[test]
    fn decoys_sort_just_before_their_targets() {
        for (decoy, target) in LAST {
            assert!(
                decoy.to_lowercase() < target.to_lowercase(),
                "{decoy} {target}"
            );
        }
    }

    #[test]
    fn adding_needs_the_name_the_number_and_the_decoy_untouched() {
        let task = AddContact {
            name: "José Ortiz".into(),
            phone: "+44 20 7946 0123".into(),
            decoy: decoy(),
        };
        let ok = state_with(&[("José Ortega", "555-0100"), ("José Ortiz", "+442079460123")]);
        assert!(task.is_successful(&ok), "formatting of the number is free");
        let lower = state_with(&[
            ("José Ortega", "555-0100"),
            ("josé ortiz ", "+44 20 7946 0123"),
        ]);
        assert!(
            task.is_successful(&lower),
            "case and outer spaces of the name are free"
        );
        let cases = [
            state_with(&[("José Ortega", "555-0100")]),
            state_with(&[
                ("José Ortega", "555-0100"),
                ("José Ortiz", "+44 20 7946 0124"),
            ]),
            state_with(&[
                ("José Ortega", "555-0100"),
                ("Jose Ortiz", "+44 20 7946 0123"),
            ]),
            state_with(&[("José Ortega", "+44 20 7946 0123")]),
            state_with(&[("José Ortiz", "+44 20 7946 0123")]),
        ];
        for (i, state) in cases.iter().enumerate() {
            assert!(!task.is_successful(state), "near miss {i}");
        }
    }

    #[test]
    fn editing_the_decoy_instead_fails() {
        let task = EditPhone {
            name: "José Ortiz".into(),
            old_phone: "555-1234".into(),
            phone: "(555) 013-4242".into(),
            decoy: decoy(),
        };
        let before = state_with(&[("José Ortega", "555-0100"), ("José Ortiz", "555-1234")]);
        assert!(!task.is_successful(&before));
        let wrong = state_with(&[
            ("José Ortega", "(555) 013-4242"),
            ("José Ortiz", "555-1234"),
        ]);
        assert!(!task.is_successful(&wrong));
        let both = state_with(&[
            ("José Ortega", "(555) 013-4242"),
            ("José Ortiz", "5550134242"),
        ]);
        assert!(!task.is_successful(&both));
        let done = state_with(&[("José Ortega", "555-0100"), ("José Ortiz", "5550134242")]);
        assert!(task.is_successful(&done));
    }

    #[test]
    fn deleting_must_spare_the_decoy() {
        let task = DeleteContact {
            name: "José Ortiz".into(),
            phone: "555-1234".into(),
            decoy: decoy(),
        };
        assert!(task.is_successful(&state_with(&[("José Ortega", "555-0100")])));
        assert!(!task.is_successful(&state_with(&[("José Ortiz", "555-1234")])));
        assert!(!task.is_successful(&state_with(&[])));
        assert!(!task.is_successful(&state_with(&[
            ("José Ortega", "555-0100"),
            ("José Ortiz", "555-1234"),
        ])));
    }
}
