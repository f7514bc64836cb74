//! Gallery tasks: delete one photo (opened, then deleted from its page) or
//! two (selected together with a long press, then deleted at once).
//!
//! Set-ups store the photos at random dates, so they may sit anywhere in
//! the grid, below the fold included, plus a decoy named like the first
//! target (`passport_14.jpg` for `passport_13.jpg`) that checkers require
//! kept. The grid is sorted by date, which a screen does not show, so the
//! oracle scans it from the top, where the app opens after set-up.

use super::oracle::{self, List, Seek};
use super::values::Draw;
use super::{OracleStep, Task, pick_or_make};
use crate::device::ui::UiNode;
use crate::sim::phone::{Key, MediaFile, Phone, PhoneState};
use rand::RngExt;

const PKG: &str = "com.btl.gallery";
const LABEL: &str = "Gallery";
const DAY_MS: u64 = 86_400_000;
const HOUR_MS: u64 = 3_600_000;

const SUBJECTS: [&str; 12] = [
    "passport",
    "boarding_pass",
    "北京",
    "café",
    "zoë",
    "invoice",
    "parking",
    "recipe",
    "screenshot",
    "menu",
    "selfie",
    "whiteboard",
];

/// What a photo's name says it shows: one of the pool, or a made-up word.
fn sample_subject(rng: &mut Draw) -> String {
    pick_or_make(rng, &SUBJECTS, |d| d.word(1..=3))
}

/// A photo a task puts in the gallery: its name and how old it is, which
/// decides its place in the grid.
#[derive(Debug, Clone)]
struct Photo {
    name: String,
    age_ms: u64,
}

impl Photo {
    fn sample(rng: &mut Draw, subject: &str, number: u32) -> Photo {
        Photo {
            name: format!("{subject}_{number:02}.jpg"),
            age_ms: rng.random_range(0..25) * DAY_MS + rng.random_range(1..24) * HOUR_MS,
        }
    }

    fn put(&self, phone: &mut Phone) {
        let taken_ms = phone.now_ms().saturating_sub(self.age_ms);
        let size_bytes = 1_000_000 + self.age_ms % 3_000_000;
        let files = &mut phone.state_mut().files;
        files.retain(|f| f.name != self.name);
        files.push(MediaFile {
            path: format!("/sdcard/Pictures/{}", self.name),
            name: self.name.clone(),
            size_bytes,
            taken_ms,
        });
    }
}

/// "Delete the photo named {x}." / "Delete the photos {x} and {y}."
pub(super) struct DeletePhotos {
    photos: Vec<Photo>,
    decoy: Photo,
}

impl DeletePhotos {
    /// `count` photos of different subjects, 1 or 2.
    pub fn sample(rng: &mut Draw, count: usize) -> DeletePhotos {
        let number = rng.random_range(10..98);
        let first = sample_subject(rng);
        let mut photos = vec![Photo::sample(rng, &first, number)];
        while photos.len() < count {
            let subject = sample_subject(rng);
            if subject != first {
                let number = rng.random_range(10..99);
                photos.push(Photo::sample(rng, &subject, number));
            }
        }
        DeletePhotos {
            photos,
            decoy: Photo::sample(rng, &first, number + 1),
        }
    }

    fn is_target(&self, name: &str) -> bool {
        self.photos.iter().any(|p| p.name == name)
    }

    fn names(&self) -> String {
        let names: Vec<&str> = self.photos.iter().map(|p| p.name.as_str()).collect();
        names.join(" and ")
    }

    /// One photo: find it, open it, delete it from its page.
    fn open_and_delete(&self, screen: &UiNode, list: &List) -> Option<OracleStep> {
        if let Some(close) = screen.find_by_id("close_selection") {
            return Some(oracle::tap(screen, close, "Leave selection mode."));
        }
        let what = format!("the photo {}", self.names());
        match oracle::seek_down(list, |i| self.is_target(&i.content_desc), &what) {
            Seek::Found(item) => Some(oracle::tap(
                screen,
                item,
                format!("Open {}.", item.content_desc),
            )),
            Seek::Absent => None,
            Seek::Move(step) => Some(*step),
        }
    }

    /// Several photos: long-press the first to start selecting, tap the
    /// others, delete them together.
    fn select_and_delete(&self, screen: &UiNode, list: &List) -> Option<OracleStep> {
        let selecting = screen.find_by_id("close_selection").is_some();
        let selected = oracle::toolbar_title(screen)
            .and_then(|t| t.strip_suffix(" selected"))
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(0);
        // Only targets are ever selected by this oracle, so the count tells
        // whether they all are, even those scrolled out of view.
        if selecting && selected >= self.photos.len() {
            let delete = screen.find_by_id("delete_button")?;
            return Some(oracle::tap(
                screen,
                delete,
                format!("Delete the {selected} selected photos."),
            ));
        }
        let what = format!("the photos {}", self.names());
        match oracle::seek_down(
            list,
            |i| self.is_target(&i.content_desc) && !i.selected,
            &what,
        ) {
            Seek::Found(item) if selecting => Some(oracle::tap(
                screen,
                item,
                format!("Select {} too.", item.content_desc),
            )),
            Seek::Found(item) => Some(oracle::long_press(
                screen,
                item,
                format!(
                    "Long-press {} to start selecting photos.",
                    item.content_desc
                ),
            )),
            // Some target was never there: delete those that were.
            Seek::Absent if selecting => {
                let delete = screen.find_by_id("delete_button")?;
                Some(oracle::tap(screen, delete, "Delete the selected photos."))
            }
            Seek::Absent => None,
            Seek::Move(step) => Some(*step),
        }
    }
}

impl Task for DeletePhotos {
    fn name(&self) -> &'static str {
        if self.photos.len() == 1 {
            "photo_delete"
        } else {
            "photos_delete_two"
        }
    }

    fn goal(&self) -> String {
        if self.photos.len() == 1 {
            format!("Delete the photo named {}.", self.names())
        } else {
            format!("Delete the photos {}.", self.names())
        }
    }

    fn params(&self) -> serde_json::Value {
        let photos: Vec<serde_json::Value> = self
            .photos
            .iter()
            .map(|p| serde_json::json!({ "name": p.name, "age_ms": p.age_ms }))
            .collect();
        serde_json::json!({
            "photos": photos,
            "decoy": { "name": self.decoy.name, "age_ms": self.decoy.age_ms },
        })
    }

    fn max_steps(&self) -> u32 {
        25
    }

    fn setup(&self, phone: &mut Phone) {
        for photo in self.photos.iter().chain([&self.decoy]) {
            photo.put(phone);
        }
        phone.force_stop(PKG);
        phone.key(Key::Home);
    }

    fn is_successful(&self, state: &PhoneState) -> bool {
        self.photos.iter().all(|p| state.file(&p.name).is_none())
            && state.file(&self.decoy.name).is_some()
    }

    fn oracle(&self, screen: &UiNode) -> Option<OracleStep> {
        if !oracle::in_app(screen, PKG) {
            return Some(oracle::launch(screen, LABEL));
        }
        let viewing = screen.find_by_id("photo_view");
        if let Some(d) = oracle::dialog(screen) {
            // On a photo's page the dialog is about that photo; in the grid,
            // about the selection, which holds targets only.
            let ours = match viewing {
                Some(view) => self.is_target(&view.content_desc),
                None => screen.find_by_id("close_selection").is_some(),
            };
            return Some(if ours {
                oracle::tap(screen, d.confirm, format!("Confirm: {}", d.title))
            } else {
                oracle::tap(screen, d.cancel, "Cancel this dialog.")
            });
        }
        if let Some(view) = viewing {
            if !self.is_target(&view.content_desc) {
                return Some(oracle::back("Go back to the photo grid."));
            }
            let delete = screen.find_by_id("delete_button")?;
            return Some(oracle::tap(
                screen,
                delete,
                format!("Delete {}.", view.content_desc),
            ));
        }
        let Some(list) = List::find(screen, "photo_grid") else {
            return Some(oracle::back("Go back to the photo grid."));
        };
        if let Some(stray) = list
            .items
            .iter()
            .find(|i| i.selected && !self.is_target(&i.content_desc))
        {
            return Some(oracle::tap(
                screen,
                stray,
                format!("Unselect {}, which should stay.", stray.content_desc),
            ));
        }
        if self.photos.len() == 1 {
            self.open_and_delete(screen, &list)
        } else {
            self.select_and_delete(screen, &list)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::tasks::tests::blank_state;

    fn photo(name: &str) -> Photo {
        Photo {
            name: name.into(),
            age_ms: 0,
        }
    }

    fn state_with(names: &[&str]) -> PhoneState {
        let mut state = blank_state();
        state.files = names
            .iter()
            .map(|n| MediaFile {
                name: n.to_string(),
                path: format!("/sdcard/Pictures/{n}"),
                size_bytes: 1,
                taken_ms: 0,
            })
            .collect();
        state
    }

    #[test]
    fn deleting_photos_means_all_of_them_and_not_the_decoy() {
        let task = DeletePhotos {
            photos: vec![photo("北京_12.jpg"), photo("menu_40.jpg")],
            decoy: photo("北京_13.jpg"),
        };
        assert_eq!(task.name(), "photos_delete_two");
        assert!(task.is_successful(&state_with(&["北京_13.jpg", "cat_01.jpg"])));
        for names in [
            vec!["北京_13.jpg", "menu_40.jpg"],
            vec!["北京_13.jpg", "北京_12.jpg"],
            vec!["cat_01.jpg"],
            vec!["北京_12.jpg", "menu_40.jpg", "北京_13.jpg"],
        ] {
            assert!(!task.is_successful(&state_with(&names)), "{names:?}");
        }
    }

    #[test]
    fn one_photo_is_matched_by_its_exact_name() {
        let task = DeletePhotos {
            photos: vec![photo("zoë_20.jpg")],
            decoy: photo("zoë_21.jpg"),
        };
        assert_eq!(task.name(), "photo_delete");
        assert!(task.is_successful(&state_with(&["zoë_21.jpg", "zoe_20.jpg"])));
        assert!(!task.is_successful(&state_with(&["zoë_21.jpg", "zoë_20.jpg"])));
    }
}
