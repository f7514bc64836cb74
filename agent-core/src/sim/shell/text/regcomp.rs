//! POSIX regular expressions as the phone's `regcomp` reads them: the
//! pieces it compiles them to, and what they match in the regex crate's
//! syntax.
//!
//! toybox's `grep` and `sed` hand their expressions to bionic's `regcomp`,
//! Henry Spencer's from NetBSD built without its GNU extensions. It reads
//! less than GNU's tools do, and reads some of it otherwise: in basic
//! expressions `\?`, `\+` and `\|` are the plain characters `?`, `+` and
//! `|`; an escaped letter (`\w`, `\b`, `\s`, `\n`) is an error in either
//! syntax, as is an operator with nothing to repeat (`*a` in an extended
//! expression, `a**`, `(?i)`) or an empty alternative (`a||b`); words are
//! delimited by `\<` and `\>` (and `[[:<:]]`, `[[:>:]]`); a bracket
//! expression takes a backslash as itself; an alternative that compiles
//! to nothing (`a{0}`) is refused too. The translation keeps every group
//! the expression opens and numbers them as POSIX does; what it adds is
//! non-capturing. Which text a group holds is the phone's own rule, worked
//! out over the pieces ([`Node`]) by [`super::dissect`].
//!
//! Three things differ from a phone: back-references (`\1` in a basic
//! expression) are refused, since the regex crate has none; a collating
//! element must be one character (`[[.-.]]`, not `[[.hyphen.]]`); and a
//! word assertion before an anchor at the same place (`a\>$`, `\<^a`)
//! matches here at a line's end or start, where bionic's engine, which
//! passes `$` and `^` there before the word assertions, never matches it.

use std::fmt;

/// The most a bound of `{m,n}` may be (POSIX's `RE_DUP_MAX`, bionic's 255).
const DUP_MAX: u32 = 255;

/// The most groups open at once. bionic's parser recurses for each, as this
/// one does, on a stack that a command line of nested parentheses would
/// overflow; the regex crate refuses expressions nested that deep anyway
/// (its limit is 250 levels, and each group is one or two).
const MAX_NESTING: usize = 256;

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
    /// Groups nested deeper than [`MAX_NESTING`].
    Nesting,
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
            Self::Nesting => "parentheses nested deeper than the virtual phone parses",
        })
    }
}

impl std::error::Error for RegcompError {}

/// The class names `[[:name:]]` takes (those `wctype` knows).
const CLASSES: [&str; 12] = [
    "alnum", "alpha", "blank", "cntrl", "digit", "graph", "lower", "print", "punct", "space",
    "upper", "xdigit",
];

/// A piece of an expression as `regcomp` reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// One character: a literal, `.` or a bracket expression, in the
    /// regex crate's syntax.
    Char(String),
    /// Where the text is, matching none of it: `^`, `$`, a word's start
    /// or end, in the regex crate's syntax.
    Assert(&'static str),
    /// Group `n` (from 1) and the pieces it holds.
    Group(usize, Vec<Node>),
    /// Alternatives, in their order.
    Alt(Vec<Vec<Node>>),
    /// `x*`, which `regcomp` compiles otherwise than `x{0,}`.
    Star(Box<Node>),
    /// `x{min,max}` (no `max`: unbounded); `x+` is `x{1,}` and `x?` is
    /// `x{0,1}`, as `regcomp` compiles them.
    Repeat(Box<Node>, u32, Option<u32>),
}

/// An expression `regcomp` accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expression {
    nodes: Vec<Node>,
    groups: usize,
}

impl Expression {
    /// Its pieces, in order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// How many groups it opens (POSIX's `re_nsub`).
    pub fn groups(&self) -> usize {
        self.groups
    }

    /// What it matches, in the regex crate's syntax, with its groups.
    pub fn to_regex(&self) -> String {
        let mut out = String::new();
        render(&self.nodes, true, &mut out);
        out
    }
}

/// `nodes` in the regex crate's syntax, appended to `out`: its groups as
/// groups where `capture`, else non-capturing.
fn render(nodes: &[Node], capture: bool, out: &mut String) {
    for node in nodes {
        match node {
            Node::Char(text) => out.push_str(text),
            Node::Assert(text) => out.push_str(text),
            Node::Group(_, inner) => {
                out.push_str(if capture { "(" } else { "(?:" });
                render(inner, capture, out);
                out.push(')');
            }
            Node::Alt(branches) => {
                alternatives(branches, out, |branch, out| render(branch, capture, out));
            }
            Node::Star(atom) => {
                render_atom(atom, capture, out);
                out.push('*');
            }
            Node::Repeat(atom, min, max) => {
                render_atom(atom, capture, out);
                match (min, max) {
                    (1, None) => out.push('+'),
                    (0, Some(1)) => out.push('?'),
                    (min, None) => out.push_str(&format!("{{{min},}}")),
                    (min, Some(max)) if min == max => out.push_str(&format!("{{{min}}}")),
                    (min, Some(max)) => out.push_str(&format!("{{{min},{max}}}")),
                }
            }
        }
    }
}

/// `branches` as one non-capturing alternation, each written by `write`.
pub fn alternatives<T>(
    branches: &[Vec<T>],
    out: &mut String,
    mut write: impl FnMut(&[T], &mut String),
) {
    out.push_str("(?:");
    for (i, branch) in branches.iter().enumerate() {
        if i > 0 {
            out.push('|');
        }
        write(branch, out);
    }
    out.push(')');
}

/// The operand of a repetition, as one unit.
fn render_atom(atom: &Node, capture: bool, out: &mut String) {
    out.push_str("(?:");
    render(std::slice::from_ref(atom), capture, out);
    out.push(')');
}

/// Whether an alternative compiles to nothing: `regcomp` drops an operand
/// repeated `{0}` times, and refuses an alternative left empty.
fn compiles_to_nothing(nodes: &[Node]) -> bool {
    nodes
        .iter()
        .all(|node| matches!(node, Node::Repeat(_, _, Some(0))))
}

/// `pattern`, a POSIX extended (`extended`) or basic regular expression,
/// as `regcomp` reads it; or why the phone refuses it. The empty pattern
/// matches everywhere, as toybox compiles it (as `()`).
pub fn parse(pattern: &str, extended: bool) -> Result<Expression, RegcompError> {
    if pattern.is_empty() {
        return Ok(Expression {
            nodes: vec![Node::Group(1, Vec::new())],
            groups: 1,
        });
    }
    let mut parser = Parser {
        chars: pattern.chars().collect(),
        pos: 0,
        groups: 0,
        closed: Vec::new(),
        open: 0,
    };
    let nodes = if extended {
        parser.extended_alternatives(true)?
    } else {
        parser.basic_expression(true)?
    };
    Ok(Expression {
        nodes,
        groups: parser.groups,
    })
}

/// `pattern` (see [`parse`]) in the regex crate's syntax.
pub fn translate(pattern: &str, extended: bool) -> Result<String, RegcompError> {
    parse(pattern, extended).map(|expression| expression.to_regex())
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    /// Groups opened so far.
    groups: usize,
    /// The numbers of the groups closed so far.
    closed: Vec<usize>,
    /// How many groups are open here.
    open: usize,
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
    fn ordinary(c: char) -> Node {
        Node::Char(regex_syntax::escape(&c.to_string()))
    }

    /// What a backslash before `escaped` means where it is no operator of
    /// the syntax: a word's start or end (`\<`, `\>`), an error (nothing,
    /// a letter, or a quote GNU gives a meaning to), else the character.
    fn escape(escaped: Option<char>) -> Result<Node, RegcompError> {
        match escaped {
            Some('<') => Ok(Node::Assert(r"\b{start}")),
            Some('>') => Ok(Node::Assert(r"\b{end}")),
            Some(c) if !(c.is_alphabetic() || c == '\'' || c == '`') => Ok(Self::ordinary(c)),
            _ => Err(RegcompError::Escape),
        }
    }

    /// A group after its opening parenthesis, numbered as it opens: its
    /// pieces (read by `inner`, where it is not `empty`) and the closing
    /// parenthesis `close` steps past.
    fn group(
        &mut self,
        empty: fn(&Self) -> bool,
        inner: fn(&mut Self) -> Result<Vec<Node>, RegcompError>,
        close: fn(&mut Self) -> bool,
    ) -> Result<Node, RegcompError> {
        if self.open == MAX_NESTING {
            return Err(RegcompError::Nesting);
        }
        self.open += 1;
        self.groups += 1;
        let group = self.groups;
        let nodes = if empty(self) {
            Vec::new()
        } else {
            inner(self)?
        };
        if !close(self) {
            return Err(RegcompError::Parentheses);
        }
        self.open -= 1;
        self.closed.push(group);
        Ok(Node::Group(group, nodes))
    }

    /// Alternatives up to the end (`outer`) or to the `)` of their group.
    fn extended_alternatives(&mut self, outer: bool) -> Result<Vec<Node>, RegcompError> {
        let mut branches = Vec::new();
        loop {
            let mut branch = Vec::new();
            while self.more() && self.peek() != Some('|') && (outer || self.peek() != Some(')')) {
                branch.push(self.extended_part()?);
            }
            if compiles_to_nothing(&branch) {
                return Err(RegcompError::Empty);
            }
            branches.push(branch);
            if !self.eat('|') {
                break;
            }
            if self.peek() == Some('|') || (outer && !self.more()) {
                return Err(RegcompError::Empty);
            }
        }
        Ok(match branches.len() {
            1 => branches.remove(0),
            _ => vec![Node::Alt(branches)],
        })
    }

    /// One atom of an extended expression and its repetition, if any.
    fn extended_part(&mut self) -> Result<Node, RegcompError> {
        let mut caret = false;
        let atom = match self.next() {
            Some('(') => {
                if !self.more() {
                    return Err(RegcompError::Parentheses);
                }
                self.group(
                    |p| p.peek() == Some(')'),
                    |p| p.extended_alternatives(false),
                    |p| p.eat(')'),
                )?
            }
            Some(')') => return Err(RegcompError::Parentheses),
            Some('^') => {
                caret = true;
                Node::Assert("^")
            }
            Some('$') => Node::Assert("$"),
            Some('|') => return Err(RegcompError::Empty),
            Some('*' | '+' | '?' | '{') => return Err(RegcompError::Repetition),
            Some('.') => Node::Char(".".into()),
            Some('[') => self.bracket()?,
            Some('\\') => Self::escape(self.next())?,
            Some(c) => Self::ordinary(c),
            None => return Err(RegcompError::Empty),
        };
        let Some(op @ ('*' | '+' | '?' | '{')) = self.peek() else {
            return Ok(atom);
        };
        if op == '{' && !self.peek2().is_some_and(|c| c.is_ascii_digit() || c == ',') {
            return Err(RegcompError::Repetition);
        }
        self.pos += 1;
        if caret {
            return Err(RegcompError::Repetition);
        }
        let atom = Box::new(atom);
        let repeated = match op {
            '*' => Node::Star(atom),
            '+' => Node::Repeat(atom, 1, None),
            '?' => Node::Repeat(atom, 0, Some(1)),
            _ => {
                let (min, max) = self.bounds('}')?;
                Node::Repeat(atom, min, max)
            }
        };
        let another = match self.peek() {
            Some('*' | '+' | '?') => true,
            Some('{') => self.peek2().is_some_and(|c| c.is_ascii_digit()),
            _ => false,
        };
        if another {
            return Err(RegcompError::Repetition);
        }
        Ok(repeated)
    }

    /// A basic expression up to the end (`outer`) or to the `\)` of its
    /// group: `^` is an anchor only first, `$` only last.
    fn basic_expression(&mut self, outer: bool) -> Result<Vec<Node>, RegcompError> {
        let mut nodes = Vec::new();
        if self.eat('^') {
            nodes.push(Node::Assert("^"));
        }
        let mut parts = 0;
        let mut ends_with_dollar = false;
        while self.more() && (outer || !self.sees_two('\\', ')')) {
            let part;
            (part, ends_with_dollar) = self.basic_part(parts)?;
            nodes.push(part);
            parts += 1;
        }
        if ends_with_dollar {
            // The `$` just read as a character was the anchor.
            nodes.pop();
            nodes.push(Node::Assert("$"));
        }
        if compiles_to_nothing(&nodes) {
            return Err(RegcompError::Empty);
        }
        Ok(nodes)
    }

    /// One atom of a basic expression (the `index`th of its expression)
    /// and its repetition, if any; and whether it was a bare `$`
    /// (unrepeated).
    fn basic_part(&mut self, index: usize) -> Result<(Node, bool), RegcompError> {
        let c = self.next();
        let atom = match c {
            Some('\\') => match self.next() {
                Some('{') => return Err(RegcompError::Repetition),
                Some('(') => self.group(
                    |p| !p.more() || p.sees_two('\\', ')'),
                    |p| p.basic_expression(false),
                    |p| p.eat_two('\\', ')'),
                )?,
                Some(')') => return Err(RegcompError::Parentheses),
                Some(d @ '1'..='9') => {
                    let n = d as usize - '0' as usize;
                    return Err(if self.closed.contains(&n) {
                        RegcompError::BackReferenceUnsupported
                    } else {
                        RegcompError::BackReference
                    });
                }
                escaped => Self::escape(escaped)?,
            },
            Some('.') => Node::Char(".".into()),
            Some('[') => self.bracket()?,
            // A star first in its expression (after a `^`, a `\(`) is
            // itself.
            Some('*') if index > 0 => return Err(RegcompError::Repetition),
            Some(c) => Self::ordinary(c),
            None => return Err(RegcompError::Empty),
        };
        let atom = Box::new(atom);
        if self.eat('*') {
            Ok((Node::Star(atom), false))
        } else if self.eat_two('\\', '{') {
            let (min, max) = self.bounds('\\')?;
            Ok((Node::Repeat(atom, min, max), false))
        } else {
            Ok((*atom, c == Some('$')))
        }
    }

    /// The bounds of a repetition after its `{`, up to its closing brace
    /// (`}`, or `\}` when `close` is the backslash): the least and the
    /// most, `None` for no most.
    fn bounds(&mut self, close: char) -> Result<(u32, Option<u32>), RegcompError> {
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
        Ok((min, max))
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
    fn bracket(&mut self) -> Result<Node, RegcompError> {
        let rest: String = self.chars[self.pos..].iter().take(6).collect();
        for (kludge, boundary) in [("[:<:]]", r"\b{start}"), ("[:>:]]", r"\b{end}")] {
            if rest == kludge {
                self.pos += 6;
                return Ok(Node::Assert(boundary));
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
        Ok(Node::Char(set))
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
