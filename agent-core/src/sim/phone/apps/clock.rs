//! Clock (`com.btl.clock`): the alarm list with an on/off switch per alarm,
//! and an alarm editor whose time picker has +/− buttons for hour and
//! minute and number fields that can be typed into.
//!
//! The editor keeps the hour and minute as typed text, checked only on
//! Save, so an agent can type "7" then "30" as on a real picker; +/− wrap
//! around (23 → 00) like a NumberPicker.

use super::{App, AppMsg, Effect, Enter, Stack};
use crate::sim::phone::scene::{Align, Column, Element, Msg as SceneMsg, Rect};
use crate::sim::phone::state::{Alarm, PhoneState, next_id};
use crate::sim::phone::widgets::{
    Cx, ERROR, Row, TEXT, TEXT_2, app_bar, bar_height, button, content_root, edit_text, fab,
    icon_button, label, number_field, rid, row, scroller, switch, symbol, text_button, text_look,
};

pub(crate) const PKG: &str = "com.btl.clock";

const HOUR: &str = "com.btl.clock:id/hour";
const MINUTE: &str = "com.btl.clock:id/minute";
const LABEL: &str = "com.btl.clock:id/label_field";

/// The time a new alarm starts at.
const NEW_ALARM: (u8, u8) = (8, 0);

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Draft {
    pub hour: String,
    pub minute: String,
    pub label: String,
    /// The last Save found an invalid time.
    pub invalid: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Page {
    List,
    /// The editor; `id` is `None` for a new alarm.
    Edit {
        id: Option<u32>,
        draft: Draft,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Msg {
    Open(u32),
    New,
    Toggle(u32),
    HourStep(i8),
    MinuteStep(i8),
    Save,
    Delete,
}

fn msg(m: Msg) -> SceneMsg {
    SceneMsg::App(AppMsg::Clock(m))
}

#[derive(Debug, Clone)]
pub(crate) struct Clock {
    stack: Stack<Page>,
}

impl Default for Clock {
    fn default() -> Self {
        Clock {
            stack: Stack::new(Page::List),
        }
    }
}

/// `07:30`.
pub(crate) fn hhmm(hour: u8, minute: u8) -> String {
    format!("{hour:02}:{minute:02}")
}

/// Steps a two-digit picker value, wrapping within `0..modulus`; text that
/// is not a number counts as 0.
fn step(text: &mut String, by: i8, modulus: i32) {
    let current = text.trim().parse::<i32>().unwrap_or(0);
    *text = format!("{:02}", (current + i32::from(by)).rem_euclid(modulus));
}

fn parse_in(text: &str, max: u8) -> Option<u8> {
    text.trim().parse::<u8>().ok().filter(|v| *v <= max)
}

impl Clock {
    pub fn update(&mut self, m: Msg, data: &mut PhoneState) -> Effect {
        match m {
            Msg::Open(id) => {
                if let Some(a) = data.alarm(id) {
                    let draft = Draft {
                        hour: format!("{:02}", a.hour),
                        minute: format!("{:02}", a.minute),
                        label: a.label.clone(),
                        invalid: false,
                    };
                    self.stack.push(Page::Edit {
                        id: Some(id),
                        draft,
                    });
                }
            }
            Msg::New => self.stack.push(Page::Edit {
                id: None,
                draft: Draft {
                    hour: format!("{:02}", NEW_ALARM.0),
                    minute: format!("{:02}", NEW_ALARM.1),
                    label: String::new(),
                    invalid: false,
                },
            }),
            Msg::Toggle(id) => {
                if let Some(a) = data.alarms.iter_mut().find(|a| a.id == id) {
                    a.enabled = !a.enabled;
                }
            }
            Msg::HourStep(by) => {
                if let Page::Edit { draft, .. } = self.stack.top_mut() {
                    step(&mut draft.hour, by, 24);
                }
            }
            Msg::MinuteStep(by) => {
                if let Page::Edit { draft, .. } = self.stack.top_mut() {
                    step(&mut draft.minute, by, 60);
                }
            }
            Msg::Save => self.save(data),
            Msg::Delete => {
                if let Page::Edit { id: Some(id), .. } = self.stack.top() {
                    let id = *id;
                    data.alarms.retain(|a| a.id != id);
                    self.stack.pop();
                }
            }
        }
        Effect::None
    }

    /// Saves a valid time (the alarm is switched on, as the Clock app does)
    /// and returns to the list; an invalid one shows an error instead.
    fn save(&mut self, data: &mut PhoneState) {
        let Page::Edit { id, draft } = self.stack.top_mut() else {
            return;
        };
        let (Some(hour), Some(minute)) = (parse_in(&draft.hour, 23), parse_in(&draft.minute, 59))
        else {
            draft.invalid = true;
            return;
        };
        let label = draft.label.trim().to_string();
        match id.and_then(|id| data.alarms.iter_mut().find(|a| a.id == id)) {
            Some(a) => {
                (a.hour, a.minute, a.label, a.enabled) = (hour, minute, label, true);
            }
            None => {
                let id = next_id(data.alarms.iter().map(|a| a.id));
                data.alarms.push(Alarm {
                    id,
                    hour,
                    minute,
                    enabled: true,
                    label,
                });
            }
        }
        self.stack.pop();
    }

    fn list_page(&self, cx: &Cx, data: &PhoneState) -> Element {
        let mut sorted: Vec<&Alarm> = data.alarms.iter().collect();
        sorted.sort_by_key(|a| (a.hour, a.minute, a.id));
        let body = cx.content.below(bar_height(cx));
        let mut col = Column::new(body, self.stack.scroll());
        for a in sorted {
            let r = col.next(cx.dp(96.0));
            let summary = if a.label.is_empty() {
                "Alarm".to_string()
            } else {
                a.label.clone()
            };
            let shown = hhmm(a.hour, a.minute);
            let mut item = row(
                cx,
                r,
                Row {
                    id: rid(PKG, "alarm_item"),
                    title: "",
                    summary: None,
                    badge: None,
                    trailing: Some(switch(
                        Rect::xywh(0, 0, cx.dp(52.0), cx.dp(32.0)),
                        rid(PKG, "alarm_switch"),
                        &shown,
                        a.enabled,
                        msg(Msg::Toggle(a.id)),
                    )),
                    on_tap: Some(msg(Msg::Open(a.id))),
                },
            );
            // The row's plain title is replaced by the large time and label.
            item.children.retain(|e| e.id != "android:id/title");
            let text_r = Rect::new(r.x1 + cx.dp(16.0), r.y1, r.x2 - cx.dp(100.0), r.y2);
            let mut time = text_look(cx, 36.0, if a.enabled { TEXT } else { TEXT_2 });
            time.valign = Align::End;
            item.children.insert(
                0,
                label(text_r.top(cx.dp(60.0)), rid(PKG, "alarm_time"), shown, time),
            );
            item.children.insert(
                1,
                label(
                    text_r.below(cx.dp(62.0)).top(cx.dp(24.0)),
                    rid(PKG, "alarm_label"),
                    summary,
                    text_look(cx, 14.0, TEXT_2),
                ),
            );
            col.push(item);
        }
        col.gap(cx.dp(88.0));
        let mut root = content_root(cx).child(app_bar(cx, PKG, "Alarms", false, Vec::new()));
        if data.alarms.is_empty() {
            let mut look = text_look(cx, 16.0, TEXT_2);
            look.align = Align::Center;
            root = root.child(label(body, rid(PKG, "empty_view"), "No alarms", look));
        }
        root.child(col.finish(scroller(
            "androidx.recyclerview.widget.RecyclerView",
            rid(PKG, "alarm_list"),
        )))
        .child(fab(
            cx,
            rid(PKG, "fab_add_alarm"),
            "Add alarm",
            msg(Msg::New),
        ))
    }

    fn edit_page(&self, cx: &Cx, id: Option<u32>, d: &Draft) -> Element {
        let heading = if id.is_some() {
            "Edit alarm"
        } else {
            "Add alarm"
        };
        let body = cx.content.below(bar_height(cx));
        let mut col = Column::new(body, self.stack.scroll());
        col.gap(cx.dp(16.0));
        let picker = col.next(cx.dp(216.0));
        let cell_w = cx.dp(96.0);
        let colon_w = cx.dp(40.0);
        let left = picker.x1 + (picker.w() - 2 * cell_w - colon_w) / 2;
        let hour_col = Rect::xywh(left, picker.y1, cell_w, picker.h());
        let colon = Rect::xywh(hour_col.x2, picker.y1, colon_w, picker.h());
        let minute_col = Rect::xywh(colon.x2, picker.y1, cell_w, picker.h());
        let step_h = cx.dp(56.0);
        let column = |r: Rect, field: &str, value: &str, unit: &str, make: fn(i8) -> Msg| {
            let up = r.top(step_h).centered(cx.dp(56.0), cx.dp(56.0));
            let down = r.bottom(step_h).centered(cx.dp(56.0), cx.dp(56.0));
            let field_r = Rect::new(
                r.x1,
                r.y1 + step_h + cx.dp(8.0),
                r.x2,
                r.y2 - step_h - cx.dp(8.0),
            );
            Element::new("android.widget.LinearLayout", r)
                .id(rid(PKG, &format!("{unit}_picker")))
                .child(icon_button(
                    up,
                    rid(PKG, &format!("{unit}_up")),
                    &format!("Increase {unit}"),
                    symbol(cx, "+", 28.0, TEXT),
                    msg(make(1)),
                ))
                .child(number_field(cx, field_r, field.to_string(), value))
                .child(icon_button(
                    down,
                    rid(PKG, &format!("{unit}_down")),
                    &format!("Decrease {unit}"),
                    symbol(cx, "−", 28.0, TEXT),
                    msg(make(-1)),
                ))
        };
        col.push(column(hour_col, HOUR, &d.hour, "hour", Msg::HourStep));
        let mut colon_look = text_look(cx, 40.0, TEXT);
        colon_look.align = Align::Center;
        col.push(label(colon, String::new(), ":", colon_look));
        col.push(column(
            minute_col,
            MINUTE,
            &d.minute,
            "minute",
            Msg::MinuteStep,
        ));
        col.gap(cx.dp(8.0));
        if d.invalid {
            let mut look = text_look(cx, 14.0, ERROR);
            look.align = Align::Center;
            let r = col.next(cx.dp(32.0));
            col.push(label(
                r,
                rid(PKG, "error"),
                "Enter a valid time (00:00–23:59)",
                look,
            ));
        }
        let label_r = col.next(cx.dp(72.0)).inset(cx.dp(16.0), cx.dp(8.0));
        col.push(edit_text(
            cx,
            label_r,
            LABEL.to_string(),
            &d.label,
            "Label",
            false,
        ));
        col.gap(cx.dp(16.0));
        let buttons = col.next(cx.dp(56.0)).inset(cx.dp(16.0), cx.dp(8.0));
        let bw = cx.dp(96.0);
        col.push(button(
            cx,
            buttons.right(bw),
            rid(PKG, "save_button"),
            "Save",
            msg(Msg::Save),
        ));
        col.push(text_button(
            cx,
            Rect::new(
                buttons.x2 - 2 * bw - cx.dp(8.0),
                buttons.y1,
                buttons.x2 - bw - cx.dp(8.0),
                buttons.y2,
            ),
            rid(PKG, "cancel_button"),
            "Cancel",
            SceneMsg::Up,
        ));
        if id.is_some() {
            col.push(text_button(
                cx,
                buttons.left(bw),
                rid(PKG, "delete_button"),
                "Delete",
                msg(Msg::Delete),
            ));
        }
        content_root(cx)
            .child(app_bar(cx, PKG, heading, true, Vec::new()))
            .child(col.finish(scroller(
                "android.widget.ScrollView",
                rid(PKG, "alarm_editor"),
            )))
    }
}

impl App for Clock {
    fn build(&self, cx: &Cx, data: &PhoneState) -> Element {
        match self.stack.top() {
            Page::List => self.list_page(cx, data),
            Page::Edit { id, draft } => self.edit_page(cx, *id, draft),
        }
    }

    fn activity(&self) -> &'static str {
        match self.stack.top() {
            Page::List => super::MAIN_ACTIVITY,
            Page::Edit { .. } => "AlarmEditActivity",
        }
    }

    fn back(&mut self) -> bool {
        self.stack.pop()
    }

    fn field_mut(&mut self, id: &str) -> Option<&mut String> {
        let Page::Edit { draft, .. } = self.stack.top_mut() else {
            return None;
        };
        match id {
            HOUR => Some(&mut draft.hour),
            MINUTE => Some(&mut draft.minute),
            LABEL => Some(&mut draft.label),
            _ => None,
        }
    }

    fn enter(&mut self, id: &str, _data: &mut PhoneState, _now_ms: u64) -> Enter {
        match id {
            HOUR => Enter::Next {
                id: MINUTE.to_string(),
                select_all: true,
            },
            _ => Enter::Done,
        }
    }

    fn scroll_mut(&mut self) -> &mut i32 {
        self.stack.scroll_mut()
    }
}
