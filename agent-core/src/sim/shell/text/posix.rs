//! Regular expressions matched as toybox matches them: through POSIX
//! `regexec`, which reports the leftmost-longest match. The regex crate
//! reports the leftmost-first one (a backtracker's): `a|ab` on `ab` is `a`
//! there and `ab` on a phone, and `grep -o` or `sed s///` would print or
//! replace another text than the phone's.
//!
//! Every semantics agrees on where the leftmost match starts, so the regex
//! crate finds the start; a lazy DFA that reports every match runs on from
//! there until no longer match can follow, which gives the longest end.
//! Groups (`\1` in a replacement) are then the leftmost-first ones among the
//! ways of matching exactly that text. POSIX's rule for groups (each, in
//! order, as long as it can be) may split such a match otherwise; GNU sed
//! splits `(a|ab)(b*)` on `ab` as this does, `a` and `b`.

use regex::bytes::{Regex, RegexBuilder};
use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::nfa::thompson;
use regex_automata::util::{captures::Captures, syntax};
use regex_automata::{Anchored, Input, MatchKind, meta};
use std::ops::Range;
use std::sync::Mutex;

/// The regex crate's default limit on a compiled expression, kept for the
/// DFA's NFA too.
const SIZE_LIMIT: usize = 10 << 20;

/// The most bytes one expression's longest-match searches look at in one
/// run of a tool. Each search runs on from a match's start until no longer
/// match can follow, so `a|a*b` over a long line of `a`s looks at the rest
/// of the line once per `a`: quadratic, hours for a 16 MiB line.
pub const MAX_LONGEST_WORK: usize = 1 << 31;

/// One expression, in the regex crate's syntax (see
/// [`super::basic_to_extended`] for POSIX basic ones).
pub struct Posix {
    /// Where the leftmost match starts.
    first: Regex,
    /// The expression ending at the end of the text: a match's groups,
    /// searched anchored at its start in the text cut at its end.
    ending: meta::Regex,
    /// Anchored at a start, the end of the longest match from there.
    longest: DFA,
    /// The DFA's states, and the bytes its searches have looked at.
    search: Mutex<(Cache, usize)>,
    /// The most bytes its searches may look at: [`MAX_LONGEST_WORK`].
    limit: usize,
}

impl Posix {
    /// `None` when the regex crate refuses the expression.
    pub fn new(pattern: &str, insensitive: bool) -> Option<Self> {
        Self::bounded(pattern, insensitive, MAX_LONGEST_WORK)
    }

    /// With `limit` in place of [`MAX_LONGEST_WORK`].
    fn bounded(pattern: &str, insensitive: bool, limit: usize) -> Option<Self> {
        let build = |pattern: &str| {
            RegexBuilder::new(pattern)
                .case_insensitive(insensitive)
                .size_limit(SIZE_LIMIT)
                .build()
                .ok()
        };
        let first = build(pattern)?;
        // As the regex crate's bytes API reads an expression: Unicode
        // classes, and matches that need not be valid UTF-8.
        let bytes = syntax::Config::new()
            .case_insensitive(insensitive)
            .utf8(false);
        let ending = meta::Regex::builder()
            .syntax(bytes)
            .configure(
                meta::Config::new()
                    .utf8_empty(false)
                    .nfa_size_limit(Some(SIZE_LIMIT)),
            )
            .build(&format!(r"(?:{pattern})\z"))
            .ok()?;
        let longest = DFA::builder()
            // A Unicode `\b` (grep -w) is decided byte by byte next to
            // ASCII only; next to other bytes the DFA gives up.
            .configure(
                DFA::config()
                    .match_kind(MatchKind::All)
                    .unicode_word_boundary(true),
            )
            .syntax(bytes)
            .thompson(
                thompson::Config::new()
                    .utf8(false)
                    .nfa_size_limit(Some(SIZE_LIMIT)),
            )
            .build(pattern)
            .ok()?;
        let search = Mutex::new((longest.create_cache(), 0));
        Some(Self {
            first,
            ending,
            longest,
            search,
            limit,
        })
    }

    pub fn is_match(&self, haystack: &[u8]) -> bool {
        self.first.is_match(haystack)
    }

    /// The leftmost-longest match at or after `at`; an error once the
    /// searches pass [`MAX_LONGEST_WORK`].
    fn find_at(&self, haystack: &[u8], at: usize) -> Result<Option<Range<usize>>, String> {
        let Some(first) = self.first.find_at(haystack, at) else {
            return Ok(None);
        };
        let end = self.longest_end(haystack, first.start())?;
        Ok(Some(
            first.start()..end.unwrap_or(first.end()).max(first.end()),
        ))
    }

    /// The end of the longest match that starts at `start`, found by
    /// stepping the DFA byte by byte until it can match no more. `None`
    /// where the DFA gives up (a Unicode `\b` next to a non-ASCII byte):
    /// the leftmost-first end stands then.
    fn longest_end(&self, haystack: &[u8], start: usize) -> Result<Option<usize>, String> {
        let Ok(mut search) = self.search.lock() else {
            return Ok(None);
        };
        let (cache, work) = &mut *search;
        let dfa = &self.longest;
        let input = Input::new(haystack).range(start..).anchored(Anchored::Yes);
        let Ok(mut state) = dfa.start_state_forward(cache, &input) else {
            return Ok(None);
        };
        let mut end = None;
        let mut looked = haystack.len() - start;
        for (at, &byte) in haystack.iter().enumerate().skip(start) {
            let Ok(next) = dfa.next_state(cache, state, byte) else {
                return Ok(None);
            };
            state = next;
            if state.is_tagged() {
                // A match state is entered one byte after the match ends.
                if state.is_match() {
                    end = Some(at);
                } else if state.is_dead() {
                    looked = at - start;
                    break;
                } else if state.is_quit() {
                    return Ok(None);
                }
            }
        }
        if !state.is_dead() {
            match dfa.next_eoi_state(cache, state) {
                Ok(eoi) if eoi.is_match() => end = Some(haystack.len()),
                Ok(eoi) if eoi.is_quit() => return Ok(None),
                Ok(_) => {}
                Err(_) => return Ok(None),
            }
        }
        *work = work.saturating_add(looked.max(1));
        if *work > self.limit {
            return Err(format!(
                "finding the longest matches looks at more than the virtual phone's \
                 {} bytes of lines for one expression",
                self.limit
            ));
        }
        Ok(end)
    }

    /// The successive matches in `haystack`, as `regexec` is called by
    /// `grep -o` and `sed s///g`: each from the end of the one before, an
    /// empty match right where the one before ended skipped.
    pub fn find_iter<'h>(
        &'h self,
        haystack: &'h [u8],
    ) -> impl Iterator<Item = Result<Range<usize>, String>> + 'h {
        let mut at = 0;
        let mut last_end = None;
        std::iter::from_fn(move || {
            while at <= haystack.len() {
                let found = match self.find_at(haystack, at) {
                    Ok(Some(found)) => found,
                    Ok(None) => return None,
                    Err(e) => {
                        at = haystack.len() + 1;
                        return Some(Err(e));
                    }
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

    /// The groups of the match `found` (from [`Self::find_iter`]), each as
    /// its range in `haystack`; `None` where no way of matching exactly
    /// that text is found again (a `\b` or `$` that reads differently with
    /// the text cut at its end).
    pub fn captures(&self, haystack: &[u8], found: &Range<usize>) -> Option<Captures> {
        let input = Input::new(&haystack[..found.end])
            .range(found.start..)
            .anchored(Anchored::Yes);
        let mut captures = self.ending.create_captures();
        self.ending.search_captures(&input, &mut captures);
        captures.is_match().then_some(captures)
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
        let quadratic = Posix::bounded("a|a*b", false, 1 << 20).unwrap();
        let found: Result<Vec<_>, String> = quadratic.find_iter(line.as_bytes()).collect();
        assert_eq!(
            found,
            Err(
                "finding the longest matches looks at more than the virtual phone's \
                 1048576 bytes of lines for one expression"
                    .into()
            )
        );
        let linear = Posix::bounded("a+", false, 1 << 20).unwrap();
        let found: Vec<(usize, usize)> = linear
            .find_iter(line.as_bytes())
            .map(|m| m.map(|m| (m.start, m.end)))
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(found, [(0, 1 << 12)]);
    }
}
