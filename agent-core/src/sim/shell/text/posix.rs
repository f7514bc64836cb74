//! Regular expressions matched as toybox matches them: through POSIX
//! `regexec`, which reports the leftmost-longest match. The regex crate
//! reports the leftmost-first one (a backtracker's): `a|ab` on `ab` is `a`
//! there and `ab` on a phone, and `grep -o` or `sed s///` would print or
//! replace another text than the phone's.
//!
//! Every semantics agrees on where the leftmost match starts: the first
//! position where any match starts. One backward pass over a line, of a
//! lazy DFA that reports every match, marks those positions; from each
//! start a forward DFA that reports every match runs on until no longer
//! match can follow, which gives the longest end. Which text each group
//! of a match holds is [`super::dissect`]'s.
//!
//! toybox searches the rest of a line after a match with `REG_NOTBOL`
//! (`sed s///g`, `grep -o`), and bionic's engine then sees no text before
//! the search's start: neither `^` nor `\<` nor `\>` holds there, so
//! `s/ |\<a/X/g` on ` a` gives `Xa` on a phone (and `XX` in GNU sed).

use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::nfa::thompson::{self, WhichCaptures, pikevm, pikevm::PikeVM};
use regex_automata::util::{start, syntax};
use regex_automata::{Anchored, Input, MatchKind, meta};
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// The regex crate's default limit on a compiled expression, kept for the
/// other engines' NFAs too.
const SIZE_LIMIT: usize = 10 << 20;

/// The most bytes the longest-match searches of one run of a tool look at,
/// all its expressions together. Each search runs on from a match's start
/// until no longer match can follow, so `a|a*b` over a long line of `a`s
/// looks at the rest of the line once per `a`: quadratic, hours for a
/// 16 MiB line. Where the NFA is simulated, a byte counts once for each of
/// its states, which the simulation may all step over it.
pub const MAX_LONGEST_WORK: usize = 1 << 31;

/// What the longest-match searches of one run of a tool have looked at,
/// shared by its expressions.
pub struct Work {
    spent: AtomicUsize,
    limit: usize,
}

impl Work {
    /// A run's budget of [`MAX_LONGEST_WORK`] bytes.
    pub fn new() -> Arc<Self> {
        Self::bounded(MAX_LONGEST_WORK)
    }

    /// A budget of `limit` bytes.
    pub fn bounded(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            spent: AtomicUsize::new(0),
            limit,
        })
    }

    /// Counts `bytes` more looked at (one at least, for a search that
    /// looks at nothing); an error once the run is past its budget.
    pub fn charge(&self, bytes: usize) -> Result<(), String> {
        let spent = self
            .spent
            .fetch_add(bytes.max(1), Ordering::Relaxed)
            .saturating_add(bytes.max(1));
        if spent > self.limit {
            return Err(format!(
                "finding the longest matches looks at more than the virtual phone's {} \
                 bytes of lines for one command",
                self.limit
            ));
        }
        Ok(())
    }
}

/// One expression, in the regex crate's syntax (see [`super::regcomp`]
/// for POSIX ones).
pub struct Posix {
    /// Leftmost-first: whether a line matches.
    first: meta::Regex,
    /// Run backwards over a whole line, where matches start.
    starts: DFA,
    starts_cache: Mutex<Cache>,
    /// Anchored at a start, the end of the longest match from there.
    longest: Longest,
    work: Arc<Work>,
}

/// Where matches start in one line.
enum Starts {
    /// For each position (the line's end included), whether a match
    /// starts there.
    Known(Vec<bool>),
    /// The DFA gave up: each start is searched for from where the last
    /// match ended.
    Unknown,
}

/// A line as one of toybox's searches sees it.
#[derive(Clone, Copy)]
pub struct Line<'a> {
    pub bytes: &'a [u8],
    /// Where a search began with `REG_NOTBOL`: no assertion holds there,
    /// for bionic's engine sees no text before it.
    pub blind: Option<usize>,
}

/// The byte to show the regex crate before `at`, where bionic's engine
/// sees none: a word character before a word character and a space before
/// anything else, so that neither `\b{start}` nor `\b{end}` holds at
/// `at`, nor `^` (which holds only where nothing is before).
fn stand_in(bytes: &[u8], at: usize) -> u8 {
    // A character is four bytes at most; the chunks of the whole rest
    // would check all of it, once per search.
    let next = bytes
        .get(at..bytes.len().min(at + 4))
        .and_then(|next| next.utf8_chunks().next())
        .and_then(|chunk| chunk.valid().chars().next());
    match next.is_some_and(regex_syntax::is_word_character) {
        true => b'a',
        false => b' ',
    }
}

/// As the regex crate's bytes API reads an expression: Unicode classes,
/// and matches that need not be valid UTF-8.
fn bytes_syntax(insensitive: bool) -> syntax::Config {
    syntax::Config::new()
        .case_insensitive(insensitive)
        .utf8(false)
}

/// `pattern`'s NFA, forward with the implicit group only (all a search
/// for match bounds needs), or `reverse` with none.
fn nfa(pattern: &str, insensitive: bool, reverse: bool) -> Option<thompson::NFA> {
    let captures = match reverse {
        true => WhichCaptures::None,
        false => WhichCaptures::Implicit,
    };
    thompson::Compiler::new()
        .syntax(bytes_syntax(insensitive))
        .configure(
            thompson::Config::new()
                .utf8(false)
                .nfa_size_limit(Some(SIZE_LIMIT))
                .reverse(reverse)
                .which_captures(captures),
        )
        .build(pattern)
        .ok()
}

/// A lazy DFA that reports every match of `nfa`, not only the first.
fn every_match(nfa: thompson::NFA) -> Option<DFA> {
    DFA::builder()
        .configure(
            DFA::config()
                .match_kind(MatchKind::All)
                .unicode_word_boundary(true)
                // A large expression (`a{100000}`) runs with states
                // evicted and made again rather than not at all.
                .skip_cache_capacity_check(true),
        )
        .build_from_nfa(nfa)
        .ok()
}

/// Anchored at a position, the end of the longest match up to a bound: a
/// DFA that reports every match, stepped byte by byte until it can match
/// no more; where the DFA gives up (any non-ASCII byte, when the
/// expression has a Unicode `\b`), the NFA simulated, slower and never
/// giving up.
pub struct Longest {
    dfa: DFA,
    slow: PikeVM,
    caches: Mutex<(Cache, pikevm::Cache)>,
    /// The NFA's states: the simulation's work per byte.
    states: usize,
}

impl Longest {
    /// `None` when the regex crate refuses the expression.
    pub fn new(pattern: &str, insensitive: bool) -> Option<Self> {
        let nfa = nfa(pattern, insensitive, false)?;
        let dfa = every_match(nfa.clone())?;
        let slow = PikeVM::builder()
            .configure(PikeVM::config().match_kind(MatchKind::All))
            .build_from_nfa(nfa)
            .ok()?;
        let caches = Mutex::new((dfa.create_cache(), slow.create_cache()));
        let states = slow.get_nfa().states().len();
        Some(Self {
            dfa,
            slow,
            caches,
            states,
        })
    }

    /// About the most memory it takes: its NFA, the DFA's cache at its
    /// capacity, and the simulation's cache.
    pub fn memory_usage(&self) -> usize {
        let caches = self.caches.lock().unwrap_or_else(PoisonError::into_inner);
        self.slow.get_nfa().memory_usage()
            + self.dfa.get_config().get_cache_capacity()
            + caches.1.memory_usage()
    }

    /// The end of the longest match that starts at `start` and ends at
    /// `stop` at the latest, `None` where there is none. Assertions see
    /// the text on both sides (`$` is the end of the line, not `stop`),
    /// but none before a blind `start`. What it looks at is charged to
    /// `work`; the simulation as if it looked at everything up to `stop`
    /// once for each of the NFA's states.
    pub fn end(
        &self,
        line: Line,
        start: usize,
        stop: usize,
        work: &Work,
    ) -> Result<Option<usize>, String> {
        if start > stop {
            return Ok(None);
        }
        let haystack = line.bytes;
        let before = (line.blind == Some(start)).then(|| stand_in(haystack, start));
        let mut caches = self.caches.lock().unwrap_or_else(PoisonError::into_inner);
        let (dfa_cache, slow_cache) = &mut *caches;
        if let Some(end) = self.end_by_dfa(dfa_cache, haystack, start, stop, before, work)? {
            return Ok(end);
        }
        work.charge((stop - start).saturating_mul(self.states))?;
        let Some(before) = before else {
            let input = Input::new(haystack)
                .range(start..stop)
                .anchored(Anchored::Yes);
            return Ok(self.slow.find(slow_cache, input).map(|m| m.end()));
        };
        // The simulation reads what is before its start from the
        // haystack, so the stand-in is put there, in a copy: up to `stop`
        // and the character after it, which an assertion at `stop` reads
        // (short of the line's end, the copy's end is past the range, so
        // `$` holds no earlier than it did).
        let end = haystack.len().min(stop + 4);
        let mut copy = Vec::with_capacity(end - start + 1);
        copy.push(before);
        copy.extend_from_slice(&haystack[start..end]);
        let input = Input::new(&copy)
            .range(1..stop - start + 1)
            .anchored(Anchored::Yes);
        Ok(self
            .slow
            .find(slow_cache, input)
            .map(|m| m.end() - 1 + start))
    }

    /// [`Self::end`] by the DFA, with `before` in place of the byte before
    /// `start` if given; `None` where it gives up.
    fn end_by_dfa(
        &self,
        cache: &mut Cache,
        haystack: &[u8],
        start: usize,
        stop: usize,
        before: Option<u8>,
        work: &Work,
    ) -> Result<Option<Option<usize>>, String> {
        let dfa = &self.dfa;
        let before = before.or_else(|| start.checked_sub(1).and_then(|i| haystack.get(i).copied()));
        let config = start::Config::new()
            .anchored(Anchored::Yes)
            .look_behind(before);
        let Ok(mut state) = dfa.start_state(cache, &config) else {
            return Ok(None);
        };
        let mut end = None;
        let mut looked = stop - start;
        let mut gave_up = false;
        // A match state is entered one byte after the match ends, so the
        // byte at `stop` is stepped over too, to see one that ends there.
        for (at, &byte) in haystack.iter().enumerate().skip(start) {
            let Ok(next) = dfa.next_state(cache, state, byte) else {
                (looked, gave_up) = (at + 1 - start, true);
                break;
            };
            state = next;
            if state.is_tagged() {
                if state.is_match() {
                    end = Some(at);
                } else if state.is_dead() || state.is_quit() {
                    (looked, gave_up) = (at + 1 - start, state.is_quit());
                    break;
                }
            }
            if at == stop {
                break;
            }
        }
        if stop == haystack.len() && !(gave_up || state.is_dead()) {
            match dfa.next_eoi_state(cache, state) {
                Ok(eoi) if eoi.is_match() => end = Some(stop),
                Ok(eoi) => gave_up = eoi.is_quit(),
                Err(_) => gave_up = true,
            }
        }
        work.charge(looked)?;
        Ok((!gave_up).then_some(end))
    }
}

/// `pattern` as the regex crate's bytes API compiles it, leftmost-first.
fn leftmost_first(pattern: &str, insensitive: bool) -> Option<meta::Regex> {
    meta::Regex::builder()
        .syntax(bytes_syntax(insensitive))
        .configure(
            meta::Config::new()
                .utf8_empty(false)
                .nfa_size_limit(Some(SIZE_LIMIT)),
        )
        .build(pattern)
        .ok()
}

impl Posix {
    /// `None` when the regex crate refuses the expression.
    pub fn new(pattern: &str, insensitive: bool, work: Arc<Work>) -> Option<Self> {
        let starts = every_match(nfa(pattern, insensitive, true)?)?;
        Some(Self {
            first: leftmost_first(pattern, insensitive)?,
            starts_cache: Mutex::new(starts.create_cache()),
            starts,
            longest: Longest::new(pattern, insensitive)?,
            work,
        })
    }

    pub fn is_match(&self, haystack: &[u8]) -> bool {
        self.first.is_match(haystack)
    }

    /// Where matches start in `haystack`, from one backward pass of a DFA
    /// that reports every match: after the byte at `i`, it is in a match
    /// state when some match starts at `i + 1`. The regex crate's own
    /// search for the next start would look, from each match's end, as far
    /// on as a longer alternative might still match (`x[^y]*y|b` over
    /// `xbxb…` looks at the rest of the line for each `b`).
    fn starts(&self, haystack: &[u8]) -> Result<Starts, String> {
        let mut cache = self
            .starts_cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let cache = &mut *cache;
        let dfa = &self.starts;
        let mut starts = vec![false; haystack.len() + 1];
        let input = Input::new(haystack);
        let Ok(mut state) = dfa.start_state_reverse(cache, &input) else {
            return Ok(Starts::Unknown);
        };
        for (at, &byte) in haystack.iter().enumerate().rev() {
            let next = dfa.next_state(cache, state, byte);
            match next {
                Ok(next) if !next.is_quit() => state = next,
                _ => {
                    self.work.charge(haystack.len() - at)?;
                    return Ok(Starts::Unknown);
                }
            }
            starts[at + 1] = state.is_match();
        }
        self.work.charge(haystack.len())?;
        match dfa.next_eoi_state(cache, state) {
            Ok(eoi) => starts[0] = eoi.is_match(),
            Err(_) => return Ok(Starts::Unknown),
        }
        Ok(Starts::Known(starts))
    }

    /// The leftmost-longest match at or after `at`; an error once the
    /// run's searches pass [`MAX_LONGEST_WORK`].
    fn find_at(
        &self,
        line: Line,
        starts: &Starts,
        mut at: usize,
    ) -> Result<Option<Range<usize>>, String> {
        let haystack = line.bytes;
        loop {
            let start = match starts {
                Starts::Known(starts) => starts[at..].iter().position(|&s| s).map(|i| at + i),
                Starts::Unknown => {
                    // As far as the search may look, with the NFA
                    // simulated as the regex crate does where its DFA
                    // gives up too. More than most searches do: `grep -o
                    // '\<a'` (a Unicode `\b`) over a line of non-ASCII
                    // text a MiB long passes the bound after some hundreds
                    // of matches.
                    let rest = haystack.len() - at;
                    self.work.charge(rest.saturating_mul(self.longest.states))?;
                    let input = Input::new(haystack).range(at..);
                    self.first.find(input).map(|m| m.start())
                }
            };
            let Some(start) = start else {
                return Ok(None);
            };
            let end = self.longest.end(line, start, haystack.len(), &self.work)?;
            // Where the search is blind, the matches found seeing the
            // text before may be none; then the next start is searched
            // for, seeing the text.
            match end {
                Some(end) => return Ok(Some(start..end)),
                None if line.blind == Some(start) && start < haystack.len() => at = start + 1,
                None if line.blind == Some(start) => return Ok(None),
                // A match starts here, so no match at all cannot happen;
                // the empty one is kept if it did.
                None => return Ok(Some(start..start)),
            }
        }
    }

    /// The matches of `sed s///`, as toybox's loop finds them, each with
    /// the line as its search saw it: each search from the end of the
    /// match before, with `REG_NOTBOL` after the first. An empty match
    /// found by the search after a match is passed over by searching
    /// again one byte on (`s/x*/-/g` on `abc` is `-a-b-c-`), once the
    /// match numbered `replaced` has been found: before, toybox has no
    /// new line to copy that byte to and searches again where it was, so
    /// `s/x*/-/2` on `abc` is `-abc`.
    pub fn substitutions<'h>(
        &'h self,
        haystack: &'h [u8],
        replaced: usize,
    ) -> impl Iterator<Item = Result<(Line<'h>, Range<usize>), String>> + 'h {
        let mut searches = Searches::new(self, haystack);
        let (mut rest, mut notbol, mut after_match) = (0, false, false);
        let mut found_so_far = 0;
        until_done(move || {
            loop {
                let Some((line, found)) = searches.find(rest, notbol)? else {
                    return Ok(None);
                };
                notbol = true;
                if found.is_empty() && after_match {
                    if rest == haystack.len() {
                        return Ok(None);
                    }
                    if found_so_far >= replaced {
                        rest += 1;
                    }
                    after_match = false;
                    continue;
                }
                after_match = true;
                found_so_far += 1;
                rest = found.end;
                return Ok(Some((line, found)));
            }
        })
    }

    /// The matches `grep -o` prints, as toybox's loop finds them: each
    /// search from the end of the match before, with `REG_NOTBOL` after
    /// the first if `notbol`; an empty match where a search starts passed
    /// over by searching again one byte on. An empty match anywhere else
    /// is the last item: it selects the line and prints nothing. The line
    /// also ends where a search would start at a NUL byte. A line with
    /// no item is not selected, though the expression matches it (`x*`
    /// over `ab`).
    pub fn prints<'h>(
        &'h self,
        haystack: &'h [u8],
        notbol: bool,
    ) -> impl Iterator<Item = Result<Range<usize>, String>> + 'h {
        let len = haystack.len();
        self.grep_loop(haystack, notbol, move |at, found| match found {
            None => (None, None),
            Some(found) if found.is_empty() && found.start == at && at < len => {
                (None, Some(at + 1))
            }
            Some(found) if found.is_empty() => (Some(found), None),
            Some(found) => {
                let end = found.end;
                (Some(found), Some(end))
            }
        })
    }

    /// What `grep -vo` prints, as toybox's loop finds it: the text from
    /// where each search starts to the match it finds, or to the line's
    /// end where there is none. Searches start as `grep -o`'s do, and
    /// after a gap where the match was found, searching again there
    /// blind (toybox's loop overwrites the match it would keep). An
    /// empty line that does not match is one empty gap: selected, with
    /// nothing printed.
    pub fn gaps<'h>(
        &'h self,
        haystack: &'h [u8],
        notbol: bool,
    ) -> impl Iterator<Item = Result<Range<usize>, String>> + 'h {
        let len = haystack.len();
        self.grep_loop(haystack, notbol, move |at, found| match found {
            None => (Some(at..len), Some(len)),
            Some(found) if found.start > at => (Some(at..found.start), Some(found.start)),
            Some(found) if found.is_empty() && at < len => (None, Some(at + 1)),
            Some(found) => (None, (found.end > at).then_some(found.end)),
        })
    }

    /// toybox grep's loop over a line: each search where the one before
    /// moved on to (`REG_NOTBOL` after the first if `notbol`); `step`
    /// takes where a search started and what it found, and gives the piece
    /// to print, if any, and where to go on, if anywhere.
    fn grep_loop<'h>(
        &'h self,
        haystack: &'h [u8],
        notbol: bool,
        mut step: impl FnMut(usize, Option<Range<usize>>) -> (Option<Range<usize>>, Option<usize>) + 'h,
    ) -> impl Iterator<Item = Result<Range<usize>, String>> + 'h {
        let mut searches = Searches::new(self, haystack);
        let mut next = Some(0);
        until_done(move || {
            while let Some(at) = next {
                let found = searches.find(at, notbol && at > 0)?.map(|(_, found)| found);
                let (piece, moved) = step(at, found);
                next = moved.and_then(|at| go_on(haystack, at));
                if piece.is_some() {
                    return Ok(piece);
                }
            }
            Ok(None)
        })
    }
}

/// Where toybox's grep loop searches next: nowhere at the line's end or
/// at a NUL byte.
fn go_on(haystack: &[u8], at: usize) -> Option<usize> {
    haystack.get(at).is_some_and(|&b| b != 0).then_some(at)
}

/// What `step` gives, until it gives nothing or fails (the failure the
/// last item).
fn until_done<T>(
    mut step: impl FnMut() -> Result<Option<T>, String>,
) -> impl Iterator<Item = Result<T, String>> {
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let item = step().transpose();
        done = !matches!(item, Some(Ok(_)));
        item
    })
}

/// One line's searches, which share where its matches start.
struct Searches<'h> {
    posix: &'h Posix,
    haystack: &'h [u8],
    starts: Option<Starts>,
}

impl<'h> Searches<'h> {
    fn new(posix: &'h Posix, haystack: &'h [u8]) -> Self {
        Self {
            posix,
            haystack,
            starts: None,
        }
    }

    /// The leftmost-longest match at or after `at`, and the line as the
    /// search saw it: `blind` at `at` for a `REG_NOTBOL` search.
    fn find(&mut self, at: usize, blind: bool) -> Result<Option<(Line<'h>, Range<usize>)>, String> {
        let line = Line {
            bytes: self.haystack,
            blind: blind.then_some(at),
        };
        let starts = match &mut self.starts {
            Some(starts) => starts,
            // Most lines do not match, and one forward search says so
            // without the backward pass.
            None if !self.posix.is_match(self.haystack) => return Ok(None),
            None => self.starts.insert(self.posix.starts(self.haystack)?),
        };
        Ok(self
            .posix
            .find_at(line, starts, at)?
            .map(|found| (line, found)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Searches that would look at the rest of a long line once per match
    /// are refused past the bound: here 4,096 matches of `a`, the search
    /// from the k-th running 4,096 − k bytes on for a `b` that never comes,
    /// about 2^23 bytes in all, against a bound of 2^20. Under the bound
    /// the same line matches whole lines' worth.
    #[test]
    fn quadratic_longest_match_searches_are_bounded() {
        let line = "a".repeat(1 << 12);
        let quadratic = Posix::new("a|a*b", false, Work::bounded(1 << 20)).unwrap();
        let found: Result<Vec<_>, String> = quadratic
            .substitutions(line.as_bytes(), 1)
            .map(|m| m.map(|(_, found)| found))
            .collect();
        assert_eq!(
            found,
            Err(
                "finding the longest matches looks at more than the virtual phone's \
                 1048576 bytes of lines for one command"
                    .into()
            )
        );
        let linear = Posix::new("a+", false, Work::bounded(1 << 20)).unwrap();
        let found: Vec<(usize, usize)> = linear
            .substitutions(line.as_bytes(), 1)
            .map(|m| m.map(|(_, found)| found))
            .map(|m| m.map(|m| (m.start, m.end)))
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(found, [(0, 1 << 12)]);
    }

    /// Where the next match starts is found without looking past it: the
    /// regex crate's own search, from each `b` of a line of `xb`s, would
    /// look to the end of the line for the `y` that ends `x[^y]*y`, about
    /// 2^37 bytes for this 1 MiB line. Here the line is looked at once
    /// backwards, and each match's longest end needs a few bytes (at most
    /// three bytes per position in all).
    #[test]
    fn finding_where_matches_start_is_linear() {
        let line = "xb".repeat(1 << 19);
        let posix = Posix::new("x[^y]*y|b", false, Work::bounded(4 << 20)).unwrap();
        let found: Vec<Range<usize>> = posix
            .substitutions(line.as_bytes(), 1)
            .map(|m| m.map(|(_, found)| found))
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(found.len(), 1 << 19);
        assert!(
            found
                .iter()
                .enumerate()
                .all(|(k, m)| *m == (2 * k + 1..2 * k + 2))
        );
    }

    /// Where the backward pass gives up (a non-ASCII byte, here at the
    /// start of the line, with a Unicode `\b`), each search for a start
    /// is charged as if it looked at the rest of the line, once for each
    /// state of the NFA: 2,048 searches over a line of 4,098 bytes are
    /// about 2^22 bytes already, past a bound of 2^20.
    #[test]
    fn searches_for_starts_the_dfa_gives_up_on_are_bounded() {
        let line = format!("é{}", "xb".repeat(1 << 11));
        let posix = Posix::new(r"\bx[^y]*y|b", false, Work::bounded(1 << 20)).unwrap();
        let found: Result<Vec<_>, String> = posix
            .substitutions(line.as_bytes(), 1)
            .map(|m| m.map(|(_, found)| found))
            .collect();
        assert!(found.is_err(), "{:?}", found.map(|f| f.len()));
        let ascii = &line.as_bytes()[2..];
        let posix = Posix::new(r"\bx[^y]*y|b", false, Work::bounded(1 << 20)).unwrap();
        let found: Result<Vec<_>, String> = posix
            .substitutions(ascii, 1)
            .map(|m| m.map(|(_, found)| found))
            .collect();
        assert_eq!(found.map(|found| found.len()), Ok(1 << 11));
    }

    /// The bound is the run's, not each expression's: two commands of one
    /// sed that look at 2^10 · (2^10 + 1) / 2 ≈ 2^19 bytes each pass a
    /// bound of 600,000 alone and not together.
    #[test]
    fn the_bound_is_shared_by_a_run_s_expressions() {
        let line = "a".repeat(1 << 10);
        let matches = |posix: &Posix| {
            posix
                .substitutions(line.as_bytes(), 1)
                .map(|m| m.map(|(_, found)| found))
                .collect::<Result<Vec<_>, String>>()
                .map(|found| found.len())
        };
        let shared = Work::bounded(600_000);
        let one = Posix::new("a|a*b", false, shared.clone()).unwrap();
        let two = Posix::new("a|a*c", false, shared).unwrap();
        assert_eq!(matches(&one), Ok(1 << 10));
        assert!(matches(&two).is_err());
        let alone = Posix::new("a|a*c", false, Work::bounded(600_000)).unwrap();
        assert_eq!(matches(&alone), Ok(1 << 10));
    }
}
