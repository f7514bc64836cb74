//! The safety gate: what may run of a parsed answer.
//!
//! [`assess`] is a pure function of the answer, the frames, the UI tree, the
//! profile and the [`SafetyConfig`], so every rule is tested as a table
//! without a device. Rules, in order:
//! 1. the link must hold an action (a grounding answer is not one);
//! 2. the action must belong to the profile's action space;
//! 3. a point must lie on the model frame: an off-frame point is rejected,
//!    never clamped, because a clamped tap lands on whatever sits at the
//!    screen edge, which the model never chose;
//! 4. a Tap, LongPress or Type is *sensitive* when the element it targets,
//!    or the screen as a whole, shows text matching a configured pattern
//!    (pay, delete, send…); the configured [`Confirm`] policy then allows it,
//!    denies it or asks a [`Confirmer`].
//!
//! Swipe, Back, Home, Wait and Finish are never sensitive: they navigate
//! without committing anything.

use crate::device::ui::UiNode;
use crate::protocol::{Action, BtlOutput, FrameMap, Link, Point, Profile, Size};
use serde::{Deserialize, Serialize};
use std::path::Path;
use thiserror::Error;

/// What to do with a sensitive action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Confirm {
    /// Ask a [`Confirmer`]; without a person to ask, this denies.
    #[default]
    Ask,
    Deny,
    Allow,
}

/// Patterns matched against the tapped element's own text, case-insensitive
/// and word by word: a pattern word matches a word it begins, so `pay`
/// matches "Pay" and "Payment" but not "Display".
pub const DEFAULT_TARGET_PATTERNS: &[&str] = &[
    "buy",
    "checkout",
    "delete",
    "erase",
    "pay",
    "purchase",
    "remove",
    "reset",
    "send",
    "transfer",
    "uninstall",
];

/// Patterns matched against all the text on screen. These are phrases, not
/// single words, because they flag any action on the screen: a confirmation
/// dialog whose button only says "OK" is sensitive by what it confirms.
pub const DEFAULT_SCREEN_PATTERNS: &[&str] = &[
    "card number",
    "confirm payment",
    "confirm purchase",
    "delete permanently",
    "erase all data",
    "factory reset",
    "uninstall this app",
];

/// Input methods, by package: a tap on one of their keys is typing, never a
/// sensitive target. Its "Delete" is backspace, and what the typed text
/// does is decided by a later tap, which the gate judges. Measured: the
/// contact-editing task's oracle clears a field with the keyboard's Delete
/// key, which the `delete` pattern stopped when nobody could confirm.
pub const DEFAULT_KEYBOARD_PACKAGES: &[&str] = &[
    // AOSP's LatinIME, Gboard, Samsung Keyboard, SwiftKey.
    "com.android.inputmethod.latin",
    "com.google.android.inputmethod.latin",
    "com.samsung.android.honeyboard",
    "com.touchtype.swiftkey",
    // The virtual phone's keyboard.
    "com.btl.inputmethod",
];

/// The sensitive-action policy, as stored in its JSON config file. Missing
/// fields take their defaults, so a file may hold only what it changes;
/// unknown fields are an error, so a typo does not silently disable a rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SafetyConfig {
    pub on_sensitive: Confirm,
    pub target_patterns: Vec<String>,
    pub screen_patterns: Vec<String>,
    /// Packages whose taps are keystrokes ([`DEFAULT_KEYBOARD_PACKAGES`]).
    pub keyboard_packages: Vec<String>,
}

impl Default for SafetyConfig {
    fn default() -> Self {
        let owned = |list: &[&str]| list.iter().map(|p| p.to_string()).collect();
        Self {
            on_sensitive: Confirm::default(),
            target_patterns: owned(DEFAULT_TARGET_PATTERNS),
            screen_patterns: owned(DEFAULT_SCREEN_PATTERNS),
            keyboard_packages: owned(DEFAULT_KEYBOARD_PACKAGES),
        }
    }
}

/// Why a safety config file could not be used.
#[derive(Debug, Error)]
pub enum SafetyConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("invalid safety config: {0}")]
    Invalid(#[from] serde_json::Error),
}

impl SafetyConfig {
    pub fn from_json(text: &str) -> Result<Self, SafetyConfigError> {
        Ok(serde_json::from_str(text)?)
    }

    pub fn load(path: &Path) -> Result<Self, SafetyConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| SafetyConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_json(&text)
    }

    /// The config as an editable file; `SafetyConfig::default().to_json()`
    /// is the built-in default a user starts from.
    pub fn to_json(&self) -> String {
        // A struct of strings and a unit enum always serializes.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// Where a sensitive pattern was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The element under the tap point, or the focused field for Type.
    Target,
    /// Any text on the screen.
    Screen,
}

/// A pattern and the text it matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SensitiveMatch {
    pub pattern: String,
    pub scope: Scope,
    pub text: String,
}

/// Why an answer was not executed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Rejection {
    /// The link holds a bare point (a grounding answer), not an action.
    NotAnAction,
    /// The action is not in the profile's action space.
    OutsideProfile { function: String, profile: Profile },
    /// The point lies off the model frame.
    OutsideFrame { point: Point, model: Size },
    /// A sensitive action under policy `deny`.
    Denied { sensitive: SensitiveMatch },
    /// A sensitive action the confirmer refused.
    Declined { sensitive: SensitiveMatch },
}

impl Rejection {
    /// Whether the answer was invalid (worth asking the model again), as
    /// opposed to valid but refused (the episode needs a person).
    pub fn is_invalid_output(&self) -> bool {
        matches!(
            self,
            Self::NotAnAction | Self::OutsideProfile { .. } | Self::OutsideFrame { .. }
        )
    }
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotAnAction => f.write_str("the answer holds a point, not an action"),
            Self::OutsideProfile { function, profile } => {
                write!(
                    f,
                    "{function} is not in the {} action space",
                    profile.name()
                )
            }
            Self::OutsideFrame { point, model } => write!(
                f,
                "point [{}, {}] lies outside the {model} model frame",
                point.x, point.y
            ),
            Self::Denied { sensitive } => write!(
                f,
                "sensitive action denied by policy ('{}' matched \"{}\")",
                sensitive.pattern, sensitive.text
            ),
            Self::Declined { sensitive } => write!(
                f,
                "sensitive action declined ('{}' matched \"{}\")",
                sensitive.pattern, sensitive.text
            ),
        }
    }
}

/// The gate's decision on one answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// Run it. `sensitive` is set when it matched a pattern and was allowed
    /// by policy or by the confirmer.
    Allow {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sensitive: Option<SensitiveMatch>,
    },
    /// Ask the [`Confirmer`] first.
    Confirm {
        sensitive: SensitiveMatch,
    },
    Reject {
        rejection: Rejection,
    },
}

/// What a confirmer is asked about.
#[derive(Debug, Clone, Copy)]
pub struct ConfirmRequest<'a> {
    pub goal: &'a str,
    pub plan: &'a str,
    pub action: &'a Action,
    pub sensitive: &'a SensitiveMatch,
}

/// Decides on sensitive actions under policy [`Confirm::Ask`]; the CLI asks
/// at the terminal.
pub trait Confirmer: Send {
    fn confirm(&mut self, request: &ConfirmRequest) -> bool;
}

impl<F: FnMut(&ConfirmRequest) -> bool + Send> Confirmer for F {
    fn confirm(&mut self, request: &ConfirmRequest) -> bool {
        self(request)
    }
}

/// The confirmer when nobody is there to ask: it refuses everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct DenyAll;

impl Confirmer for DenyAll {
    fn confirm(&mut self, _: &ConfirmRequest) -> bool {
        false
    }
}

/// Judges one parsed answer (see the module doc for the rules).
pub fn assess(
    output: &BtlOutput,
    frame: &FrameMap,
    ui: Option<&UiNode>,
    profile: Profile,
    config: &SafetyConfig,
) -> Verdict {
    let reject = |rejection| Verdict::Reject { rejection };
    let Link::Action { action, .. } = &output.link else {
        return reject(Rejection::NotAnAction);
    };
    if !profile.allows(action) {
        return reject(Rejection::OutsideProfile {
            function: action.function().into(),
            profile,
        });
    }
    if let Some(point) = action.point()
        && !frame.in_model_frame(point)
    {
        return reject(Rejection::OutsideFrame {
            point,
            model: frame.model,
        });
    }
    let Some(sensitive) = ui.and_then(|ui| sensitive_match(action, frame, ui, config)) else {
        return Verdict::Allow { sensitive: None };
    };
    match config.on_sensitive {
        Confirm::Allow => Verdict::Allow {
            sensitive: Some(sensitive),
        },
        Confirm::Deny => reject(Rejection::Denied { sensitive }),
        Confirm::Ask => Verdict::Confirm { sensitive },
    }
}

fn sensitive_match(
    action: &Action,
    frame: &FrameMap,
    ui: &UiNode,
    config: &SafetyConfig,
) -> Option<SensitiveMatch> {
    let target_texts = match action {
        Action::Tap { point_2d } | Action::LongPress { point_2d } => {
            let at = frame.to_device(*point_2d);
            let (x, y) = (
                i32::try_from(at.x).unwrap_or(i32::MAX),
                i32::try_from(at.y).unwrap_or(i32::MAX),
            );
            touch_target_texts(ui, x, y, &config.keyboard_packages)
        }
        Action::Type { .. } => ui.find(|n| n.focused).map(node_texts).unwrap_or_default(),
        Action::Swipe { .. }
        | Action::Back
        | Action::Home
        | Action::Wait
        | Action::Finish { .. } => {
            return None;
        }
    };
    let find = |texts: &[&str], patterns: &[String], scope| {
        patterns.iter().find_map(|pattern| {
            texts
                .iter()
                .find(|t| matches_pattern(t, pattern))
                .map(|t| SensitiveMatch {
                    pattern: pattern.clone(),
                    scope,
                    text: t.to_string(),
                })
        })
    };
    find(&target_texts, &config.target_patterns, Scope::Target)
        .or_else(|| find(&node_texts(ui), &config.screen_patterns, Scope::Screen))
}

/// The text of what a tap at `(x, y)` lands on. That is the smallest
/// clickable node containing the point (what Android dispatches the click
/// to), its labels included; failing one, only the own text of the smallest
/// node there, since a plain container's descendants are not what was hit.
/// A key of an input method in `keyboards` has none that counts.
fn touch_target_texts<'a>(ui: &'a UiNode, x: i32, y: i32, keyboards: &[String]) -> Vec<&'a str> {
    let area = |n: &&UiNode| n.area();
    let under: Vec<&UiNode> = ui.iter().filter(|n| n.contains(x, y)).collect();
    let clickable = under
        .iter()
        .copied()
        .filter(|n| n.clickable || n.long_clickable)
        .min_by_key(area);
    match clickable {
        Some(node) if keyboards.contains(&node.package) => Vec::new(),
        Some(node) => node_texts(node),
        None => under
            .into_iter()
            .min_by_key(area)
            .map(|n| {
                [n.text.as_str(), n.content_desc.as_str()]
                    .into_iter()
                    .filter(|t| !t.is_empty())
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Text and content descriptions of a node and its descendants: a button's
/// label is often a child TextView, an icon button's only a description.
fn node_texts(node: &UiNode) -> Vec<&str> {
    node.iter()
        .flat_map(|n| [n.text.as_str(), n.content_desc.as_str()])
        .filter(|t| !t.is_empty())
        .collect()
}

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Whether the pattern's words occur consecutively in `text`, each pattern
/// word beginning the text word it meets.
fn matches_pattern(text: &str, pattern: &str) -> bool {
    let pattern = words(pattern);
    let text = words(text);
    !pattern.is_empty()
        && text.windows(pattern.len()).any(|window| {
            window
                .iter()
                .zip(&pattern)
                .all(|(word, p)| word.starts_with(p.as_str()))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Direction, TRAINING_MAX_PIXELS};

    /// A 720x1280 screen (model frame 728x1288) showing a "Pay now" button
    /// at [100, 100, 300, 200] whose label is a child, a "Display" row at
    /// [100, 300, 300, 400], a focused text field at [100, 500, 600, 600]
    /// and, when given, a message at [100, 700, 600, 800].
    fn screen(extra_text: &str) -> UiNode {
        let node = |text: &str, bounds, clickable| UiNode {
            text: text.into(),
            bounds,
            clickable,
            enabled: true,
            ..UiNode::default()
        };
        let mut pay = node("", [100, 100, 300, 200], true);
        pay.children
            .push(node("Pay now", [120, 120, 280, 180], false));
        let mut field = node("", [100, 500, 600, 600], true);
        field.focused = true;
        field.content_desc = "Recipient".into();
        let mut root = node("", [0, 0, 720, 1280], false);
        root.children = vec![pay, node("Display", [100, 300, 300, 400], true), field];
        if !extra_text.is_empty() {
            root.children
                .push(node(extra_text, [100, 700, 600, 800], false));
        }
        root
    }

    fn output(action: Action) -> BtlOutput {
        BtlOutput {
            blink: Vec::new(),
            think: String::new(),
            link: Link::Action {
                plan: "plan".into(),
                action,
            },
        }
    }

    /// The model-frame point over a device pixel of the 720x1280 screen.
    fn tap_at(frame: &FrameMap, x: u32, y: u32) -> Action {
        Action::Tap {
            point_2d: frame.to_model(crate::protocol::DevicePoint { x, y }),
        }
    }

    fn config(on_sensitive: Confirm) -> SafetyConfig {
        SafetyConfig {
            on_sensitive,
            ..SafetyConfig::default()
        }
    }

    /// The verdict on `tap` over `ui` in the released profile, where a
    /// sensitive action is denied.
    fn denying(tap: &BtlOutput, frame: &FrameMap, ui: &UiNode) -> Verdict {
        assess(tap, frame, Some(ui), Profile::BtlUi, &config(Confirm::Deny))
    }

    fn pay_match(text: &str) -> SensitiveMatch {
        SensitiveMatch {
            pattern: "pay".into(),
            scope: Scope::Target,
            text: text.into(),
        }
    }

    /// Case name, answer, screen, profile, sensitive policy, verdict.
    type Row<'a> = (
        &'a str,
        BtlOutput,
        Option<&'a UiNode>,
        Profile,
        Confirm,
        Verdict,
    );

    #[test]
    fn gate_table() {
        let frame = FrameMap::new(Size::new(720, 1280), TRAINING_MAX_PIXELS).unwrap();
        let plain = screen("");
        let dialog = screen("Confirm payment of $20?");
        let allow = Verdict::Allow { sensitive: None };
        let rows: Vec<Row> = vec![
            (
                "grounding answer",
                BtlOutput {
                    link: Link::Point(Point::new(1.0, 1.0)),
                    ..output(Action::Back)
                },
                Some(&plain),
                Profile::BtlUi,
                Confirm::Allow,
                Verdict::Reject {
                    rejection: Rejection::NotAnAction,
                },
            ),
            (
                "Finish outside btl-ui",
                output(Action::Finish { answer: None }),
                Some(&plain),
                Profile::BtlUi,
                Confirm::Allow,
                Verdict::Reject {
                    rejection: Rejection::OutsideProfile {
                        function: "Finish".into(),
                        profile: Profile::BtlUi,
                    },
                },
            ),
            (
                "Wait outside btl-ui",
                output(Action::Wait),
                None,
                Profile::BtlUi,
                Confirm::Allow,
                Verdict::Reject {
                    rejection: Rejection::OutsideProfile {
                        function: "Wait".into(),
                        profile: Profile::BtlUi,
                    },
                },
            ),
            (
                "Finish in btl-extended",
                output(Action::Finish { answer: None }),
                Some(&dialog),
                Profile::BtlExtended,
                Confirm::Deny,
                allow.clone(),
            ),
            (
                "tap right of the frame",
                output(Action::Tap {
                    point_2d: Point::new(729.0, 10.0),
                }),
                Some(&plain),
                Profile::BtlUi,
                Confirm::Allow,
                Verdict::Reject {
                    rejection: Rejection::OutsideFrame {
                        point: Point::new(729.0, 10.0),
                        model: frame.model,
                    },
                },
            ),
            (
                "long press above the frame",
                output(Action::LongPress {
                    point_2d: Point::new(10.0, -1.0),
                }),
                Some(&plain),
                Profile::BtlUi,
                Confirm::Allow,
                Verdict::Reject {
                    rejection: Rejection::OutsideFrame {
                        point: Point::new(10.0, -1.0),
                        model: frame.model,
                    },
                },
            ),
            (
                "tap on the frame's far corner",
                output(Action::Tap {
                    point_2d: Point::new(728.0, 1288.0),
                }),
                Some(&plain),
                Profile::BtlUi,
                Confirm::Deny,
                allow.clone(),
            ),
            (
                "tap on a label inside the pay button, deny",
                output(tap_at(&frame, 150, 150)),
                Some(&plain),
                Profile::BtlUi,
                Confirm::Deny,
                Verdict::Reject {
                    rejection: Rejection::Denied {
                        sensitive: pay_match("Pay now"),
                    },
                },
            ),
            (
                "tap on the pay button's edge, ask",
                output(tap_at(&frame, 105, 105)),
                Some(&plain),
                Profile::BtlUi,
                Confirm::Ask,
                Verdict::Confirm {
                    sensitive: pay_match("Pay now"),
                },
            ),
            (
                "long press on the pay button, allow",
                output(Action::LongPress {
                    point_2d: tap_at(&frame, 150, 150).point().unwrap(),
                }),
                Some(&plain),
                Profile::BtlUi,
                Confirm::Allow,
                Verdict::Allow {
                    sensitive: Some(pay_match("Pay now")),
                },
            ),
            (
                "'pay' does not match inside 'Display'",
                output(tap_at(&frame, 150, 350)),
                Some(&plain),
                Profile::BtlUi,
                Confirm::Deny,
                allow.clone(),
            ),
            (
                "tap on empty screen",
                output(tap_at(&frame, 600, 1000)),
                Some(&plain),
                Profile::BtlUi,
                Confirm::Deny,
                allow.clone(),
            ),
            (
                "tap anywhere on a payment confirmation",
                output(tap_at(&frame, 600, 1000)),
                Some(&dialog),
                Profile::BtlUi,
                Confirm::Deny,
                Verdict::Reject {
                    rejection: Rejection::Denied {
                        sensitive: SensitiveMatch {
                            pattern: "confirm payment".into(),
                            scope: Scope::Screen,
                            text: "Confirm payment of $20?".into(),
                        },
                    },
                },
            ),
            (
                "type on a payment confirmation",
                output(Action::Type { text: "20".into() }),
                Some(&dialog),
                Profile::BtlUi,
                Confirm::Ask,
                Verdict::Confirm {
                    sensitive: SensitiveMatch {
                        pattern: "confirm payment".into(),
                        scope: Scope::Screen,
                        text: "Confirm payment of $20?".into(),
                    },
                },
            ),
            (
                "type on a plain screen",
                output(Action::Type { text: "pay".into() }),
                Some(&plain),
                Profile::BtlUi,
                Confirm::Deny,
                allow.clone(),
            ),
            (
                "swipe, back and home are never sensitive",
                output(Action::Swipe {
                    direction: Direction::Up,
                }),
                Some(&dialog),
                Profile::BtlUi,
                Confirm::Deny,
                allow.clone(),
            ),
            (
                "back on a payment confirmation",
                output(Action::Back),
                Some(&dialog),
                Profile::BtlUi,
                Confirm::Deny,
                allow.clone(),
            ),
            (
                "no UI tree: nothing to match",
                output(tap_at(&frame, 150, 150)),
                None,
                Profile::BtlUi,
                Confirm::Deny,
                allow.clone(),
            ),
        ];
        for (name, out, ui, profile, on_sensitive, expected) in rows {
            let got = assess(&out, &frame, ui, profile, &config(on_sensitive));
            assert_eq!(got, expected, "{name}");
        }
    }

    /// A node whose bounds span the whole `i32` range (a hostile dump)
    /// is the largest under the finger, not one whose area wrapped below
    /// every other's: the tap on Delete is judged as one.
    #[test]
    fn bounds_spanning_every_pixel_do_not_hide_the_target() {
        let frame = FrameMap::new(Size::new(720, 1280), TRAINING_MAX_PIXELS).unwrap();
        let mut ui = screen("");
        for (text, bounds) in [
            ("OK", [i32::MIN, 0, i32::MAX, 3000]),
            ("Delete", [600, 1100, 700, 1200]),
            ("OK", [i32::MIN, i32::MIN, i32::MAX, i32::MAX]),
        ] {
            ui.children.push(UiNode {
                text: text.into(),
                package: "com.example.mail".into(),
                bounds,
                clickable: true,
                enabled: true,
                ..UiNode::default()
            });
        }
        let tap = output(tap_at(&frame, 650, 1150));
        let got = denying(&tap, &frame, &ui);
        assert!(
            matches!(&got, Verdict::Reject { rejection: Rejection::Denied { sensitive } }
                if sensitive.text == "Delete" && sensitive.scope == Scope::Target),
            "{got:?}"
        );
    }

    /// A key labelled Delete on a keyboard is backspace; the same label on
    /// an app's button is a deletion.
    #[test]
    fn keyboard_keys_are_keystrokes_not_sensitive_targets() {
        let frame = FrameMap::new(Size::new(720, 1280), TRAINING_MAX_PIXELS).unwrap();
        let delete_key = |package: &str| {
            let mut root = screen("");
            root.children.push(UiNode {
                content_desc: "Delete".into(),
                package: package.into(),
                bounds: [600, 1100, 700, 1200],
                clickable: true,
                enabled: true,
                ..UiNode::default()
            });
            root
        };
        let tap = output(tap_at(&frame, 650, 1150));
        let denied = Verdict::Reject {
            rejection: Rejection::Denied {
                sensitive: SensitiveMatch {
                    pattern: "delete".into(),
                    scope: Scope::Target,
                    text: "Delete".into(),
                },
            },
        };
        for keyboard in DEFAULT_KEYBOARD_PACKAGES {
            let ui = delete_key(keyboard);
            let got = denying(&tap, &frame, &ui);
            assert_eq!(got, Verdict::Allow { sensitive: None }, "{keyboard}");
        }
        let ui = delete_key("com.example.mail");
        assert_eq!(denying(&tap, &frame, &ui), denied);
        // A config without keyboards judges the key by its label.
        let strict = SafetyConfig {
            keyboard_packages: Vec::new(),
            ..config(Confirm::Deny)
        };
        let ui = delete_key("com.btl.inputmethod");
        assert_eq!(
            assess(&tap, &frame, Some(&ui), Profile::BtlUi, &strict),
            denied
        );
    }

    #[test]
    fn pattern_matching_is_word_prefix_and_case_insensitive() {
        let rows = [
            ("Pay now", "pay", true),
            ("PAYMENT", "pay", true),
            ("Display", "pay", false),
            ("Delete contact?", "delete", true),
            ("Confirm  payment", "confirm payment", true),
            ("Confirm the payment", "confirm payment", false),
            ("anything", "", false),
            ("", "pay", false),
        ];
        for (text, pattern, expected) in rows {
            assert_eq!(
                matches_pattern(text, pattern),
                expected,
                "{text:?} ~ {pattern:?}"
            );
        }
    }

    #[test]
    fn config_file_round_trips_and_fills_defaults() {
        let default = SafetyConfig::default();
        assert_eq!(
            SafetyConfig::from_json(&default.to_json()).unwrap(),
            default
        );
        let partial = SafetyConfig::from_json(r#"{"on_sensitive": "deny"}"#).unwrap();
        assert_eq!(partial, config(Confirm::Deny));
        let typo = SafetyConfig::from_json(r#"{"on_sensitve": "deny"}"#).unwrap_err();
        assert!(typo.to_string().contains("unknown field"), "{typo}");
    }

    #[test]
    fn deny_all_refuses() {
        let sensitive = pay_match("Pay");
        let request = ConfirmRequest {
            goal: "g",
            plan: "p",
            action: &Action::Back,
            sensitive: &sensitive,
        };
        assert!(!DenyAll.confirm(&request));
        assert!((|_: &ConfirmRequest| true).confirm(&request));
    }
}
