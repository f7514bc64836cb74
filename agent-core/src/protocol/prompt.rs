//! The prompts a BTL model is asked with.
//!
//! Profile `btl-ui` reproduces the released BTL-UI training prompts byte for
//! byte, irregular spacing included (`- format` on action 1, ` - format` on
//! actions 2–6), because a released checkpoint was trained on exactly these
//! bytes. Profile `btl-extended` adds `Wait` and `Finish` so an agent can stop
//! by itself; it is for models we train. Profile `btl-screen-text` is
//! `btl-extended` with the screen's elements, as the accessibility tree
//! names them, listed in the user message: a model whose vision cannot read
//! text (one trained from nothing on a CPU host) finds a named row there,
//! as android_world's text agents do, and still sees the screenshot.

use super::action::{Action, Point};
use serde_json::{Value, json};
use std::ops::Range;

/// Where the screenshot goes; the model backend swaps it for the vision tokens.
pub const IMAGE_PLACEHOLDER: &str = "<image>";

/// llama.cpp's media marker (`mtmd_default_marker`): like
/// [`IMAGE_PLACEHOLDER`], text that must not come from outside the templates.
pub(crate) const MEDIA_MARKER: &str = "<__media__>";

/// The placeholder for the number of regions to blink, kept literally by default.
pub const ROI_COUNT_PLACEHOLDER: &str = "$N$";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Profile {
    /// The released BTL-UI prompts and action space.
    #[default]
    #[serde(rename = "btl-ui")]
    BtlUi,
    /// `btl-ui` plus `Wait` and `Finish`.
    #[serde(rename = "btl-extended")]
    BtlExtended,
    /// `btl-extended` plus a `## Screen Elements` section listing what the
    /// accessibility tree shows (label, point, switch state), and the
    /// instruction once more after the screenshot.
    #[serde(rename = "btl-screen-text")]
    BtlScreenText,
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Self::BtlUi => "btl-ui",
            Self::BtlExtended => "btl-extended",
            Self::BtlScreenText => "btl-screen-text",
        }
    }

    /// Whether the action space has `Wait` and `Finish`.
    pub fn can_finish(self) -> bool {
        self != Self::BtlUi
    }

    /// Whether the user message lists the screen's elements, so the agent
    /// has to read the UI tree for every step.
    pub fn lists_screen(self) -> bool {
        self == Self::BtlScreenText
    }

    /// The version of the text btl writes for this profile; a model is
    /// trained on exact bytes, so it changes whenever they do.
    /// `btl-screen-text` is at 2 since it repeats the instruction after the
    /// screenshot.
    pub fn prompt_version(self) -> u32 {
        match self {
            Self::BtlUi | Self::BtlExtended => 1,
            Self::BtlScreenText => 2,
        }
    }

    /// Whether the action belongs to this profile's action space.
    pub fn allows(self, action: &Action) -> bool {
        match action {
            Action::Wait | Action::Finish { .. } => self.can_finish(),
            _ => true,
        }
    }

    /// The profile whose action space a navigation user prompt lists;
    /// `None` for other prompts (grounding).
    pub fn of_user_prompt(user: &str) -> Option<Self> {
        Self::of_prompt_and_body(user, without_repeated_instruction(user))
    }

    /// [`Self::of_user_prompt`] of `user`, given its `body` without the
    /// repeated instruction.
    fn of_prompt_and_body(user: &str, body: &str) -> Option<Self> {
        let extended = user.contains(&Self::BtlExtended.action_space());
        if extended && listed_lines(body).is_some() {
            Some(Self::BtlScreenText)
        } else if extended {
            Some(Self::BtlExtended)
        } else if user.contains(ACTIONS_BTL_UI) {
            Some(Self::BtlUi)
        } else {
            None
        }
    }

    /// The profile a navigation user prompt was written in, as
    /// [`Self::of_user_prompt`], and the version of that profile's text it
    /// was written by: a `btl-screen-text` prompt without the repeated
    /// instruction is version 1's, recorded before the repeat.
    pub fn with_version_of_user_prompt(user: &str) -> Option<(Self, u32)> {
        let body = without_repeated_instruction(user);
        let profile = Self::of_prompt_and_body(user, body)?;
        let version = match profile {
            Self::BtlScreenText if body.len() == user.len() => 1,
            _ => profile.prompt_version(),
        };
        Some((profile, version))
    }

    fn action_space(self) -> String {
        match self {
            Self::BtlUi => ACTIONS_BTL_UI.to_string(),
            Self::BtlExtended | Self::BtlScreenText => {
                format!("{ACTIONS_BTL_UI}{ACTIONS_EXTENDED}")
            }
        }
    }
}

impl std::str::FromStr for Profile {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "btl-ui" => Ok(Self::BtlUi),
            "btl-extended" => Ok(Self::BtlExtended),
            "btl-screen-text" => Ok(Self::BtlScreenText),
            _ => Err(format!(
                "unknown prompt profile '{s}' (expected btl-ui, btl-extended or btl-screen-text)"
            )),
        }
    }
}

const SYSTEM_NAVIGATION_INTRO: &str = "You are a GUI Agent capable of reasoning based on user instructions, action history, and the current screenshot.";
const SYSTEM_GROUNDING_INTRO: &str =
    "You are a GUI Agent capable of reasoning based on user instructions and the screenshot.";
const SYSTEM_TASK: &str = " You should first observe the layout of the screenshot and locate $N$ elements RELATED TO the user instruction. Next, think about the reasoning process BASED ON the observations and instructions in your mind, and then provide the user with the answer.\n\nThe observation process";
const SYSTEM_NAVIGATION_EMPTY_BLINK: &str = " (can be None if $N$ == 0)";
const SYSTEM_FORMAT: &str = ", reasoning process and answer are enclosed within <blink></blink>, <think></think> and <link></link> tags, respectively, i.e.,\n<blink>```json\n[{\"bbox_2d\": [x1, y1, x2, y2], \"label\": \"object name/description\"},\n ...]\n ```</blink>\n<think> reasoning process here </think>\n<link>```json\n";
const SYSTEM_NAVIGATION_LINK: &str =
    "[{\"Plan\": \"action description\", \"Action\": {\"function\": \"...\", \"...\": \"...\"}}]";
const SYSTEM_GROUNDING_LINK: &str = "[{\"point_2d\": [x, y]}]";
const SYSTEM_END: &str = "\n```</link>";

const USER_NAVIGATION_INTRO: &str = "You are given a task and your action history, with screenshots. You need to perform the next action to complete the task.\n\n## Action Space\n";
const ACTIONS_BTL_UI: &str = "Action 1: Tap\n- format: {'function': 'Tap', 'point_2d':[x, y]}\n- purpose: tap the specified position.\nAction 2: Type\n - format: {'function': 'Type', 'text':'text_to_input'}\n - purpose: input specified text.\nAction 3: Swipe\n - format: {'function': 'Swipe', 'direction': 'up/down/right/left'}\n - purpose: swipe on the screen.\nAction 4: Back\n - format: {'function': 'Back'}\n - purpose: return to the previous screen.\nAction 5: Home\n - format: {'function': 'Home'}\n - purpose: navigate to the home screen.\nAction 6: LongPress\n - format: {'function': 'LongPress', 'point_2d':[x,y]}\n - purpose: longpress the specified position.";
const ACTIONS_EXTENDED: &str = "\nAction 7: Wait\n - format: {'function': 'Wait'}\n - purpose: wait for the screen to finish loading.\nAction 8: Finish\n - format: {'function': 'Finish', 'answer': 'answer_text'}\n - purpose: end the task once it is complete; answer is optional and holds the reply if the task asks a question.";

/// The heading of the section `btl-screen-text` adds to the user message.
const SCREEN_SECTION: &str = "## Screen Elements\n";

/// The goal's heading, as it opens the goal's section and, in
/// `btl-screen-text`, as it repeats the goal after the screenshot.
const INSTRUCTION_HEADING: &str = "\n\n## User Instruction\n";
const HISTORY_HEADING: &str = "\n\n## Action History\n";

/// One line of the `## Screen Elements` section: what the accessibility
/// tree calls an element, the model-frame point a finger aims at (the
/// middle of its bounds, in whole pixels, the point the oracle taps), and
/// for a switch or check box whether it is on.
#[derive(Debug, Clone, PartialEq)]
pub struct ScreenElement {
    pub label: String,
    pub point: Point,
    pub checked: Option<bool>,
}

impl ScreenElement {
    /// `- "label" [x, y]`, then ` on` or ` off` for a switch. The label is a
    /// JSON string, so no screen text can end the line or open a section of
    /// its own; its `<` is escaped (`\u003c`), so no screen text can be
    /// read as the image marker (`<image>`, llama.cpp's `<__media__>`) or a
    /// chat token (`<|im_end|>`), which the model's tokenizer parses.
    fn line(&self) -> String {
        let label = serde_json::to_string(&self.label)
            .unwrap_or_default()
            .replace('<', "\\u003c");
        let state = match self.checked {
            Some(true) => " on",
            Some(false) => " off",
            None => "",
        };
        format!("- {label} [{}, {}]{state}", self.point.x, self.point.y)
    }

    /// The element a line of [`Self::line`]'s form lists; `None` for any
    /// other text.
    fn from_line(line: &str) -> Option<Self> {
        let rest = line.strip_prefix("- ")?;
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<String>();
        let label = values.next()?.ok()?;
        let rest = rest[values.byte_offset()..].strip_prefix(" [")?;
        let (x, rest) = rest.split_once(", ")?;
        let (y, state) = rest.split_once(']')?;
        // Digits only: `u32`'s parser would also take a sign.
        let whole = |v: &str| {
            v.bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| v.parse::<u32>().ok())
                .flatten()
        };
        let checked = match state {
            "" => None,
            " on" => Some(true),
            " off" => Some(false),
            _ => return None,
        };
        Some(Self {
            label,
            point: Point::new(f64::from(whole(x)?), f64::from(whole(y)?)),
            checked,
        })
    }
}

/// The verbs a Plan that quotes a listed line opens with: a tap and a long
/// press at the line's point.
pub const QUOTING_VERBS: [&str; 2] = ["Tap", "Long press"];

/// The verb a Plan that quotes a listed line gives `action`; other actions
/// than a tap or long press quote no line.
pub fn quoting_verb(action: &Action) -> Option<&'static str> {
    match action {
        Action::Tap { .. } => Some(QUOTING_VERBS[0]),
        Action::LongPress { .. } => Some(QUOTING_VERBS[1]),
        _ => None,
    }
}

/// Whether no other line of `screen` has `label`: only such a line can be
/// quoted, by the oracle and under the grounded grammar alike.
pub fn label_is_its_own(screen: &[ScreenElement], label: &str) -> bool {
    screen.iter().filter(|l| l.label == label).count() == 1
}

/// The labels of `screen` that are their line's own
/// ([`label_is_its_own`]), found in one pass: asking of every line in turn
/// would take time in the square of a long list.
pub fn own_labels(screen: &[ScreenElement]) -> std::collections::HashSet<&str> {
    let mut counts: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for line in screen {
        *counts.entry(line.label.as_str()).or_default() += 1;
    }
    counts
        .into_iter()
        .filter(|&(_, n)| n == 1)
        .map(|(label, _)| label)
        .collect()
}

/// A Plan that names what it acts on word for word: `Tap "Contacts".`
pub fn quoting_plan(verb: &str, label: &str) -> String {
    format!("{verb} \"{label}\".")
}

/// The lines of the screen section [`Prompt::new`] writes that a navigation
/// user prompt ends with, before the screenshot and the repeated
/// instruction (`"None"` for an empty screen; its image placeholder may have
/// been taken out, as in text-only samples; prompts of version 1 end at the
/// screenshot). The goal and the history come before the section, so a goal
/// that quotes its heading does not make one: only listed lines, or `None`,
/// may stand between the heading and the screenshots.
fn screen_section(user: &str) -> Option<&str> {
    listed_lines(without_repeated_instruction(user))
}

/// [`screen_section`] of a prompt without its repeated instruction.
fn listed_lines(prompt: &str) -> Option<&str> {
    let user = prompt.strip_suffix(IMAGE_PLACEHOLDER).unwrap_or(prompt);
    let body = user.strip_suffix("\n\n## Screenshots\n")?;
    let heading = format!("\n\n{SCREEN_SECTION}");
    let at = body.rfind(&heading)?;
    let lines = &body[at + heading.len()..];
    (lines == "None" || (!lines.is_empty() && lines.lines().all(|line| line.starts_with("- "))))
        .then_some(lines)
}

/// `user` without the instruction `btl-screen-text` repeats at its end: the
/// text of the first instruction section, under the same heading. As it is
/// when it does not end so. The instruction is the user's and may hold
/// either heading itself, so the repeat is the longest ending that also
/// stands between the first instruction heading and a history heading.
///
/// An ending that also starts the sections is one of their borders, so all
/// candidates are checked in time linear in the prompt: comparing each
/// heading's ending with the start would be quadratic, a minute for a
/// 10 MB prompt of headings.
fn without_repeated_instruction(user: &str) -> &str {
    let Some(first) = user.find(INSTRUCTION_HEADING) else {
        return user;
    };
    let sections = &user[first + INSTRUCTION_HEADING.len()..];
    let bytes = sections.as_bytes();
    let is_border = borders(bytes);
    sections
        .match_indices(INSTRUCTION_HEADING)
        .map(|(at, _)| at)
        .find(|&at| {
            let instruction = bytes.len() - at - INSTRUCTION_HEADING.len();
            is_border[instruction]
                && bytes[instruction..].starts_with(HISTORY_HEADING.as_bytes())
                && bytes.len() - instruction - HISTORY_HEADING.len() >= bytes.len() - at
        })
        .map_or(user, |at| &user[..first + INSTRUCTION_HEADING.len() + at])
}

/// For every length up to `text`'s, whether its first that many bytes are
/// also its last (Knuth–Morris–Pratt's failure function, followed down from
/// the whole text).
fn borders(text: &[u8]) -> Vec<bool> {
    let mut failure = vec![0; text.len()];
    let mut matched = 0;
    for (i, &byte) in text.iter().enumerate().skip(1) {
        while matched > 0 && byte != text[matched] {
            matched = failure[matched - 1];
        }
        if byte == text[matched] {
            matched += 1;
        }
        failure[i] = matched;
    }
    let mut is_border = vec![false; text.len() + 1];
    is_border[0] = true;
    is_border[text.len()] = true;
    let mut length = failure.last().copied().unwrap_or(0);
    while length > 0 {
        is_border[length] = true;
        length = failure[length - 1];
    }
    is_border
}

/// Where the task's own words stand in a navigation user prompt
/// [`Prompt::new`] wrote, as byte ranges: the instruction (the goal, and a
/// step's instruction after it), each earlier step's Plan (after its
/// `Step k: `), and the instruction `btl-screen-text` repeats after the
/// screenshot. The rest is the templates' fixed text, the listed screen
/// and the image placeholder, whose numbers and labels are no task's
/// words even where they spell the same (a point `[235, 552]`, a goal's
/// "55").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskWords {
    pub instruction: Range<usize>,
    pub plans: Vec<Range<usize>>,
    pub repeat: Option<Range<usize>>,
}

impl TaskWords {
    /// The ranges in the order they stand in the prompt.
    pub fn ranges(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        std::iter::once(self.instruction.clone())
            .chain(self.plans.iter().cloned())
            .chain(self.repeat.clone())
    }
}

/// The task's words of a navigation user prompt ([`TaskWords`]); `None`
/// for a prompt without an instruction and a history section (grounding).
/// The instruction is the user's and may hold either heading itself, but
/// no Plan holds a line break ([`render_history`]) nor a listed label a
/// raw one, so the history heading is the last one before the repeat.
pub fn task_words(user: &str) -> Option<TaskWords> {
    let start = user.find(INSTRUCTION_HEADING)? + INSTRUCTION_HEADING.len();
    let body = without_repeated_instruction(user);
    let history = start + body.get(start..)?.rfind(HISTORY_HEADING)?;
    let mut plans = Vec::new();
    let mut at = history + HISTORY_HEADING.len();
    for (k, line) in body[at..].split('\n').enumerate() {
        let step = format!("Step {}: ", k + 1);
        if !line.starts_with(&step) {
            break;
        }
        plans.push(at + step.len()..at + line.len());
        at += line.len() + 1;
    }
    let repeat =
        (body.len() < user.len()).then(|| body.len() + INSTRUCTION_HEADING.len()..user.len());
    Some(TaskWords {
        instruction: start..history,
        plans,
        repeat,
    })
}

/// A line of the screen section that [`ScreenElement`] does not write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "screen element line {number} is not `- \"label\" [x, y]` with an optional ` on` or ` off`: {line:?}"
)]
pub struct BadScreenLine {
    /// From 1, within the section.
    pub number: usize,
    pub line: String,
}

/// The elements a navigation user prompt lists, read back from the screen
/// section [`Prompt::new`] writes in `btl-screen-text`: what a recorded
/// sample showed its model, so decoding can be grounded in it as on the
/// phone. Empty for a prompt without the section, or with `None`.
pub fn listed_screen(user: &str) -> Result<Vec<ScreenElement>, BadScreenLine> {
    match screen_section(user) {
        None | Some("None") => Ok(Vec::new()),
        Some(lines) => lines
            .lines()
            .enumerate()
            .map(|(i, line)| {
                ScreenElement::from_line(line).ok_or_else(|| BadScreenLine {
                    number: i + 1,
                    line: line.to_string(),
                })
            })
            .collect(),
    }
}

/// What the model is asked to do at this step.
#[derive(Debug, Clone, PartialEq)]
pub enum Task<'a> {
    /// A navigation step: the goal, for low-level tasks the instruction of
    /// this step, the Plan strings of the previous steps, and the screen's
    /// elements (listed by `btl-screen-text` only).
    Navigation {
        goal: &'a str,
        step_instruction: Option<&'a str>,
        history: &'a [String],
        screen: &'a [ScreenElement],
    },
    /// Point at the element most relevant to an instruction.
    Grounding { instruction: &'a str },
}

/// System and user message; the user message holds [`IMAGE_PLACEHOLDER`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Prompt {
    pub system: String,
    pub user: String,
}

impl Prompt {
    /// Whether the system message asks for a point as the whole link, as
    /// a grounding prompt's does (spec §2), rather than a Plan and an
    /// action.
    pub fn asks_for_a_point(&self) -> bool {
        self.system
            .ends_with(&[SYSTEM_GROUNDING_LINK, SYSTEM_END].concat())
    }

    /// Builds the prompt for one step. `roi_count` replaces the literal `$N$`
    /// when given.
    pub fn new(task: &Task, profile: Profile, roi_count: Option<usize>) -> Self {
        let (system, user) = match task {
            Task::Navigation {
                goal,
                step_instruction,
                history,
                screen,
            } => {
                let system = [
                    SYSTEM_NAVIGATION_INTRO,
                    SYSTEM_TASK,
                    SYSTEM_NAVIGATION_EMPTY_BLINK,
                    SYSTEM_FORMAT,
                    SYSTEM_NAVIGATION_LINK,
                    SYSTEM_END,
                ]
                .concat();
                let goal = inert(goal);
                let instruction = match step_instruction {
                    Some(step) => format!("{goal}\n{}", inert(step)),
                    None => goal.into_owned(),
                };
                // The goal otherwise stands some 400 tokens back, across the
                // list and the screenshot; trained with it repeated right
                // before the answer, a small model completed all 80
                // held-out toggle episodes against 59 without
                // (docs/training.md, "The goal again after the screenshot").
                let (screen, repeated) = if profile.lists_screen() {
                    (
                        format!("{SCREEN_SECTION}{}\n\n", render_screen(screen)),
                        format!("{INSTRUCTION_HEADING}{instruction}"),
                    )
                } else {
                    (String::new(), String::new())
                };
                let user = format!(
                    "{USER_NAVIGATION_INTRO}{actions}{INSTRUCTION_HEADING}{instruction}{HISTORY_HEADING}{history}\n\n{screen}## Screenshots\n{IMAGE_PLACEHOLDER}{repeated}",
                    actions = profile.action_space(),
                    history = render_history(history),
                );
                (system, user)
            }
            Task::Grounding { instruction } => {
                let instruction = inert(instruction);
                let system = [
                    SYSTEM_GROUNDING_INTRO,
                    SYSTEM_TASK,
                    SYSTEM_FORMAT,
                    SYSTEM_GROUNDING_LINK,
                    SYSTEM_END,
                ]
                .concat();
                let user = format!(
                    "Point to the UI element most relevant to {instruction}.\n{IMAGE_PLACEHOLDER}"
                );
                (system, user)
            }
        };
        let system = match roi_count {
            Some(n) => system.replace(ROI_COUNT_PLACEHOLDER, &n.to_string()),
            None => system,
        };
        Self { system, user }
    }

    /// The official `messages` list (system then user, no assistant turn).
    pub fn to_messages(&self) -> Value {
        json!([
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.user},
        ])
    }
}

/// One line per element, in the order given; `None` for a screen without
/// any, so the model is told the list is empty rather than cut off.
pub fn render_screen(elements: &[ScreenElement]) -> String {
    if elements.is_empty() {
        return "None".to_string();
    }
    elements
        .iter()
        .map(ScreenElement::line)
        .collect::<Vec<_>>()
        .join("\n")
}

/// `Step k: plan` lines, k from 1; empty when there is no history. The
/// Plans are the model's own words, which may quote a screen, so no text
/// of theirs may spell a marker either (`inert`), and each stays on its
/// line (`on_one_line`).
pub fn render_history(plans: &[String]) -> String {
    plans
        .iter()
        .enumerate()
        .map(|(i, plan)| format!("Step {}: {}", i + 1, on_one_line(&inert(plan))))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `text` with each line break written as a space. The answer grammar
/// lets a Plan hold `\n`, and a Plan ending in `\n\n## Screen Elements\n`
/// and a made-up line would make a `btl-extended` prompt read as a
/// screen-text one ([`listed_screen`], [`Profile::of_user_prompt`]) or
/// add a Plan of its own. No Plan the oracle writes breaks a line, so the
/// bytes models were trained on, and prompt versions, stay.
fn on_one_line(text: &str) -> std::borrow::Cow<'_, str> {
    let breaks = |c: char| {
        matches!(
            c,
            '\n' | '\r' | '\u{0B}' | '\u{0C}' | '\u{85}' | '\u{2028}' | '\u{2029}'
        )
    };
    if !text.contains(breaks) {
        return text.into();
    }
    text.chars()
        .map(|c| if breaks(c) { ' ' } else { c })
        .collect::<String>()
        .into()
}

/// Text from outside the templates (the goal, a step's instruction, the
/// Plans of earlier steps) with each `<` that would open a marker written
/// full-width (`＜`): the backend puts the screenshot at every
/// [`IMAGE_PLACEHOLDER`] and [`MEDIA_MARKER`], and the tokenizer reads
/// `<|im_end|>` and its kin as chat tokens, so such text would fail the
/// step or open a turn of its own. No other text changes, so a prompt's
/// bytes, and the version of its profile, stay those models were trained
/// on; a `<` that opens nothing stays as typed. What it guards is
/// llama.cpp's and the Qwen tokenizer's reading: Qwen's added tags
/// (`<tool_call>`) still tokenize as one token each, and ms-swift's own
/// tags (`<video>`, `<bbox>`, …) are not escaped.
pub(crate) fn inert(text: &str) -> std::borrow::Cow<'_, str> {
    let opens_marker = |rest: &str| {
        rest.starts_with("<|")
            || rest.starts_with(IMAGE_PLACEHOLDER)
            || rest.starts_with(MEDIA_MARKER)
    };
    if !text
        .match_indices('<')
        .any(|(at, _)| opens_marker(&text[at..]))
    {
        return text.into();
    }
    text.char_indices()
        .map(|(at, c)| {
            if c == '<' && opens_marker(&text[at..]) {
                '\u{FF1C}'
            } else {
                c
            }
        })
        .collect::<String>()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The own labels found in one pass are those each line's own
        /// count finds, on lists of a few labels repeated.
        #[test]
        fn own_labels_are_those_of_one_line(labels in proptest::collection::vec("[ab]{0,2}", 0..12)) {
            let screen: Vec<ScreenElement> = labels
                .iter()
                .map(|label| ScreenElement {
                    label: label.clone(),
                    point: crate::protocol::Point::new(1.0, 2.0),
                    checked: None,
                })
                .collect();
            let own = own_labels(&screen);
            for line in &screen {
                prop_assert_eq!(own.contains(line.label.as_str()), label_is_its_own(&screen, &line.label));
            }
            prop_assert!(own.iter().all(|label| labels.iter().any(|l| l == label)));
        }

        /// The borders are the lengths whose prefix equals the suffix, as
        /// comparing them one by one finds.
        #[test]
        fn borders_are_the_prefixes_that_end_the_text(text in proptest::collection::vec(0u8..3, 0..40)) {
            let expected: Vec<bool> = (0..=text.len())
                .map(|l| text[..l] == text[text.len() - l..])
                .collect();
            prop_assert_eq!(borders(&text), expected);
        }

        /// The repeat found through the borders is the one comparing every
        /// heading's ending with the sections' start finds, on prompts made
        /// of headings and a few words.
        #[test]
        fn the_repeat_is_found_as_by_comparing_each_ending(
            parts in proptest::collection::vec(
                proptest::sample::select(vec![INSTRUCTION_HEADING, HISTORY_HEADING, "a", "b"]),
                0..14,
            )
        ) {
            let user = parts.concat();
            let expected = user.find(INSTRUCTION_HEADING).map_or(user.as_str(), |first| {
                let sections = &user[first + INSTRUCTION_HEADING.len()..];
                sections
                    .match_indices(INSTRUCTION_HEADING)
                    .map(|(at, _)| at)
                    .find(|&at| {
                        let instruction = &sections[at + INSTRUCTION_HEADING.len()..];
                        sections
                            .strip_prefix(instruction)
                            .and_then(|rest| rest.strip_prefix(HISTORY_HEADING))
                            .is_some_and(|rest| rest.len() >= sections.len() - at)
                    })
                    .map_or(user.as_str(), |at| &user[..first + INSTRUCTION_HEADING.len() + at])
            });
            prop_assert_eq!(without_repeated_instruction(&user), expected);
        }
    }
}
