//! Fuzzes the trajectory reader (`episode.json` and `steps.jsonl`, read when
//! a collection resumes and when trajectories become training samples).
//!
//! The input is the episode record, then a 0 byte, then the step log.
//! Beyond "never panics": only complete lines are read, and an unfinished
//! last line is reported, never parsed.

#![no_main]

use agent_core::agent::trajectory::parse_trajectory;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let (episode, steps) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let episode = String::from_utf8_lossy(episode);
    if let Ok(t) = parse_trajectory(Path::new("episode"), &episode, steps) {
        let valid = usize::try_from(t.valid_len).unwrap();
        assert!(valid <= steps.len());
        assert!(valid == 0 || steps[valid - 1] == b'\n');
        assert_eq!(t.truncated_tail.is_some(), valid < steps.len());
    }
});
