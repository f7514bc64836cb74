//! Gallery (`com.btl.gallery`): a three-column grid of the photos in
//! [`PhoneState::files`], newest first; a long press starts selection mode,
//! taps then toggle photos, and Delete asks for confirmation. A tap outside
//! selection mode opens the photo, which can be deleted from there too.

use super::{App, AppMsg, Effect, Stack};
use crate::sim::phone::scene::{Align, Column, Element, Glyph, Look, Msg as SceneMsg, Rect};
use crate::sim::phone::state::{MediaFile, PhoneState};
use crate::sim::phone::widgets::{
    Cx, TEXT, TEXT_2, app_bar, bar_height, bar_icon, checkbox, content_root, dialog, label, rid,
    scroller, symbol, text_look,
};

pub(crate) const PKG: &str = "com.btl.gallery";

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Page {
    Grid,
    Photo(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Msg {
    Open(String),
    /// Long press: start selection mode with this photo, or toggle it.
    Select(String),
    /// Tap in selection mode.
    Toggle(String),
    ClearSelection,
    /// Ask to delete the selection, or the photo on screen.
    AskDelete,
    Delete,
    Dismiss,
}

fn msg(m: Msg) -> SceneMsg {
    SceneMsg::App(AppMsg::Gallery(m))
}

#[derive(Debug, Clone)]
pub(crate) struct Gallery {
    stack: Stack<Page>,
    /// Selected photo names, in selection order; `None` outside selection
    /// mode.
    selection: Option<Vec<String>>,
    /// The photos a delete confirmation is open for.
    confirm: Option<Vec<String>>,
}

impl Default for Gallery {
    fn default() -> Self {
        Gallery {
            stack: Stack::new(Page::Grid),
            selection: None,
            confirm: None,
        }
    }
}

/// FNV-1a of a photo's name, the seed of its drawn picture.
fn photo_seed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl Gallery {
    pub fn update(&mut self, m: Msg, data: &mut PhoneState) -> Effect {
        match m {
            Msg::Open(name) => self.stack.push(Page::Photo(name)),
            Msg::Select(name) | Msg::Toggle(name) => {
                let selection = self.selection.get_or_insert_with(Vec::new);
                match selection.iter().position(|n| *n == name) {
                    Some(i) => {
                        selection.remove(i);
                    }
                    None => selection.push(name),
                }
                if selection.is_empty() {
                    self.selection = None;
                }
            }
            Msg::ClearSelection => self.selection = None,
            Msg::AskDelete => {
                self.confirm = match self.stack.top() {
                    Page::Photo(name) => Some(vec![name.clone()]),
                    Page::Grid => self.selection.clone().filter(|s| !s.is_empty()),
                };
            }
            Msg::Delete => {
                let doomed = self.confirm.take().unwrap_or_default();
                data.files.retain(|f| !doomed.contains(&f.name));
                self.selection = None;
                if matches!(self.stack.top(), Page::Photo(name) if doomed.contains(name)) {
                    self.stack.pop();
                }
            }
            Msg::Dismiss => self.confirm = None,
        }
        Effect::None
    }

    fn grid_page(&self, cx: &Cx, data: &PhoneState) -> Element {
        let mut photos: Vec<&MediaFile> = data.files.iter().collect();
        photos.sort_by_key(|f| (std::cmp::Reverse(f.taken_ms), f.name.clone()));
        let selection = self.selection.as_deref();
        let bar = match selection {
            Some(sel) => {
                let mut bar = app_bar(
                    cx,
                    PKG,
                    &format!("{} selected", sel.len()),
                    false,
                    vec![bar_icon(
                        cx,
                        rid(PKG, "delete_button"),
                        "Delete",
                        Glyph::Trash { color: TEXT },
                        msg(Msg::AskDelete),
                    )],
                );
                // Selection mode's toolbar starts with a close button.
                let close = Rect::xywh(
                    cx.content.x1 + cx.dp(4.0),
                    cx.content.y1 + cx.dp(8.0),
                    cx.dp(48.0),
                    cx.dp(48.0),
                );
                if let Some(title) = bar
                    .children
                    .iter_mut()
                    .find(|e| e.id == rid(PKG, "toolbar_title"))
                {
                    title.rect.x1 = close.x2 + cx.dp(8.0);
                }
                bar.children.insert(
                    0,
                    crate::sim::phone::widgets::icon_button(
                        close,
                        rid(PKG, "close_selection"),
                        "Clear selection",
                        symbol(cx, "✕", 22.0, TEXT),
                        msg(Msg::ClearSelection),
                    ),
                );
                bar
            }
            None => app_bar(cx, PKG, "Gallery", false, Vec::new()),
        };
        let body = cx.content.below(bar_height(cx));
        let mut col = Column::new(body, self.stack.scroll());
        let gap = cx.dp(4.0);
        let cell_w = (body.w() - 4 * gap) / 3;
        let label_h = cx.dp(28.0);
        col.gap(gap);
        for chunk in photos.chunks(3) {
            let line = col.next(cell_w + label_h + gap);
            for (i, f) in chunk.iter().enumerate() {
                let x = line.x1 + gap + i as i32 * (cell_w + gap);
                let cell = Rect::xywh(x, line.y1, cell_w, cell_w + label_h);
                let selected = selection.is_some_and(|s| s.contains(&f.name));
                let tap = match selection {
                    Some(_) => Msg::Toggle(f.name.clone()),
                    None => Msg::Open(f.name.clone()),
                };
                let thumb = cell.top(cell_w);
                let mut name_look = text_look(cx, 12.0, TEXT_2);
                name_look.align = Align::Center;
                let mut item = Element::new("android.widget.LinearLayout", cell)
                    .id(rid(PKG, "photo_item"))
                    .desc(&f.name)
                    .on_tap(msg(tap))
                    .on_long(msg(Msg::Select(f.name.clone())))
                    .child(
                        Element::new("android.widget.ImageView", thumb)
                            .id(rid(PKG, "thumbnail"))
                            .look(Look {
                                glyph: Glyph::Photo {
                                    seed: photo_seed(&f.name),
                                },
                                stroke: selected.then_some(([0x67, 0x50, 0xA4, 255], cx.dp(4.0))),
                                ..Look::default()
                            }),
                    )
                    .child(label(
                        cell.below(cell_w),
                        rid(PKG, "photo_name"),
                        &f.name,
                        name_look,
                    ));
                if selection.is_some() {
                    let size = cx.dp(40.0);
                    let r = Rect::xywh(thumb.x2 - size, thumb.y1, size, size);
                    item = item.child(checkbox(r, rid(PKG, "photo_check"), selected));
                }
                item.selected = selected;
                col.push(item);
            }
        }
        col.gap(cx.dp(16.0));
        let mut root = content_root(cx).child(bar);
        if photos.is_empty() {
            let mut look = text_look(cx, 16.0, TEXT_2);
            look.align = Align::Center;
            root = root.child(label(body, rid(PKG, "empty_view"), "No photos", look));
        }
        root = root.child(col.finish(scroller(
            "androidx.recyclerview.widget.RecyclerView",
            rid(PKG, "photo_grid"),
        )));
        self.with_dialog(cx, root)
    }

    fn photo_page(&self, cx: &Cx, f: &MediaFile) -> Element {
        let actions = vec![bar_icon(
            cx,
            rid(PKG, "delete_button"),
            "Delete",
            Glyph::Trash { color: TEXT },
            msg(Msg::AskDelete),
        )];
        let body = cx.content.below(bar_height(cx));
        let image = body.top(body.w() * 3 / 4);
        let info = Rect::new(
            body.x1 + cx.dp(16.0),
            image.y2 + cx.dp(8.0),
            body.x2 - cx.dp(16.0),
            image.y2 + cx.dp(48.0),
        );
        let mb = f.size_bytes as f64 / 1_000_000.0;
        let root = content_root(cx)
            .child(app_bar(cx, PKG, &f.name, true, actions))
            .child(
                Element::new("android.widget.ImageView", image)
                    .id(rid(PKG, "photo_view"))
                    .desc(&f.name)
                    .look(Look {
                        glyph: Glyph::Photo {
                            seed: photo_seed(&f.name),
                        },
                        ..Look::default()
                    }),
            )
            .child(label(
                info,
                rid(PKG, "photo_info"),
                format!("{} · {mb:.1} MB", f.path),
                text_look(cx, 14.0, TEXT_2),
            ));
        self.with_dialog(cx, root)
    }

    fn with_dialog(&self, cx: &Cx, root: Element) -> Element {
        match &self.confirm {
            Some(names) => {
                let title = match names.as_slice() {
                    [_] => "Delete this photo?".to_string(),
                    _ => format!("Delete {} photos?", names.len()),
                };
                root.child(dialog(
                    cx,
                    &title,
                    "Deleted photos are removed from this device.",
                    msg(Msg::Dismiss),
                    ("Delete", msg(Msg::Delete)),
                ))
            }
            None => root,
        }
    }
}

impl App for Gallery {
    fn build(&self, cx: &Cx, data: &PhoneState) -> Element {
        match self.stack.top() {
            Page::Grid => self.grid_page(cx, data),
            Page::Photo(name) => match data.file(name) {
                Some(f) => self.photo_page(cx, f),
                None => self.grid_page(cx, data),
            },
        }
    }

    fn activity(&self) -> &'static str {
        match self.stack.top() {
            Page::Grid => super::MAIN_ACTIVITY,
            Page::Photo(_) => "PhotoViewActivity",
        }
    }

    fn back(&mut self) -> bool {
        if self.confirm.take().is_some() || self.selection.take().is_some() {
            return true;
        }
        self.stack.pop()
    }

    fn scroll_mut(&mut self) -> &mut i32 {
        self.stack.scroll_mut()
    }
}
