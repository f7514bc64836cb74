//! A reader for the Python-literal form models sometimes write instead of
//! JSON: `{'function': 'Tap', 'point_2d': (663, 1135)}`.
//!
//! The BTL prompts themselves show actions in this form (`{'function': 'Tap',
//! 'point_2d':[x, y]}`), so models trained on them drift into it. Accepted:
//! dicts, lists, tuples, single- or double-quoted strings with the usual
//! escapes, ints and floats, `True`, `False`, `None`, trailing commas. The
//! result is a JSON value, so the rest of the parser sees one shape.

use serde_json::{Map, Number, Value};

/// Nesting deeper than this is refused, so hostile input cannot exhaust the
/// stack (serde_json uses the same bound).
const MAX_DEPTH: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyLiteralError {
    /// Byte offset into the parsed text.
    pub offset: usize,
    pub reason: String,
}

/// Parses a whole Python literal; only whitespace may follow it.
pub fn parse(text: &str) -> Result<Value, PyLiteralError> {
    let mut reader = Reader {
        text,
        bytes: text.as_bytes(),
        pos: 0,
    };
    let value = reader.value(0)?;
    reader.skip_ws();
    if reader.pos != reader.bytes.len() {
        return Err(reader.error("unexpected text after the value"));
    }
    Ok(value)
}

struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn error(&self, reason: impl Into<String>) -> PyLiteralError {
        PyLiteralError {
            offset: self.pos,
            reason: reason.into(),
        }
    }

    fn skip_ws(&mut self) {
        while self
            .bytes
            .get(self.pos)
            .is_some_and(|b| b.is_ascii_whitespace())
        {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn value(&mut self, depth: usize) -> Result<Value, PyLiteralError> {
        if depth > MAX_DEPTH {
            return Err(self.error("nesting is too deep"));
        }
        self.skip_ws();
        match self.peek() {
            None => Err(self.error("expected a value, found the end")),
            Some(b'{') => self.dict(depth),
            Some(b'[') => self.sequence(b']', depth),
            Some(b'(') => self.sequence(b')', depth),
            Some(q @ (b'\'' | b'"')) => self.string(q).map(Value::String),
            Some(b'-' | b'+' | b'.' | b'0'..=b'9') => self.number(),
            Some(_) => self.word(),
        }
    }

    fn dict(&mut self, depth: usize) -> Result<Value, PyLiteralError> {
        self.pos += 1;
        let mut map = Map::new();
        loop {
            self.skip_ws();
            match self.peek() {
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Object(map));
                }
                Some(q @ (b'\'' | b'"')) => {
                    let key = self.string(q)?;
                    self.skip_ws();
                    if self.peek() != Some(b':') {
                        return Err(self.error("expected ':' after a dict key"));
                    }
                    self.pos += 1;
                    let value = self.value(depth + 1)?;
                    map.insert(key, value);
                    self.separator(b'}')?;
                }
                _ => return Err(self.error("expected a quoted dict key or '}'")),
            }
        }
    }

    fn sequence(&mut self, close: u8, depth: usize) -> Result<Value, PyLiteralError> {
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            if self.peek() == Some(close) {
                self.pos += 1;
                return Ok(Value::Array(items));
            }
            items.push(self.value(depth + 1)?);
            self.separator(close)?;
        }
    }

    /// After an item: a comma (the closing bracket may follow it) or the
    /// closing bracket itself, which is left for the caller to consume.
    fn separator(&mut self, close: u8) -> Result<(), PyLiteralError> {
        self.skip_ws();
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                Ok(())
            }
            Some(c) if c == close => Ok(()),
            _ => Err(self.error(format!("expected ',' or '{}'", close as char))),
        }
    }

    fn string(&mut self, quote: u8) -> Result<String, PyLiteralError> {
        let start = self.pos;
        self.pos += 1;
        let mut out = String::new();
        loop {
            let Some(c) = self.text[self.pos..].chars().next() else {
                self.pos = start;
                return Err(self.error("unterminated string"));
            };
            self.pos += c.len_utf8();
            match c {
                '\\' => out.push(self.escape()?),
                '\n' => {
                    self.pos = start;
                    return Err(self.error("line break inside a string"));
                }
                c if c as u32 == u32::from(quote) => return Ok(out),
                c => out.push(c),
            }
        }
    }

    fn escape(&mut self) -> Result<char, PyLiteralError> {
        let Some(c) = self.peek() else {
            return Err(self.error("unterminated escape"));
        };
        self.pos += 1;
        Ok(match c {
            b'n' => '\n',
            b't' => '\t',
            b'r' => '\r',
            b'0' => '\0',
            b'\\' => '\\',
            b'\'' => '\'',
            b'"' => '"',
            b'x' => self.hex_escape(2)?,
            b'u' => self.hex_escape(4)?,
            b'U' => self.hex_escape(8)?,
            _ => return Err(self.error("unknown escape")),
        })
    }

    fn hex_escape(&mut self, digits: usize) -> Result<char, PyLiteralError> {
        let hex = self
            .text
            .get(self.pos..self.pos + digits)
            .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| self.error("bad hex escape"))?;
        let code = u32::from_str_radix(hex, 16).map_err(|_| self.error("bad hex escape"))?;
        let c = char::from_u32(code).ok_or_else(|| self.error("escape is not a character"))?;
        self.pos += digits;
        Ok(c)
    }

    fn number(&mut self) -> Result<Value, PyLiteralError> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.' | b'_'))
        {
            self.pos += 1;
        }
        let raw = self.text[start..self.pos].replace('_', "");
        let raw = raw.strip_prefix('+').unwrap_or(&raw);
        let number = if let Ok(i) = raw.parse::<i64>() {
            Some(Number::from(i))
        } else {
            raw.parse::<f64>()
                .ok()
                .filter(|f| f.is_finite() && raw.bytes().any(|b| b.is_ascii_digit()))
                .and_then(Number::from_f64)
        };
        number.map(Value::Number).ok_or_else(|| PyLiteralError {
            offset: start,
            reason: format!("'{raw}' is not a number"),
        })
    }

    fn word(&mut self) -> Result<Value, PyLiteralError> {
        let start = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii_alphabetic()) {
            self.pos += 1;
        }
        match &self.text[start..self.pos] {
            "True" | "true" => Ok(Value::Bool(true)),
            "False" | "false" => Ok(Value::Bool(false)),
            "None" | "null" => Ok(Value::Null),
            _ => {
                self.pos = start;
                Err(self.error("expected a value"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_the_prompt_style_action() {
        assert_eq!(
            parse("{'function': 'Tap', 'point_2d':[663, 1135]}").unwrap(),
            json!({"function": "Tap", "point_2d": [663, 1135]})
        );
        assert_eq!(
            parse("[{'Plan': \"it's\", 'Action': {'function': 'Back',},},]").unwrap(),
            json!([{"Plan": "it's", "Action": {"function": "Back"}}])
        );
    }

    #[test]
    fn tuples_words_escapes_and_numbers() {
        assert_eq!(
            parse("(1, -2.5, +3, 1e2, True, False, None, '\\u00e9\\n\\x41')").unwrap(),
            json!([1, -2.5, 3, 100.0, true, false, null, "é\nA"])
        );
    }

    #[test]
    fn errors_carry_offsets() {
        assert_eq!(parse("{'a' 1}").unwrap_err().offset, 5);
        assert_eq!(parse("['abc").unwrap_err().offset, 1);
        assert_eq!(parse("[1] x").unwrap_err().offset, 4);
        assert_eq!(parse("[nan]").unwrap_err().offset, 1);
        assert_eq!(parse("{1: 2}").unwrap_err().offset, 1);
        assert!(parse("1e999").is_err(), "infinite floats are refused");
        assert_eq!(parse("'\\x+1'").unwrap_err().reason, "bad hex escape");
    }

    #[test]
    fn deep_nesting_is_refused_not_overflowed() {
        let deep = "[".repeat(100_000);
        assert_eq!(parse(&deep).unwrap_err().reason, "nesting is too deep");
    }
}
