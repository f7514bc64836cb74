//! Notes (`com.btl.notes`): a list of notes, last modified first; an editor
//! with a title and a multi-line body, saved with Save; deletion behind a
//! confirmation dialog. Back leaves the editor without saving.

use super::{App, AppMsg, Effect, Enter, Stack};
use crate::sim::phone::scene::{Align, Column, Element, Glyph, Look, Msg as SceneMsg};
use crate::sim::phone::state::{Note, PhoneState, next_id};
use crate::sim::phone::widgets::{
    Cx, DIVIDER, TEXT, TEXT_2, app_bar, bar_height, bar_icon, bar_text_button, content_root,
    dialog, edit_text, fab, label, rid, scroller, text_look,
};

pub(crate) const PKG: &str = "com.btl.notes";

const TITLE: &str = "com.btl.notes:id/title_field";
const BODY: &str = "com.btl.notes:id/body_field";

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Page {
    List,
    /// The editor; `id` is `None` for a new note.
    Edit {
        id: Option<u32>,
        title: String,
        body: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Msg {
    Open(u32),
    New,
    Save,
    AskDelete,
    Delete,
    Dismiss,
}

fn msg(m: Msg) -> SceneMsg {
    SceneMsg::App(AppMsg::Notes(m))
}

#[derive(Debug, Clone)]
pub(crate) struct Notes {
    stack: Stack<Page>,
    confirm_delete: bool,
}

impl Default for Notes {
    fn default() -> Self {
        Notes {
            stack: Stack::new(Page::List),
            confirm_delete: false,
        }
    }
}

impl Notes {
    pub fn update(&mut self, m: Msg, data: &mut PhoneState, now_ms: u64) -> Effect {
        match m {
            Msg::Open(id) => {
                if let Some(n) = data.note(id) {
                    let page = Page::Edit {
                        id: Some(id),
                        title: n.title.clone(),
                        body: n.body.clone(),
                    };
                    self.stack.push(page);
                }
            }
            Msg::New => self.stack.push(Page::Edit {
                id: None,
                title: String::new(),
                body: String::new(),
            }),
            Msg::Save => {
                if let Page::Edit { id, title, body } = self.stack.top().clone() {
                    save(data, id, title, body, now_ms);
                    self.stack.pop();
                }
            }
            Msg::AskDelete => self.confirm_delete = true,
            Msg::Delete => {
                self.confirm_delete = false;
                if let Page::Edit { id: Some(id), .. } = self.stack.top() {
                    let id = *id;
                    data.notes.retain(|n| n.id != id);
                    self.stack.pop();
                }
            }
            Msg::Dismiss => self.confirm_delete = false,
        }
        Effect::None
    }

    fn list_page(&self, cx: &Cx, data: &PhoneState) -> Element {
        let mut sorted: Vec<&Note> = data.notes.iter().collect();
        sorted.sort_by_key(|n| (std::cmp::Reverse(n.modified_ms), std::cmp::Reverse(n.id)));
        let body = cx.content.below(bar_height(cx));
        let mut col = Column::new(body, self.stack.scroll());
        col.gap(cx.dp(8.0));
        for n in sorted {
            let r = col.next(cx.dp(96.0)).inset(cx.dp(16.0), cx.dp(6.0));
            let inner = r.inset(cx.dp(16.0), cx.dp(12.0));
            let mut title = text_look(cx, 17.0, TEXT);
            title.bold = true;
            let title_text = if n.title.is_empty() {
                "Untitled"
            } else {
                n.title.as_str()
            };
            col.push(
                Element::new("android.widget.LinearLayout", r)
                    .id(rid(PKG, "note_item"))
                    .on_tap(msg(Msg::Open(n.id)))
                    .look(Look {
                        fill: Some([255, 255, 255, 255]),
                        stroke: Some((DIVIDER, cx.dp(1.0).max(1))),
                        radius: cx.dp(12.0),
                        ..Look::default()
                    })
                    .child(label(
                        inner.top(cx.dp(28.0)),
                        rid(PKG, "note_title"),
                        title_text,
                        title,
                    ))
                    .child(label(
                        inner.below(cx.dp(30.0)),
                        rid(PKG, "note_snippet"),
                        n.body.replace('\n', " "),
                        text_look(cx, 14.0, TEXT_2),
                    )),
            );
        }
        col.gap(cx.dp(88.0));
        let mut root = content_root(cx).child(app_bar(cx, PKG, "Notes", false, Vec::new()));
        if data.notes.is_empty() {
            let mut look = text_look(cx, 16.0, TEXT_2);
            look.align = Align::Center;
            root = root.child(label(body, rid(PKG, "empty_view"), "No notes yet", look));
        }
        root.child(col.finish(scroller(
            "androidx.recyclerview.widget.RecyclerView",
            rid(PKG, "note_list"),
        )))
        .child(fab(cx, rid(PKG, "fab_new_note"), "New note", msg(Msg::New)))
    }

    fn edit_page(&self, cx: &Cx, id: Option<u32>, title: &str, body: &str) -> Element {
        let mut actions = vec![bar_text_button(
            cx,
            rid(PKG, "save_button"),
            "Save",
            msg(Msg::Save),
        )];
        if id.is_some() {
            actions.push(bar_icon(
                cx,
                rid(PKG, "delete_button"),
                "Delete",
                Glyph::Trash { color: TEXT },
                msg(Msg::AskDelete),
            ));
        }
        let heading = if id.is_some() {
            "Edit note"
        } else {
            "New note"
        };
        let area = cx
            .content
            .below(bar_height(cx))
            .inset(cx.dp(16.0), cx.dp(8.0));
        let title_r = area.top(cx.dp(56.0));
        let body_r = area.below(cx.dp(68.0));
        let mut root = content_root(cx)
            .child(app_bar(cx, PKG, heading, true, actions))
            .child(edit_text(
                cx,
                title_r,
                TITLE.to_string(),
                title,
                "Title",
                false,
            ))
            .child(edit_text(cx, body_r, BODY.to_string(), body, "Note", true));
        if self.confirm_delete {
            root = root.child(dialog(
                cx,
                "Delete note?",
                "This note will be permanently deleted.",
                msg(Msg::Dismiss),
                ("Delete", msg(Msg::Delete)),
            ));
        }
        root
    }
}

/// Stores an edited or new note; an all-empty new note is discarded.
fn save(data: &mut PhoneState, id: Option<u32>, title: String, body: String, now_ms: u64) {
    let title = title.trim().to_string();
    let body = body.trim_end().to_string();
    match id.and_then(|id| data.notes.iter_mut().find(|n| n.id == id)) {
        Some(n) => {
            (n.title, n.body, n.modified_ms) = (title, body, now_ms);
        }
        None if title.is_empty() && body.is_empty() => {}
        None => {
            let id = next_id(data.notes.iter().map(|n| n.id));
            data.notes.push(Note {
                id,
                title,
                body,
                modified_ms: now_ms,
            });
        }
    }
}

impl App for Notes {
    fn build(&self, cx: &Cx, data: &PhoneState) -> Element {
        match self.stack.top() {
            Page::List => self.list_page(cx, data),
            Page::Edit { id, title, body } => self.edit_page(cx, *id, title, body),
        }
    }

    fn activity(&self) -> &'static str {
        match self.stack.top() {
            Page::List => super::MAIN_ACTIVITY,
            Page::Edit { .. } => "NoteEditorActivity",
        }
    }

    fn back(&mut self) -> bool {
        if std::mem::take(&mut self.confirm_delete) {
            return true;
        }
        self.stack.pop()
    }

    fn field_mut(&mut self, id: &str) -> Option<&mut String> {
        let Page::Edit { title, body, .. } = self.stack.top_mut() else {
            return None;
        };
        match id {
            TITLE => Some(title),
            BODY => Some(body),
            _ => None,
        }
    }

    fn enter(&mut self, id: &str, _data: &mut PhoneState, _now_ms: u64) -> Enter {
        match id {
            TITLE => Enter::Next {
                id: BODY.to_string(),
                select_all: false,
            },
            _ => Enter::Newline,
        }
    }

    fn scroll_mut(&mut self) -> &mut i32 {
        self.stack.scroll_mut()
    }
}
