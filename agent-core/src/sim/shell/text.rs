//! The text tools of the phone's toybox (`grep`, `sed`, `cut`, `tr`, `head`,
//! `tail`, `wc`, `printf`, `seq`), with the options automation scripts use,
//! as pure functions from arguments and inputs to output. File reading and
//! the shell's streams are the caller's ([`super::commands`]).

use dissect::Dissect;
use posix::{Posix, Work};
use regex::bytes::{Regex, RegexBuilder};
use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

mod dissect;
mod posix;
mod regcomp;

/// The most bytes one tool prints, and the largest printf field or `tr`
/// set. A phone would print whatever `printf '%1000000000000s'` or `seq
/// inf` asks for; the virtual phone serves many clients from one process
/// and holds a phone's lock while a command runs, so such a command fails
/// with a message instead of taking the host's memory or never ending.
pub const MAX_OUTPUT: usize = 16 << 20;

/// The most work one `sed` does: the bytes of the lines its commands look
/// at, in all. Each command looks at every line, so a script of a million
/// commands (built from a doubled variable) over a large file, or one that
/// grows a line and then scans it again and again, would hold the phone
/// for hours; a hand-written script of a dozen commands over the largest
/// file the line may read stays far below.
pub const MAX_SED_WORK: usize = 1 << 31;

fn too_large(what: &str) -> String {
    format!("{what} is over the virtual phone's {MAX_OUTPUT} bytes")
}

/// Short options as toybox reads them: grouped (`-vn`), with values
/// attached or separate (`-n5`, `-n 5`), `--` ending them.
pub struct Opts<'a> {
    flags: Vec<(char, Option<&'a str>)>,
    pub operands: Vec<&'a str>,
}

impl<'a> Opts<'a> {
    /// `with_value` lists the options that take a value, `plain` the others.
    pub fn parse(args: &[&'a str], plain: &str, with_value: &str) -> Result<Self, String> {
        let mut flags = Vec::new();
        let mut operands = Vec::new();
        let mut rest = args.iter();
        while let Some(&arg) = rest.next() {
            if arg == "--" {
                operands.extend(rest.by_ref().copied());
                break;
            }
            if arg.len() < 2 || !arg.starts_with('-') {
                operands.push(arg);
                continue;
            }
            for (i, c) in arg[1..].char_indices() {
                if with_value.contains(c) {
                    let attached = &arg[1 + i + c.len_utf8()..];
                    let value = if attached.is_empty() {
                        *rest
                            .next()
                            .ok_or_else(|| format!("Missing argument to -{c}"))?
                    } else {
                        attached
                    };
                    flags.push((c, Some(value)));
                    break;
                }
                if !plain.contains(c) {
                    return Err(format!("Unknown option '{c}'"));
                }
                flags.push((c, None));
            }
        }
        Ok(Self { flags, operands })
    }

    pub fn has(&self, c: char) -> bool {
        self.flags.iter().any(|(f, _)| *f == c)
    }

    /// The last value given to option `c`.
    pub fn value(&self, c: char) -> Option<&'a str> {
        self.flags
            .iter()
            .rev()
            .find(|(f, _)| *f == c)
            .and_then(|(_, v)| *v)
    }

    /// Every value given to option `c`, in order.
    pub fn values(&self, c: char) -> Vec<&'a str> {
        self.flags
            .iter()
            .filter(|(f, _)| *f == c)
            .filter_map(|(_, v)| *v)
            .collect()
    }
}

/// Lines of `data`, each without its `\n`; a last line without one counts.
fn lines(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let body = data.strip_suffix(b"\n").unwrap_or(data);
    let empty = data.is_empty();
    body.split(|&b| b == b'\n').filter(move |_| !empty)
}

/// `grep [-EFivwxcnloqsh] [-e PATTERN]... [PATTERN] [FILE...]`.
pub struct Grep {
    /// Every pattern, as alternatives of one expression: a line is read
    /// once, not once per pattern.
    patterns: Posix,
    invert: bool,
    count: bool,
    number: bool,
    only: bool,
    /// Whether `-o`'s searches after a match see no text before them, as
    /// toybox's do with `REG_NOTBOL`. Not with `-w`, which toybox tests on
    /// the bytes around a match as they are, where a search here that
    /// saw a stand-in byte would test that; nor with several patterns,
    /// where toybox keeps each pattern's match ahead from the search
    /// that saw the text before it.
    notbol: bool,
    quiet: bool,
    files_only: bool,
    names: Option<bool>,
}

/// grep's patterns and sed's scripts: the `-e` values, else the first
/// operand; returned with the file operands that remain.
fn script_operands<'a>(
    opts: &Opts<'a>,
    usage: &str,
) -> Result<(Vec<&'a str>, Vec<&'a str>), String> {
    let mut operands = opts.operands.clone();
    let mut scripts = opts.values('e');
    if scripts.is_empty() {
        if operands.is_empty() {
            return Err(usage.into());
        }
        scripts.push(operands.remove(0));
    }
    Ok((scripts, operands))
}

impl Grep {
    /// Reads the options; returns the grep and its file operands.
    pub fn new<'a>(args: &[&'a str]) -> Result<(Self, Vec<&'a str>), String> {
        let opts = Opts::parse(args, "EFivwxcnloqsHhr", "e")?;
        let (raw, operands) = script_operands(
            &opts,
            "usage: grep [-EFivwxcnloqsHh] [-e PATTERN]... PATTERN [FILE...]",
        )?;
        let patterns = raw
            .iter()
            // A pattern with line breaks is one pattern per line.
            .flat_map(|p| p.split('\n'))
            .map(|p| {
                let mut re = if opts.has('F') {
                    regex::escape(p)
                } else {
                    regcomp::translate(p, opts.has('E')).map_err(|e| bad_regex(p, e))?
                };
                if opts.has('x') {
                    re = format!("^(?:{re})$");
                } else if opts.has('w') {
                    // toybox checks the bytes on either side of a match
                    // with `isalnum` and `_`: ASCII words, and the check
                    // is that no word character touches the match, not
                    // that a word starts or ends there (`-w ' a'` does
                    // not match `x a`).
                    re = format!(r"(?-u:\b{{start-half}})(?:{re})(?-u:\b{{end-half}})");
                }
                RegexBuilder::new(&re)
                    .case_insensitive(opts.has('i'))
                    .build()
                    .map(|_| re)
                    .map_err(|_| format!("bad regex '{p}'"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let count = patterns.len();
        let patterns = Posix::new(
            &format!("(?:{})", patterns.join(")|(?:")),
            opts.has('i'),
            Work::new(),
        )
        .ok_or_else(|| match count {
            1 => "the pattern is too large".to_owned(),
            n => format!("{n} patterns are too large together"),
        })?;
        let names = if opts.has('h') {
            Some(false)
        } else if opts.has('H') {
            Some(true)
        } else {
            None
        };
        Ok((
            Self {
                patterns,
                invert: opts.has('v'),
                count: opts.has('c'),
                number: opts.has('n'),
                only: opts.has('o'),
                notbol: !opts.has('w') && count == 1,
                quiet: opts.has('q'),
                files_only: opts.has('l'),
                names,
            },
            operands,
        ))
    }

    /// What `-o` prints of a line (with `-v`, the text between its
    /// matches), as toybox's loops find it; the line is selected when
    /// there is a piece, though an empty one prints nothing.
    fn pieces<'a>(
        &'a self,
        line: &'a [u8],
    ) -> Box<dyn Iterator<Item = Result<Range<usize>, String>> + 'a> {
        match self.invert {
            true => Box::new(self.patterns.gaps(line, self.notbol)),
            false => Box::new(self.patterns.prints(line, self.notbol)),
        }
    }

    /// Greps the inputs (name, bytes); returns the output and whether a
    /// line was selected, or an error once the output passes
    /// [`MAX_OUTPUT`] (`-o` of every character, each after a long name).
    pub fn run(&self, inputs: &[(String, Vec<u8>)]) -> Result<(Vec<u8>, bool), String> {
        let over = |out: &Vec<u8>| {
            (out.len() > MAX_OUTPUT)
                .then(|| too_large("the output"))
                .map_or(Ok(()), Err)
        };
        let mut out = Vec::new();
        let mut any = false;
        let show_names = self.names.unwrap_or(inputs.len() > 1);
        for (name, data) in inputs {
            let mut count = 0;
            for (index, line) in lines(data).enumerate() {
                let mut pieces = self.only.then(|| self.pieces(line));
                let first = match &mut pieces {
                    Some(pieces) => pieces.next().transpose()?,
                    None => None,
                };
                let selected = match pieces {
                    Some(_) => first.is_some(),
                    None => self.patterns.is_match(line) != self.invert,
                };
                if !selected {
                    continue;
                }
                count += 1;
                any = true;
                if self.quiet {
                    return Ok((Vec::new(), true));
                }
                if self.count || self.files_only {
                    continue;
                }
                let prefix = |out: &mut Vec<u8>| {
                    if show_names {
                        out.extend_from_slice(name.as_bytes());
                        out.push(b':');
                    }
                    if self.number {
                        out.extend_from_slice(format!("{}:", index + 1).as_bytes());
                    }
                };
                if let Some(rest) = pieces {
                    for m in first.into_iter().map(Ok).chain(rest) {
                        let m = m?;
                        // toybox prints no line for an empty piece.
                        if m.is_empty() {
                            continue;
                        }
                        prefix(&mut out);
                        out.extend_from_slice(&line[m]);
                        out.push(b'\n');
                        over(&out)?;
                    }
                } else {
                    prefix(&mut out);
                    out.extend_from_slice(line);
                    out.push(b'\n');
                    over(&out)?;
                }
            }
            if self.files_only && count > 0 {
                out.extend_from_slice(name.as_bytes());
                out.push(b'\n');
            } else if self.count {
                if show_names {
                    out.extend_from_slice(format!("{name}:").as_bytes());
                }
                out.extend_from_slice(format!("{count}\n").as_bytes());
            }
            over(&out)?;
        }
        Ok((out, any))
    }
}

/// A line selection of `head`/`tail`: the first or last N lines or bytes,
/// or (tail's `+N`) from line or byte N on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub count: usize,
    pub bytes: bool,
    pub from_start: bool,
}

/// Reads `-n N`, `-c N`, `-N` (and tail's `+N`); returns the span and the
/// file operands.
pub fn span(args: &[&str], tail: bool) -> Result<(Span, Vec<String>), String> {
    // The old `head -5` form is `-n 5`.
    let args: Vec<String> = args
        .iter()
        .map(|a| match a.strip_prefix('-') {
            Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => format!("-n{n}"),
            _ => (*a).to_owned(),
        })
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let opts = Opts::parse(&args, "qvf", "nc")?;
    let (text, bytes) = match (opts.value('c'), opts.value('n')) {
        (Some(c), _) => (c, true),
        (None, Some(n)) => (n, false),
        (None, None) => ("10", false),
    };
    let from_start = tail && text.starts_with('+');
    let count = text
        .trim_start_matches(['+', '-'])
        .parse()
        .map_err(|_| format!("invalid number '{text}'"))?;
    let span = Span {
        count,
        bytes,
        from_start,
    };
    Ok((
        span,
        opts.operands.iter().map(|o| (*o).to_owned()).collect(),
    ))
}

/// The start of `data` (`head`).
pub fn head(data: &[u8], span: Span) -> &[u8] {
    if span.bytes {
        return &data[..span.count.min(data.len())];
    }
    let mut end = 0;
    for _ in 0..span.count {
        match data[end..].iter().position(|&b| b == b'\n') {
            Some(i) => end += i + 1,
            None => return data,
        }
    }
    &data[..end]
}

/// The end of `data` (`tail`), or from line/byte N on with `+N`.
pub fn tail(data: &[u8], span: Span) -> &[u8] {
    if span.bytes {
        return match span.from_start {
            true => &data[span.count.saturating_sub(1).min(data.len())..],
            false => &data[data.len().saturating_sub(span.count)..],
        };
    }
    if span.from_start {
        let mut start = 0;
        for _ in 1..span.count.max(1) {
            match data[start..].iter().position(|&b| b == b'\n') {
                Some(i) => start += i + 1,
                None => return &[],
            }
        }
        return &data[start..];
    }
    if span.count == 0 {
        return &[];
    }
    // The last N line breaks, not counting one that ends the data.
    let body = data.strip_suffix(b"\n").unwrap_or(data);
    let mut start = body.len();
    let mut found = 0;
    while start > 0 {
        if body[start - 1] == b'\n' {
            found += 1;
            if found == span.count {
                break;
            }
        }
        start -= 1;
    }
    &data[start..]
}

/// `wc`'s counts of one input: lines, words, bytes.
pub fn wc_counts(data: &[u8]) -> [u64; 3] {
    let lines = data.iter().filter(|&&b| b == b'\n').count() as u64;
    let words = data
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
        .count() as u64;
    [lines, words, data.len() as u64]
}

/// One `wc` output line: the chosen counts separated by spaces, then the
/// name when files were named.
pub fn wc_line(counts: [u64; 3], show: [bool; 3], name: Option<&str>) -> String {
    let all = !show.iter().any(|&s| s);
    let mut fields: Vec<String> = counts
        .iter()
        .zip(show)
        .filter(|(_, s)| all || *s)
        .map(|(c, _)| c.to_string())
        .collect();
    if let Some(name) = name {
        fields.push(name.to_owned());
    }
    format!("{}\n", fields.join(" "))
}

/// A `cut` list (`1,3-5,7-`), as sorted ranges of 1-based positions.
fn cut_list(list: &str) -> Result<Vec<(usize, usize)>, String> {
    let bad = || format!("bad list '{list}'");
    let mut ranges = Vec::new();
    for part in list.split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (
                if a.is_empty() {
                    1
                } else {
                    a.parse().map_err(|_| bad())?
                },
                if b.is_empty() {
                    usize::MAX
                } else {
                    b.parse().map_err(|_| bad())?
                },
            ),
            None => {
                let n = part.parse().map_err(|_| bad())?;
                (n, n)
            }
        };
        if a == 0 || b < a {
            return Err(bad());
        }
        ranges.push((a, b));
    }
    // Sorted and merged, so a position is looked up by a binary search
    // rather than against every range of a list of thousands.
    ranges.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
    for (a, b) in ranges {
        match merged.last_mut() {
            Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    Ok(merged)
}

/// `cut`'s options: the plain ones, and those that take a value.
pub const CUT_OPTIONS: (&str, &str) = ("sn", "fcbd");

/// `cut -f LIST [-d DELIM] [-s]`, `cut -c LIST`, `cut -b LIST`, with its
/// options parsed by [`CUT_OPTIONS`].
pub fn cut(opts: &Opts, data: &[u8]) -> Result<Vec<u8>, String> {
    let wanted = |i: usize, ranges: &[(usize, usize)]| {
        let after = ranges.partition_point(|&(a, _)| a <= i);
        after > 0 && i <= ranges[after - 1].1
    };
    let mut out = Vec::new();
    if let Some(list) = opts.value('f') {
        let ranges = cut_list(list)?;
        let delim = match opts.value('d') {
            Some(d) if d.len() == 1 => d.as_bytes()[0],
            Some(_) => return Err("the delimiter must be a single character".into()),
            None => b'\t',
        };
        for line in lines(data) {
            if !line.contains(&delim) {
                if !opts.has('s') {
                    out.extend_from_slice(line);
                    out.push(b'\n');
                }
                continue;
            }
            let fields: Vec<&[u8]> = line
                .split(|&b| b == delim)
                .enumerate()
                .filter(|(i, _)| wanted(i + 1, &ranges))
                .map(|(_, f)| f)
                .collect();
            out.extend_from_slice(&fields.join(&delim));
            out.push(b'\n');
        }
        return Ok(out);
    }
    let list = opts
        .value('c')
        .or(opts.value('b'))
        .ok_or("usage: cut [-f LIST [-d DELIM] [-s] | -c LIST | -b LIST] [FILE...]")?;
    let ranges = cut_list(list)?;
    for line in lines(data) {
        if opts.has('b') {
            out.extend(
                line.iter()
                    .enumerate()
                    .filter(|(i, _)| wanted(i + 1, &ranges))
                    .map(|(_, b)| *b),
            );
        } else {
            let text = String::from_utf8_lossy(line);
            let kept: String = text
                .chars()
                .enumerate()
                .filter(|(i, _)| wanted(i + 1, &ranges))
                .map(|(_, c)| c)
                .collect();
            out.extend_from_slice(kept.as_bytes());
        }
        out.push(b'\n');
    }
    Ok(out)
}

/// A `tr` set: ranges `a-z`, escapes `\n`, `\t`, `\\`, and the classes
/// `[:digit:]`, `[:lower:]`, `[:upper:]`, `[:space:]`, `[:alpha:]`, `[:alnum:]`.
fn tr_set(set: &str) -> Result<Vec<char>, String> {
    let mut chars: Vec<char> = Vec::new();
    let mut rest = set;
    while let Some(c) = rest.chars().next() {
        for (name, class) in [
            ("[:digit:]", ('0'..='9').collect::<Vec<_>>()),
            ("[:lower:]", ('a'..='z').collect()),
            ("[:upper:]", ('A'..='Z').collect()),
            ("[:space:]", vec![' ', '\t', '\n', '\r', '\x0b', '\x0c']),
            ("[:alpha:]", ('A'..='Z').chain('a'..='z').collect()),
            (
                "[:alnum:]",
                ('0'..='9').chain('A'..='Z').chain('a'..='z').collect(),
            ),
        ] {
            if let Some(after) = rest.strip_prefix(name) {
                chars.extend(class);
                rest = after;
            }
        }
        if !rest.starts_with(c) {
            continue;
        }
        let (first, after) = unescape_one(rest);
        if let Some(range) = after.strip_prefix('-')
            && !range.is_empty()
        {
            let (last, after_range) = unescape_one(range);
            if last >= first {
                if chars.len() + (first..=last).count() > MAX_OUTPUT {
                    return Err(too_large(&format!("the set {set:?}")));
                }
                chars.extend(first..=last);
                rest = after_range;
                continue;
            }
        }
        chars.push(first);
        rest = after;
    }
    Ok(chars)
}

fn unescape_one(s: &str) -> (char, &str) {
    let mut it = s.chars();
    match it.next() {
        Some('\\') => match it.next() {
            Some('n') => ('\n', it.as_str()),
            Some('t') => ('\t', it.as_str()),
            Some('r') => ('\r', it.as_str()),
            Some(c) => (c, it.as_str()),
            None => ('\\', it.as_str()),
        },
        Some(c) => (c, it.as_str()),
        None => ('\0', s),
    }
}

/// `tr SET1 SET2`, `tr -d SET1`, `tr -s SET1`.
pub fn tr(args: &[&str], data: &[u8]) -> Result<Vec<u8>, String> {
    let opts = Opts::parse(args, "dsc", "")?;
    let sets: Vec<Vec<char>> = opts
        .operands
        .iter()
        .map(|s| tr_set(s))
        .collect::<Result<_, _>>()?;
    let text = String::from_utf8_lossy(data);
    // Looked up per input character, so a set of a million is no slower.
    let members = |set: &[char]| set.iter().copied().collect::<HashSet<char>>();
    let out: String = match (opts.has('d'), opts.has('s'), sets.as_slice()) {
        (true, _, [delete, ..]) => {
            let delete = members(delete);
            text.chars().filter(|c| !delete.contains(c)).collect()
        }
        (false, true, [squeeze]) => {
            let squeeze = members(squeeze);
            let mut out = String::new();
            for c in text.chars() {
                if !(squeeze.contains(&c) && out.ends_with(c)) {
                    out.push(c);
                }
            }
            out
        }
        (false, _, [from, to]) if !to.is_empty() => {
            // The last position of a character in SET1 decides, as it did
            // when it was searched from the end.
            let last: HashMap<char, usize> =
                from.iter().enumerate().map(|(i, &f)| (f, i)).collect();
            text.chars()
                .map(|c| match last.get(&c) {
                    Some(&i) => to[i.min(to.len() - 1)],
                    None => c,
                })
                .collect()
        }
        _ => return Err("usage: tr [-ds] SET1 [SET2]".into()),
    };
    Ok(out.into_bytes())
}

/// One `sed` command of the kinds scripts use: `s/RE/REPL/[gpI]`, `p`,
/// `d` and `q`, each with an optional address (a line number, `$` or
/// `/RE/`).
struct SedCommand {
    address: Option<Address>,
    action: SedAction,
}

enum Address {
    Line(usize),
    Last,
    Match(Regex),
}

enum SedAction {
    Substitute(Box<Substitution>),
    Print,
    Delete,
    Quit,
}

/// An address's expression, which only tells whether a line matches.
fn sed_regex(pattern: &str, extended: bool) -> Result<Regex, String> {
    RegexBuilder::new(&sed_syntax(pattern, extended)?)
        .build()
        .map_err(|_| format!("bad regex '{pattern}'"))
}

/// An `s` command: its expression, whose matches are replaced, and what
/// replaces them.
struct Substitution {
    re: Posix,
    /// Splits a match among its groups; only where the replacement uses
    /// one.
    dissect: Option<Dissect>,
    /// How many groups the expression opens.
    groups: usize,
    replacement: Vec<Replacement>,
    /// Which match is replaced: the nth alone (the first by default, or
    /// the number given), or every one (`g`).
    only: Option<usize>,
    print: bool,
}

impl Substitution {
    fn new(
        pattern: &str,
        replacement: &str,
        flags: &SubstituteFlags,
        extended: bool,
        work: &Arc<Work>,
    ) -> Result<Self, String> {
        let expression = regcomp::parse(pattern, extended || flags.extended)
            .map_err(|e| bad_regex(pattern, e))?;
        let re = Posix::new(&expression.to_regex(), flags.insensitive, work.clone())
            .ok_or_else(|| format!("bad regex '{pattern}'"))?;
        let replacement = sed_replacement(replacement);
        let uses_groups = replacement
            .iter()
            .any(|piece| matches!(piece, Replacement::Group(n) if *n > 0));
        let dissect = uses_groups
            .then(|| Dissect::new(&expression, flags.insensitive, work.clone()))
            .transpose()
            .map_err(|e| {
                format!(
                    "the virtual phone cannot split the matches of '{pattern}' among its \
                     groups: {e}"
                )
            })?;
        Ok(Self {
            re,
            dissect,
            groups: expression.groups(),
            replacement,
            only: flags.only(),
            print: flags.print,
        })
    }
}

/// `pattern` in the regex crate's syntax.
fn sed_syntax(pattern: &str, extended: bool) -> Result<String, String> {
    regcomp::translate(pattern, extended).map_err(|e| bad_regex(pattern, e))
}

/// toybox's words for an expression `regcomp` refused.
fn bad_regex(pattern: &str, why: regcomp::RegcompError) -> String {
    format!("bad regex '{pattern}': {why}")
}

/// The expression of an address or an `s` command, read as toybox reads
/// it up to its closing `delim`, and the text after that: a `delim` in a
/// bracket expression does not close it, an escaped one is the bare
/// character (`\|` with `|` as the delimiter is an alternation of an
/// extended expression), `\n`, `\t` and the other escapes of `printf`
/// are the characters they name, and a range of one character (`a-a`)
/// is that character. `None` when it is never closed.
fn sed_expression(text: &str, delim: char) -> Option<(String, &str)> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let at = |i: usize| chars.get(i).map(|&(_, c)| c);
    let mut out = String::new();
    // Inside a bracket expression: `]`, or the `.`, `=` or `:` that ends
    // a collating element, an equivalence class or a class in one.
    let mut bracket: Option<char> = None;
    let mut i = 0;
    loop {
        let (offset, c) = *chars.get(i)?;
        let next = at(i + 1);
        if bracket.is_none() && c == delim {
            return Some((out, &text[offset + c.len_utf8()..]));
        }
        let mut take = 1;
        if c == '[' {
            if bracket.is_none() {
                bracket = Some(']');
                if matches!(next, Some('-' | ']')) {
                    take = 2;
                }
            } else if bracket == Some(']') && matches!(next, Some('.' | '=' | ':')) {
                bracket = next;
                take = 2;
            }
        } else if bracket == Some(c) {
            if c == ']' {
                bracket = None;
            } else {
                bracket = Some(']');
                take = 2;
            }
        } else if bracket.is_some() && c == '-' && i > 0 && at(i - 1) == next {
            i += 2;
            continue;
        } else if c == '\\' {
            let escaped = next?;
            if escaped == delim {
                out.push(delim);
                i += 2;
                continue;
            }
            if let Some(control) = control_escape(escaped) {
                out.push(control);
                i += 2;
                continue;
            }
            if escaped == '\\' || bracket.is_none() {
                take = 2;
            }
        }
        for _ in 0..take {
            out.extend(at(i));
            i += 1;
        }
    }
}

/// The character `\c` names in toybox's `unescape` (`\n` a line break),
/// if any.
fn control_escape(c: char) -> Option<char> {
    Some(match c {
        'a' => '\x07',
        'b' => '\x08',
        'e' => '\x1b',
        'f' => '\x0c',
        'n' => '\n',
        'r' => '\r',
        't' => '\t',
        'v' => '\x0b',
        _ => return None,
    })
}

/// A replacement up to its closing `delim` (`\\` and that `delim` is the
/// bare `delim`), and the text after it; `None` when it is never closed.
fn sed_replacement_text(text: &str, delim: char) -> Option<(String, &str)> {
    let mut replacement = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some((_, d)) if d == delim => replacement.push(d),
                Some((_, d)) => {
                    replacement.push('\\');
                    replacement.push(d);
                }
                None => replacement.push('\\'),
            }
        } else if c == delim {
            return Some((replacement, &text[i + c.len_utf8()..]));
        } else {
            replacement.push(c);
        }
    }
    None
}

/// The commands of one script, in order. They are separated by `;` or a
/// line break, which an expression or a replacement may hold.
fn sed_parse(script: &str, extended: bool, work: &Arc<Work>) -> Result<Vec<SedCommand>, String> {
    let bad = |what: &str| format!("bad sed command '{script}': {what}");
    let blank = |c: char| c == ' ' || c == '\t';
    let mut commands = Vec::new();
    let mut rest = script;
    loop {
        rest = rest.trim_start_matches(|c: char| c == ';' || c.is_whitespace());
        if rest.is_empty() {
            return Ok(commands);
        }
        let address = if let Some(after) = rest.strip_prefix('$') {
            rest = after;
            Some(Address::Last)
        } else if let Some(after) = rest.strip_prefix('/') {
            let (pattern, after) = sed_expression(after, '/').ok_or_else(|| bad("unclosed /"))?;
            rest = after;
            Some(Address::Match(sed_regex(&pattern, extended)?))
        } else {
            let digits = rest.chars().take_while(char::is_ascii_digit).count();
            if digits > 0 {
                let n = rest[..digits].parse().map_err(|_| bad("line number"))?;
                rest = &rest[digits..];
                Some(Address::Line(n))
            } else {
                None
            }
        };
        let mut chars = rest.trim_start_matches(blank).chars();
        let action = match chars.next() {
            Some('s') => {
                let delim = chars.next().ok_or_else(|| bad("s without a delimiter"))?;
                if delim == '\\' || delim == '\n' {
                    return Err(bad("a backslash or a line break cannot delimit s"));
                }
                let unterminated = || bad("unterminated s");
                let (pattern, after) =
                    sed_expression(chars.as_str(), delim).ok_or_else(unterminated)?;
                let (replacement, after) =
                    sed_replacement_text(after, delim).ok_or_else(unterminated)?;
                let (flags, after) = substitute_flags(after).map_err(|e| bad(&e))?;
                chars = after.chars();
                let substitution =
                    Substitution::new(&pattern, &replacement, &flags, extended, work)?;
                SedAction::Substitute(Box::new(substitution))
            }
            Some('p') => SedAction::Print,
            Some('d') => SedAction::Delete,
            Some('q') => SedAction::Quit,
            _ => return Err(bad("only s, p, d and q are supported by this sed")),
        };
        rest = chars.as_str().trim_start_matches(blank);
        if !(rest.is_empty() || rest.starts_with([';', '\n'])) {
            return Err(bad("extra characters after a command"));
        }
        commands.push(SedCommand { address, action });
    }
}

/// The flags of an `s` command, as toybox reads them.
#[derive(Default)]
struct SubstituteFlags {
    /// `g`: every match (unless `nth` picks one).
    global: bool,
    /// A number n: the nth match alone, with `g` or without.
    nth: Option<usize>,
    /// `p`: the line is printed when a match was replaced.
    print: bool,
    /// `i` or `I`: letters match either case.
    insensitive: bool,
    /// `x`: this expression is an extended one.
    extended: bool,
}

impl SubstituteFlags {
    /// Which match is replaced: the numbered one (toybox ignores `g`
    /// then), every one with `g`, else the first.
    fn only(&self) -> Option<usize> {
        match (self.nth, self.global) {
            (Some(n), _) => Some(n),
            (None, true) => None,
            (None, false) => Some(1),
        }
    }
}

/// The flags at the start of `text` (blanks between them are skipped),
/// and the text after them.
fn substitute_flags(mut text: &str) -> Result<(SubstituteFlags, &str), String> {
    let mut flags = SubstituteFlags::default();
    loop {
        text = text.trim_start_matches([' ', '\t']);
        let mut chars = text.chars();
        match chars.next() {
            Some('g') => flags.global = true,
            Some('p') => flags.print = true,
            Some('i' | 'I') => flags.insensitive = true,
            Some('x') => flags.extended = true,
            Some('1'..='9') if flags.nth.is_none() => {
                let digits = text.chars().take_while(char::is_ascii_digit).count();
                let n = text[..digits]
                    .parse()
                    .map_err(|_| format!("s flag {} is too large", &text[..digits]))?;
                flags.nth = Some(n);
                text = &text[digits..];
                continue;
            }
            _ => return Ok((flags, text)),
        }
        text = chars.as_str();
    }
}

/// A piece of sed's replacement: text, or what a group matched (`&` is
/// group 0).
#[derive(Debug, PartialEq, Eq)]
enum Replacement {
    Text(Vec<u8>),
    Group(usize),
}

/// sed's replacement (`&`, `\1`…`\9`, and `printf`'s escapes such as
/// `\n`), in pieces.
fn sed_replacement(text: &str) -> Vec<Replacement> {
    let mut pieces = Vec::new();
    let mut literal = String::new();
    let group = |pieces: &mut Vec<Replacement>, literal: &mut String, n: usize| {
        if !literal.is_empty() {
            pieces.push(Replacement::Text(std::mem::take(literal).into_bytes()));
        }
        pieces.push(Replacement::Group(n));
    };
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '&' => group(&mut pieces, &mut literal, 0),
            '\\' => match chars.next() {
                Some(d @ '0'..='9') => group(&mut pieces, &mut literal, d as usize - '0' as usize),
                Some(other) => literal.push(control_escape(other).unwrap_or(other)),
                None => literal.push('\\'),
            },
            c => literal.push(c),
        }
    }
    if !literal.is_empty() {
        pieces.push(Replacement::Text(literal.into_bytes()));
    }
    pieces
}

impl Substitution {
    /// `line` with its `only`th match (every match, when `None`) replaced,
    /// and whether the expression matched (toybox's `p` prints then,
    /// replaced or not: `s/a/X/2p` prints a line of one `a`); an error, before it is built, once the
    /// line would pass [`MAX_OUTPUT`] (`s/x/&&&&/g` over a long line, or
    /// twenty times over), or where a replaced match would need a group
    /// the expression does not open (toybox's `no s//\N/`).
    fn apply(&self, line: &[u8]) -> Result<(Vec<u8>, bool), String> {
        fn add(out: &mut Vec<u8>, bytes: &[u8]) -> Result<(), String> {
            if out.len() + bytes.len() > MAX_OUTPUT {
                return Err(too_large("a line"));
            }
            out.extend_from_slice(bytes);
            Ok(())
        }
        let mut out = Vec::new();
        let mut rest = 0;
        let mut matched = false;
        let only = self.only;
        let matches = self
            .re
            .substitutions(line, only.unwrap_or(1))
            .take(only.unwrap_or(usize::MAX));
        for (nth, found) in (1..).zip(matches) {
            let (seen, whole) = found?;
            matched = true;
            if only.is_some_and(|n| nth < n) {
                continue;
            }
            let groups = match &self.dissect {
                Some(dissect) => dissect.groups(seen, &whole)?,
                None => vec![Some(whole.clone())],
            };
            add(&mut out, &line[rest..whole.start])?;
            for piece in &self.replacement {
                match piece {
                    Replacement::Text(text) => add(&mut out, text)?,
                    Replacement::Group(n) if *n > self.groups => {
                        return Err(format!("no s//\\{n}/"));
                    }
                    Replacement::Group(n) => {
                        if let Some(group) = groups.get(*n).cloned().flatten() {
                            add(&mut out, &line[group])?;
                        }
                    }
                }
            }
            rest = whole.end;
        }
        add(&mut out, &line[rest..])?;
        Ok((out, matched))
    }
}

/// Writes `line` and its line break to sed's output; an error, before it
/// is written, once the output would pass [`MAX_OUTPUT`] (a script of a
/// thousand `p`s over a long line).
fn emit(out: &mut Vec<u8>, line: &[u8]) -> Result<(), String> {
    if out.len() + line.len() + 1 > MAX_OUTPUT {
        return Err(too_large("the output"));
    }
    out.extend_from_slice(line);
    out.push(b'\n');
    Ok(())
}

/// `sed [-nE] [-e SCRIPT]... [SCRIPT] [FILE...]`.
pub struct Sed {
    commands: Vec<SedCommand>,
    quiet: bool,
}

impl Sed {
    /// Reads the options and script; returns the sed and its file operands.
    pub fn new<'a>(args: &[&'a str]) -> Result<(Self, Vec<&'a str>), String> {
        let opts = Opts::parse(args, "nErs", "e")?;
        let (scripts, operands) =
            script_operands(&opts, "usage: sed [-nE] [-e SCRIPT]... [SCRIPT] [FILE...]")?;
        let extended = opts.has('E') || opts.has('r');
        let work = Work::new();
        let commands = scripts
            .iter()
            .map(|s| sed_parse(s, extended, &work))
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .flatten()
            .collect();
        let sed = Self {
            commands,
            quiet: opts.has('n'),
        };
        Ok((sed, operands))
    }

    /// The script run over `data`'s lines, its output written to `out` as
    /// it goes; an error once a line or the output passes [`MAX_OUTPUT`]
    /// (`s/x/xxxx/g` twenty times over makes a line of one `x` four
    /// trillion bytes long), or where an `s` command cannot replace a match
    /// (`out` then holds what was written before, as on a phone).
    pub fn run(&self, data: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        let over = |commands: usize, bytes: usize| {
            format!(
                "{commands} commands over {bytes} bytes are more than the virtual phone's \
                 {MAX_SED_WORK} command-bytes of work for one sed"
            )
        };
        if self.commands.len().saturating_mul(data.len()) > MAX_SED_WORK {
            return Err(over(self.commands.len(), data.len()));
        }
        // A substitution can grow the line the next commands look at, so
        // the work is also counted as it is done.
        let mut work = 0usize;
        let all: Vec<&[u8]> = lines(data).collect();
        'lines: for (index, line) in all.iter().enumerate() {
            let mut line = line.to_vec();
            let last = index + 1 == all.len();
            for command in &self.commands {
                let selected = match &command.address {
                    None => true,
                    Some(Address::Line(n)) => index + 1 == *n,
                    Some(Address::Last) => last,
                    Some(Address::Match(re)) => re.is_match(&line),
                };
                if !selected {
                    continue;
                }
                work = work.saturating_add(line.len().max(1));
                if work > MAX_SED_WORK {
                    return Err(over(self.commands.len(), data.len()));
                }
                match &command.action {
                    SedAction::Substitute(substitution) => {
                        let matched;
                        (line, matched) = substitution.apply(&line)?;
                        if matched && substitution.print {
                            emit(out, &line)?;
                        }
                    }
                    SedAction::Print => emit(out, &line)?,
                    SedAction::Delete => continue 'lines,
                    SedAction::Quit => {
                        if !self.quiet {
                            emit(out, &line)?;
                        }
                        break 'lines;
                    }
                }
            }
            if !self.quiet {
                emit(out, &line)?;
            }
        }
        Ok(())
    }
}

/// The character of a numeric escape: up to `more` further digits in `radix`
/// after the value read so far.
fn escaped_char(
    chars: &mut std::iter::Peekable<std::str::Chars>,
    radix: u32,
    mut value: u32,
    more: usize,
) -> char {
    for _ in 0..more {
        let Some(d) = chars.peek().and_then(|c| c.to_digit(radix)) else {
            break;
        };
        value = value * radix + d;
        chars.next();
    }
    char::from_u32(value).unwrap_or('\u{fffd}')
}

/// The backslash escapes of `printf`'s format and `%b`; returns the text
/// and whether `\c` asked to stop all output.
fn printf_escapes(text: &str) -> (String, bool) {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('a') => out.push('\x07'),
            Some('b') => out.push('\x08'),
            Some('f') => out.push('\x0c'),
            Some('v') => out.push('\x0b'),
            Some('e') => out.push('\x1b'),
            Some('\\') => out.push('\\'),
            Some('c') => return (out, true),
            Some('x') => out.push(escaped_char(&mut chars, 16, 0, 2)),
            Some(d @ '0'..='7') => {
                out.push(escaped_char(&mut chars, 8, d.to_digit(8).unwrap_or(0), 2))
            }
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    (out, false)
}

/// A number argument of `printf`: decimal, `0x` hex, `0` octal, or `'c`
/// (the character's code); errors name the argument.
fn printf_number(arg: &str) -> Result<i64, String> {
    if let Some(c) = arg.strip_prefix(['\'', '"']) {
        return Ok(c.chars().next().map_or(0, |c| c as i64));
    }
    let (negative, digits) = match arg.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, arg.strip_prefix('+').unwrap_or(arg)),
    };
    let value = if let Some(hex) = digits.strip_prefix("0x").or(digits.strip_prefix("0X")) {
        i64::from_str_radix(hex, 16)
    } else if digits.len() > 1 && digits.starts_with('0') {
        i64::from_str_radix(&digits[1..], 8)
    } else if digits.is_empty() {
        Ok(0)
    } else {
        digits.parse()
    }
    .map_err(|_| format!("invalid number '{arg}'"))?;
    Ok(if negative { -value } else { value })
}

/// Pads `body` to `width` as printf's flags say.
fn pad(body: String, width: Option<usize>, left: bool, zero: bool) -> String {
    let Some(width) = width else { return body };
    let len = body.chars().count();
    if len >= width {
        return body;
    }
    let fill = width - len;
    if left {
        format!("{body}{}", " ".repeat(fill))
    } else if zero {
        let (sign, digits) = match body.strip_prefix('-') {
            Some(d) => ("-", d),
            None => ("", body.as_str()),
        };
        format!("{sign}{}{digits}", "0".repeat(fill))
    } else {
        format!("{}{body}", " ".repeat(fill))
    }
}

/// `printf FORMAT [ARG...]`: the format is reused while arguments remain.
/// Returns the output, and an error message for a bad argument (printed
/// after the output, as toybox does).
pub fn printf(format: &str, args: &[&str]) -> (Vec<u8>, Option<String>) {
    let mut out = String::new();
    let mut error = None;
    let mut next = 0;
    // The format is read again for each round of arguments: a long one
    // that prints nothing, over many arguments, would never reach the
    // output's bound.
    let mut read = 0usize;
    loop {
        read = read.saturating_add(format.len());
        if read > 4 * MAX_OUTPUT {
            error.get_or_insert(too_large("the format read once per round of arguments"));
            return (out.into_bytes(), error);
        }
        let mut consumed = false;
        let mut chars = format.char_indices().peekable();
        let mut literal = String::new();
        while let Some((_, c)) = chars.next() {
            if c != '%' {
                literal.push(c);
                continue;
            }
            let (text, stop) = printf_escapes(&std::mem::take(&mut literal));
            out.push_str(&text);
            if stop {
                return (out.into_bytes(), error);
            }
            if chars.next_if(|&(_, c)| c == '%').is_some() {
                out.push('%');
                continue;
            }
            let (mut left, mut zero, mut plus, mut space) = (false, false, false, false);
            while let Some((_, f)) = chars.next_if(|&(_, c)| "-0+ #".contains(c)) {
                match f {
                    '-' => left = true,
                    '0' => zero = true,
                    '+' => plus = true,
                    ' ' => space = true,
                    _ => {}
                }
            }
            // Saturating: a width past MAX_OUTPUT is refused below anyway.
            let number = |chars: &mut std::iter::Peekable<std::str::CharIndices>| {
                let mut n: Option<usize> = None;
                while let Some((_, d)) = chars.next_if(|&(_, c)| c.is_ascii_digit()) {
                    let digit = d.to_digit(10).unwrap_or(0) as usize;
                    n = Some(n.unwrap_or(0).saturating_mul(10).saturating_add(digit));
                }
                n
            };
            let width = number(&mut chars);
            let precision = if chars.next_if(|&(_, c)| c == '.').is_some() {
                Some(number(&mut chars).unwrap_or(0))
            } else {
                None
            };
            if width.max(precision).is_some_and(|n| n > MAX_OUTPUT) {
                error.get_or_insert(too_large("a field"));
                return (out.into_bytes(), error);
            }
            // Length modifiers mean nothing here.
            while chars.next_if(|&(_, c)| "hlLqjzt".contains(c)).is_some() {}
            let Some((_, conversion)) = chars.next() else {
                out.push('%');
                break;
            };
            let arg = args.get(next).copied();
            if arg.is_some() {
                next += 1;
                consumed = true;
            }
            let arg = arg.unwrap_or("");
            let mut number_arg = |arg: &str| match printf_number(arg) {
                Ok(n) => n,
                Err(e) => {
                    error.get_or_insert(e);
                    0
                }
            };
            let body = match conversion {
                's' => match precision {
                    Some(p) => arg.chars().take(p).collect(),
                    None => arg.to_owned(),
                },
                'b' => {
                    let (text, stop) = printf_escapes(arg);
                    if stop {
                        out.push_str(&pad(text, width, left, false));
                        return (out.into_bytes(), error);
                    }
                    text
                }
                'c' => arg.chars().next().map(String::from).unwrap_or_default(),
                'd' | 'i' => {
                    let n = number_arg(arg);
                    let sign = if n >= 0 && plus {
                        "+"
                    } else if n >= 0 && space {
                        " "
                    } else {
                        ""
                    };
                    format!("{sign}{n}")
                }
                'u' => (number_arg(arg) as u64).to_string(),
                'x' => format!("{:x}", number_arg(arg)),
                'X' => format!("{:X}", number_arg(arg)),
                'o' => format!("{:o}", number_arg(arg)),
                'f' | 'F' | 'e' | 'g' => {
                    let value = if arg.is_empty() {
                        0.0
                    } else {
                        arg.parse::<f64>().unwrap_or_else(|_| {
                            error.get_or_insert(format!("invalid number '{arg}'"));
                            0.0
                        })
                    };
                    let p = precision.unwrap_or(6);
                    match conversion {
                        'e' => format!("{value:.p$e}"),
                        'g' => format!("{value}"),
                        _ => format!("{value:.p$}"),
                    }
                }
                other => {
                    error.get_or_insert(format!("%{other}: invalid conversion"));
                    String::new()
                }
            };
            let numeric = !matches!(conversion, 's' | 'b' | 'c');
            out.push_str(&pad(body, width, left, zero && numeric && !left));
            if out.len() > MAX_OUTPUT {
                error.get_or_insert(too_large("the output"));
                return (out.into_bytes(), error);
            }
        }
        let (text, stop) = printf_escapes(&literal);
        out.push_str(&text);
        if stop || !consumed || next >= args.len() {
            break;
        }
    }
    (out.into_bytes(), error)
}

/// `seq [-s SEP] [-w] [FIRST [INCREMENT]] LAST`.
pub fn seq(args: &[&str]) -> Result<Vec<u8>, String> {
    // Negative numbers are operands, not options.
    let (options, numbers): (Vec<&str>, Vec<&str>) = {
        let mut options = Vec::new();
        let mut numbers = Vec::new();
        let mut rest = args.iter();
        while let Some(&a) = rest.next() {
            if a == "-s" {
                options.push(a);
                options.extend(rest.next().copied());
            } else if a.starts_with("-s") || a == "-w" {
                options.push(a);
            } else {
                numbers.push(a);
            }
        }
        (options, numbers)
    };
    let opts = Opts::parse(&options, "w", "s")?;
    let separator = opts.value('s').unwrap_or("\n");
    let parsed = numbers
        .iter()
        .map(|n| {
            n.parse::<f64>()
                .map_err(|_| format!("invalid number '{n}'"))
        })
        .collect::<Result<Vec<f64>, String>>()?;
    let (first, step, last) = match parsed.as_slice() {
        [last] => (1.0, 1.0, *last),
        [first, last] => (*first, 1.0, *last),
        [first, step, last] => (*first, *step, *last),
        _ => return Err("usage: seq [-s SEP] [-w] [FIRST [INCREMENT]] LAST".into()),
    };
    if let Some(n) = numbers.iter().zip(&parsed).find(|(_, v)| !v.is_finite()) {
        return Err(format!("invalid number '{}'", n.0));
    }
    if step == 0.0 {
        return Err("increment must not be 0".into());
    }
    let integers = numbers.iter().all(|n| !n.contains(['.', 'e', 'E']));
    let decimals = numbers
        .iter()
        .map(|n| n.split_once('.').map_or(0, |(_, d)| d.len()))
        .max()
        .unwrap_or(0);
    let width = if opts.has('w') {
        [first, last]
            .iter()
            .map(|v| format!("{v:.decimals$}").len())
            .max()
            .unwrap_or(0)
    } else {
        0
    };
    let mut out = Vec::new();
    let mut i = 0u64;
    loop {
        let value = first + step * i as f64;
        if (step > 0.0 && value > last) || (step < 0.0 && value < last) {
            break;
        }
        if i > 0 {
            out.extend_from_slice(separator.as_bytes());
        }
        let text = if integers {
            format!("{:0width$}", value as i64)
        } else {
            format!("{value:0width$.decimals$}")
        };
        out.extend_from_slice(text.as_bytes());
        if out.len() > MAX_OUTPUT {
            return Err(too_large("the output"));
        }
        i += 1;
    }
    if i > 0 {
        out.push(b'\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
