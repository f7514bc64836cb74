//! POSIX regular expressions as the phone's `regcomp` reads them, in the
//! regex crate's syntax.
//!
//! toybox's `grep` and `sed` hand their expressions to bionic's `regcomp`,
//! Henry Spencer's from NetBSD built without its GNU extensions. It reads
//! less than GNU's tools do, and reads some of it otherwise: in basic
//! expressions `\?`, `\+` and `\|` are the plain characters `?`, `+` and
//! `|`; an escaped letter (`\w`, `\b`, `\s`, `\n`) is an error in either
//! syntax, as is an operator with nothing to repeat (`*a` in an extended
//! expression, `a**`, `(?i)`) or an empty alternative (`a||b`); words are
//! delimited by `\<` and `\>` (and `[[:<:]]`, `[[:>:]]`); a bracket
//! expression takes a backslash as itself. The translation keeps every
//! group the expression opens and numbers them as POSIX does, so `\1` in a
//! replacement names the same text; what it adds is non-capturing.
//!
//! Two things differ from a phone: back-references (`\1` in a basic
//! expression) are refused, since the regex crate has none, and a
//! collating element must be one character (`[[.-.]]`, not `[[.hyphen.]]`).

use std::fmt;

/// The most a bound of `{m,n}` may be (POSIX's `RE_DUP_MAX`, bionic's 255).
const DUP_MAX: u32 = 255;

/// Why `regcomp` refused an expression, worded as bionic's `regerror`
/// words it (toybox prints that after "bad regex '…': ").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegcompError {
    /// A backslash at the end, or before a letter (`\w`).
    Escape,
    /// A repetition operator with nothing to repeat, or a second one.
    Repetition,
    /// A `(` without its `)`, or the other way round.
    Parentheses,
    /// A `[` without its `]`.
    Brackets,
    /// A `{` without its `}`.
    Braces,
    /// A bound of `{m,n}` missing, above 255 or out of order.
    Count,
    /// A range whose end comes before its start (`[z-a]`).
    Range,
    /// An unknown class name (`[[:letter:]]`).
    Class,
    /// A collating element that is not one character.
    Collating,
    /// An alternative with nothing in it.
    Empty,
    /// A back-reference to a group not closed before it.
    BackReference,
    /// A back-reference to a group that is closed: the phone has it, this
    /// translation cannot.
    BackReferenceUnsupported,
}

impl fmt::Display for RegcompError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Escape => "trailing backslash (\\)",
            Self::Repetition => "repetition-operator operand invalid",
            Self::Parentheses => "parentheses not balanced",
            Self::Brackets => "brackets ([ ]) not balanced",
            Self::Braces => "braces not balanced",
            Self::Count => "invalid repetition count(s)",
            Self::Range => "invalid character range",
            Self::Class => "invalid character class",
            Self::Collating => "invalid collating element",
            Self::Empty => "empty (sub)expression",
            Self::BackReference => "invalid backreference number",
            Self::BackReferenceUnsupported => {
                "back-references are not supported by the virtual phone"
            }
        })
    }
}

impl std::error::Error for RegcompError {}

/// The class names `[[:name:]]` takes (those `wctype` knows).
const CLASSES: [&str; 12] = [
    "alnum", "alpha", "blank", "cntrl", "digit", "graph", "lower", "print", "punct", "space",
    "upper", "xdigit",
];

/// `pattern`, a POSIX extended (`extended`) or basic regular expression,
/// in the regex crate's syntax; or why the phone refuses it. The empty
/// pattern matches everywhere, as toybox compiles it (as `()`).
pub fn translate(pattern: &str, extended: bool) -> Result<String, RegcompError> {
    if pattern.is_empty() {
        return Ok("()".to_owned());
    }
    let mut parser = Parser {
        chars: pattern.chars().collect(),
        pos: 0,
        out: String::with_capacity(pattern.len() * 2),
        groups: 0,
        closed: Vec::new(),
    };
    if extended {
        parser.extended_alternatives(true)?;
    } else {
        parser.basic_expression(true)?;
    }
    Ok(parser.out)
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    out: String,
    /// Groups opened so far.
    groups: usize,
    /// The numbers of the groups closed so far.
    closed: Vec<usize>,
}

impl Parser {
    fn more(&self) -> bool {
        self.pos < self.chars.len()
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek2(&self) -> Option<char> {
        self.chars.get(self.pos + 1).copied()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += 1;
        Some(c)
    }

    fn eat(&mut self, c: char) -> bool {
        let seen = self.peek() == Some(c);
        self.pos += usize::from(seen);
        seen
    }

    fn sees_two(&self, a: char, b: char) -> bool {
        self.peek() == Some(a) && self.peek2() == Some(b)
    }

    fn eat_two(&mut self, a: char, b: char) -> bool {
        let seen = self.sees_two(a, b);
        if seen {
            self.pos += 2;
        }
        seen
    }

    /// `c` matched as itself.
    fn ordinary(&mut self, c: char) {
        if regex_syntax::is_meta_character(c) {
            self.out.push('\\');
        }
        self.out.push(c);
    }

    /// What a backslash before `escaped` means where it is no operator of
    /// the syntax: a word's start or end (`\<`, `\>`), an error (nothing,
    /// a letter, or a quote GNU gives a meaning to), else the character.
    fn escape(&mut self, escaped: Option<char>) -> Result<(), RegcompError> {
        match escaped {
            Some('<') => self.out.push_str(r"\b{start}"),
            Some('>') => self.out.push_str(r"\b{end}"),
            Some(c) if !(c.is_alphabetic() || c == '\'' || c == '`') => self.ordinary(c),
            _ => return Err(RegcompError::Escape),
        }
        Ok(())
    }

    /// Makes what was emitted since `atom` one unit for the repetition
    /// that follows.
    fn wrap(&mut self, atom: usize) {
        self.out.insert_str(atom, "(?:");
        self.out.push(')');
    }

    /// Alternatives up to the end (`outer`) or to the `)` of their group.
    fn extended_alternatives(&mut self, outer: bool) -> Result<(), RegcompError> {
        loop {
            let mut parts = 0;
            while self.more() && self.peek() != Some('|') && (outer || self.peek() != Some(')')) {
                self.extended_part()?;
                parts += 1;
            }
            if parts == 0 {
                return Err(RegcompError::Empty);
            }
            if !self.eat('|') {
                return Ok(());
            }
            if self.peek() == Some('|') || (outer && !self.more()) {
                return Err(RegcompError::Empty);
            }
            self.out.push('|');
        }
    }

    /// One atom of an extended expression and its repetition, if any.
    fn extended_part(&mut self) -> Result<(), RegcompError> {
        let atom = self.out.len();
        let mut caret = false;
        match self.next() {
            Some('(') => {
                if !self.more() {
                    return Err(RegcompError::Parentheses);
                }
                self.groups += 1;
                let group = self.groups;
                self.out.push('(');
                if self.peek() != Some(')') {
                    self.extended_alternatives(false)?;
                }
                if !self.eat(')') {
                    return Err(RegcompError::Parentheses);
                }
                self.out.push(')');
                self.closed.push(group);
            }
            Some(')') => return Err(RegcompError::Parentheses),
            Some('^') => {
                self.out.push('^');
                caret = true;
            }
            Some('$') => self.out.push('$'),
            Some('|') => return Err(RegcompError::Empty),
            Some('*' | '+' | '?' | '{') => return Err(RegcompError::Repetition),
            Some('.') => self.out.push('.'),
            Some('[') => self.bracket()?,
            Some('\\') => {
                let escaped = self.next();
                self.escape(escaped)?;
            }
            Some(c) => self.ordinary(c),
            None => return Err(RegcompError::Empty),
        }
        let Some(op @ ('*' | '+' | '?' | '{')) = self.peek() else {
            return Ok(());
        };
        if op == '{' && !self.peek2().is_some_and(|c| c.is_ascii_digit() || c == ',') {
            return Err(RegcompError::Repetition);
        }
        self.pos += 1;
        if caret {
            return Err(RegcompError::Repetition);
        }
        self.wrap(atom);
        if op == '{' {
            self.bounds('}')?;
        } else {
            self.out.push(op);
        }
        let another = match self.peek() {
            Some('*' | '+' | '?') => true,
            Some('{') => self.peek2().is_some_and(|c| c.is_ascii_digit()),
            _ => false,
        };
        if another {
            return Err(RegcompError::Repetition);
        }
        Ok(())
    }

    /// A basic expression up to the end (`outer`) or to the `\)` of its
    /// group: `^` is an anchor only first, `$` only last.
    fn basic_expression(&mut self, outer: bool) -> Result<(), RegcompError> {
        let anchored = self.eat('^');
        if anchored {
            self.out.push('^');
        }
        let mut parts = 0;
        let mut ends_with_dollar = false;
        while self.more() && (outer || !self.sees_two('\\', ')')) {
            ends_with_dollar = self.basic_part(parts)?;
            parts += 1;
        }
        if ends_with_dollar {
            // The escaped `$` just emitted was the anchor.
            self.out.truncate(self.out.len() - 2);
            self.out.push('$');
        }
        if parts == 0 && !anchored {
            return Err(RegcompError::Empty);
        }
        Ok(())
    }

    /// One atom of a basic expression (the `index`th of its expression)
    /// and its repetition, if any; whether it was a bare `$` (unrepeated).
    fn basic_part(&mut self, index: usize) -> Result<bool, RegcompError> {
        let atom = self.out.len();
        let c = self.next();
        match c {
            Some('\\') => match self.next() {
                Some('{') => return Err(RegcompError::Repetition),
                Some('(') => {
                    self.groups += 1;
                    let group = self.groups;
                    self.out.push('(');
                    if self.more() && !self.sees_two('\\', ')') {
                        self.basic_expression(false)?;
                    }
                    if !self.eat_two('\\', ')') {
                        return Err(RegcompError::Parentheses);
                    }
                    self.out.push(')');
                    self.closed.push(group);
                }
                Some(')') => return Err(RegcompError::Parentheses),
                Some(d @ '1'..='9') => {
                    let n = d as usize - '0' as usize;
                    return Err(if self.closed.contains(&n) {
                        RegcompError::BackReferenceUnsupported
                    } else {
                        RegcompError::BackReference
                    });
                }
                escaped => self.escape(escaped)?,
            },
            Some('.') => self.out.push('.'),
            Some('[') => self.bracket()?,
            // A star first in its expression (after a `^`, a `\(`) is
            // itself.
            Some('*') if index > 0 => return Err(RegcompError::Repetition),
            Some(c) => self.ordinary(c),
            None => return Err(RegcompError::Empty),
        }
        if self.eat('*') {
            self.wrap(atom);
            self.out.push('*');
        } else if self.eat_two('\\', '{') {
            self.wrap(atom);
            self.bounds('\\')?;
        } else {
            return Ok(c == Some('$'));
        }
        Ok(false)
    }

    /// The bounds of a repetition after its `{`, up to its closing brace
    /// (`}`, or `\}` when `close` is the backslash).
    fn bounds(&mut self, close: char) -> Result<(), RegcompError> {
        let min = self.count()?;
        let max = if self.eat(',') {
            if self.peek().is_some_and(|c| c.is_ascii_digit()) {
                let max = self.count()?;
                if min > max {
                    return Err(RegcompError::Count);
                }
                Some(max)
            } else {
                None
            }
        } else {
            Some(min)
        };
        let closes = |p: &Self| match close {
            '}' => p.peek() == Some('}'),
            _ => p.sees_two('\\', '}'),
        };
        if !closes(self) {
            while self.more() && !closes(self) {
                self.pos += 1;
            }
            return Err(if self.more() {
                RegcompError::Count
            } else {
                RegcompError::Braces
            });
        }
        self.pos += if close == '}' { 1 } else { 2 };
        match max {
            Some(max) if max == min => self.out.push_str(&format!("{{{min}}}")),
            Some(max) => self.out.push_str(&format!("{{{min},{max}}}")),
            None => self.out.push_str(&format!("{{{min},}}")),
        }
        Ok(())
    }

    /// A bound of a repetition: up to three digits, at most 255.
    fn count(&mut self) -> Result<u32, RegcompError> {
        let mut count = 0u32;
        let mut digits = 0;
        while count <= DUP_MAX {
            let Some(d) = self.peek().and_then(|c| c.to_digit(10)) else {
                break;
            };
            self.pos += 1;
            count = count * 10 + d;
            digits += 1;
        }
        if digits == 0 || count > DUP_MAX {
            return Err(RegcompError::Count);
        }
        Ok(count)
    }

    /// A bracket expression after its `[`.
    fn bracket(&mut self) -> Result<(), RegcompError> {
        let rest: String = self.chars[self.pos..].iter().take(6).collect();
        for (kludge, boundary) in [("[:<:]]", r"\b{start}"), ("[:>:]]", r"\b{end}")] {
            if rest == kludge {
                self.pos += 6;
                self.out.push_str(boundary);
                return Ok(());
            }
        }
        let mut set = String::from("[");
        if self.eat('^') {
            set.push('^');
        }
        if self.eat(']') {
            push_member(&mut set, ']');
        } else if self.eat('-') {
            push_member(&mut set, '-');
        }
        while self.more() && self.peek() != Some(']') && !self.sees_two('-', ']') {
            self.bracket_term(&mut set)?;
        }
        if self.eat('-') {
            push_member(&mut set, '-');
        }
        if !self.eat(']') {
            return Err(RegcompError::Brackets);
        }
        set.push(']');
        self.out.push_str(&set);
        Ok(())
    }

    /// One member of a bracket expression: a class, an equivalence class,
    /// a character or a range.
    fn bracket_term(&mut self, set: &mut String) -> Result<(), RegcompError> {
        let kind = match self.peek() {
            Some('[') => self.peek2(),
            Some('-') => return Err(RegcompError::Range),
            _ => None,
        };
        match kind {
            Some(':') => {
                self.open_element(RegcompError::Class)?;
                let start = self.pos;
                while self.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
                    self.pos += 1;
                }
                let name: String = self.chars[start..self.pos].iter().collect();
                if !CLASSES.contains(&name.as_str()) {
                    return Err(RegcompError::Class);
                }
                self.close_element(':', RegcompError::Class)?;
                set.push_str(&format!("[:{name}:]"));
            }
            Some('=') => {
                self.open_element(RegcompError::Collating)?;
                let c = self.collating_element('=')?;
                self.close_element('=', RegcompError::Collating)?;
                push_member(set, c);
            }
            _ => {
                let start = self.symbol()?;
                let end = if self.peek() == Some('-') && self.peek2().is_some_and(|c| c != ']') {
                    self.pos += 1;
                    if self.eat('-') { '-' } else { self.symbol()? }
                } else {
                    start
                };
                if start > end {
                    return Err(RegcompError::Range);
                }
                push_member(set, start);
                if end != start {
                    set.push('-');
                    push_member(set, end);
                }
            }
        }
        Ok(())
    }

    /// A character of a bracket expression, or a collating symbol
    /// (`[.c.]`).
    fn symbol(&mut self) -> Result<char, RegcompError> {
        if !self.eat_two('[', '.') {
            return self.next().ok_or(RegcompError::Brackets);
        }
        let c = self.collating_element('.')?;
        self.close_element('.', RegcompError::Collating)?;
        Ok(c)
    }

    /// Steps past the `[:` or `[=` that opens a class or an equivalence
    /// class, which must go on with a name (`wrong` where it goes on with
    /// `-` or `]`).
    fn open_element(&mut self, wrong: RegcompError) -> Result<(), RegcompError> {
        self.pos += 2;
        match self.peek() {
            None => Err(RegcompError::Brackets),
            Some('-' | ']') => Err(wrong),
            Some(_) => Ok(()),
        }
    }

    /// Steps past the `:]`, `=]` or `.]` (`end` and `]`) that closes an
    /// element of a bracket expression (`wrong` where something else
    /// stands there).
    fn close_element(&mut self, end: char, wrong: RegcompError) -> Result<(), RegcompError> {
        if !self.more() {
            return Err(RegcompError::Brackets);
        }
        if !self.eat_two(end, ']') {
            return Err(wrong);
        }
        Ok(())
    }

    /// The element up to `end` followed by `]`.
    fn collating_element(&mut self, end: char) -> Result<char, RegcompError> {
        let start = self.pos;
        while self.more() && !self.sees_two(end, ']') {
            self.pos += 1;
        }
        if !self.more() {
            return Err(RegcompError::Brackets);
        }
        match self.chars[start..self.pos] {
            [c] => Ok(c),
            _ => Err(RegcompError::Collating),
        }
    }
}

/// `c` as a member of a regex crate class, where `[`, `]`, `-`, `^`, `&`,
/// `~` and the backslash mean more than themselves.
fn push_member(set: &mut String, c: char) {
    if regex_syntax::is_meta_character(c) {
        set.push('\\');
    }
    set.push(c);
}

#[cfg(test)]
mod tests;
