//! A GBNF grammar (llama.cpp's grammar format) that admits exactly the
//! canonical BTL answer, for grammar-constrained decoding.
//!
//! The grammar follows the renderer's canonical text (spec §2): the three
//! tagged parts with their `` ```json `` fences, Python `json.dumps`
//! separators, keys in the official order, whole-number coordinates bounded
//! by the model frame (a point or box off the screenshot cannot be sampled),
//! a bounded `<think>`, and only the actions of the prompt's profile (or,
//! for a grounding prompt, the `[{"point_2d": [x, y]}]` link). The
//! blink list may be empty, as the oracle writes it for actions without a
//! target (Type, Back, Home, Swipe). JSON strings hold any character but `"`,
//! `\`, control characters and `<` (raw UTF-8, as the renderer writes them),
//! or a two-character escape; without `<` no string can close a tag early.
//!
//! In `btl-screen-text` the prompt lists the screen's elements, and the
//! link is grounded in that list: a Plan that starts quoting a line
//! (`Tap "Dmitri King".`) can only quote a listed one, and its action is
//! bound to that line's point ([`btl_grammar`]'s `screen`).
//!
//! The answer is bounded in bytes ([`GrammarLimits::max_answer_bytes`]):
//! every token a model samples decodes to at least one byte, so an answer
//! under the grammar always closes within that many tokens, whatever the
//! tokenizer. [`GrammarLimits::fit`] shrinks the limits to a token budget.
//!
//! Pure: it only builds text; `LlamaPolicy` hands it to llama.cpp's grammar
//! sampler.

use crate::protocol::prompt::{
    QUOTING_VERBS, ScreenElement, own_labels, quoting_plan, quoting_verb,
};
use crate::protocol::{Action, Link, Profile, Size};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// When the grammar is applied to the whole vocabulary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "host", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
pub enum GrammarCheck {
    /// Only when it refuses the unconstrained sampler's token (the default).
    #[default]
    Lazy,
    /// Before every token, as the grammar sampler first in llama.cpp's
    /// chain does: the same greedy tokens, at a cost that grows with the
    /// vocabulary. Kept to measure the lazy check against.
    First,
}

/// What the `<link>` of an answer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answering {
    /// A Plan and one action of the profile's action space: a navigation
    /// prompt.
    Action(Profile),
    /// A point and nothing else: a grounding prompt
    /// ([`Prompt::asks_for_a_point`](crate::protocol::Prompt::asks_for_a_point)).
    Point,
}

impl From<Profile> for Answering {
    fn from(profile: Profile) -> Self {
        Self::Action(profile)
    }
}

/// Length bounds that keep a constrained answer finite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrammarLimits {
    /// Regions in `<blink>` (0 to this many).
    pub max_regions: usize,
    /// Characters of a region's label (an escape counts as one).
    pub max_label_chars: usize,
    /// Characters of the `<think>` text.
    pub max_think_chars: usize,
    /// Characters of the Plan, a typed text or a Finish answer.
    pub max_string_chars: usize,
}

/// The widest character the grammar admits: four bytes of UTF-8 (an escape
/// takes two).
const WIDEST_CHAR: char = '\u{1D11E}';

impl Default for GrammarLimits {
    /// Room for every answer the suite's oracles write (over ten instances
    /// of every template: longest label 46 characters, Plan and think 73,
    /// typed text 26, printed by the llama test
    /// `llama_cpp_grammar_admits_every_oracle_answer`) with margin; the
    /// longest admitted answer is [`DEFAULT_MAX_TOKENS`] bytes or less on
    /// any frame up to 9999 pixels a side.
    fn default() -> Self {
        Self {
            max_regions: DEFAULT_MAX_REGIONS,
            max_label_chars: crate::device::ui::MAX_LABEL_CHARS,
            max_think_chars: 128,
            max_string_chars: 96,
        }
    }
}

/// Blink regions the default limits admit, so the most a prompt's `$N$`
/// may ask for.
pub const DEFAULT_MAX_REGIONS: usize = 3;

/// The decoding budget that holds the longest answer the default limits
/// admit, for CLIs and configs.
pub const DEFAULT_MAX_TOKENS: u32 = 2200;

/// The budget is smaller than the shortest useful limits' longest answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a budget of {budget} tokens cannot hold a constrained BTL answer on a {frame} frame: \
     give at least {needed}"
)]
pub struct BudgetTooSmall {
    pub budget: usize,
    pub needed: usize,
    pub frame: String,
}

impl GrammarLimits {
    /// The most bytes an answer that [`btl_grammar`] admits with these
    /// limits can have: the length of [`Self::longest_answer`].
    pub fn max_answer_bytes(&self, frame: Size, answering: impl Into<Answering>) -> usize {
        self.longest_answer(frame, answering).len()
    }

    /// An answer the grammar admits that no admitted answer is longer than
    /// in bytes: every region, the largest coordinates, every string at its
    /// limit in the widest character, and the longest action.
    pub fn longest_answer(&self, frame: Size, answering: impl Into<Answering>) -> String {
        let fill = |n: usize| WIDEST_CHAR.to_string().repeat(n);
        let (x, y) = (frame.width, frame.height);
        let region = format!(
            "{{\"bbox_2d\": [{x}, {y}, {x}, {y}], \"label\": \"{}\"}}",
            fill(self.max_label_chars)
        );
        let blink = vec![region; self.max_regions].join(", ");
        let link = match answering.into() {
            Answering::Point => format!("{{\"point_2d\": [{x}, {y}]}}"),
            Answering::Action(profile) => {
                let text = fill(self.max_string_chars);
                let mut actions = vec![
                    format!("{{\"function\": \"LongPress\", \"point_2d\": [{x}, {y}]}}"),
                    format!("{{\"function\": \"Type\", \"text\": \"{text}\"}}"),
                    "{\"function\": \"Swipe\", \"direction\": \"right\"}".to_string(),
                ];
                if profile.can_finish() {
                    actions.push(format!(
                        "{{\"function\": \"Finish\", \"answer\": \"{text}\"}}"
                    ));
                }
                let action = actions
                    .into_iter()
                    .max_by_key(String::len)
                    .unwrap_or_default();
                format!("{{\"Plan\": \"{text}\", \"Action\": {action}}}")
            }
        };
        format!(
            "<blink>```json\n[{blink}]\n```</blink>\n<think>{}</think>\n<link>```json\n[{link}]\n```</link>",
            fill(self.max_think_chars)
        )
    }

    /// These limits, shrunk in proportion until the longest answer fits
    /// `budget` tokens (one byte each at least). Limits that already fit
    /// are returned as they are.
    pub fn fit(
        &self,
        budget: usize,
        frame: Size,
        answering: impl Into<Answering>,
    ) -> Result<Self, BudgetTooSmall> {
        let answering = answering.into();
        if self.max_answer_bytes(frame, answering) <= budget {
            return Ok(*self);
        }
        // The skeleton with one short region and a few characters of each
        // string: below this a model has no room to say anything useful.
        let floor = Self {
            max_regions: self.max_regions.min(1),
            max_label_chars: self.max_label_chars.min(4),
            max_think_chars: self.max_think_chars.min(4),
            max_string_chars: self.max_string_chars.min(4),
        };
        let needed = floor.max_answer_bytes(frame, answering);
        if needed > budget {
            return Err(BudgetTooSmall {
                budget,
                needed,
                frame: format!("{}x{}", frame.width, frame.height),
            });
        }
        // The answer's length grows with the scale, so the largest scale
        // that fits is found by bisection over per-mille steps.
        let scaled = |permille: usize| {
            let s = |limit: usize, least: usize| (limit * permille / 1000).max(least);
            Self {
                max_regions: s(self.max_regions, floor.max_regions),
                max_label_chars: s(self.max_label_chars, floor.max_label_chars),
                max_think_chars: s(self.max_think_chars, floor.max_think_chars),
                max_string_chars: s(self.max_string_chars, floor.max_string_chars),
            }
        };
        let (mut lo, mut hi) = (0usize, 1000usize);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if scaled(mid).max_answer_bytes(frame, answering) <= budget {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        Ok(scaled(lo))
    }
}

/// The grammar for answers on a model frame of `frame` pixels. `screen`
/// is the prompt's `## Screen Elements` list (empty when the profile lists
/// none, or the device has no UI tree); with it the link is grounded, see
/// `grounded_plans`.
pub fn btl_grammar(
    frame: Size,
    answering: impl Into<Answering>,
    limits: &GrammarLimits,
    screen: &[ScreenElement],
) -> String {
    let mut g = String::new();
    let blink = match limits.max_regions {
        0 => String::new(),
        1 => "region?".to_string(),
        n => format!("(region (\", \" region){{0,{}}})?", n - 1),
    };
    let _ = writeln!(
        g,
        "root ::= \"<blink>```json\\n[\" {blink} \"]\\n```</blink>\\n<think>\" think \"</think>\\n<link>```json\\n[\" item \"]\\n```</link>\""
    );
    let _ = writeln!(
        g,
        "region ::= \"{{\\\"bbox_2d\\\": [\" x \", \" y \", \" x \", \" y \"], \\\"label\\\": \" label \"}}\""
    );
    let _ = writeln!(g, "think ::= [^<]{{0,{}}}", limits.max_think_chars);
    let _ = writeln!(
        g,
        "label ::= \"\\\"\" char{{0,{}}} \"\\\"\"",
        limits.max_label_chars
    );
    // Any character but `"`, `\`, `<` and the control characters, or an
    // escape as json.dumps writes them (`\uXXXX` is left out: the renderer
    // writes it only for control characters, and it would triple a
    // character's worst-case length).
    g.push_str("char ::= [^\"\\\\<\\x00-\\x1F] | \"\\\\\" [\"\\\\/bfnrt]\n");
    match answering.into() {
        Answering::Point => {
            g.push_str("item ::= \"{\\\"point_2d\\\": [\" x \", \" y \"]}\"\n");
        }
        Answering::Action(profile) => action_item(&mut g, profile, frame, limits, screen),
    }
    let _ = writeln!(g, "x ::= {}", int_upto(frame.width));
    let _ = writeln!(g, "y ::= {}", int_upto(frame.height));
    g
}

/// The rules of a navigation answer's link item: its Plan (grounded in
/// `screen` where the profile lists one) and the profile's actions.
fn action_item(
    g: &mut String,
    profile: Profile,
    frame: Size,
    limits: &GrammarLimits,
    screen: &[ScreenElement],
) {
    g.push_str("item ::= \"{\\\"Plan\\\": \" link \"}\"\n");
    let _ = writeln!(
        g,
        "string ::= \"\\\"\" char{{0,{}}} \"\\\"\"",
        limits.max_string_chars
    );
    let then_action = "\", \\\"Action\\\": \" action";
    if profile.lists_screen() && !screen.is_empty() {
        let quoted = grounded_plans(screen, frame, limits);
        let free = format!("\"\\\"\" free-plan \"\\\"\" {then_action}");
        if quoted.is_empty() {
            let _ = writeln!(g, "link ::= {free}");
        } else {
            let _ = writeln!(g, "link ::= {free} | {}", quoted.join(" | "));
        }
        let prefixes: Vec<Vec<Unit>> = QUOTING_VERBS
            .iter()
            .map(|verb| {
                verb.chars()
                    .map(Unit::Plain)
                    .chain([Unit::Plain(' '), Unit::Escaped('"')])
                    .collect()
            })
            .collect();
        let prefixes: Vec<&[Unit]> = prefixes.iter().map(Vec::as_slice).collect();
        let mut rules = 0;
        string_without(
            g,
            "free-plan",
            &prefixes,
            limits.max_string_chars,
            &mut rules,
        );
    } else {
        let _ = writeln!(g, "link ::= string {then_action}");
    }
    let point = "\\\"point_2d\\\": [\" x \", \" y \"]";
    let mut actions = vec![
        format!("\"{{\\\"function\\\": \\\"Tap\\\", {point}}}\""),
        format!("\"{{\\\"function\\\": \\\"LongPress\\\", {point}}}\""),
        "\"{\\\"function\\\": \\\"Type\\\", \\\"text\\\": \" string \"}\"".to_string(),
        "\"{\\\"function\\\": \\\"Swipe\\\", \\\"direction\\\": \\\"\" (\"up\" | \"down\" | \"left\" | \"right\") \"\\\"}\"".to_string(),
        "\"{\\\"function\\\": \\\"Back\\\"}\"".to_string(),
        "\"{\\\"function\\\": \\\"Home\\\"}\"".to_string(),
    ];
    if profile.can_finish() {
        actions.push("\"{\\\"function\\\": \\\"Wait\\\"}\"".to_string());
        actions.push(
            "\"{\\\"function\\\": \\\"Finish\\\"\" (\", \\\"answer\\\": \" string)? \"}\""
                .to_string(),
        );
    }
    let _ = writeln!(g, "action ::= {}", actions.join(" | "));
}

/// The grounded link's quoting alternatives, as GBNF literals of the text
/// from the Plan's opening quote to the end of the Action: for every
/// listed line whose label no other line shares, `"Tap \"Dmitri
/// King\".", "Action": {"function": "Tap", "point_2d": [140, 313]}` and the
/// same for a long press.
///
/// A model that quotes a line in its Plan, as the `btl-screen-text` oracle
/// does for every tap on one (`model::oracle::quoting_its_line`), then
/// acts at that line's point: the lookup of the point that follows a
/// quote in the list is done by decoding, not by the model (the small
/// models of docs/training.md quote the right line far more often than
/// they copy its point). Where the Plan starts quoting, only listed lines
/// can follow, so a misspelt quote cannot be written either. A Plan that
/// does not start with a quote (a slider's tap, a swipe) is free
/// (`free-plan`), and so is its action. Lines whose label is shared, or
/// holds a `<` or a control character, or whose Plan would be longer than
/// the limits, are not quotable.
fn grounded_plans(screen: &[ScreenElement], frame: Size, limits: &GrammarLimits) -> Vec<String> {
    let mut out = Vec::new();
    let own = own_labels(screen);
    for line in screen {
        let unique = own.contains(line.label.as_str());
        let plain = !line.label.chars().any(|c| c == '<' || c.is_control());
        let whole = |v: f64, max: u32| v.fract() == 0.0 && (0.0..=f64::from(max)).contains(&v);
        if !unique
            || !plain
            || !whole(line.point.x, frame.width)
            || !whole(line.point.y, frame.height)
        {
            continue;
        }
        for action in [
            Action::Tap {
                point_2d: line.point,
            },
            Action::LongPress {
                point_2d: line.point,
            },
        ] {
            let Some(verb) = quoting_verb(&action) else {
                continue;
            };
            let plan = quoting_plan(verb, &line.label);
            if plan.chars().count() > limits.max_string_chars {
                continue;
            }
            let json = Link::Action { plan, action }.to_json();
            if let Some(text) = json
                .strip_prefix("[{\"Plan\": ")
                .and_then(|rest| rest.strip_suffix("}]"))
            {
                out.push(gbnf_literal(text));
            }
        }
    }
    out
}

/// One character of a JSON string as the `char` rule reads it: itself, or
/// a two-character escape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Plain(char),
    Escaped(char),
}

impl Unit {
    fn literal(self) -> String {
        match self {
            Unit::Plain(c) => gbnf_literal(&c.to_string()),
            Unit::Escaped(c) => gbnf_literal(&format!("\\{c}")),
        }
    }
}

/// Writes rule `name` (and the rules it needs, numbered by `rules`): the
/// body of a JSON string of at most `max` characters that starts with
/// none of `prefixes`, a trie of what it may not begin with.
fn string_without(g: &mut String, name: &str, prefixes: &[&[Unit]], max: usize, rules: &mut usize) {
    let mut alternatives = vec!["\"\"".to_string()];
    if max > 0 {
        let mut firsts: Vec<Unit> = Vec::new();
        for unit in prefixes.iter().filter_map(|p| p.first().copied()) {
            if !firsts.contains(&unit) {
                firsts.push(unit);
            }
        }
        let rest = match max - 1 {
            0 => String::new(),
            n => format!(" char{{0,{n}}}"),
        };
        alternatives.push(format!("{}{rest}", char_other_than(&firsts)));
        for unit in firsts {
            let tails: Vec<&[Unit]> = prefixes
                .iter()
                .filter(|p| p.first() == Some(&unit))
                .map(|p| &p[1..])
                .collect();
            // A prefix that ends with this unit is what the string may not
            // start with: no branch.
            if tails.iter().any(|t| t.is_empty()) {
                continue;
            }
            *rules += 1;
            let child = format!("{name}-{rules}");
            alternatives.push(format!("{} {child}", unit.literal()));
            string_without(g, &child, &tails, max - 1, rules);
        }
    }
    let _ = writeln!(g, "{name} ::= {}", alternatives.join(" | "));
}

/// The `char` rule less `units`.
fn char_other_than(units: &[Unit]) -> String {
    let class_char = |c: char| match c {
        '\\' | ']' | '^' | '-' => format!("\\{c}"),
        c => c.to_string(),
    };
    let plain: String = units
        .iter()
        .filter_map(|u| match u {
            Unit::Plain(c) => Some(class_char(*c)),
            Unit::Escaped(_) => None,
        })
        .collect();
    let escapes: String = ['"', '\\', '/', 'b', 'f', 'n', 'r', 't']
        .into_iter()
        .filter(|c| !units.contains(&Unit::Escaped(*c)))
        .map(class_char)
        .collect();
    format!("([^\"\\\\<\\x00-\\x1F{plain}] | \"\\\\\" [{escapes}])")
}

/// `text` as a GBNF string literal.
fn gbnf_literal(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A GBNF alternation matching the decimal integers 0 to `max` without
/// leading zeros, and nothing else.
pub fn int_upto(max: u32) -> String {
    let digits: Vec<u32> = max
        .to_string()
        .bytes()
        .map(|b| u32::from(b - b'0'))
        .collect();
    let n = digits.len();
    let mut alternatives = vec!["\"0\"".to_string()];
    // Every length shorter than max's: any number of that many digits.
    for len in 1..n {
        alternatives.push(format!("[1-9]{}", any_digits(len - 1)));
    }
    // Max's own length: agree with max on a prefix, then a smaller digit,
    // then anything.
    if max > 0 {
        for i in 0..n {
            let low = u32::from(i == 0);
            if digits[i] > low {
                let prefix: String = digits[..i].iter().map(|d| d.to_string()).collect();
                let quoted = if prefix.is_empty() {
                    String::new()
                } else {
                    format!("\"{prefix}\" ")
                };
                alternatives.push(format!(
                    "{quoted}{}{}",
                    digit_class(low, digits[i] - 1),
                    any_digits(n - i - 1)
                ));
            }
        }
        if max >= 10 || digits[0] > 0 {
            alternatives.push(format!("\"{max}\""));
        }
    }
    alternatives.dedup();
    format!("({})", alternatives.join(" | "))
}

fn digit_class(low: u32, high: u32) -> String {
    if low == high {
        format!("\"{low}\"")
    } else {
        format!("[{low}-{high}]")
    }
}

fn any_digits(count: usize) -> String {
    match count {
        0 => String::new(),
        1 => " [0-9]".to_string(),
        n => format!(" [0-9]{{{n}}}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GBNF's alternation, classes, literals and `{n}` read the same as a
    /// regex once the quotes and spaces between items are dropped.
    fn as_regex(gbnf: &str) -> regex::Regex {
        let mut out = String::from("^");
        let mut in_quote = false;
        for c in gbnf.chars() {
            match c {
                '"' => in_quote = !in_quote,
                ' ' if !in_quote => {}
                c => out.push(c),
            }
        }
        out.push('$');
        regex::Regex::new(&out).unwrap()
    }

    #[test]
    fn int_upto_matches_exactly_zero_to_max() {
        for max in (0..=1200).chain([2408, 3000, 9999, 10000, 65535]) {
            let re = as_regex(&int_upto(max));
            for v in 0..=max + 150 {
                assert_eq!(
                    re.is_match(&v.to_string()),
                    v <= max,
                    "max {max}, value {v}"
                );
            }
            for bad in ["00", "01", "-1", "", "1.0", "007"] {
                assert!(!re.is_match(bad), "max {max} admits {bad:?}");
            }
        }
    }

    #[test]
    fn the_longest_answer_holds_every_region_at_its_widest() {
        // llama.cpp's grammar engine admitting it is checked in the llama
        // tests; here its length against a hand count.
        let frame = Size::new(1092, 2408);
        let limits = GrammarLimits::default();
        let longest = limits.longest_answer(frame, Profile::BtlExtended);
        assert_eq!(
            longest.len(),
            limits.max_answer_bytes(frame, Profile::BtlExtended)
        );
        assert!(longest.len() <= DEFAULT_MAX_TOKENS as usize);
        // Hand count of the widest region: 13 + 4·4 digits + 3·2 + 13 +
        // 48 characters · 4 bytes + 2.
        assert!(longest.contains(&format!(
            "{{\"bbox_2d\": [1092, 2408, 1092, 2408], \"label\": \"{}\"}}",
            WIDEST_CHAR.to_string().repeat(48)
        )));
        assert_eq!(13 + 16 + 6 + 13 + 48 * 4 + 2, 242);
    }

    proptest::proptest! {
        /// `fit` returns limits whose longest answer fits the budget, no
        /// larger than the limits it started from, or says the budget is
        /// too small only when even the floor does not fit.
        #[test]
        fn fit_respects_the_budget(
            budget in 0usize..4000,
            width in 1u32..10_000,
            height in 1u32..10_000,
            extended in proptest::bool::ANY,
        ) {
            let frame = Size::new(width, height);
            let profile = if extended { Profile::BtlExtended } else { Profile::BtlUi };
            let limits = GrammarLimits::default();
            match limits.fit(budget, frame, profile) {
                Ok(fit) => {
                    proptest::prop_assert!(fit.max_answer_bytes(frame, profile) <= budget);
                    proptest::prop_assert!(fit.max_regions <= limits.max_regions);
                    proptest::prop_assert!(fit.max_think_chars <= limits.max_think_chars);
                    proptest::prop_assert!(fit.max_label_chars <= limits.max_label_chars);
                    proptest::prop_assert!(fit.max_string_chars <= limits.max_string_chars);
                    if limits.max_answer_bytes(frame, profile) <= budget {
                        proptest::prop_assert_eq!(fit, limits);
                    }
                }
                Err(e) => {
                    proptest::prop_assert!(e.needed > budget);
                    let wanted = format!("give at least {}", e.needed);
                    proptest::prop_assert!(e.to_string().contains(&wanted));
                }
            }
        }
    }

    /// The quoting alternatives, written out by hand: a tap and a long
    /// press for each line whose label is its own; none for the two lines
    /// that share "Search", nor for a label with a `<`.
    #[test]
    fn each_line_of_its_own_is_quotable_at_its_point() {
        let line = |label: &str, x: f64, y: f64| ScreenElement {
            label: label.into(),
            point: crate::protocol::Point::new(x, y),
            checked: Some(false),
        };
        let screen = [
            line("Wi-Fi", 251.0, 90.0),
            line("Search", 10.0, 10.0),
            line("Search", 250.0, 10.0),
            line("a <b>", 5.0, 5.0),
        ];
        let quoted = grounded_plans(&screen, Size::new(280, 644), &GrammarLimits::default());
        assert_eq!(
            quoted,
            [
                r#""\"Tap \\\"Wi-Fi\\\".\", \"Action\": {\"function\": \"Tap\", \"point_2d\": [251, 90]}""#,
                r#""\"Long press \\\"Wi-Fi\\\".\", \"Action\": {\"function\": \"LongPress\", \"point_2d\": [251, 90]}""#,
            ]
        );
        // A point off the frame is not quotable either.
        let off = [line("Wi-Fi", 281.0, 90.0)];
        assert!(grounded_plans(&off, Size::new(280, 644), &GrammarLimits::default()).is_empty());
    }

    #[test]
    fn the_grammar_names_only_the_profiles_actions_and_the_frame() {
        let frame = Size::new(1092, 2408);
        let ui = btl_grammar(frame, Profile::BtlUi, &GrammarLimits::default(), &[]);
        let extended = btl_grammar(frame, Profile::BtlExtended, &GrammarLimits::default(), &[]);
        assert!(!ui.contains("Finish") && !ui.contains("Wait"));
        assert!(extended.contains("Finish") && extended.contains("Wait"));
        // Listing the screen changes the prompt, not the answers.
        let listed = btl_grammar(
            frame,
            Profile::BtlScreenText,
            &GrammarLimits::default(),
            &[],
        );
        assert_eq!(listed, extended);
        assert!(ui.contains(&format!("x ::= {}", int_upto(1092))));
        assert!(ui.contains(&format!("y ::= {}", int_upto(2408))));
        assert!(ui.contains("think ::= [^<]{0,128}"));
    }
}
