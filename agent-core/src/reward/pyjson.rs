//! `json.loads` as Python 3.11 reads a completion's body, where it differs
//! from serde_json in what it accepts:
//!
//! - **Lone surrogate escapes** (`"\ud800"`, a `\udc00` with no high half
//!   before it): Python keeps the code point in its `str`; a Rust `String`
//!   cannot hold one, and serde_json refuses the body. Each is rewritten
//!   before parsing as [`MARK`] followed by a private-use character that
//!   names it, and a real [`MARK`] is doubled, so the mapping is injective:
//!   two strings are equal after it exactly when Python finds them equal,
//!   and since neither character is a space or has a case, `lower()`,
//!   `split()` and substring tests give what Python's give.
//! - **Nesting**: serde_json stops at 128 levels; Python's decoder recurses
//!   until the interpreter's recursion limit (1,000 by default), which a
//!   top-level `json.loads` reaches at [`MAX_DEPTH`] levels (measured with
//!   Python 3.11.7: 994 nested lists or objects parse, 995 raise
//!   `RecursionError`). Inside a trainer the call stack is deeper, so the
//!   plugin's own limit is somewhat lower; deeper bodies are refused here,
//!   before any recursion, so no body overflows the stack.
//!
//! Python also reads `NaN`, `Infinity` and numbers beyond `f64`'s range;
//! serde_json refuses them, and such a body scores as unparsable (0).

use serde::Deserialize;
use serde_json::Value;

/// Nesting depth Python's `json.loads` reaches before `RecursionError`.
pub const MAX_DEPTH: usize = 994;

/// Starts the stand-in of a lone surrogate; doubled when the text has it.
/// A noncharacter, so it means nothing in real text.
pub const MARK: char = '\u{10ffff}';

/// First private-use code point of the stand-ins: lone surrogate
/// U+D800 + k stands as [`MARK`] followed by `STAND_IN + k`.
const STAND_IN: u32 = 0x10_f000;

/// Python's `json.loads(text)`; `None` where it raises.
pub fn loads(text: &str) -> Option<Value> {
    let rewritten = rewrite(text)?;
    let mut de = serde_json::Deserializer::from_str(&rewritten);
    de.disable_recursion_limit();
    let value = Value::deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(value)
}

/// The text with lone surrogate escapes replaced by their stand-ins and
/// real [`MARK`]s doubled; `None` when it nests deeper than [`MAX_DEPTH`].
/// Malformed JSON is passed on for serde_json to refuse.
fn rewrite(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let (mut depth, mut in_string) = (0usize, false);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        rest = &rest[c.len_utf8()..];
        if !in_string {
            match c {
                '[' | '{' => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return None;
                    }
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                '"' => in_string = true,
                _ => {}
            }
            out.push(c);
            continue;
        }
        match c {
            '"' => {
                in_string = false;
                out.push(c);
            }
            MARK => out.extend([MARK, MARK]),
            '\\' => match unit_escape(rest) {
                Some(high @ 0xd800..=0xdbff) => {
                    match rest[5..].strip_prefix('\\').and_then(unit_escape) {
                        Some(low @ 0xdc00..=0xdfff) => {
                            let code = 0x10000 + ((high - 0xd800) << 10) + (low - 0xdc00);
                            if code == MARK as u32 {
                                out.extend([MARK, MARK]);
                            } else {
                                // The pair's escapes as written.
                                out.push('\\');
                                out.push_str(&rest[..11]);
                            }
                            rest = &rest[11..];
                        }
                        _ => {
                            push_stand_in(&mut out, high);
                            rest = &rest[5..];
                        }
                    }
                }
                Some(low @ 0xdc00..=0xdfff) => {
                    push_stand_in(&mut out, low);
                    rest = &rest[5..];
                }
                // Any other escape, valid or not, is serde_json's to read;
                // its second character is copied with it so an escaped
                // quote does not end the string here.
                _ => {
                    out.push('\\');
                    if let Some(next) = rest.chars().next() {
                        out.push(next);
                        rest = &rest[next.len_utf8()..];
                    }
                }
            },
            c => out.push(c),
        }
    }
    Some(out)
}

/// The code unit of a `uXXXX` escape at the start of `s` (after its `\`).
fn unit_escape(s: &str) -> Option<u32> {
    let hex = s.strip_prefix('u')?.get(..4)?;
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(hex, 16).ok()
}

fn push_stand_in(out: &mut String, surrogate: u32) {
    out.push(MARK);
    out.push(char::from_u32(STAND_IN + (surrogate - 0xd800)).expect("a private-use code point"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stand_in(surrogate: u32) -> String {
        [MARK, char::from_u32(STAND_IN + surrogate - 0xd800).unwrap()]
            .iter()
            .collect()
    }

    #[test]
    fn lone_surrogates_are_kept_and_pairs_still_combine() {
        // What Python 3.11 gives: json.loads('"\\ud800"') == '\ud800',
        // json.loads('"\\ud83d\\ude00"') == '😀', and a low half alone or a
        // high half before a non-low escape stays a lone code point.
        assert_eq!(loads(r#""\ud800""#), Some(json!(stand_in(0xd800))));
        assert_eq!(loads(r#""\ud83d\ude00""#), Some(json!("😀")));
        assert_eq!(
            loads(r#""a\udc00b""#),
            Some(json!(format!("a{}b", stand_in(0xdc00))))
        );
        assert_eq!(
            loads(r#""\ud800\u0041""#),
            Some(json!(format!("{}A", stand_in(0xd800))))
        );
        assert_eq!(
            loads(r#""\ud800\ud800\udc00""#),
            Some(json!(format!("{}\u{10000}", stand_in(0xd800))))
        );
        assert_eq!(
            loads(r#"{"\udfff": [1, "x\"\ud800"]}"#),
            Some(json!({ stand_in(0xdfff): [1, format!("x\"{}", stand_in(0xd800))] }))
        );
    }

    #[test]
    fn the_mapping_is_injective() {
        // A real U+10FFFF, raw or escaped, is doubled, so it never reads as
        // the start of a stand-in.
        let real = loads("\"\u{10ffff}\u{10f000}\"").unwrap();
        let escaped = loads(r#""\udbff\udfff\udbfc\udc00""#).unwrap();
        assert_eq!(real, escaped);
        assert_ne!(real, loads(r#""\ud800""#).unwrap());
        assert_ne!(loads(r#""\ud800""#), loads(r#""\ud801""#));
        assert_eq!(
            real,
            json!(format!("{MARK}{MARK}\u{10f000}")),
            "the stand-in's private-use character on its own is itself"
        );
    }

    #[test]
    fn nesting_is_read_as_deep_as_python_reads_it() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(loads(&nested(MAX_DEPTH)).is_some());
        assert_eq!(loads(&nested(MAX_DEPTH + 1)), None);
        let objects = |n: usize| format!("{}1{}", r#"{"a":"#.repeat(n), "}".repeat(n));
        assert!(loads(&objects(MAX_DEPTH)).is_some());
        assert_eq!(loads(&objects(MAX_DEPTH + 1)), None);
        // Brackets inside strings do not nest.
        assert_eq!(
            loads(&format!("\"{}\"", "[".repeat(5000)))
                .unwrap()
                .as_str()
                .unwrap()
                .len(),
            5000
        );
        // Far deeper input is refused before any recursion.
        assert_eq!(loads(&nested(1_000_000)), None);
    }

    #[test]
    fn what_python_refuses_is_refused() {
        for bad in [
            "",
            "[1,]",
            r#""\x""#,
            r#""\ud80""#,
            "\"a",
            "[1] 2",
            "\"tab\there\"",
        ] {
            assert_eq!(loads(bad), None, "{bad:?}");
        }
        // Python reads these (nan, inf); serde_json does not, a documented
        // difference.
        for python_only in ["NaN", "-Infinity", "1e400"] {
            assert_eq!(loads(python_only), None, "{python_only}");
        }
        assert_eq!(loads(" [1, \"\\\"\", {}] \n"), Some(json!([1, "\"", {}])));
    }

    #[test]
    fn deep_bodies_parse_on_a_spawned_thread_s_stack() {
        let body = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        let parsed = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || loads(&body).is_some())
            .unwrap()
            .join()
            .unwrap();
        assert!(parsed);
    }
}
