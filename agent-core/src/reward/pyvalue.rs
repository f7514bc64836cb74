//! The few Python semantics the official reward code leans on, over JSON values.
//!
//! The released reward is Python code run on `json.loads` output inside a
//! `try/except` that turns any exception into 0. Reproducing it exactly means
//! reproducing which values make it raise and how `==`, numbers and
//! whitespace behave in Python, not in Rust.

use serde_json::Value;

/// A value Python would do arithmetic with: numbers, and booleans (a `bool`
/// is an `int` in Python).
pub fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        _ => None,
    }
}

/// Python `a == b` on values `json.loads` produces: `1 == 1.0 == True`,
/// lists element-wise, dicts by key set and values.
pub fn eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| eq(v, w)))
        }
        _ => match (number(a), number(b)) {
            (Some(x), Some(y)) => x == y,
            _ => false,
        },
    }
}

/// `x, y = value`: a list of exactly two numbers.
pub fn unpack2(v: &Value) -> Option<[f64; 2]> {
    match v.as_array()?.as_slice() {
        [x, y] => Some([number(x)?, number(y)?]),
        _ => None,
    }
}

/// `box[0]..box[3]` as the IoU code indexes it: a list of at least four
/// items whose first four are numbers (Python ignores the rest).
pub fn first4(v: &Value) -> Option<[f64; 4]> {
    match v.as_array()?.as_slice() {
        [a, b, c, d, ..] => Some([number(a)?, number(b)?, number(c)?, number(d)?]),
        _ => None,
    }
}

/// Python's `str.isspace` for one character: Unicode whitespace plus the
/// four ASCII separators U+001C..U+001F, which Rust does not count.
pub fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.strip()`.
pub fn strip(s: &str) -> &str {
    s.trim_matches(is_space)
}

/// The set of `s.lower().split()` tokens.
pub fn token_set(s: &str) -> std::collections::HashSet<String> {
    s.to_lowercase()
        .split(is_space)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// Token-set F1 of the official `text_determination`.
pub fn token_f1(predicted: &str, truth: &str) -> f64 {
    let p = token_set(predicted);
    let t = token_set(truth);
    let common = p.intersection(&t).count() as f64;
    let precision = if p.is_empty() {
        0.0
    } else {
        common / p.len() as f64
    };
    let recall = if t.is_empty() {
        0.0
    } else {
        common / t.len() as f64
    };
    if precision + recall == 0.0 {
        0.0
    } else {
        2.0 * (precision * recall) / (precision + recall)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn python_equality() {
        assert!(eq(
            &json!({"function": "Back", "n": 1}),
            &json!({"n": 1.0, "function": "Back"})
        ));
        assert!(eq(&json!(true), &json!(1)));
        assert!(!eq(
            &json!({"function": "Back"}),
            &json!({"function": "Back", "point_2d": [1, 2]})
        ));
        assert!(!eq(&json!("1"), &json!(1)));
        assert!(!eq(&json!(null), &json!(0)));
    }

    // F1 by hand: "Los Angeles CA" vs "los angeles": p = 2/3, r = 1,
    // F1 = 2 * (2/3) / (5/3) = 0.8.
    #[test]
    fn f1_by_hand() {
        assert!((token_f1("Los Angeles CA", "los angeles") - 0.8).abs() < 1e-12);
        assert_eq!(token_f1("Angeles", "Los Angeles"), 2.0 * 0.5 / 1.5);
        assert_eq!(token_f1("LA", "Los Angeles"), 0.0);
        assert_eq!(token_f1("", ""), 0.0);
        assert_eq!(token_f1("a,", "a"), 0.0, "punctuation is not stripped");
        assert_eq!(
            token_f1("a\u{1f}b", "a b"),
            1.0,
            "U+001F splits as in Python"
        );
    }
}
