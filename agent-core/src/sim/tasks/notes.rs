//! Notes tasks: create a note, delete one, add text at the end of one.
//!
//! Set-ups store a decoy note with a title close to the target's, which
//! checkers require untouched.

use super::oracle::{self, List, Seek};
use super::values::Draw;
use super::{OracleStep, Task, loose_eq, pick, pick_or_make};
use crate::device::ui::UiNode;
use crate::sim::phone::state::next_id;
use crate::sim::phone::{Key, Note, Phone, PhoneState};
use rand::RngExt;

const PKG: &str = "com.btl.notes";
const LABEL: &str = "Notes";
const TITLE_HINT: &str = "Title";
const BODY_HINT: &str = "Note";

/// Titles with a decoy sharing their first word; none is a seeded title.
const TITLES: [(&str, &str); 10] = [
    ("Trip to 北京", "Trip to Lisbon"),
    ("Recipe: crème brûlée", "Recipe: banana bread"),
    ("Zoë's birthday", "Zoë's wedding"),
    ("Weekly plan", "Weekly review"),
    ("Books to read", "Books to lend"),
    ("Car maintenance", "Car insurance"),
    ("Garden ideas", "Garden chores"),
    ("Call José", "Call the bank"),
    ("Movie night", "Movie quotes"),
    ("Workout log", "Workout goals"),
];

const BODIES: [&str; 8] = [
    "Buy tickets before Friday",
    "Ask Renée about the café on Rue Cler",
    "Pack the blue umbrella",
    "Oil change at 15000 km",
    "Plant tomatoes and basil",
    "Bring the 东京 guidebook",
    "Check the warranty",
    "Three sets of ten push-ups",
];

const ADDITIONS: [&str; 6] = [
    "Don't forget the charger",
    "Confirm with Søren",
    "Budget 200 euros",
    "Call back after 6 pm",
    "Bring snacks",
    "Ask about the 周末 plan",
];

/// A title and its decoy, in random order of which is the target.
fn sample_titles(rng: &mut Draw) -> (String, String) {
    let (a, b) = if rng.is_open() {
        let first = rng.name();
        let (a, b) = rng.two_words(1..=3);
        (format!("{first} {a}"), format!("{first} {b}"))
    } else {
        let (a, b) = pick(rng, &TITLES);
        (a.to_string(), b.to_string())
    };
    if rng.random_bool(0.5) { (a, b) } else { (b, a) }
}

/// A note's body: a sentence of the pool, or made up.
fn sample_body(rng: &mut Draw) -> String {
    pick_or_make(rng, &BODIES, |d| d.phrase(2..=5))
}

/// Replaces any note titled `title` with one edited `hours_ago`.
fn put_note(phone: &mut Phone, title: &str, body: &str, hours_ago: u64) {
    let modified_ms = phone.now_ms().saturating_sub(hours_ago * 3_600_000);
    put_note_at(phone.state_mut(), title, body, modified_ms);
}

/// Replaces any note titled `title` with one last edited at `modified_ms`.
pub(super) fn put_note_at(state: &mut PhoneState, title: &str, body: &str, modified_ms: u64) {
    state.notes.retain(|n| !loose_eq(&n.title, title));
    let id = next_id(state.notes.iter().map(|n| n.id));
    state.notes.push(Note {
        id,
        title: title.to_string(),
        body: body.to_string(),
        modified_ms,
    });
}

fn finish_setup(phone: &mut Phone) {
    phone.force_stop(PKG);
    phone.key(Key::Home);
}

fn has_body(state: &PhoneState, title: &str, body: &str) -> bool {
    state
        .note_titled(title)
        .is_some_and(|n| n.body.trim() == body)
}

/// A note the checker expects as it was set up.
struct Decoy {
    title: String,
    body: String,
}

impl Decoy {
    fn intact(&self, state: &PhoneState) -> bool {
        has_body(state, &self.title, &self.body)
    }
}

/// What the oracle drives a note towards.
enum Want<'a> {
    /// The note with this body, written as a new note if it is missing.
    Written(&'a str),
    /// The existing note with this body; a new note's editor is left.
    Edited(&'a str),
    Gone,
}

fn note_oracle(screen: &UiNode, title: &str, want: Want) -> Option<OracleStep> {
    if !oracle::in_app(screen, PKG) {
        return Some(oracle::launch(screen, LABEL));
    }
    let editing = screen.find_by_id("title_field");
    // The delete dialog does not name the note: the editor under it does.
    let ours = editing.is_some_and(|f| f.text == title);
    if let Some(d) = oracle::dialog(screen) {
        return Some(match want {
            Want::Gone if ours => {
                oracle::tap(screen, d.confirm, format!("Confirm deleting \"{title}\"."))
            }
            _ => oracle::tap(screen, d.cancel, "Cancel this dialog."),
        });
    }
    if let Some(list) = List::find(screen, "note_list") {
        let is_target = |n: &UiNode| oracle::text_of(n, "note_title") == Some(title);
        return match oracle::seek_down(&list, is_target, &format!("the note \"{title}\"")) {
            Seek::Found(item) => {
                if let Want::Written(body) | Want::Edited(body) = want
                    && oracle::text_of(item, "note_snippet") == Some(body)
                {
                    return None;
                }
                Some(oracle::tap(
                    screen,
                    item,
                    format!("Open the note \"{title}\"."),
                ))
            }
            Seek::Absent => match want {
                Want::Gone | Want::Edited(_) => None,
                Want::Written(_) => {
                    let add = screen.find_by_id("fab_new_note")?;
                    Some(oracle::tap(
                        screen,
                        add,
                        "Tap the add button to start a new note.",
                    ))
                }
            },
            Seek::Move(step) => Some(*step),
        };
    }
    let title_field = editing?;
    let new = oracle::toolbar_title(screen) == Some("New note");
    if !new && !ours {
        return Some(oracle::navigate_up(
            screen,
            "This is another note: leave it unchanged.",
        ));
    }
    match want {
        Want::Gone | Want::Edited(_) if new => {
            Some(oracle::navigate_up(screen, "Leave the new note unsaved."))
        }
        Want::Gone => {
            let delete = screen.find_by_id("delete_button")?;
            Some(oracle::tap(
                screen,
                delete,
                format!("Delete the note \"{title}\"."),
            ))
        }
        Want::Written(body) | Want::Edited(body) => {
            if let Some(step) = oracle::fill(screen, title_field, TITLE_HINT, title, "title") {
                return Some(step);
            }
            let body_field = screen.find_by_id("body_field")?;
            if let Some(step) = oracle::fill(screen, body_field, BODY_HINT, body, "note") {
                return Some(step);
            }
            let save = screen.find_by_id("save_button")?;
            Some(oracle::tap(screen, save, "Save the note."))
        }
    }
}

/// "Create a note titled {title} containing {body}."
pub(super) struct CreateNote {
    title: String,
    body: String,
    decoy: Decoy,
}

impl CreateNote {
    pub fn sample(rng: &mut Draw) -> CreateNote {
        let (title, decoy) = sample_titles(rng);
        CreateNote {
            title,
            body: sample_body(rng),
            decoy: Decoy {
                title: decoy,
                body: sample_body(rng),
            },
        }
    }
}

impl Task for CreateNote {
    fn name(&self) -> &'static str {
        "note_create"
    }

    fn goal(&self) -> String {
        format!(
            "Create a note titled \"{}\" containing \"{}\".",
            self.title, self.body
        )
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({
            "title": self.title,
            "body": self.body,
            "decoy": self.decoy.title,
            "decoy_body": self.decoy.body,
        })
    }

    fn max_steps(&self) -> u32 {
        25
    }

    fn setup(&self, phone: &mut Phone) {
        phone
            .state_mut()
            .notes
            .retain(|n| !loose_eq(&n.title, &self.title));
        put_note(phone, &self.decoy.title, &self.decoy.body, 30);
        finish_setup(phone);
    }

    fn is_successful(&self, state: &PhoneState) -> bool {
        has_body(state, &self.title, &self.body) && self.decoy.intact(state)
    }

    fn oracle(&self, screen: &UiNode) -> Option<OracleStep> {
        note_oracle(screen, &self.title, Want::Written(&self.body))
    }
}

/// A note the set-up stores for a task to change, beside its decoy.
struct StoredNote {
    title: String,
    body: String,
    decoy: Decoy,
    hours_ago: u64,
}

impl StoredNote {
    fn params(&self) -> serde_json::Map<String, serde_json::Value> {
        [
            ("title", self.title.as_str().into()),
            ("body", self.body.as_str().into()),
            ("decoy", self.decoy.title.as_str().into()),
            ("decoy_body", self.decoy.body.as_str().into()),
            ("hours_ago", self.hours_ago.into()),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value))
        .collect()
    }

    fn setup(&self, phone: &mut Phone) {
        put_note(phone, &self.title, &self.body, self.hours_ago);
        put_note(phone, &self.decoy.title, &self.decoy.body, 4);
        finish_setup(phone);
    }
}

/// "Delete the note titled {title}."
pub(super) struct DeleteNote {
    note: StoredNote,
}

impl DeleteNote {
    pub fn sample(rng: &mut Draw) -> DeleteNote {
        let (title, decoy) = sample_titles(rng);
        DeleteNote {
            note: StoredNote {
                title,
                body: sample_body(rng),
                decoy: Decoy {
                    title: decoy,
                    body: sample_body(rng),
                },
                hours_ago: rng.random_range(0..8),
            },
        }
    }
}

impl Task for DeleteNote {
    fn name(&self) -> &'static str {
        "note_delete"
    }

    fn goal(&self) -> String {
        format!("Delete the note titled \"{}\".", self.note.title)
    }

    fn params(&self) -> serde_json::Value {
        self.note.params().into()
    }

    fn max_steps(&self) -> u32 {
        20
    }

    fn setup(&self, phone: &mut Phone) {
        self.note.setup(phone);
    }

    fn is_successful(&self, state: &PhoneState) -> bool {
        state.note_titled(&self.note.title).is_none() && self.note.decoy.intact(state)
    }

    fn oracle(&self, screen: &UiNode) -> Option<OracleStep> {
        note_oracle(screen, &self.note.title, Want::Gone)
    }
}

/// "Add {text} at the end of the note titled {title}."
pub(super) struct AppendNote {
    note: StoredNote,
    text: String,
}

impl AppendNote {
    pub fn sample(rng: &mut Draw) -> AppendNote {
        // The draws keep their order (title, body, text, decoy, age): each
        // seed names the same instance as before.
        let (title, decoy) = sample_titles(rng);
        let body = sample_body(rng);
        let text = pick_or_make(rng, &ADDITIONS, |d| d.phrase(2..=4));
        AppendNote {
            note: StoredNote {
                title,
                body,
                decoy: Decoy {
                    title: decoy,
                    body: sample_body(rng),
                },
                hours_ago: rng.random_range(0..8),
            },
            text,
        }
    }

    /// The body the oracle aims for: the old one, a space, the addition.
    fn target_body(&self) -> String {
        format!("{} {}", self.note.body, self.text)
    }
}

impl Task for AppendNote {
    fn name(&self) -> &'static str {
        "note_append"
    }

    fn goal(&self) -> String {
        format!(
            "Add \"{}\" at the end of the note titled \"{}\".",
            self.text, self.note.title
        )
    }

    fn params(&self) -> serde_json::Value {
        let mut params = self.note.params();
        params.insert("text".to_owned(), self.text.as_str().into());
        params.into()
    }

    fn max_steps(&self) -> u32 {
        20
    }

    fn setup(&self, phone: &mut Phone) {
        self.note.setup(phone);
    }

    /// The old text must stay in front and the addition come last; how
    /// they are separated (space, new line, full stop) is free.
    fn is_successful(&self, state: &PhoneState) -> bool {
        let note = &self.note;
        let appended = state.note_titled(&note.title).is_some_and(|n| {
            let body = n.body.trim();
            body.len() > note.body.len()
                && body.starts_with(&note.body)
                && body.ends_with(&self.text)
        });
        appended && note.decoy.intact(state)
    }

    fn oracle(&self, screen: &UiNode) -> Option<OracleStep> {
        note_oracle(screen, &self.note.title, Want::Edited(&self.target_body()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::tasks::tests::blank_state;

    fn state_with(notes: &[(&str, &str)]) -> PhoneState {
        let mut state = blank_state();
        for (id, (title, body)) in (1..).zip(notes) {
            state.notes.push(Note {
                id,
                title: title.to_string(),
                body: body.to_string(),
                modified_ms: 0,
            });
        }
        state
    }

    fn decoy() -> Decoy {
        Decoy {
            title: "Trip to Lisbon".into(),
            body: "Pack the blue umbrella".into(),
        }
    }

    const DECOY: (&str, &str) = ("Trip to Lisbon", "Pack the blue umbrella");

    #[test]
    fn a_created_note_needs_its_title_and_body() {
        let task = CreateNote {
            title: "Trip to 北京".into(),
            body: "Buy tickets before Friday".into(),
            decoy: decoy(),
        };
        assert!(task.is_successful(&state_with(&[
            DECOY,
            ("trip to 北京", "Buy tickets before Friday\n"),
        ])));
        for notes in [
            vec![DECOY],
            vec![DECOY, ("Trip to 北京", "Buy tickets")],
            vec![DECOY, ("Trip to Beijing", "Buy tickets before Friday")],
            vec![("Trip to Lisbon", "Buy tickets before Friday")],
            vec![("Trip to 北京", "Buy tickets before Friday")],
        ] {
            assert!(!task.is_successful(&state_with(&notes)), "{notes:?}");
        }
    }

    #[test]
    fn deleting_a_note_spares_the_decoy() {
        let task = DeleteNote {
            note: StoredNote {
                title: "Trip to 北京".into(),
                body: "x".into(),
                decoy: decoy(),
                hours_ago: 0,
            },
        };
        assert!(task.is_successful(&state_with(&[DECOY])));
        assert!(!task.is_successful(&state_with(&[DECOY, ("Trip to 北京", "x")])));
        assert!(!task.is_successful(&state_with(&[("Trip to 北京", "x")])));
        assert!(!task.is_successful(&state_with(&[])));
    }

    #[test]
    fn appended_text_must_follow_the_old_text() {
        let task = AppendNote {
            note: StoredNote {
                title: "Workout log".into(),
                body: "Three sets".into(),
                decoy: decoy(),
                hours_ago: 0,
            },
            text: "Bring snacks".into(),
        };
        for (body, ok) in [
            ("Three sets Bring snacks", true),
            ("Three sets\nBring snacks ", true),
            ("Three sets. Bring snacks", true),
            ("Three sets", false),
            ("Bring snacks", false),
            ("Bring snacks Three sets", false),
            ("Three sets Bring", false),
        ] {
            let state = state_with(&[DECOY, ("Workout log", body)]);
            assert_eq!(task.is_successful(&state), ok, "{body:?}");
        }
        let on_decoy = state_with(&[
            ("Trip to Lisbon", "Pack the blue umbrella Bring snacks"),
            ("Workout log", "Three sets Bring snacks"),
        ]);
        assert!(!task.is_successful(&on_decoy));
    }
}
