//! The installed apps: their identities (package, label, icon colour), the
//! [`App`] interface the phone drives them through, and message dispatch.
//!
//! Each app keeps only navigation state (its page stack, drafts being
//! typed, an open dialog); the data it shows and edits is in
//! [`PhoneState`], passed in on every call, so task checkers never need to
//! look inside an app.

pub(crate) mod browser;
pub(crate) mod clock;
pub(crate) mod contacts;
pub(crate) mod gallery;
pub(crate) mod notes;
pub(crate) mod settings;

use super::scene::{Color, Element};
use super::state::PhoneState;
use super::widgets::Cx;

/// The apps the launcher shows, in launcher order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum AppId {
    Settings,
    Contacts,
    Notes,
    Clock,
    Browser,
    Gallery,
}

impl AppId {
    pub const ALL: [AppId; 6] = [
        AppId::Settings,
        AppId::Contacts,
        AppId::Notes,
        AppId::Clock,
        AppId::Browser,
        AppId::Gallery,
    ];

    pub fn package(self) -> &'static str {
        match self {
            AppId::Settings => settings::PKG,
            AppId::Contacts => contacts::PKG,
            AppId::Notes => notes::PKG,
            AppId::Clock => clock::PKG,
            AppId::Browser => browser::PKG,
            AppId::Gallery => gallery::PKG,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            AppId::Settings => "Settings",
            AppId::Contacts => "Contacts",
            AppId::Notes => "Notes",
            AppId::Clock => "Clock",
            AppId::Browser => "Browser",
            AppId::Gallery => "Gallery",
        }
    }

    pub fn color(self) -> Color {
        match self {
            AppId::Settings => [0x5F, 0x63, 0x68, 255],
            AppId::Contacts => [0x1A, 0x73, 0xE8, 255],
            AppId::Notes => [0xF2, 0x9C, 0x00, 255],
            AppId::Clock => [0x39, 0x49, 0xAB, 255],
            AppId::Browser => [0x18, 0x80, 0x38, 255],
            AppId::Gallery => [0xD8, 0x1B, 0x60, 255],
        }
    }

    pub fn from_package(package: &str) -> Option<AppId> {
        AppId::ALL.into_iter().find(|a| a.package() == package)
    }
}

/// An app's message, routed to the app in the foreground.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AppMsg {
    Settings(settings::Msg),
    Contacts(contacts::Msg),
    Notes(notes::Msg),
    Clock(clock::Msg),
    Browser(browser::Msg),
    Gallery(gallery::Msg),
}

/// What Enter does in a focused field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Enter {
    /// Insert a line break (multi-line fields).
    Newline,
    /// Move the focus to the field with this id (see [`Msg::Focus`] for
    /// `select_all`).
    ///
    /// [`Msg::Focus`]: super::scene::Msg::Focus
    Next { id: String, select_all: bool },
    /// Drop the focus and hide the keyboard (the app may have acted).
    Done,
}

/// What an app asks of the phone after handling a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effect {
    None,
    HideKeyboard,
}

/// How the phone drives an app, whatever its screens.
pub(crate) trait App {
    /// The app's window content for the current page, inside `cx.content`.
    fn build(&self, cx: &Cx, data: &PhoneState) -> Element;

    /// Simple class name of the current page's activity (`MainActivity`).
    fn activity(&self) -> &'static str;

    /// Handles Back; `false` when already at the root, so the app closes.
    fn back(&mut self) -> bool;

    /// The text of the field with this resource id on the current page;
    /// an app without text fields has none.
    fn field_mut(&mut self, _id: &str) -> Option<&mut String> {
        None
    }

    /// The Enter key in the field with this resource id.
    fn enter(&mut self, _id: &str, _data: &mut PhoneState, _now_ms: u64) -> Enter {
        Enter::Done
    }

    /// The scroll offset of the current page's scrolling view.
    fn scroll_mut(&mut self) -> &mut i32;
}

/// The launch activity every app has, the only one `start_app` opens.
pub(crate) const MAIN_ACTIVITY: &str = "MainActivity";

/// A back stack of pages, never empty, each with its scroll offset.
#[derive(Debug, Clone)]
pub(crate) struct Stack<P> {
    root: (P, i32),
    above: Vec<(P, i32)>,
}

impl<P> Stack<P> {
    pub fn new(root: P) -> Self {
        Stack {
            root: (root, 0),
            above: Vec::new(),
        }
    }

    pub fn top(&self) -> &P {
        &self.above.last().unwrap_or(&self.root).0
    }

    pub fn top_mut(&mut self) -> &mut P {
        &mut self.above.last_mut().unwrap_or(&mut self.root).0
    }

    pub fn scroll(&self) -> i32 {
        self.above.last().unwrap_or(&self.root).1
    }

    pub fn scroll_mut(&mut self) -> &mut i32 {
        &mut self.above.last_mut().unwrap_or(&mut self.root).1
    }

    pub fn push(&mut self, page: P) {
        self.above.push((page, 0));
    }

    /// Drops the top page; `false` at the root.
    pub fn pop(&mut self) -> bool {
        self.above.pop().is_some()
    }

    /// Swaps the top page for another, as an activity finishing while
    /// starting the next does.
    pub fn replace(&mut self, page: P) {
        if self.above.pop().is_some() {
            self.above.push((page, 0));
        } else {
            self.root = (page, 0);
        }
    }
}

/// Every app's navigation state.
#[derive(Debug, Clone, Default)]
pub(crate) struct Apps {
    settings: settings::Settings,
    contacts: contacts::Contacts,
    notes: notes::Notes,
    clock: clock::Clock,
    browser: browser::Browser,
    gallery: gallery::Gallery,
}

impl Apps {
    pub fn get(&self, id: AppId) -> &dyn App {
        match id {
            AppId::Settings => &self.settings,
            AppId::Contacts => &self.contacts,
            AppId::Notes => &self.notes,
            AppId::Clock => &self.clock,
            AppId::Browser => &self.browser,
            AppId::Gallery => &self.gallery,
        }
    }

    pub fn get_mut(&mut self, id: AppId) -> &mut dyn App {
        match id {
            AppId::Settings => &mut self.settings,
            AppId::Contacts => &mut self.contacts,
            AppId::Notes => &mut self.notes,
            AppId::Clock => &mut self.clock,
            AppId::Browser => &mut self.browser,
            AppId::Gallery => &mut self.gallery,
        }
    }

    /// Back to the launch page with nothing typed, as after a force stop.
    pub fn reset(&mut self, id: AppId) {
        match id {
            AppId::Settings => self.settings = Default::default(),
            AppId::Contacts => self.contacts = Default::default(),
            AppId::Notes => self.notes = Default::default(),
            AppId::Clock => self.clock = Default::default(),
            AppId::Browser => self.browser = Default::default(),
            AppId::Gallery => self.gallery = Default::default(),
        }
    }

    /// Delivers a message to the app it belongs to, if that app is `to`; a
    /// message from a screen that is no longer in front is dropped.
    pub fn update(&mut self, to: AppId, msg: AppMsg, data: &mut PhoneState, now_ms: u64) -> Effect {
        match (to, msg) {
            (AppId::Settings, AppMsg::Settings(m)) => self.settings.update(m, data),
            (AppId::Contacts, AppMsg::Contacts(m)) => self.contacts.update(m, data),
            (AppId::Notes, AppMsg::Notes(m)) => self.notes.update(m, data, now_ms),
            (AppId::Clock, AppMsg::Clock(m)) => self.clock.update(m, data),
            (AppId::Browser, AppMsg::Browser(m)) => self.browser.update(m, data),
            (AppId::Gallery, AppMsg::Gallery(m)) => self.gallery.update(m, data),
            _ => Effect::None,
        }
    }
}
