//! A GBNF grammar (llama.cpp's grammar format) that admits exactly the
//! canonical BTL answer, for grammar-constrained decoding.
//!
//! The grammar follows the renderer's canonical text (spec §2): the three
//! tagged parts with their `` ```json `` fences, Python `json.dumps`
//! separators, keys in the official order, whole-number coordinates bounded
//! by the model frame (a point or box off the screenshot cannot be sampled),
//! a bounded `<think>`, and only the actions of the prompt's profile. JSON
//! strings are printable ASCII with escapes, as `json.dumps` writes them by
//! default (`ensure_ascii`), and never contain `<`, so no string can close a
//! tag early.
//!
//! Pure: it only builds text; `LlamaPolicy` hands it to llama.cpp's grammar
//! sampler.

use crate::protocol::{Profile, Size};
use std::fmt::Write as _;

/// Length bounds that keep a constrained answer finite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrammarLimits {
    /// Regions in `<blink>` (at least one).
    pub max_regions: usize,
    /// Characters of the `<think>` text.
    pub max_think_chars: usize,
    /// Characters of a label, Plan, typed text or Finish answer (escapes
    /// count as one).
    pub max_string_chars: usize,
}

impl Default for GrammarLimits {
    fn default() -> Self {
        Self {
            max_regions: 5,
            max_think_chars: 600,
            max_string_chars: 120,
        }
    }
}

/// The grammar for answers on a model frame of `frame` pixels.
pub fn btl_grammar(frame: Size, profile: Profile, limits: &GrammarLimits) -> String {
    let mut g = String::new();
    let extra_regions = limits.max_regions.saturating_sub(1);
    let _ = writeln!(
        g,
        "root ::= \"<blink>```json\\n[\" region (\", \" region){{0,{extra_regions}}} \"]\\n```</blink>\\n<think>\" think \"</think>\\n<link>```json\\n[{{\\\"Plan\\\": \" string \", \\\"Action\\\": \" action \"}}]\\n```</link>\""
    );
    let _ = writeln!(
        g,
        "region ::= \"{{\\\"bbox_2d\\\": [\" x \", \" y \", \" x \", \" y \"], \\\"label\\\": \" string \"}}\""
    );
    let _ = writeln!(g, "think ::= [^<]{{0,{}}}", limits.max_think_chars);
    let _ = writeln!(
        g,
        "string ::= \"\\\"\" char{{0,{}}} \"\\\"\"",
        limits.max_string_chars
    );
    // Printable ASCII but `"`, `\` and `<`, or an escape as json.dumps
    // writes them.
    g.push_str(
        "char ::= [ !#-;=-\\[\\]-~] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-f] [0-9a-f] [0-9a-f] [0-9a-f])\n",
    );
    let point = "\\\"point_2d\\\": [\" x \", \" y \"]";
    let mut actions = vec![
        format!("\"{{\\\"function\\\": \\\"Tap\\\", {point}}}\""),
        format!("\"{{\\\"function\\\": \\\"LongPress\\\", {point}}}\""),
        "\"{\\\"function\\\": \\\"Type\\\", \\\"text\\\": \" string \"}\"".to_string(),
        "\"{\\\"function\\\": \\\"Swipe\\\", \\\"direction\\\": \\\"\" (\"up\" | \"down\" | \"left\" | \"right\") \"\\\"}\"".to_string(),
        "\"{\\\"function\\\": \\\"Back\\\"}\"".to_string(),
        "\"{\\\"function\\\": \\\"Home\\\"}\"".to_string(),
    ];
    if profile == Profile::BtlExtended {
        actions.push("\"{\\\"function\\\": \\\"Wait\\\"}\"".to_string());
        actions.push(
            "\"{\\\"function\\\": \\\"Finish\\\"\" (\", \\\"answer\\\": \" string)? \"}\""
                .to_string(),
        );
    }
    let _ = writeln!(g, "action ::= {}", actions.join(" | "));
    let _ = writeln!(g, "x ::= {}", int_upto(frame.width));
    let _ = writeln!(g, "y ::= {}", int_upto(frame.height));
    g
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
    fn the_grammar_names_only_the_profiles_actions_and_the_frame() {
        let frame = Size::new(1092, 2408);
        let ui = btl_grammar(frame, Profile::BtlUi, &GrammarLimits::default());
        let extended = btl_grammar(frame, Profile::BtlExtended, &GrammarLimits::default());
        assert!(!ui.contains("Finish") && !ui.contains("Wait"));
        assert!(extended.contains("Finish") && extended.contains("Wait"));
        assert!(ui.contains(&format!("x ::= {}", int_upto(1092))));
        assert!(ui.contains(&format!("y ::= {}", int_upto(2408))));
        assert!(ui.contains("think ::= [^<]{0,600}"));
    }
}
