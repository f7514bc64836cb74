//! Each expected value was worked out by hand from the rule in the module
//! documentation and agrees with bionic's `regexec` (NetBSD's engine.c
//! built on the host), written as its `rm_so,rm_eo` pairs: group 0 first,
//! `-1,-1` for a group that took no part.

use super::*;
use crate::sim::shell::text::posix::Posix;
use crate::sim::shell::text::regcomp;

/// The groups of the first match of `pattern` in `text`, as `so,eo`
/// pairs.
fn groups(pattern: &str, extended: bool, insensitive: bool, text: &str) -> String {
    let expression = regcomp::parse(pattern, extended).unwrap();
    let posix = Posix::new(&expression.to_regex(), insensitive, Work::new()).unwrap();
    let (line, found) = posix
        .substitutions(text.as_bytes(), 1)
        .next()
        .unwrap()
        .unwrap();
    let dissect = Dissect::new(&expression, insensitive, Work::new()).unwrap();
    let groups = dissect.groups(line, &found).unwrap();
    let pairs: Vec<String> = groups
        .iter()
        .map(|group| match group {
            Some(group) => format!("{},{}", group.start, group.end),
            None => "-1,-1".into(),
        })
        .collect();
    pairs.join(" ")
}

fn extended(pattern: &str, text: &str) -> String {
    groups(pattern, true, false, text)
}

/// The first alternative takes as much as the rest allows, not what a
/// backtracker's first choice would: `(a|ab)` keeps `ab` and leaves the
/// rest nothing, though `b$` could have matched it.
#[test]
fn each_piece_takes_as_much_as_the_rest_allows() {
    assert_eq!(extended("(a|ab)(b*)", "ab"), "0,2 0,2 2,2");
    assert_eq!(extended("(a|ab)(b$)?", "ab"), "0,2 0,2 -1,-1");
    // Only `a` leaves `bcd` a match, whichever alternative comes first.
    assert_eq!(extended("(ab|a)(c|bcd)", "abcd"), "0,4 0,1 1,4");
    assert_eq!(extended("(a|ab)(c|bcd)", "abcd"), "0,4 0,1 1,4");
}

/// A repeated group holds its last iteration, found by taking each as
/// long as it can be: `aaa` then nothing fits, so the last is `aaa`
/// (0..3), though the match (`aaaa`) is two iterations of `aa`.
#[test]
fn a_repetition_holds_its_last_iteration_each_taken_longest() {
    assert_eq!(extended("(aa|aaa)+", "aaaa"), "0,4 0,3");
    assert_eq!(extended("x(a|b)*y", "xabay"), "0,5 3,4");
    assert_eq!(extended("(a|b)*\\>", "ab c"), "0,2 1,2");
    // The iteration after `aa` matches only the empty text.
    assert_eq!(extended("(a*)+", "aab"), "0,2 2,2");
    assert_eq!(extended("(a*)*", "b"), "0,0 0,0");
}

/// A bound is copies of its operand (`x{2,3}` is `x (x|) x`), and the
/// group holds what the last copy that matched took.
#[test]
fn a_bounded_repetition_is_copies_of_its_operand() {
    assert_eq!(extended("(a){2}", "aa"), "0,2 1,2");
    assert_eq!(extended("(a){2,3}", "aaaa"), "0,3 2,3");
    assert_eq!(
        groups(r"\(a\{1,2\}\)\(a*\)", false, false, "aaa"),
        "0,3 0,2 2,3"
    );
    assert_eq!(groups(r"x\(a\)*", false, false, "xaa"), "0,3 2,3");
}

/// A group outside the alternative that matched, or in an iteration
/// before the last, took no part.
#[test]
fn groups_that_take_no_part_are_unset() {
    assert_eq!(extended("(a)?b", "b"), "0,1 -1,-1");
    assert_eq!(extended("(a)?b", "ab"), "0,2 0,1");
    assert_eq!(extended("((a)|b)+", "ab"), "0,2 1,2 -1,-1");
    assert_eq!(extended("(a)|b", "b"), "0,1 -1,-1");
}

/// Case-insensitive pieces split the match as the sensitive ones do
/// their own text.
#[test]
fn case_insensitive_pieces_split_alike() {
    assert_eq!(groups("(A|ab)(c|bcd)", true, true, "ABCD"), "0,4 0,1 1,4");
}

/// Offsets are bytes; a piece steps over a whole character. `é` is two
/// bytes, so `(é|éb)` on `éb` is the `(a|ab)` case shifted by one.
#[test]
fn pieces_step_over_whole_characters() {
    assert_eq!(extended("(é|éb)(b*)", "éb"), "0,3 0,3 3,3");
    assert_eq!(extended("é(a)", "xéa"), "1,4 3,4");
}

/// An expression whose pieces take more than the phone's bound is
/// refused, not split: `(a{255}){255}` is 255 · 257 pieces of a byte or
/// so, and one more level is 255 times that.
#[test]
fn expressions_of_too_many_pieces_are_refused() {
    let fits = regcomp::parse("(a{255}){255}", true).unwrap();
    assert!(Dissect::new(&fits, false, Work::new()).is_ok());
    let past = regcomp::parse("((a{255}){255}){255}", true).unwrap();
    let error = Dissect::new(&past, false, Work::new()).err().unwrap();
    assert_eq!(error, "its pieces take more than 1048576 bytes");
}

/// The pieces of fixed length are charged too: `(){255}` is 510 marks,
/// split at each of the 1,001 empty matches in a line of 1,000 bytes:
/// some 510,000 steps against a budget of 100,000.
#[test]
fn splitting_is_charged_to_the_run() {
    let expression = regcomp::parse("(){255}", true).unwrap();
    let posix = Posix::new(&expression.to_regex(), false, Work::new()).unwrap();
    let work = Work::bounded(100_000);
    let dissect = Dissect::new(&expression, false, work).unwrap();
    let line = [b'x'; 1000];
    let split: Result<Vec<_>, String> = posix
        .substitutions(&line, 1)
        .map(|found| found.and_then(|(seen, whole)| dissect.groups(seen, &whole)))
        .collect();
    assert!(split.is_err());
}

/// Where the DFA gives up (`\>` beside é, a letter), the NFA is simulated
/// up to the bound each part may end at: `(a|ab)` still takes `ab`,
/// leaving `é*\>` the `é` (bytes 2..4). By hand, from the rule.
#[test]
fn parts_end_at_their_bound_where_the_nfa_is_simulated() {
    assert_eq!(extended("(a|ab)(é*)\\>", "abé x"), "0,4 0,2 2,4");
}
