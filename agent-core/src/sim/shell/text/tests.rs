//! The text tools against outputs worked out by hand from toybox's and
//! POSIX's definitions.

use super::*;

fn s(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap()
}

#[test]
fn options_group_attach_and_separate() {
    let opts = Opts::parse(&["-vn", "-e", "a", "-eb", "--", "-x"], "vn", "e").unwrap();
    assert!(opts.has('v') && opts.has('n'));
    assert_eq!(opts.values('e'), ["a", "b"]);
    assert_eq!(opts.operands, ["-x"]);
    assert_eq!(
        Opts::parse(&["-q"], "v", "").err().unwrap(),
        "Unknown option 'q'"
    );
    assert_eq!(
        Opts::parse(&["-e"], "", "e").err().unwrap(),
        "Missing argument to -e"
    );
}

fn grep(args: &[&str], text: &str) -> (String, bool) {
    let (g, files) = Grep::new(args).unwrap();
    assert!(files.is_empty());
    let (out, found) = g
        .run(&[("(standard input)".into(), text.as_bytes().to_vec())])
        .unwrap();
    (String::from_utf8(out).unwrap(), found)
}

#[test]
fn grep_selects_counts_and_numbers_lines() {
    let text = "mCurrentFocus=Window{1 u0 a/b}\nmFocusedApp=x\nother\n";
    assert_eq!(
        grep(&["mCurrentFocus"], text).0,
        "mCurrentFocus=Window{1 u0 a/b}\n"
    );
    assert_eq!(
        grep(&["-E", "mCurrent|mFocused"], text).0.lines().count(),
        2
    );
    assert_eq!(grep(&["mCurrent|mFocused"], text), (String::new(), false));
    assert_eq!(grep(&["-c", "m"], text).0, "2\n");
    assert_eq!(grep(&["-v", "-n", "Focus"], text).0, "3:other\n");
    assert_eq!(grep(&["-i", "OTHER"], text).0, "other\n");
    assert_eq!(grep(&["-o", "u0 [a-z/]*"], text).0, "u0 a/b\n");
    assert_eq!(grep(&["-F", "{1"], text).0.lines().count(), 1);
    assert_eq!(grep(&["-x", "other"], text).0, "other\n");
    assert_eq!(grep(&["-w", "oth"], text), (String::new(), false));
    assert_eq!(grep(&["-q", "other"], text), (String::new(), true));
    let (g, _) = Grep::new(&["x"]).unwrap();
    let (out, _) = g
        .run(&[
            ("a".into(), b"x\n".to_vec()),
            ("b".into(), b"y\nx\n".to_vec()),
        ])
        .unwrap();
    assert_eq!(s(&out), "a:x\nb:x\n");
    // Several patterns select a line when any matches; `-o` prints the
    // matches in the order they stand in the line.
    assert_eq!(
        grep(&["-e", "App=x", "-e", "other"], text).0,
        "mFocusedApp=x\nother\n"
    );
    assert_eq!(grep(&["-o", "-e", "b", "-e", "a"], "ab\n").0, "a\nb\n");
    assert_eq!(
        Grep::new(&["-E", "-e", "a", "-e", "("]).err().unwrap(),
        "bad regex '(': parentheses not balanced"
    );
}

#[test]
fn head_and_tail_take_lines_and_bytes() {
    let data = b"1\n2\n3\n4\n5\n";
    let span_of = |args: &[&str], tail: bool| super::span(args, tail).unwrap().0;
    assert_eq!(head(data, span_of(&["-n", "2"], false)), b"1\n2\n");
    assert_eq!(head(data, span_of(&["-3"], false)), b"1\n2\n3\n");
    assert_eq!(head(data, span_of(&["-c", "3"], false)), b"1\n2");
    assert_eq!(head(data, span_of(&[], false)), data);
    assert_eq!(tail(data, span_of(&["-n", "2"], true)), b"4\n5\n");
    assert_eq!(tail(data, span_of(&["-n", "+4"], true)), b"4\n5\n");
    assert_eq!(tail(data, span_of(&["-c", "2"], true)), b"5\n");
    assert_eq!(tail(b"a\nb", span_of(&["-n", "1"], true)), b"b");
    assert_eq!(tail(data, span_of(&["-n", "0"], true)), b"");
    let (_, files) = super::span(&["-n", "1", "f"], false).unwrap();
    assert_eq!(files, ["f"]);
}

#[test]
fn wc_counts_lines_words_and_bytes() {
    let counts = wc_counts(b"one two\nthree\n");
    assert_eq!(counts, [2, 3, 14]);
    assert_eq!(wc_line(counts, [false; 3], None), "2 3 14\n");
    assert_eq!(wc_line(counts, [true, false, false], None), "2\n");
    assert_eq!(wc_line(counts, [true, false, true], Some("f")), "2 14 f\n");
}

#[test]
fn cut_fields_and_characters() {
    let data = b"a:b:c\nd:e\nnone\n";
    assert_eq!(
        s(&cut_args(&["-d", ":", "-f", "2"], data).unwrap()),
        "b\ne\nnone\n"
    );
    assert_eq!(
        s(&cut_args(&["-d:", "-f1,3", "-s"], data).unwrap()),
        "a:c\nd\n"
    );
    assert_eq!(s(&cut_args(&["-c", "2-"], b"hello\n").unwrap()), "ello\n");
    assert_eq!(s(&cut_args(&["-c", "-2,4"], b"hello\n").unwrap()), "hel\n");
    assert!(cut_args(&["-f", "0"], data).is_err());
    // Overlapping, touching and repeated ranges select each position once.
    assert_eq!(
        cut_list("5-7,1,2-3,6-9,9,11-").unwrap(),
        [(1, 3), (5, 9), (11, usize::MAX)]
    );
    assert_eq!(
        s(&cut_args(&["-c", "5-7,1,2-3,6-9,9,11-"], b"abcdefghijklm\n").unwrap()),
        "abcefghiklm\n"
    );
    assert_eq!(
        s(&cut_args(&["-d:", "-f", "3,1,1-1"], data).unwrap()),
        "a:c\nd\nnone\n"
    );
}

#[test]
fn tr_maps_deletes_and_squeezes() {
    assert_eq!(
        s(&tr(&["a-z", "A-Z"], b"Hi there\n").unwrap()),
        "HI THERE\n"
    );
    assert_eq!(s(&tr(&["-d", "\\r"], b"a\r\nb\r\n").unwrap()), "a\nb\n");
    assert_eq!(s(&tr(&["-s", " "], b"a   b  c").unwrap()), "a b c");
    assert_eq!(s(&tr(&["[:lower:]", "[:upper:]"], b"ok").unwrap()), "OK");
    assert_eq!(s(&tr(&["abc", "x"], b"aabbd").unwrap()), "xxxxd");
}

/// What `sed` writes over `data`, where it runs to the end.
fn sed_output(sed: &Sed, data: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    sed.run(data, &mut out)?;
    Ok(out)
}

fn sed_run(args: &[&str], data: &str) -> String {
    let (sed, files) = Sed::new(args).unwrap();
    assert!(files.is_empty());
    String::from_utf8(sed_output(&sed, data.as_bytes()).unwrap()).unwrap()
}

#[test]
fn sed_substitutes_prints_and_deletes() {
    assert_eq!(sed_run(&["s/a/x/"], "aaa\nbab\n"), "xaa\nbxb\n");
    assert_eq!(sed_run(&["s/a/x/g"], "aaa\n"), "xxx\n");
    assert_eq!(
        sed_run(
            &["-E", "s/([0-9]+)x([0-9]+)/\\2 \\1/"],
            "Physical size: 1080x2400\n"
        ),
        "Physical size: 2400 1080\n"
    );
    assert_eq!(sed_run(&[r"s/\([0-9]*\)x/<&>/"], "12x\n"), "<12x>\n");
    assert_eq!(sed_run(&["-n", "2p"], "a\nb\nc\n"), "b\n");
    assert_eq!(sed_run(&["/b/d"], "a\nb\nc\n"), "a\nc\n");
    assert_eq!(sed_run(&["$d"], "a\nb\n"), "a\n");
    assert_eq!(sed_run(&["-n", "s/^x=//p"], "x=1\ny=2\n"), "1\n");
    assert_eq!(sed_run(&["2q"], "a\nb\nc\n"), "a\nb\n");
    assert_eq!(sed_run(&["s|/|_|g"], "/a/b\n"), "_a_b\n");
    assert_eq!(sed_run(&["s/b*/-/g"], "abc\n"), "-a-c-\n");
    assert_eq!(sed_run(&["-E", r"s/(a)|b/[\1$]/g"], "ab\n"), "[a$][$]\n");
    assert!(Sed::new(&["y/a/b/"]).is_err());
}

/// toybox reads an expression of sed up to its delimiter first: a
/// delimiter in a bracket expression is text, an escaped one is the bare
/// character (with `|` as the delimiter, `\|` is an extended expression's
/// alternation), `\t` and `\n` are the characters they name. Commands are
/// separated by `;` outside their expressions and replacements.
#[test]
fn sed_reads_expressions_as_toybox_does() {
    assert_eq!(sed_run(&["s/[/]/_/g"], "a/b/c\n"), "a_b_c\n");
    assert_eq!(sed_run(&["-E", r"s|a\|b|x|g"], "abc\n"), "xxc\n");
    assert_eq!(sed_run(&[r"s|a\|b|x|g"], "a|b ab\n"), "x ab\n");
    assert_eq!(sed_run(&[r"s/\t/T/"], "a\tb\n"), "aTb\n");
    assert_eq!(sed_run(&["s/a;b/x/;s/c/y/"], "a;bc\n"), "xy\n");
    assert_eq!(sed_run(&["-n", "/b/ p"], "a\nb\n"), "b\n");
    assert_eq!(sed_run(&["s/[a-a]/x/"], "ba\n"), "bx\n");
    // Flags: a number picks one match (with `g` too, in toybox), `x` makes
    // this one expression extended; blanks between flags are skipped.
    assert_eq!(sed_run(&["s/a/x/2"], "aaa\n"), "axa\n");
    assert_eq!(sed_run(&["s/a/x/2g"], "aaa\n"), "axa\n");
    assert_eq!(sed_run(&["s/a/x/ g p"], "aa\n"), "xx\nxx\n");
    assert_eq!(sed_run(&["s/a+/x/x"], "aa+\n"), "x+\n");
    assert_eq!(sed_run(&[r"s/a/\t&\n/"], "a\n"), "\ta\n\n");
    assert_eq!(
        Sed::new(&["s/a/x/w"]).err(),
        Some("bad sed command 's/a/x/w': extra characters after a command".into())
    );
    assert_eq!(
        Sed::new(&["px"]).err(),
        Some("bad sed command 'px': extra characters after a command".into())
    );
    // grep hands its expressions to regcomp as they are: GNU's escapes of
    // letters are refused.
    assert_eq!(
        Grep::new(&[r"a\tb"]).err(),
        Some(r"bad regex 'a\tb': trailing backslash (\)".into())
    );
    assert_eq!(
        Grep::new(&["-E", "a||b"]).err(),
        Some("bad regex 'a||b': empty (sub)expression".into())
    );
    assert_eq!(grep(&[r"a\|b"], "a|b\nab\n").0, "a|b\n");
}

/// toybox matches through POSIX regexec: the leftmost match, and of those
/// starting there the longest, whatever the order of the alternatives.
#[test]
fn matches_are_leftmost_longest_as_posix_asks() {
    assert_eq!(grep(&["-oE", "a|ab"], "xab\n").0, "ab\n");
    // Each next match starts where the one before ended.
    assert_eq!(grep(&["-oE", "b|ba|a"], "baba\n").0, "ba\nba\n");
    assert_eq!(sed_run(&["-E", "s/a|ab/X/"], "abc\n"), "Xc\n");
    // Longest overall where a greedy star alone takes less: a* could take
    // both a's, but one a leaves (ab)* the rest of the line.
    assert_eq!(sed_run(&["-E", "s/a*(ab)*/X/"], "aabab\n"), "X\n");
    // The groups of the longest match, though the first alternatives
    // would match less; and of a match whose `$` or `\>` reads the text
    // after it.
    assert_eq!(
        sed_run(&["-E", r"s/(ab|a)(c|bcd)/[\1][\2]/"], "abcd\n"),
        "[a][bcd]\n"
    );
    assert_eq!(
        sed_run(&["-E", r"s/(a$)|(a)/[\1][\2]/"], "ab\n"),
        "[][a]b\n"
    );
    assert_eq!(sed_run(&["-E", r"s/(ab\>)/[\1]/"], "ab c\n"), "[ab] c\n");
    // `(a|ab)` takes as much as the rest allows, and the rest reads the
    // text after the match: `\>` and `$` are not at the line's end
    // there.
    assert_eq!(
        sed_run(&["-E", r"s/(a|ab)(c\>)?/[\1|\2]/"], "abc d\n"),
        "[ab|c] d\n"
    );
    assert_eq!(
        sed_run(&["-E", r"s/(a|ab)(c\>)?/[\1|\2]/"], "abcd\n"),
        "[ab|]cd\n"
    );
    assert_eq!(
        sed_run(&["-E", r"s/(a|ab)(b$)?/[\1|\2]/"], "abc\n"),
        "[ab|]c\n"
    );
    // The character after is é, two bytes, a letter to a Unicode `\>` (as
    // to GNU sed in a UTF-8 locale): no word ends after `ab`.
    assert_eq!(sed_run(&["-E", r"s/(ab\>|a)/[\1]/"], "abé\n"), "[a]bé\n");
    // Empty matches: none right after a match, one at the end of the line.
    assert_eq!(sed_run(&["s/x*/-/g"], "abc\n"), "-a-b-c-\n");
    assert_eq!(sed_run(&["-E", "s/b*|a/-/g"], "abc\n"), "--c-\n");
    // Words among non-ASCII letters: toybox's `-w` tests the bytes beside
    // a match with `isalnum`, to which é's are no letters (GNU grep prints
    // the same in the C locale); `\<` reads é as a letter, where the DFA
    // gives up and the NFA is simulated.
    assert_eq!(grep(&["-ow", "ab"], "ab éab ab\n").0, "ab\nab\nab\n");
    assert_eq!(grep(&["-o", r"\<ab"], "ab éab ab\n").0, "ab\nab\n");
    // No word character may touch a match, whatever its own ends are.
    assert_eq!(grep(&["-w", " a"], "x a\n").0, "");
    assert_eq!(grep(&["-w", " a"], "- a\n").0, "- a\n");
    assert_eq!(grep(&["-ow", "a_"], "a_b a_\n").0, "a_\n");
    assert_eq!(grep(&["-oE", r"x|x.*\>"], "xé y\n").0, "xé y\n");
}

/// After a match toybox searches the rest of the line with `REG_NOTBOL`,
/// and bionic's engine then sees no text before the rest: no `\<`, `\>`
/// or `^` right where a search starts. Worked out from toybox's loops and
/// engine.c's `walk`, and what both, built on the host, print; GNU sed
/// and grep, which see the whole line, give `XX`, `|ab| |cd|`, `X Xb`,
/// `XXé`, ` ` and `a`, and `b`; GNU sed gives `a-bc` for `s/x*/-/2` and
/// prints nothing for `s/a/X/2p`.
#[test]
fn searches_after_a_match_see_no_text_before_them() {
    assert_eq!(sed_run(&["-E", r"s/ |\<a/X/g"], " a\n"), "Xa\n");
    assert_eq!(sed_run(&["-E", r"s/\<|\>/|/g"], "ab cd\n"), "|ab| cd|\n");
    // The empty match before `b` comes right after the match `a`, so sed
    // searches again from `b`, where it sees no space before.
    assert_eq!(sed_run(&["-E", r"s/a|\</X/g"], "a b\n"), "X b\n");
    // The same where the DFA gives up (a Unicode `\<` before é) and the
    // NFA is simulated.
    assert_eq!(sed_run(&["-E", r"s/ |\<a/X/g"], " aé\n"), "Xaé\n");
    assert_eq!(grep(&["-oE", r" |\<a"], " a\n").0, " \n");
    // `grep -o` ends the line at an empty match that is not where its
    // search started, and where a search would start at a NUL byte.
    assert_eq!(grep(&["-oE", r"\>|b"], "a b\n"), (String::new(), true));
    assert_eq!(grep(&["-oE", "a+"], "a\0a\n").0, "a\n");
    // `-w` tests the bytes around a match as they are: ` x` has `b`
    // before it.
    assert_eq!(grep(&["-owE", "ab| x"], "ab x\n").0, "ab\n");
    // Of several patterns, toybox keeps the one whose match lies ahead,
    // found seeing the space before `foo`.
    assert_eq!(
        grep(&["-oE", "-e", "[0-9]+: ", "-e", r"\<[a-z]+"], "12: foo\n").0,
        "12: \nfoo\n"
    );
    // Until a match is replaced, an empty match after a match is searched
    // for again where it was found, and then counts: the second match of
    // `x*` in `abc` is the empty one at its start again. And `p` prints
    // where the expression matched, replaced or not.
    assert_eq!(sed_run(&["s/x*/-/2"], "abc\n"), "-abc\n");
    assert_eq!(sed_run(&["-E", r"s/\<|b/X/3"], "ab ab\n"), "ab Xab\n");
    assert_eq!(sed_run(&["-n", "s/a/X/2p"], "a\n"), "a\n");
}

/// Under `-o` a line is selected where toybox's loop prints a piece or
/// stops at an empty match, not wherever the expression matches; `-vo`
/// prints the text between matches. Worked out from toybox's loop in
/// `grep.c`; the `-vo` case is toybox's own test (`tests/grep.test`).
/// GNU grep selects `ab` for `-o 'x*'` and prints nothing for `-vo`.
#[test]
fn only_matching_selects_lines_as_toybox_does() {
    // Each search finds the empty match where it starts, which is passed
    // over: nothing printed, nothing selected.
    assert_eq!(grep(&["-o", "x*"], "ab\n"), (String::new(), false));
    // An empty line matches `x*` where its search starts, at its end.
    assert_eq!(grep(&["-co", "x*"], "ab\n\nb\n").0, "1\n");
    // `b*` is empty before `a`, then `b` is printed.
    assert_eq!(grep(&["-lo", "b*"], "ab\n").0, "(standard input)\n");
    assert_eq!(
        grep(&["-vo", "one"], "onetwoonethreeone\n"),
        ("two\nthree\n".to_owned(), true)
    );
    assert_eq!(grep(&["-vo", "[0-9]"], "12\n"), (String::new(), false));
    assert_eq!(grep(&["-cvo", "[0-9]"], "12\na1b\n\n").0, "2\n");
    // After the gap ` `, the search starts at `ab` blind, where `\<a`
    // does not match, so `a` is a gap too.
    assert_eq!(grep(&["-voE", r"\<a|b"], "ab ab\n").0, " \na\n");
}

/// A match's groups are split as bionic's `regexec` splits them (see
/// `dissect`), not as GNU sed's backtracking does: `(a|ab)(b*)` on `ab`
/// holds `ab` and nothing, where GNU sed has `a` and `b`.
#[test]
fn sed_groups_are_split_as_the_phone_splits_them() {
    assert_eq!(
        sed_run(&["-E", r"s/(a|ab)(b*)/[\1|\2]/"], "ab\n"),
        "[ab|]\n"
    );
    assert_eq!(
        sed_run(&["-E", r"s/(a|ab)(b$)?/[\1|\2]/"], "ab\n"),
        "[ab|]\n"
    );
    // The last iteration, each taken as long as it can be: `aaa`.
    assert_eq!(sed_run(&["-E", r"s/(aa|aaa)+/[\1]/"], "aaaa\n"), "[aaa]\n");
    // A group of an alternative the last iteration did not take is
    // replaced by nothing.
    assert_eq!(sed_run(&["-E", r"s/((a)|b)+/[\1|\2]/"], "ab\n"), "[b|]\n");
    assert_eq!(sed_run(&[r"s/x\(a\)*/[\1]/g"], "xaa x\n"), "[a] []\n");
}

/// As deep an expression as the regex crate takes to match, it takes to
/// split the match: the deepest `((…(a)*…)*)*` grep accepts, sed splits.
/// Its outer group holds its last iteration, the empty text after the
/// first took `aa` (as bionic gives `((a)*)*` on `aa`: 2,2).
#[test]
fn sed_splits_as_deep_an_expression_as_it_matches() {
    let nested = |depth| format!("{}a{}", "(".repeat(depth), ")*".repeat(depth));
    let deepest = (1..400)
        .take_while(|&depth| Grep::new(&["-E", &nested(depth)]).is_ok())
        .last()
        .unwrap();
    assert!((10..399).contains(&deepest), "{deepest}");
    let script = format!(r"s/{}/[\1]/", nested(deepest));
    assert_eq!(sed_run(&["-E", &script], "aa\n"), "[]\n");
}

/// A command line of nested parentheses is refused, not parsed until the
/// stack overflows (it took down the virtual phone at 30,000 levels).
#[test]
fn deeply_nested_groups_are_refused() {
    let nested = format!("{}a{}", "(".repeat(100_000), ")".repeat(100_000));
    let refused = Grep::new(&["-E", &nested]).err().unwrap();
    assert!(
        refused.ends_with("': parentheses nested deeper than the virtual phone parses"),
        "{}",
        &refused[refused.len() - 80..]
    );
    for script in [format!("s/{nested}/x/"), format!("/{nested}/p")] {
        assert!(Sed::new(&["-E", &script]).is_err());
    }
}

/// A replacement that names a group the expression does not open ends
/// sed at the first match it replaces, with toybox's words; what was
/// written before stays written. Lines that do not match never need it.
#[test]
fn sed_stops_at_a_group_the_expression_does_not_open() {
    let (sed, _) = Sed::new(&[r"s/b\(c\)/\2/"]).unwrap();
    let mut out = Vec::new();
    assert_eq!(sed.run(b"a\nbc\nd\n", &mut out), Err(r"no s//\2/".into()));
    assert_eq!(out, b"a\n");
    assert_eq!(sed_run(&[r"s/b/\1/"], "a\n"), "a\n");
}

/// The regex crate's groups that open with `(?` are not POSIX; a phone's
/// regcomp refuses them (a `?` with nothing to repeat). Among them `(?x)`,
/// whose comment would swallow the parenthesis the tools close a wrapped
/// expression with. In basic syntax `\(\?i\)` is no GNU `(?i)` but a
/// group of the text `?i`.
#[test]
fn groups_that_are_not_posix_are_refused() {
    for pattern in ["(?i)A", "(?:a)", "(?P<n>a)", "(?x)a # c", "b|(?s:.)"] {
        assert_eq!(
            Grep::new(&["-E", pattern]).err(),
            Some(format!(
                "bad regex '{pattern}': repetition-operator operand invalid"
            )),
            "{pattern}"
        );
        for args in [&["-E", "-x", pattern], &["-E", "-w", pattern]] {
            assert!(Grep::new(args).is_err(), "{args:?}");
        }
        let script = format!("s/{pattern}/x/");
        assert_eq!(
            Sed::new(&["-E", &script]).err(),
            Some(format!(
                "bad regex '{pattern}': repetition-operator operand invalid"
            ))
        );
        let address = format!("/{pattern}/p");
        assert!(Sed::new(&["-E", &address]).is_err(), "{address}");
    }
    assert_eq!(grep(&[r"\(\?i\)a"], "?ia\nia\n").0, "?ia\n");
    assert_eq!(sed_run(&[r"s/\(\?i\)a/x/"], "?ia\n"), "x\n");
    // What only looks like one: an optional parenthesis, a class, an
    // escaped backslash before a group.
    assert_eq!(grep(&["-oE", r"\(?a"], "(a a\n").0, "(a\na\n");
    assert_eq!(grep(&["-oE", "[(?]+"], "a(?b\n").0, "(?\n");
    assert_eq!(grep(&["-o", "(?a"], "(?a\n").0, "(?a\n");
    assert_eq!(sed_run(&["-E", r"s/(a)?b/[\1]/"], "ab\n"), "[a]\n");
}

/// A small extended expression over a and b: letters, concatenation,
/// alternation, star and `?`.
fn expression() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let leaf = prop_oneof![Just("a".to_owned()), Just("b".to_owned())];
    leaf.prop_recursive(4, 12, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(x, y)| format!("{x}{y}")),
            (inner.clone(), inner.clone()).prop_map(|(x, y)| format!("({x}|{y})")),
            inner.clone().prop_map(|x| format!("({x})*")),
            inner.prop_map(|x| format!("({x})?")),
        ]
    })
}

/// [`expression`]s with the anchors `^` and `$` among them, one or two
/// alternatives of up to four parts. No word boundaries: after a match,
/// toybox's searches see no text before them, where GNU's see the line
/// (`searches_after_a_match_see_no_text_before_them`).
fn anchored_expression() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let part = prop_oneof![
        3 => expression(),
        1 => Just("^".to_owned()),
        1 => Just("$".to_owned()),
    ];
    let sequence = prop::collection::vec(part, 1..=4).prop_map(|parts| parts.concat());
    prop::collection::vec(sequence, 1..=2).prop_map(|alternatives| alternatives.join("|"))
}

/// A GNU tool's output for `text` on its stdin, in the C locale.
fn gnu(tool: &str, args: &[&str], text: &str) -> String {
    use std::io::Write as _;
    let mut child = std::process::Command::new(tool)
        .args(args)
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{tool}, the reference, cannot run: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(500))]
    /// GNU grep and sed match as POSIX asks too (leftmost-longest), so
    /// they are the reference for which text is matched: `grep -oE` and
    /// `sed -E s/RE/[&]/g` print the same here as there. Without word
    /// boundaries their loops and toybox's agree: the only empty match
    /// that is not where a search starts is `$`'s, and nothing follows it.
    #[test]
    fn matched_text_agrees_with_gnu_grep_and_sed(re in anchored_expression(), line in "[abc ]{0,8}") {
        let text = format!("{line}\n");
        proptest::prop_assert_eq!(grep(&["-oE", &re], &text).0, gnu("grep", &["-oE", &re], &text));
        let script = format!("s/{re}/[&]/g");
        proptest::prop_assert_eq!(
            sed_run(&["-E", &script], &text),
            gnu("sed", &["-E", &script], &text)
        );
    }
}

/// An extended expression over `a`, `b` and a space, with anchors and
/// word boundaries, as a tree that [`ends`] matches by brute force.
#[derive(Debug, Clone)]
enum Tree {
    Byte(u8),
    Any,
    Bol,
    Eol,
    Bow,
    Eow,
    Cat(Box<Tree>, Box<Tree>),
    Alt(Box<Tree>, Box<Tree>),
    Star(Box<Tree>),
    Quest(Box<Tree>),
}

impl Tree {
    fn render(&self) -> String {
        match self {
            Tree::Byte(b) => char::from(*b).to_string(),
            Tree::Any => ".".into(),
            Tree::Bol => "^".into(),
            Tree::Eol => "$".into(),
            Tree::Bow => r"\<".into(),
            Tree::Eow => r"\>".into(),
            Tree::Cat(x, y) => format!("{}{}", x.render(), y.render()),
            Tree::Alt(x, y) => format!("({}|{})", x.render(), y.render()),
            Tree::Star(x) => format!("({})*", x.render()),
            Tree::Quest(x) => format!("({})?", x.render()),
        }
    }
}

/// Trees whose assertions are never repeated: bionic's engine steps an
/// assertion once per position, where a brute force would loop on it.
fn tree() -> impl proptest::strategy::Strategy<Value = Tree> {
    use proptest::prelude::*;
    let byte = prop_oneof![Just(b'a'), Just(b'b'), Just(b' ')].prop_map(Tree::Byte);
    let plain = prop_oneof![byte, Just(Tree::Any)].prop_recursive(3, 8, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(x, y)| Tree::Cat(x.into(), y.into())),
            (inner.clone(), inner.clone()).prop_map(|(x, y)| Tree::Alt(x.into(), y.into())),
            inner.clone().prop_map(|x| Tree::Star(x.into())),
            inner.prop_map(|x| Tree::Quest(x.into())),
        ]
    });
    let part = prop_oneof![
        3 => plain,
        1 => Just(Tree::Bol),
        1 => Just(Tree::Eol),
        2 => Just(Tree::Bow),
        2 => Just(Tree::Eow),
    ];
    let sequence = prop::collection::vec(part, 1..=4).prop_map(|parts| {
        parts
            .into_iter()
            .reduce(|x, y| Tree::Cat(x.into(), y.into()))
            .unwrap()
    });
    prop::collection::vec(sequence, 1..=2).prop_map(|branches| {
        branches
            .into_iter()
            .reduce(|x, y| Tree::Alt(x.into(), y.into()))
            .unwrap()
    })
}

/// Every end of a match of `tree` from `at` in `text`, POSIX's assertions
/// read off the text around each position, except that none holds at a
/// `blind` position (engine.c's `walk` under `REG_NOTBOL`).
fn ends(
    tree: &Tree,
    text: &[u8],
    at: usize,
    blind: Option<usize>,
) -> std::collections::BTreeSet<usize> {
    let word = |i: usize| {
        text.get(i)
            .is_some_and(|&b| b.is_ascii_alphanumeric() || b == b'_')
    };
    let seen = blind != Some(at);
    let here = |holds: bool| {
        if holds {
            std::collections::BTreeSet::from([at])
        } else {
            std::collections::BTreeSet::new()
        }
    };
    match tree {
        Tree::Byte(b) => here(text.get(at) == Some(b))
            .into_iter()
            .map(|i| i + 1)
            .collect(),
        Tree::Any => here(at < text.len()).into_iter().map(|i| i + 1).collect(),
        Tree::Bol => here(seen && at == 0),
        Tree::Eol => here(at == text.len()),
        Tree::Bow => here(seen && (at == 0 || !word(at - 1)) && word(at)),
        Tree::Eow => here(seen && at > 0 && word(at - 1) && !word(at)),
        Tree::Cat(x, y) => ends(x, text, at, blind)
            .into_iter()
            .flat_map(|middle| ends(y, text, middle, blind))
            .collect(),
        Tree::Alt(x, y) => &ends(x, text, at, blind) | &ends(y, text, at, blind),
        Tree::Quest(x) => &ends(x, text, at, blind) | &here(true),
        Tree::Star(x) => {
            let mut all = here(true);
            let mut todo = vec![at];
            while let Some(from) = todo.pop() {
                for end in ends(x, text, from, blind) {
                    if all.insert(end) {
                        todo.push(end);
                    }
                }
            }
            all
        }
    }
}

/// The leftmost-longest match of `tree` at or after `at`.
fn leftmost_longest(
    tree: &Tree,
    text: &[u8],
    at: usize,
    blind: Option<usize>,
) -> Option<std::ops::Range<usize>> {
    (at..=text.len()).find_map(|start| ends(tree, text, start, blind).last().map(|&end| start..end))
}

/// `sed -E 's/RE/[&]/g'` (`s/RE/[&]/N` for `Some(N)`) over one line, as
/// toybox's loop in `sed.c` runs `regexec`: from the end of each match,
/// `REG_NOTBOL` after the first search; an empty match found by the search
/// after a match passed over by one byte, but only once a match has been
/// replaced (before, toybox has no new line to copy the byte to, and
/// searches again from where it was).
fn toybox_sed(tree: &Tree, text: &[u8], nth: Option<usize>) -> String {
    let (mut out, mut rest, mut notbol, mut zmatch) = (Vec::new(), 0, false, true);
    let (mut count, mut replaced) = (0, false);
    while let Some(found) = leftmost_longest(tree, text, rest, notbol.then_some(rest)) {
        notbol = true;
        if found.is_empty() && !zmatch {
            if rest == text.len() {
                break;
            }
            if replaced {
                out.push(text[rest]);
                rest += 1;
            }
            zmatch = true;
            continue;
        }
        zmatch = false;
        count += 1;
        if nth.is_some_and(|n| n != count) {
            out.extend_from_slice(&text[rest..found.end]);
            rest = found.end;
            continue;
        }
        replaced = true;
        out.extend_from_slice(&text[rest..found.start]);
        out.extend_from_slice(format!("[{}]", s(&text[found.clone()])).as_bytes());
        rest = found.end;
        if nth.is_some() {
            break;
        }
    }
    out.extend_from_slice(&text[rest..]);
    String::from_utf8(out).unwrap() + "\n"
}

/// `grep -oE RE` (`-voE` if `invert`) over one line, as toybox's loop
/// in `grep.c` runs `regexec`: from where the last search's piece ends,
/// `REG_NOTBOL` but at the line's start, one byte on from an empty match
/// where the search started. `-o` prints each match and stops after an
/// empty one elsewhere; `-vo` prints the text before each match, or the
/// rest of the line where none is left, and passes over a match where
/// the search started. Returns what it prints and whether the line was
/// selected (toybox's `matched`).
fn toybox_grep_o(tree: &Tree, text: &[u8], invert: bool) -> (String, bool) {
    let (mut out, mut start, mut matched) = (String::new(), 0, false);
    loop {
        let found = leftmost_longest(tree, text, start, (start > 0).then_some(start));
        let (piece, moved) = match found {
            Some(found) if found.end == start && start < text.len() => (None, 1),
            Some(found) if invert && found.start == start => (None, found.end - start),
            Some(found) if invert => (Some(start..found.start), found.start - start),
            None if invert => (Some(start..text.len()), text.len() - start),
            None => break,
            Some(found) => (Some(found.clone()), found.end - start),
        };
        if let Some(piece) = piece {
            matched = true;
            if !piece.is_empty() {
                out += &format!("{}\n", s(&text[piece.clone()]));
            }
            if piece.is_empty() {
                break;
            }
        }
        start += moved;
        if moved == 0 || start >= text.len() {
            break;
        }
    }
    (out, matched)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(500))]
    /// `sed s///g`, `grep -o` and `grep -vo` with word boundaries and
    /// anchors print what toybox's loops print over a brute-force matcher
    /// of the same expression, and grep selects the lines they select.
    #[test]
    fn matches_after_a_match_agree_with_a_brute_force(
        tree in tree(),
        line in "[ab _]{0,8}",
        nth in proptest::option::of(1..4usize),
    ) {
        let re = tree.render();
        let text = format!("{line}\n");
        proptest::prop_assert_eq!(grep(&["-oE", &re], &text), toybox_grep_o(&tree, line.as_bytes(), false));
        proptest::prop_assert_eq!(grep(&["-voE", &re], &text), toybox_grep_o(&tree, line.as_bytes(), true));
        let flag = nth.map_or("g".to_owned(), |n| n.to_string());
        proptest::prop_assert_eq!(
            sed_run(&["-E", &format!("s/{re}/[&]/{flag}")], &text),
            toybox_sed(&tree, line.as_bytes(), nth)
        );
    }
}

/// A sed's commands times its input's bytes are bounded: 2^31. Eight
/// commands over 2^28 bytes (lines of 63 `a`s) are exactly that much work
/// and run; nine are refused before any line is looked at, as is a
/// script of a million commands over 4 KiB (2^20 × 2^12 = 2^32).
#[test]
fn sed_refuses_more_work_than_the_phone_does() {
    let data = [[b'a'; 63].as_slice(), b"\n"].concat().repeat(1 << 22);
    assert_eq!(data.len(), 1 << 28);
    let script = |n: usize| vec!["s/b/c/p"; n].join(";");
    let (eight, _) = Sed::new(&["-n", &script(8)]).unwrap();
    assert_eq!(sed_output(&eight, &data), Ok(Vec::new()));
    let (nine, _) = Sed::new(&["-n", &script(9)]).unwrap();
    assert_eq!(
        sed_output(&nine, &data),
        Err(
            "9 commands over 268435456 bytes are more than the virtual phone's \
             2147483648 command-bytes of work for one sed"
                .into()
        )
    );
    let million = vec!["p"; 1 << 20].join(";");
    let (many, _) = Sed::new(&["-n", &million]).unwrap();
    assert!(sed_output(&many, &[b'a'; 4096]).is_err());
    // The work grows with the line: eleven `s/x/xxxx/g` make `x` 4^11 =
    // 4 MiB long, and 600 more commands would look at 600 times that,
    // 2.5 GB, past the bound though the input is two bytes.
    let grow = vec!["s/x/xxxx/g"; 11];
    let scan = vec!["s/y/z/"; 600];
    let script = [grow, scan].concat().join(";");
    let (growing, _) = Sed::new(&["-n", &script]).unwrap();
    assert_eq!(
        sed_output(&growing, b"x\n"),
        Err(
            "611 commands over 2 bytes are more than the virtual phone's \
             2147483648 command-bytes of work for one sed"
                .into()
        )
    );
}

fn printf_text(format: &str, args: &[&str]) -> String {
    let (out, error) = printf(format, args);
    assert_eq!(error, None, "{format}");
    String::from_utf8(out).unwrap()
}

#[test]
fn printf_formats_as_c_does() {
    assert_eq!(printf_text("%s-%d\\n", &["a", "7"]), "a-7\n");
    assert_eq!(
        printf_text("%5s|%-5s|%05d|%x|%o|%%", &["ab", "cd", "-42", "255", "8"]),
        "   ab|cd   |-0042|ff|10|%"
    );
    assert_eq!(printf_text("%s\\n", &["a", "b", "c"]), "a\nb\nc\n");
    assert_eq!(printf_text("%.2f %.3s", &["3.14159", "abcdef"]), "3.14 abc");
    assert_eq!(printf_text("%b", &["x\\ty"]), "x\ty");
    assert_eq!(printf_text("\\101\\x42%c", &["Cat"]), "ABC");
    assert_eq!(printf_text("%d %d", &["0x10", "'A"]), "16 65");
    assert_eq!(printf_text("no args\\n", &[]), "no args\n");
    let (out, error) = printf("%d\\n", &["x"]);
    assert_eq!(s(&out), "0\n");
    assert_eq!(error.as_deref(), Some("invalid number 'x'"));
}

#[test]
fn seq_counts_as_toybox_does() {
    assert_eq!(s(&seq(&["3"]).unwrap()), "1\n2\n3\n");
    assert_eq!(s(&seq(&["2", "4"]).unwrap()), "2\n3\n4\n");
    assert_eq!(s(&seq(&["10", "-3", "4"]).unwrap()), "10\n7\n4\n");
    assert_eq!(s(&seq(&["-s", ",", "3"]).unwrap()), "1,2,3\n");
    assert_eq!(s(&seq(&["-w", "8", "10"]).unwrap()), "08\n09\n10\n");
    assert_eq!(s(&seq(&["0", "0.5", "1"]).unwrap()), "0.0\n0.5\n1.0\n");
    assert_eq!(s(&seq(&["5", "1"]).unwrap()), "");
    assert!(seq(&["1", "0", "2"]).is_err());
    assert!(seq(&["x"]).is_err());
}

fn cut_args(args: &[&str], data: &[u8]) -> Result<Vec<u8>, String> {
    let (plain, valued) = CUT_OPTIONS;
    cut(&Opts::parse(args, plain, valued)?, data)
}

/// Requests for more than the virtual phone prints fail with a message
/// rather than taking the host's memory or running forever: a printf
/// field of a trillion, or one whose width overflows a counter; `seq` of
/// a hundred billion lines, or up to infinity, or by a NaN step; `tr` sets
/// of sixteen whole Unicode ranges. One whole range is still a set, and
/// `tr` still maps by the last position of a repeated character.
#[test]
fn output_beyond_the_phones_budget_fails_in_words() {
    let too_large = |what: &str| format!("{what} is over the virtual phone's 16777216 bytes");
    for width in [
        "%1000000000000s",
        "%.1000000000000f",
        "%99999999999999999999999d",
    ] {
        let (out, error) = printf(&format!("ab{width}"), &["1"]);
        assert_eq!((s(&out), error), ("ab", Some(too_large("a field"))));
    }
    // A format of 1,000 bytes (length modifiers) that prints nothing, read
    // for each of 70,000 arguments: 70,000,000 bytes read, past four times
    // 16 MiB (67,108,864).
    let format = format!("%{}s", "l".repeat(998));
    let args = vec![""; 70_000];
    let (out, error) = printf(&format, &args);
    assert_eq!(
        (s(&out), error),
        (
            "",
            Some(too_large("the format read once per round of arguments"))
        )
    );
    let args = vec!["xy"; 9_000_000];
    let (out, error) = printf("%s", &args);
    assert_eq!(error, Some(too_large("the output")));
    assert!(out.len() <= MAX_OUTPUT + 2);
    assert_eq!(seq(&["100000000000"]), Err(too_large("the output")));
    for args in [
        &["inf"][..],
        &["nan"],
        &["1", "nan", "5"],
        &["-inf", "1", "3"],
    ] {
        let err = seq(args).unwrap_err();
        assert!(err.starts_with("invalid number '"), "{args:?}: {err}");
    }
    let (sed, _) = Sed::new(&[&"s/x/xxxx/g;".repeat(20)]).unwrap();
    assert_eq!(sed_output(&sed, b"x\n"), Err(too_large("a line")));
    // A line of a million spaces: a hundred copies of each space is over
    // 16 MiB in one substitution, a hundred prints of it in the output.
    let spaces = [vec![b' '; 1_000_000], b"\n".to_vec()].concat();
    let (sed, _) = Sed::new(&[&format!("s/ /{}/g", "&".repeat(100))]).unwrap();
    assert_eq!(sed_output(&sed, &spaces), Err(too_large("a line")));
    let (sed, _) = Sed::new(&["-n", &"p;".repeat(100)]).unwrap();
    assert_eq!(sed_output(&sed, &spaces), Err(too_large("the output")));
    // `-o` of every character, each after the file's name: 2,000,000
    // records of 13 bytes ("n123456789:a\n").
    let (g, _) = Grep::new(&["-H", "-o", "."]).unwrap();
    let every = [vec![b'a'; 2_000_000], b"\n".to_vec()].concat();
    assert_eq!(
        g.run(&[("n123456789".into(), every)]),
        Err(too_large("the output"))
    );
    let every = "\u{1}-\u{10FFFF}";
    assert_eq!(s(&tr(&["-d", every], b"abc\0").unwrap()), "\0");
    assert_eq!(
        tr(&["-d", &every.repeat(16)], b"abc"),
        Err(too_large(&format!("the set {:?}", every.repeat(16))))
    );
    assert_eq!(s(&tr(&["aba", "xyz"], b"ab").unwrap()), "zy");
}
