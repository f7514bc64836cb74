//! Contacts (`com.btl.contacts`): a scrolling list sorted by name, a detail
//! page, a create/edit form (name, phone, email) and deletion with a
//! confirmation dialog.

use super::{App, AppMsg, Effect, Enter, Stack};
use crate::sim::phone::scene::{Align, Column, Element, Glyph, Look, Msg as SceneMsg};
use crate::sim::phone::state::{Contact, PhoneState, next_id};
use crate::sim::phone::widgets::{
    Cx, PRIMARY, Row, TEXT, TEXT_2, app_bar, bar_height, bar_icon, bar_text_button, content_root,
    dialog, edit_text, fab, label, rid, row, scroller, symbol, text_look,
};

pub(crate) const PKG: &str = "com.btl.contacts";

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Draft {
    pub name: String,
    pub phone: String,
    pub email: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Page {
    List,
    Detail(u32),
    /// The form; `id` is `None` for a new contact.
    Edit {
        id: Option<u32>,
        draft: Draft,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Msg {
    Open(u32),
    New,
    Edit(u32),
    Save,
    AskDelete(u32),
    Delete(u32),
    Dismiss,
}

fn msg(m: Msg) -> SceneMsg {
    SceneMsg::App(AppMsg::Contacts(m))
}

const NAME: &str = "com.btl.contacts:id/name_field";
const PHONE: &str = "com.btl.contacts:id/phone_field";
const EMAIL: &str = "com.btl.contacts:id/email_field";

#[derive(Debug, Clone)]
pub(crate) struct Contacts {
    stack: Stack<Page>,
    /// The contact a delete confirmation is open for.
    confirm_delete: Option<u32>,
}

impl Default for Contacts {
    fn default() -> Self {
        Contacts {
            stack: Stack::new(Page::List),
            confirm_delete: None,
        }
    }
}

/// A contact's initial for its avatar.
pub(crate) fn initial(name: &str) -> String {
    name.trim()
        .chars()
        .next()
        .map(|c| c.to_uppercase().collect())
        .unwrap_or_else(|| "?".into())
}

/// The avatar colour, stable per contact.
fn avatar_color(id: u32) -> [u8; 4] {
    const COLORS: [[u8; 4]; 6] = [
        [0x1A, 0x73, 0xE8, 255],
        [0xD9, 0x30, 0x25, 255],
        [0x18, 0x80, 0x38, 255],
        [0xE3, 0x74, 0x00, 255],
        [0x9C, 0x27, 0xB0, 255],
        [0x00, 0x79, 0x6B, 255],
    ];
    COLORS[id as usize % COLORS.len()]
}

impl Contacts {
    pub fn update(&mut self, m: Msg, data: &mut PhoneState) -> Effect {
        match m {
            Msg::Open(id) => self.stack.push(Page::Detail(id)),
            Msg::New => self.stack.push(Page::Edit {
                id: None,
                draft: Draft::default(),
            }),
            Msg::Edit(id) => {
                if let Some(c) = data.contact(id) {
                    let draft = Draft {
                        name: c.name.clone(),
                        phone: c.phone.clone(),
                        email: c.email.clone(),
                    };
                    self.stack.push(Page::Edit {
                        id: Some(id),
                        draft,
                    });
                }
            }
            Msg::Save => self.save(data),
            Msg::AskDelete(id) => self.confirm_delete = Some(id),
            Msg::Delete(id) => {
                self.confirm_delete = None;
                data.contacts.retain(|c| c.id != id);
                while matches!(self.stack.top(), Page::Detail(d) | Page::Edit { id: Some(d), .. } if *d == id)
                {
                    if !self.stack.pop() {
                        break;
                    }
                }
            }
            Msg::Dismiss => self.confirm_delete = None,
        }
        Effect::None
    }

    /// Saves the form: an all-empty form is discarded; a new contact then
    /// shows its detail page, an edited one returns to it.
    fn save(&mut self, data: &mut PhoneState) {
        let Page::Edit { id, draft } = self.stack.top().clone() else {
            return;
        };
        let fields =
            [draft.name.trim(), draft.phone.trim(), draft.email.trim()].map(str::to_string);
        if fields.iter().all(String::is_empty) {
            self.stack.pop();
            return;
        }
        let [name, phone, email] = fields;
        match id.and_then(|id| data.contacts.iter_mut().find(|c| c.id == id)) {
            Some(c) => {
                (c.name, c.phone, c.email) = (name, phone, email);
                self.stack.pop();
            }
            None => {
                let id = next_id(data.contacts.iter().map(|c| c.id));
                data.contacts.push(Contact {
                    id,
                    name,
                    phone,
                    email,
                });
                self.stack.replace(Page::Detail(id));
            }
        }
    }

    fn list_page(&self, cx: &Cx, data: &PhoneState) -> Element {
        let mut sorted: Vec<&Contact> = data.contacts.iter().collect();
        sorted.sort_by_key(|c| (c.name.to_lowercase(), c.id));
        let body = cx.content.below(bar_height(cx));
        let mut col = Column::new(body, self.stack.scroll());
        for c in sorted {
            let r = col.next(cx.dp(64.0));
            let mut item = row(
                cx,
                r,
                Row {
                    id: rid(PKG, "contact_item"),
                    title: &c.name,
                    summary: None,
                    badge: Some((avatar_color(c.id), initial(&c.name))),
                    trailing: None,
                    on_tap: Some(msg(Msg::Open(c.id))),
                },
            );
            if let Some(title) = item
                .children
                .iter_mut()
                .find(|e| e.id == "android:id/title")
            {
                title.id = rid(PKG, "contact_name");
            }
            col.push(item);
        }
        col.gap(cx.dp(88.0));
        let mut root = content_root(cx).child(app_bar(cx, PKG, "Contacts", false, Vec::new()));
        if data.contacts.is_empty() {
            let mut look = text_look(cx, 16.0, TEXT_2);
            look.align = Align::Center;
            root = root.child(label(body, rid(PKG, "empty_view"), "No contacts", look));
        }
        root.child(col.finish(scroller(
            "androidx.recyclerview.widget.RecyclerView",
            rid(PKG, "contact_list"),
        )))
        .child(fab(
            cx,
            rid(PKG, "fab_add"),
            "Create contact",
            msg(Msg::New),
        ))
    }

    fn detail_page(&self, cx: &Cx, c: &Contact) -> Element {
        let actions = vec![
            bar_icon(
                cx,
                rid(PKG, "edit_button"),
                "Edit",
                symbol(cx, "✎", 22.0, TEXT),
                msg(Msg::Edit(c.id)),
            ),
            bar_icon(
                cx,
                rid(PKG, "delete_button"),
                "Delete",
                Glyph::Trash { color: TEXT },
                msg(Msg::AskDelete(c.id)),
            ),
        ];
        let body = cx.content.below(bar_height(cx));
        let mut col = Column::new(body, self.stack.scroll());
        let avatar_r = col.next(cx.dp(128.0));
        let size = cx.dp(96.0);
        col.push(
            Element::new("android.widget.ImageView", avatar_r.centered(size, size))
                .id(rid(PKG, "contact_photo"))
                .look(Look {
                    glyph: Glyph::Badge {
                        color: avatar_color(c.id),
                        letter: initial(&c.name),
                        size,
                        top: false,
                    },
                    ..Look::default()
                }),
        );
        let mut name_look = text_look(cx, 28.0, TEXT);
        name_look.align = Align::Center;
        let name_r = col.next(cx.dp(56.0)).inset(cx.dp(16.0), 0);
        col.push(label(name_r, rid(PKG, "contact_name"), &c.name, name_look));
        col.gap(cx.dp(16.0));
        for (id, caption, value) in [
            ("contact_phone", "Phone", &c.phone),
            ("contact_email", "Email", &c.email),
        ] {
            if value.is_empty() {
                continue;
            }
            let r = col.next(cx.dp(72.0));
            let inner = r.inset(cx.dp(16.0), cx.dp(8.0));
            let mut cap = text_look(cx, 12.0, PRIMARY);
            cap.bold = true;
            col.push(
                Element::new("android.widget.LinearLayout", r)
                    .child(label(inner.top(cx.dp(20.0)), String::new(), caption, cap))
                    .child(label(
                        inner.below(cx.dp(20.0)),
                        rid(PKG, id),
                        value.as_str(),
                        text_look(cx, 18.0, TEXT),
                    )),
            );
        }
        let mut root = content_root(cx)
            .child(app_bar(cx, PKG, "", true, actions))
            .child(col.finish(scroller(
                "android.widget.ScrollView",
                rid(PKG, "contact_detail"),
            )));
        if self.confirm_delete == Some(c.id) {
            root = root.child(dialog(
                cx,
                "Delete contact?",
                &format!("{} will be removed from your contacts.", c.name),
                msg(Msg::Dismiss),
                ("Delete", msg(Msg::Delete(c.id))),
            ));
        }
        root
    }

    fn edit_page(&self, cx: &Cx, id: Option<u32>, draft: &Draft) -> Element {
        let title = if id.is_some() {
            "Edit contact"
        } else {
            "Create contact"
        };
        let actions = vec![bar_text_button(
            cx,
            rid(PKG, "save_button"),
            "Save",
            msg(Msg::Save),
        )];
        let body = cx.content.below(bar_height(cx));
        let mut col = Column::new(body, self.stack.scroll());
        col.gap(cx.dp(8.0));
        for (field, value, hint) in [
            (NAME, &draft.name, "Name"),
            (PHONE, &draft.phone, "Phone"),
            (EMAIL, &draft.email, "Email"),
        ] {
            let r = col.next(cx.dp(72.0)).inset(cx.dp(16.0), cx.dp(8.0));
            col.push(edit_text(cx, r, field.to_string(), value, hint, false));
        }
        content_root(cx)
            .child(app_bar(cx, PKG, title, true, actions))
            .child(col.finish(scroller("android.widget.ScrollView", rid(PKG, "editor"))))
    }
}

impl App for Contacts {
    fn build(&self, cx: &Cx, data: &PhoneState) -> Element {
        match self.stack.top() {
            Page::List => self.list_page(cx, data),
            Page::Detail(id) => match data.contact(*id) {
                Some(c) => self.detail_page(cx, c),
                // Deleted behind the page's back (e.g. by a task set-up).
                None => self.list_page(cx, data),
            },
            Page::Edit { id, draft } => self.edit_page(cx, *id, draft),
        }
    }

    fn activity(&self) -> &'static str {
        match self.stack.top() {
            Page::List => super::MAIN_ACTIVITY,
            Page::Detail(_) => "ContactDetailActivity",
            Page::Edit { .. } => "ContactEditorActivity",
        }
    }

    fn back(&mut self) -> bool {
        if self.confirm_delete.take().is_some() {
            return true;
        }
        self.stack.pop()
    }

    fn field_mut(&mut self, id: &str) -> Option<&mut String> {
        let Page::Edit { draft, .. } = self.stack.top_mut() else {
            return None;
        };
        match id {
            NAME => Some(&mut draft.name),
            PHONE => Some(&mut draft.phone),
            EMAIL => Some(&mut draft.email),
            _ => None,
        }
    }

    fn enter(&mut self, id: &str, _data: &mut PhoneState, _now_ms: u64) -> Enter {
        match id {
            NAME => Enter::Next {
                id: PHONE.to_string(),
                select_all: false,
            },
            PHONE => Enter::Next {
                id: EMAIL.to_string(),
                select_all: false,
            },
            _ => Enter::Done,
        }
    }

    fn scroll_mut(&mut self) -> &mut i32 {
        self.stack.scroll_mut()
    }
}
