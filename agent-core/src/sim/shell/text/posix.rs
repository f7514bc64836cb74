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
//! match can follow, which gives the longest end.
//! Groups (`\1` in a replacement) are then the leftmost-first ones among the
//! ways of matching exactly that text. POSIX's rule for groups (each, in
//! order, as long as it can be) may split such a match otherwise; GNU sed
//! splits `(a|ab)(b*)` on `ab` as this does, `a` and `b`.

use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::nfa::thompson::{self, WhichCaptures, pikevm, pikevm::PikeVM};
use regex_automata::util::{captures::Captures, syntax};
use regex_automata::{Anchored, Input, MatchKind, meta};
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// The regex crate's default limit on a compiled expression, kept for the
/// other engines' NFAs too.
const SIZE_LIMIT: usize = 10 << 20;

/// The most bytes the longest-match searches of one run of a tool look at,
/// all its expressions together. Each search runs on from a match's start
/// until no longer match can follow, so `a|a*b` over a long line of `a`s
/// looks at the rest of the line once per `a`: quadratic, hours for a
/// 16 MiB line.
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

    fn bounded(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            spent: AtomicUsize::new(0),
            limit,
        })
    }

    fn charge(&self, bytes: usize) -> Result<(), String> {
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
    /// Leftmost-first: whether a line matches, and a match's groups.
    first: meta::Regex,
    /// The expression followed by k more bytes (index k, up to one
    /// character's) and the end of the text: a match's groups, searched
    /// anchored at its start in the text cut k bytes after its end. Made
    /// when first needed.
    ending: [OnceLock<Option<meta::Regex>>; LONGEST_CHAR + 1],
    pattern: String,
    syntax: syntax::Config,
    /// Run backwards over a whole line, where matches start.
    starts: DFA,
    /// Anchored at a start, the end of the longest match from there.
    longest: DFA,
    /// The same, where the DFA gives up (any non-ASCII byte, when the
    /// expression has a Unicode `\b`): slower, never giving up.
    longest_slow: PikeVM,
    caches: Mutex<Caches>,
    work: Arc<Work>,
}

struct Caches {
    starts: Cache,
    longest: Cache,
    longest_slow: pikevm::Cache,
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

/// The most bytes of a UTF-8 character: all an assertion at a match's end
/// (`\b`, `$`) looks at after it.
const LONGEST_CHAR: usize = 4;

/// `pattern` as the regex crate's bytes API compiles it, leftmost-first.
fn leftmost_first(pattern: &str, syntax: syntax::Config) -> Option<meta::Regex> {
    meta::Regex::builder()
        .syntax(syntax)
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
        // As the regex crate's bytes API reads an expression: Unicode
        // classes, and matches that need not be valid UTF-8.
        let bytes = syntax::Config::new()
            .case_insensitive(insensitive)
            .utf8(false);
        let config = thompson::Config::new()
            .utf8(false)
            .nfa_size_limit(Some(SIZE_LIMIT));
        let compile = |config: thompson::Config| {
            thompson::Compiler::new()
                .syntax(bytes)
                .configure(config)
                .build(pattern)
                .ok()
        };
        // One forward NFA for the DFA and the simulation of the longest
        // end; the NFA simulation's match bounds need only the implicit
        // group, and a reverse NFA can have no groups.
        let forward = compile(config.clone().which_captures(WhichCaptures::Implicit))?;
        let reverse = compile(config.reverse(true).which_captures(WhichCaptures::None))?;
        let every_match = |nfa: thompson::NFA| {
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
        };
        let starts = every_match(reverse)?;
        let longest = every_match(forward.clone())?;
        let longest_slow = PikeVM::builder()
            .configure(PikeVM::config().match_kind(MatchKind::All))
            .build_from_nfa(forward)
            .ok()?;
        let caches = Mutex::new(Caches {
            starts: starts.create_cache(),
            longest: longest.create_cache(),
            longest_slow: longest_slow.create_cache(),
        });
        Some(Self {
            first: leftmost_first(pattern, bytes)?,
            ending: Default::default(),
            pattern: pattern.to_owned(),
            syntax: bytes,
            starts,
            longest,
            longest_slow,
            caches,
            work,
        })
    }

    pub fn is_match(&self, haystack: &[u8]) -> bool {
        self.first.is_match(haystack)
    }

    fn caches(&self) -> std::sync::MutexGuard<'_, Caches> {
        self.caches.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Where matches start in `haystack`, from one backward pass of a DFA
    /// that reports every match: after the byte at `i`, it is in a match
    /// state when some match starts at `i + 1`. The regex crate's own
    /// search for the next start would look, from each match's end, as far
    /// on as a longer alternative might still match (`x[^y]*y|b` over
    /// `xbxb…` looks at the rest of the line for each `b`).
    fn starts(&self, haystack: &[u8]) -> Result<Starts, String> {
        let cache = &mut self.caches().starts;
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
        haystack: &[u8],
        starts: &Starts,
        at: usize,
    ) -> Result<Option<Range<usize>>, String> {
        let start = match starts {
            Starts::Known(starts) => starts[at..].iter().position(|&s| s).map(|i| at + i),
            Starts::Unknown => {
                // As far as the search may look. More than most searches
                // do: `grep -ow` (a Unicode `\b`) over a line of non-ASCII
                // text a MiB long passes the bound after some thousands of
                // matches.
                self.work.charge(haystack.len() - at)?;
                let input = Input::new(haystack).range(at..);
                self.first.find(input).map(|m| m.start())
            }
        };
        let Some(start) = start else {
            return Ok(None);
        };
        let end = match self.longest_end(haystack, start)? {
            Some(end) => end,
            None => self.longest_end_slowly(haystack, start)?,
        };
        Ok(Some(start..end))
    }

    /// The end of the longest match that starts at `start`, found by
    /// stepping the DFA byte by byte until it can match no more; `None`
    /// where the DFA gives up.
    fn longest_end(&self, haystack: &[u8], start: usize) -> Result<Option<usize>, String> {
        let cache = &mut self.caches().longest;
        let dfa = &self.longest;
        let input = Input::new(haystack).range(start..).anchored(Anchored::Yes);
        let Ok(mut state) = dfa.start_state_forward(cache, &input) else {
            return Ok(None);
        };
        let mut end = None;
        let mut looked = haystack.len() - start;
        let mut gave_up = false;
        for (at, &byte) in haystack.iter().enumerate().skip(start) {
            let Ok(next) = dfa.next_state(cache, state, byte) else {
                (looked, gave_up) = (at + 1 - start, true);
                break;
            };
            state = next;
            if state.is_tagged() {
                // A match state is entered one byte after the match ends.
                if state.is_match() {
                    end = Some(at);
                } else if state.is_dead() || state.is_quit() {
                    (looked, gave_up) = (at + 1 - start, state.is_quit());
                    break;
                }
            }
        }
        if !(gave_up || state.is_dead()) {
            match dfa.next_eoi_state(cache, state) {
                Ok(eoi) if eoi.is_match() => end = Some(haystack.len()),
                Ok(eoi) => gave_up = eoi.is_quit(),
                Err(_) => gave_up = true,
            }
        }
        self.work.charge(looked)?;
        // A match starts here, so no match at all cannot happen; the empty
        // one is kept if it did.
        Ok((!gave_up).then(|| end.unwrap_or(start)))
    }

    /// [`Self::longest_end`] by simulating the NFA: every thread runs on,
    /// and the last match seen is the longest. Charged as if it looked at
    /// the rest of the text.
    fn longest_end_slowly(&self, haystack: &[u8], start: usize) -> Result<usize, String> {
        self.work.charge(haystack.len() - start)?;
        let input = Input::new(haystack).range(start..).anchored(Anchored::Yes);
        Ok(self
            .longest_slow
            .find(&mut self.caches().longest_slow, input)
            .map_or(start, |m| m.end()))
    }

    /// The successive matches in `haystack`, as `regexec` is called by
    /// `grep -o` and `sed s///g`: each from the end of the one before, an
    /// empty match right where the one before ended skipped.
    pub fn find_iter<'h>(
        &'h self,
        haystack: &'h [u8],
    ) -> impl Iterator<Item = Result<Range<usize>, String>> + 'h {
        let mut starts = None;
        let mut at = 0;
        let mut last_end = None;
        std::iter::from_fn(move || {
            let fail = |at: &mut usize, e| {
                *at = haystack.len() + 1;
                Some(Err(e))
            };
            // Most lines do not match, and one forward search says so
            // without the backward pass.
            if starts.is_none() && at <= haystack.len() {
                if !self.is_match(haystack) {
                    return None;
                }
                match self.starts(haystack) {
                    Ok(found) => starts = Some(found),
                    Err(e) => return fail(&mut at, e),
                }
            }
            while let Some(starts) = starts.as_ref().filter(|_| at <= haystack.len()) {
                let found = match self.find_at(haystack, starts, at) {
                    Ok(Some(found)) => found,
                    Ok(None) => return None,
                    Err(e) => return fail(&mut at, e),
                };
                if found.is_empty() && last_end == Some(found.start) {
                    at = found.start + 1;
                    continue;
                }
                at = if found.is_empty() {
                    found.end + 1
                } else {
                    found.end
                };
                last_end = Some(found.end);
                return Some(Ok(found));
            }
            None
        })
    }

    /// The groups of the match `found` (from [`Self::find_iter`]), by
    /// number, each as its range in `haystack`: those of the leftmost-first
    /// way of matching exactly that text. Where the leftmost-first match
    /// within `found` is all of it, its own groups; else those of a search
    /// anchored at its start for the expression followed by the character
    /// after it, in the text cut after that character. Either search sees
    /// the text on both sides as far as an assertion looks (`$`, `\b` at
    /// the match's end) and looks at the match alone; `None` where no way
    /// of matching exactly that text is found.
    pub fn groups(
        &self,
        haystack: &[u8],
        found: &Range<usize>,
    ) -> Option<Vec<Option<Range<usize>>>> {
        let groups = |captures: &Captures| {
            (0..captures.group_len())
                .map(|n| captures.get_group(n).map(|span| span.range()))
                .collect()
        };
        let mut captures = self.first.create_captures();
        let within = Input::new(haystack)
            .range(found.clone())
            .anchored(Anchored::Yes);
        self.first.search_captures(&within, &mut captures);
        if captures.get_match().is_some_and(|m| m.range() == *found) {
            return Some(groups(&captures));
        }
        let after = (haystack.len() - found.end).min(LONGEST_CHAR);
        let ending = self.ending[after]
            .get_or_init(|| {
                let pattern = format!(r"(?:{})(?s-u:.){{{after}}}\z", self.pattern);
                leftmost_first(&pattern, self.syntax)
            })
            .as_ref()?;
        let input = Input::new(&haystack[..found.end + after])
            .range(found.start..)
            .anchored(Anchored::Yes);
        let mut captures = ending.create_captures();
        ending.search_captures(&input, &mut captures);
        captures.is_match().then(|| groups(&captures))
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
        let found: Result<Vec<_>, String> = quadratic.find_iter(line.as_bytes()).collect();
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
            .find_iter(line.as_bytes())
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
            .find_iter(line.as_bytes())
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
    /// is charged as if it looked at the rest of the line: 2,048 searches
    /// over a line of 4,098 bytes are about 2^22 bytes, past a bound of
    /// 2^20.
    #[test]
    fn searches_for_starts_the_dfa_gives_up_on_are_bounded() {
        let line = format!("é{}", "xb".repeat(1 << 11));
        let posix = Posix::new(r"\bx[^y]*y|b", false, Work::bounded(1 << 20)).unwrap();
        let found: Result<Vec<_>, String> = posix.find_iter(line.as_bytes()).collect();
        assert!(found.is_err(), "{:?}", found.map(|f| f.len()));
        let ascii = &line.as_bytes()[2..];
        let posix = Posix::new(r"\bx[^y]*y|b", false, Work::bounded(1 << 20)).unwrap();
        let found: Result<Vec<_>, String> = posix.find_iter(ascii).collect();
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
                .find_iter(line.as_bytes())
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
