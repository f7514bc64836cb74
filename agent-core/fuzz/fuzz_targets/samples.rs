//! Fuzzes the sample and completion files (`btl score`, `btl-train`): the
//! official JSON sample format and JSONL completions scored against them.
//!
//! The input is the samples text, then a 0xFF byte, then the completions.
//! Beyond "never panics": every completion of parsed files is scored with
//! both reward modes, every score in [0, 1]; the screen a sample's prompt
//! lists (`btl predict` grounds decoding in it), written again as the
//! prompt writer writes it, reads back the same; the task's words a prompt
//! holds (`augment-typed` rewrites them) are slices of it, in order.

#![no_main]

use agent_core::protocol::Profile;
use agent_core::protocol::prompt::{listed_screen, render_screen, task_words};
use agent_core::reward::{RewardMode, Weights, score};
use agent_core::sample::{parse_completions, parse_samples};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (samples, completions) = match data.iter().position(|&b| b == 0xff) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let Ok(samples) = parse_samples(&String::from_utf8_lossy(samples)) else {
        return;
    };
    for message in samples.iter().flat_map(|s| &s.messages) {
        let _ = Profile::with_version_of_user_prompt(&message.content);
        if let Some(words) = task_words(&message.content) {
            let mut end = 0;
            for range in words.ranges() {
                assert!(end <= range.start && range.start <= range.end, "{words:?}");
                assert!(message.content.get(range.clone()).is_some(), "{words:?}");
                end = range.end;
            }
        }
        if let Ok(screen) = listed_screen(&message.content)
            && !screen.is_empty()
        {
            let again = format!(
                "g\n\n## Screen Elements\n{}\n\n## Screenshots\n",
                render_screen(&screen)
            );
            assert_eq!(listed_screen(&again).ok(), Some(screen));
        }
    }
    let Ok(completions) = parse_completions(&String::from_utf8_lossy(completions), &samples) else {
        return;
    };
    for c in &completions {
        let sample = &samples[c.sample];
        for mode in [RewardMode::Released, RewardMode::Paper] {
            let total = score(sample, &c.completion, mode, Weights::default()).total;
            assert!((0.0..=1.0).contains(&total), "{mode:?} total {total}");
        }
    }
});
