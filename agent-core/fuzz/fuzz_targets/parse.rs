//! Fuzzes the BTL answer parser and the rewards on arbitrary text.
//!
//! Beyond "never panics", every input is checked against the invariants the
//! parser and the rewards promise:
//! - strict and tolerant parses agree: a strict success is a tolerant success
//!   with no tolerance and the same output, and a tolerant success with no
//!   tolerance is a strict success;
//! - round trip: a tolerant success whose output renders re-parses strictly
//!   to the same output, and that canonical text gets the released format
//!   reward (unless the think text holds a `<link>` the released pattern
//!   would pick up first, as the official plugin does);
//! - every reward term, and the weighted total, lies in [0, 1] in both modes.
//!
//! Inputs that are not UTF-8 are read lossily, so every input is exercised.

#![no_main]

use agent_core::protocol::{ParseMode, Parsed, parse, render};
use agent_core::reward::{RewardMode, Weights, score};
use agent_core::sample::{Sample, parse_samples};
use libfuzzer_sys::fuzz_target;
use std::sync::LazyLock;

const NAVIGATION: &str =
    include_str!("../../../tests/data/btl-ui-examples/navigation_meta_format.json");

static SAMPLE: LazyLock<Sample> = LazyLock::new(|| {
    parse_samples(NAVIGATION)
        .expect("the official navigation example parses")
        .remove(0)
});

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    check_modes_agree(&text);
    check_round_trip(&text);
    check_rewards(&text);
});

fn check_modes_agree(text: &str) {
    let strict = parse(text, ParseMode::Strict);
    let tolerant = parse(text, ParseMode::Tolerant);
    match (&strict, &tolerant) {
        (Ok(s), Ok(t)) => {
            assert!(
                s.tolerances.is_empty(),
                "strict success with tolerances: {:?}",
                s.tolerances
            );
            assert!(
                t.tolerances.is_empty(),
                "strict success but the tolerant parse forgave {:?}",
                t.tolerances
            );
            assert_eq!(s.output, t.output, "strict and tolerant outputs differ");
        }
        (Ok(s), Err(e)) => panic!(
            "strict accepted ({:?}) but tolerant rejected: {e}",
            s.output
        ),
        (Err(e), Ok(t)) => assert!(
            !t.tolerances.is_empty(),
            "tolerant accepted with no tolerance but strict rejected: {e}"
        ),
        (Err(_), Err(_)) => {}
    }
}

fn check_round_trip(text: &str) {
    let Ok(Parsed { output, .. }) = parse(text, ParseMode::Tolerant) else {
        return;
    };
    let Ok(canonical) = render(&output) else {
        return;
    };
    let again = match parse(&canonical, ParseMode::Strict) {
        Ok(again) => again,
        Err(e) => panic!("the rendered text does not parse strictly: {e}\nrendered: {canonical:?}"),
    };
    assert_eq!(
        again.output, output,
        "round trip changed the output\nrendered: {canonical:?}"
    );
    if !output.think.contains("<link>") {
        let released = score(
            &SAMPLE,
            &canonical,
            RewardMode::Released,
            Weights::default(),
        );
        assert_eq!(
            released.format, 1.0,
            "canonical text gets released format reward {}\nrendered: {canonical:?}",
            released.format
        );
    }
}

fn check_rewards(text: &str) {
    for mode in [RewardMode::Released, RewardMode::Paper] {
        let r = score(&SAMPLE, text, mode, Weights::default());
        for (term, value) in [("format", r.format), ("blink", r.blink), ("link", r.link)] {
            assert!(
                (0.0..=1.0).contains(&value),
                "{mode:?} {term} reward {value} is outside [0, 1]"
            );
        }
        // The default weights sum to 1, so the total is a convex combination.
        assert!(
            (-1e-12..=1.0 + 1e-12).contains(&r.total),
            "{mode:?} total reward {} is outside [0, 1]",
            r.total
        );
    }
}
