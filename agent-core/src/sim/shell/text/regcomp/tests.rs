//! The phone's `regcomp` grammar, case by case, worked out by hand from
//! bionic's `regcomp.c` (NetBSD's, without `REGEX_GNU_EXTENSIONS`): what it
//! refuses, with which of `regerror`'s words, and what what it accepts
//! matches.

use super::*;
use RegcompError::*;

/// The first match of `pattern` in `text` (leftmost-first is enough for
/// these expressions, which have one way of matching at each place).
fn first(pattern: &str, extended: bool, text: &str) -> Option<String> {
    let syntax = translate(pattern, extended)
        .unwrap_or_else(|e| panic!("{pattern} (extended: {extended}) refused: {e}"));
    let re = regex::Regex::new(&syntax).unwrap_or_else(|e| panic!("{syntax}: {e}"));
    re.find(text).map(|m| m.as_str().to_owned())
}

#[test]
fn basic_expressions_read_escaped_operators_as_characters() {
    let basic = |pattern, text| first(pattern, false, text);
    // GNU's `\?`, `\+` and `\|` are not bionic's: plain characters.
    assert_eq!(basic(r"a\?", "a a?"), Some("a?".into()));
    assert_eq!(basic(r"a\+", "aa a+"), Some("a+".into()));
    assert_eq!(basic(r"a\|b", "a b a|b"), Some("a|b".into()));
    // The bare ones are characters too; `\(`, `\)`, `\{`, `\}` are the
    // operators.
    assert_eq!(
        basic("a+b?(c)|d{1}", "a+b?(c)|d{1}"),
        Some("a+b?(c)|d{1}".into())
    );
    assert_eq!(basic(r"\(ab\)\{2\}", "ab abab"), Some("abab".into()));
    assert_eq!(basic(r"x\{2,\}", "x xxx"), Some("xxx".into()));
    // `^` is an anchor first, `$` last; elsewhere both are characters.
    assert_eq!(basic("^a", "ba"), None);
    assert_eq!(basic("a^b", "a^b"), Some("a^b".into()));
    assert_eq!(basic("a$b", "a$b"), Some("a$b".into()));
    assert_eq!(basic("a$", "a$ a"), Some("a".into()));
    assert_eq!(basic(r"\(a$\)", "a$ a"), Some("a".into()));
    assert_eq!(basic(r"\(^a\)", "ba"), None);
    assert_eq!(basic("a$*", "a$$"), Some("a$$".into()));
    // A star first in its expression is a star.
    assert_eq!(basic("*a", "x*a"), Some("*a".into()));
    assert_eq!(basic("^*a", "*a"), Some("*a".into()));
    assert_eq!(basic(r"\(*a\)", "*a"), Some("*a".into()));
    // An escaped character that is neither a letter nor an operator is
    // itself; words start and end at `\<` and `\>`.
    assert_eq!(
        basic(r"\.\*\[\]\/\$\^\\", r".*[]/$^\"),
        Some(r".*[]/$^\".into())
    );
    assert_eq!(basic(r"\<ab\>", "cab ab"), Some("ab".into()));
    assert_eq!(basic(r"\(\)x", "x"), Some("x".into()));
}

#[test]
fn extended_expressions_take_posix_operators_only() {
    let extended = |pattern, text| first(pattern, true, text);
    assert_eq!(extended("a|b+", "cbb"), Some("bb".into()));
    assert_eq!(extended("(ab){2}c?", "ababc"), Some("ababc".into()));
    assert_eq!(extended("x{2,}", "x xxx"), Some("xxx".into()));
    assert_eq!(extended("x{0}y", "xy"), Some("y".into()));
    assert_eq!(extended("()a", "a"), Some("a".into()));
    assert_eq!(extended(r"\<b", "ab b"), Some("b".into()));
    assert_eq!(extended(r"a\>", "ab a"), Some("a".into()));
    // An escaped digit is the digit: no back-references in this syntax.
    assert_eq!(extended(r"(a)\1", "aa a1"), Some("a1".into()));
    // `{` repeats only before a digit or a comma.
    assert_eq!(extended(r"a\{", "a{"), Some("a{".into()));
    assert_eq!(extended("a$b", "a$b"), None);
    assert_eq!(extended(r"[[:<:]]b[[:>:]]", "ab b"), Some("b".into()));
}

#[test]
fn bracket_expressions_take_a_backslash_as_itself() {
    let extended = |pattern, text| first(pattern, true, text);
    assert_eq!(extended(r"[\w]+", r"xx\w"), Some(r"\w".into()));
    assert_eq!(extended("[]a]+", "x]a]"), Some("]a]".into()));
    assert_eq!(extended("[^]a]+", "]ax"), Some("x".into()));
    assert_eq!(extended("[-a]+", "x-a"), Some("-a".into()));
    assert_eq!(extended("[a-]+", "x-a"), Some("-a".into()));
    assert_eq!(extended("[!--]+", "a,-!"), Some(",-!".into()));
    assert_eq!(extended("[a-c]+", "dcab"), Some("cab".into()));
    assert_eq!(extended("[[:digit:]x]+", "a1x2"), Some("1x2".into()));
    assert_eq!(extended("[[.-.]a]+", "b-a"), Some("-a".into()));
    assert_eq!(extended("[[=a=]]", "ba"), Some("a".into()));
    // What the regex crate reads as set operations or nested classes is
    // plain here.
    assert_eq!(extended("[a&&b]+", "&ab"), Some("&ab".into()));
    assert_eq!(extended("[a[b]+", "[ab"), Some("[ab".into()));
    assert_eq!(extended("[~^]+", "a^~"), Some("^~".into()));
}

#[test]
fn what_regcomp_refuses_is_refused_with_its_words() {
    let cases: &[(&str, bool, RegcompError)] = &[
        // Escapes: at the end, or of a letter (GNU's \w, \b, \s, \n).
        (r"a\", true, Escape),
        (r"a\", false, Escape),
        (r"\w", true, Escape),
        (r"\b", false, Escape),
        (r"\n", false, Escape),
        (r"\é", true, Escape),
        // Repetitions with nothing to repeat, or a second one.
        ("*a", true, Repetition),
        ("a|*b", true, Repetition),
        ("(?i)a", true, Repetition),
        ("^*", true, Repetition),
        ("a**", true, Repetition),
        ("a+?", true, Repetition),
        ("a{2}{3}", true, Repetition),
        ("{1}", true, Repetition),
        ("a{x", true, Repetition),
        ("a**", false, Repetition),
        (r"\{1\}", false, Repetition),
        (r"a\{1\}*", false, Repetition),
        // Parentheses.
        ("(a", true, Parentheses),
        ("a)", true, Parentheses),
        ("(", true, Parentheses),
        (r"\(a", false, Parentheses),
        (r"a\)", false, Parentheses),
        // Brackets, braces and counts.
        ("[a", true, Brackets),
        ("[]", true, Brackets),
        ("[[:alpha:]", true, Brackets),
        ("a{1", true, Braces),
        ("a{1x}", true, Count),
        ("a{,2}", true, Count),
        ("a{3,2}", true, Count),
        ("a{256}", true, Count),
        (r"a\{1", false, Braces),
        (r"a\{2,1\}", false, Count),
        (r"x\{,2\}", false, Count),
        // Ranges, classes, collating elements.
        ("[z-a]", true, Range),
        ("[a-c-e]", true, Range),
        ("[[:letter:]]", true, Class),
        ("[[:alpha]]", true, Class),
        ("[[.ab.]]", true, Collating),
        ("[[=]=]]", true, Collating),
        // Empty alternatives.
        ("a||b", true, Empty),
        ("|a", true, Empty),
        ("a|", true, Empty),
        ("(a|)", true, Empty),
        // Alternatives of operands repeated no times, which compile to
        // nothing; `x{0}y` keeps the `y`.
        ("a{0}", true, Empty),
        ("(a{0})", true, Empty),
        ("b|a{0}", true, Empty),
        ("a{0}b{0}", true, Empty),
        (r"a\{0\}", false, Empty),
        (r"\(a\{0\}\)", false, Empty),
        // Nesting past the bound, which a command line reaches.
        (&"(".repeat(100_000), true, Nesting),
        (&r"\(".repeat(100_000), false, Nesting),
        // Back-references.
        (r"\1\(a\)", false, BackReference),
        (r"\(a\1\)", false, BackReference),
        (r"\(a\)\1", false, BackReferenceUnsupported),
    ];
    for &(pattern, extended, error) in cases {
        assert_eq!(
            translate(pattern, extended),
            Err(error),
            "{pattern} (extended: {extended})"
        );
    }
    assert_eq!(Escape.to_string(), r"trailing backslash (\)");
    assert_eq!(
        Repetition.to_string(),
        "repetition-operator operand invalid"
    );
}

#[test]
fn the_empty_pattern_matches_everywhere_as_toybox_compiles_it() {
    assert_eq!(first("", false, "x"), Some(String::new()));
    assert_eq!(first("", true, ""), Some(String::new()));
}

proptest::proptest! {
    /// Whatever the phone accepts becomes an expression the regex crate
    /// reads, with one group for each the phone counts.
    #[test]
    fn accepted_expressions_are_valid_regex_syntax(
        pattern in r"[ab()|*+?{}\[\]\\^$.,:=<>1-3-]{0,12}",
        extended: bool,
    ) {
        if let Ok(syntax) = translate(&pattern, extended) {
            let parsed = regex_syntax::Parser::new().parse(&syntax);
            proptest::prop_assert!(parsed.is_ok(), "{} → {}: {:?}", pattern, syntax, parsed);
            let opened = if extended {
                pattern.matches('(').count() - pattern.matches(r"\(").count()
            } else {
                pattern.matches(r"\(").count()
            };
            let groups = regex::Regex::new(&syntax).map(|re| re.captures_len() - 1);
            if !pattern.contains('[') && !pattern.contains(r"\\") {
                proptest::prop_assert_eq!(groups.ok(), Some(opened.max(usize::from(pattern.is_empty()))));
            }
        }
    }
}

/// An extended expression over `a`, `b` and `.` with groups, stars and
/// bounds (the operators both syntaxes have), and the same expression in
/// basic syntax.
fn both_syntaxes() -> impl proptest::strategy::Strategy<Value = (String, String)> {
    use proptest::prelude::*;
    let leaf =
        prop_oneof![Just("a"), Just("b"), Just(".")].prop_map(|c| (c.to_owned(), c.to_owned()));
    leaf.prop_recursive(4, 16, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 2..4).prop_map(|parts| {
                let (extended, basic): (Vec<_>, Vec<_>) = parts.into_iter().unzip();
                (extended.concat(), basic.concat())
            }),
            inner
                .clone()
                .prop_map(|(e, b)| (format!("({e})*"), format!(r"\({b}\)*"))),
            (inner, 0..3u32, 0..3u32).prop_map(|((e, b), m, extra)| {
                // Not `{0,0}`: a group that compiles to nothing is refused.
                let n = (m + extra).max(1);
                (
                    format!("({e}){{{m},{n}}}"),
                    format!(r"\({b}\)\{{{m},{n}\}}"),
                )
            }),
        ]
    })
}

proptest::proptest! {
    /// What both syntaxes can say, they say alike: an extended expression
    /// and its basic spelling become the same expression, anchored or not.
    #[test]
    fn basic_and_extended_spellings_agree((extended, basic) in both_syntaxes(), anchored: bool) {
        let (extended, basic) = match anchored {
            true => (format!("^{extended}$"), format!("^{basic}$")),
            false => (extended, basic),
        };
        let translated = translate(&extended, true);
        proptest::prop_assert!(translated.is_ok(), "{}: {:?}", extended, translated);
        proptest::prop_assert_eq!(translated, translate(&basic, false));
    }
}
