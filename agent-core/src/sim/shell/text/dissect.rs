//! Which text each group of a match holds, as the phone's `regexec`
//! decides it.
//!
//! bionic's `regexec` (Henry Spencer's, from NetBSD) finds the
//! leftmost-longest match first ([`super::posix`]), then splits it among
//! the pieces `regcomp` compiled the expression to (its `dissect`). In
//! order, each piece whose length is not fixed takes as much as it can
//! while the pieces after it still match the rest; of alternatives, the
//! first that matches exactly what was taken; of a repetition, the last
//! iteration, found by taking each iteration as long as it can be. So
//! `(a|ab)(b*)` on `ab` holds `ab` and the empty text, where a
//! backtracker (and GNU sed) has `a` and `b`; and `(aa|aaa)+` on `aaaa`
//! holds `aaa`, though no iteration matched that: the first took `aaa`
//! and no second one fitted after it.
//!
//! The pieces are `regcomp`'s, not the expression's: `x*` is `(x+)?`, `x?`
//! is `(x|)`, `x{2,3}` is `x (x|) x`, and a group is a mark where it opens
//! and one where it closes, so that of its copies the last one matched
//! says what it holds.

use super::posix::{Line, Longest, Work};
use super::regcomp::{Expression, Node, alternatives};
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

/// The most bytes an expression's pieces may take, written out (each at
/// least one; `(a{255}){255}` is some 65,000 pieces of one byte), beyond
/// which the virtual phone does not split its matches.
const MAX_SIZE: usize = 1 << 20;

/// The most sub-expressions kept compiled at once, and the most memory
/// they may take together; past either they are all dropped and compiled
/// again as needed.
const MAX_WALKERS: usize = 1 << 10;
const MAX_WALKER_MEMORY: usize = 1 << 28;

/// A piece as `regcomp` compiles it.
#[derive(Debug)]
enum Op {
    /// One character, in the regex crate's syntax.
    Char(String),
    /// Where the text is, matching none of it.
    Assert(&'static str),
    /// Where group `n` opens.
    Open(usize),
    /// Where group `n` closes.
    Close(usize),
    /// Its pieces or nothing (`x*` is `(x+)?`).
    Quest(Vec<Op>),
    /// Its pieces, once or more.
    Plus(Vec<Op>),
    /// Alternatives, in their order.
    Alt(Vec<Vec<Op>>),
}

/// An expression's pieces, to split its matches among its groups.
pub struct Dissect {
    program: Vec<Op>,
    groups: usize,
    insensitive: bool,
    /// Sub-expressions compiled so far, by the address and length of
    /// their pieces in `program`, which never moves.
    walkers: Mutex<Walkers>,
    work: Arc<Work>,
}

/// Compiled sub-expressions and the memory they take.
#[derive(Default)]
struct Walkers {
    compiled: HashMap<(usize, usize), Arc<Longest>>,
    memory: usize,
}

/// Where a group opens and where it closes, as far as known.
type Marks = Vec<(Option<usize>, Option<usize>)>;

impl Dissect {
    /// `expression` compiled to its pieces; an error where they are more
    /// than [`MAX_SIZE`] or the regex crate refuses them. Each part
    /// compiled later is a part of them, so that none is refused then.
    pub fn new(
        expression: &Expression,
        insensitive: bool,
        work: Arc<Work>,
    ) -> Result<Self, String> {
        let mut compiler = Compiler { size: 0 };
        let dissect = Self {
            program: compiler.sequence(expression.nodes())?,
            groups: expression.groups(),
            insensitive,
            walkers: Mutex::default(),
            work,
        };
        dissect.walker(&dissect.program)?;
        Ok(dissect)
    }

    /// The groups of `found`, a leftmost-longest match in `text` as its
    /// search saw it, by number (0 is `found`); `None` for a group that
    /// took no part.
    pub fn groups(
        &self,
        text: Line,
        found: &Range<usize>,
    ) -> Result<Vec<Option<Range<usize>>>, String> {
        let mut marks = vec![(None, None); self.groups + 1];
        self.dissect(&self.program, text, found.start, found.end, &mut marks)?;
        // Marks are set in order, so a group never closes before it opens,
        // unless a part's matches disagree with the whole's: then it is
        // dropped rather than sliced backwards.
        let mut groups: Vec<_> = marks
            .into_iter()
            .map(|(open, close)| Some(open?..close?).filter(|group| group.start <= group.end))
            .collect();
        groups[0] = Some(found.clone());
        Ok(groups)
    }

    /// Marks where the groups of `ops` open and close, given that `ops`
    /// match exactly `text[start..stop]`.
    fn dissect(
        &self,
        ops: &[Op],
        text: Line,
        start: usize,
        stop: usize,
        marks: &mut Marks,
    ) -> Result<(), String> {
        // The pieces of fixed length cost a step each, searching nothing.
        self.work.charge(ops.len())?;
        let mut at = start;
        for (i, op) in ops.iter().enumerate() {
            let after = &ops[i + 1..];
            let piece = std::slice::from_ref(op);
            match op {
                Op::Char(_) => at += char_len(text.bytes, at),
                Op::Assert(_) => {}
                Op::Open(n) => marks[*n].0 = Some(at),
                Op::Close(n) => marks[*n].1 = Some(at),
                Op::Quest(inner) => {
                    let end = self.take(piece, after, text, at, stop)?;
                    if self.walk(inner, text, at, end)?.is_some() {
                        self.dissect(inner, text, at, end, marks)?;
                    }
                    at = end;
                }
                Op::Plus(inner) => {
                    let end = self.take(piece, after, text, at, stop)?;
                    let last = self.last_iteration(inner, text, at, end)?;
                    self.dissect(inner, text, last.start, last.end, marks)?;
                    at = end;
                }
                Op::Alt(branches) => {
                    let end = self.take(piece, after, text, at, stop)?;
                    for branch in branches {
                        if self.walk(branch, text, at, end)? == Some(end) {
                            self.dissect(branch, text, at, end, marks)?;
                            break;
                        }
                    }
                    at = end;
                }
            }
        }
        Ok(())
    }

    /// Where `piece`, from `start`, ends: as late as it can while `after`
    /// still matches from there to `stop`.
    fn take(
        &self,
        piece: &[Op],
        after: &[Op],
        text: Line,
        start: usize,
        stop: usize,
    ) -> Result<usize, String> {
        let mut bound = stop;
        loop {
            // The pieces from `piece` on match `start..stop`, so some end
            // of it leaves `after` a match to `stop`; the early returns
            // only keep a disagreement of the parts from looping.
            let Some(end) = self.walk(piece, text, start, bound)? else {
                return Ok(start);
            };
            if self.walk(after, text, end, stop)? == Some(stop) || end == start {
                return Ok(end);
            }
            bound = end - 1;
        }
    }

    /// The last iteration of a repetition of `inner` over
    /// `text[start..stop]`, each taken as long as it can be: after the
    /// last, the next matches nothing (or only the empty text). Where the
    /// iterations so taken fall short of `stop`, still the last of them.
    fn last_iteration(
        &self,
        inner: &[Op],
        text: Line,
        start: usize,
        stop: usize,
    ) -> Result<Range<usize>, String> {
        let (mut before, mut at) = (start, start);
        loop {
            match self.walk(inner, text, at, stop)? {
                Some(end) if end != at => (before, at) = (at, end),
                Some(end) => return Ok(at..end),
                None => return Ok(before..at),
            }
        }
    }

    /// The end of the longest match of `ops` from `start` that ends at
    /// `stop` at the latest.
    fn walk(
        &self,
        ops: &[Op],
        text: Line,
        start: usize,
        stop: usize,
    ) -> Result<Option<usize>, String> {
        if ops.is_empty() {
            return Ok(Some(start));
        }
        self.walker(ops)?.end(text, start, stop, &self.work)
    }

    /// `ops` compiled, once.
    fn walker(&self, ops: &[Op]) -> Result<Arc<Longest>, String> {
        let key = (ops.as_ptr() as usize, ops.len());
        let mut walkers = self.walkers.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(walker) = walkers.compiled.get(&key) {
            return Ok(walker.clone());
        }
        let mut pattern = String::new();
        render(ops, &mut pattern);
        // Compiling is about as much work as reading the pattern's bytes.
        self.work.charge(pattern.len())?;
        let walker = Longest::new(&pattern, self.insensitive)
            .map(Arc::new)
            .ok_or_else(|| {
                format!(
                    "its pieces, {} bytes written out, are more than the regex crate compiles",
                    pattern.len()
                )
            })?;
        let memory = walker.memory_usage();
        if walkers.compiled.len() >= MAX_WALKERS || walkers.memory + memory > MAX_WALKER_MEMORY {
            *walkers = Walkers::default();
        }
        walkers.memory += memory;
        walkers.compiled.insert(key, walker.clone());
        Ok(walker)
    }
}

/// Compiles [`Node`]s to [`Op`]s as `regcomp` does, counting their size.
struct Compiler {
    size: usize,
}

impl Compiler {
    fn sequence(&mut self, nodes: &[Node]) -> Result<Vec<Op>, String> {
        let mut ops = Vec::new();
        for node in nodes {
            self.node(node, &mut ops)?;
        }
        Ok(ops)
    }

    fn node(&mut self, node: &Node, ops: &mut Vec<Op>) -> Result<(), String> {
        self.size += match node {
            Node::Char(text) => text.len(),
            Node::Assert(text) => text.len(),
            _ => 1,
        };
        if self.size > MAX_SIZE {
            return Err(format!("its pieces take more than {MAX_SIZE} bytes"));
        }
        match node {
            Node::Char(text) => ops.push(Op::Char(text.clone())),
            Node::Assert(text) => ops.push(Op::Assert(text)),
            Node::Group(n, inner) => {
                ops.push(Op::Open(*n));
                for node in inner {
                    self.node(node, ops)?;
                }
                ops.push(Op::Close(*n));
            }
            Node::Alt(branches) => {
                let branches = branches
                    .iter()
                    .map(|branch| self.sequence(branch))
                    .collect::<Result<_, _>>()?;
                ops.push(Op::Alt(branches));
            }
            Node::Star(atom) => {
                let plus = Op::Plus(self.sequence(std::slice::from_ref(atom))?);
                ops.push(Op::Quest(vec![plus]));
            }
            Node::Repeat(atom, min, max) => self.repeat(atom, *min, *max, ops)?,
        }
        Ok(())
    }

    /// `atom{from,to}` as `regcomp`'s `repeat` writes it: nothing for
    /// `{0}`, `(x{1,n}|)` for `{0,n}`, `(x|)x{1,n-1}` for `{1,n}`, `x+` for
    /// `{1,}`, and `x x{m-1,n-1}` for more.
    fn repeat(
        &mut self,
        atom: &Node,
        from: u32,
        to: Option<u32>,
        ops: &mut Vec<Op>,
    ) -> Result<(), String> {
        let once = std::slice::from_ref(atom);
        match (from, to) {
            (_, Some(0)) => {}
            (0, _) => {
                let mut some = Vec::new();
                self.repeat(atom, 1, to, &mut some)?;
                ops.push(Op::Alt(vec![some, Vec::new()]));
            }
            (1, Some(1)) => self.node(atom, ops)?,
            (1, None) => ops.push(Op::Plus(self.sequence(once)?)),
            (1, Some(to)) => {
                ops.push(Op::Alt(vec![self.sequence(once)?, Vec::new()]));
                self.repeat(atom, 1, Some(to - 1), ops)?;
            }
            (from, to) => {
                self.node(atom, ops)?;
                self.repeat(atom, from - 1, to.map(|to| to - 1), ops)?;
            }
        }
        Ok(())
    }
}

/// `ops` in the regex crate's syntax, without groups.
fn render(ops: &[Op], out: &mut String) {
    for op in ops {
        match op {
            Op::Char(text) => out.push_str(text),
            Op::Assert(text) => out.push_str(text),
            Op::Open(_) | Op::Close(_) => {}
            // `x*` as `(?:x)*`, not `(?:(?:x)+)?`, nests no deeper than the
            // expression does, so that the regex crate takes it as it
            // took the whole.
            Op::Quest(inner) => match &inner[..] {
                [Op::Plus(x)] => repeated(x, '*', out),
                _ => repeated(inner, '?', out),
            },
            Op::Plus(inner) => repeated(inner, '+', out),
            Op::Alt(branches) => alternatives(branches, out, render),
        }
    }
}

/// `ops` as one unit, then the repetition `op`.
fn repeated(ops: &[Op], op: char, out: &mut String) {
    out.push_str("(?:");
    render(ops, out);
    out.push(')');
    out.push(op);
}

/// The bytes of the character at `at` (one for a byte that starts none).
fn char_len(text: &[u8], at: usize) -> usize {
    let bytes = text.get(at..text.len().min(at + 4)).unwrap_or_default();
    bytes.utf8_chunks().next().map_or(0, |chunk| {
        chunk.valid().chars().next().map_or(1, char::len_utf8)
    })
}

#[cfg(test)]
mod tests;
