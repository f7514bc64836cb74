//! Fuzzes the safety-gate configuration reader (a user's JSON file).

#![no_main]

use agent_core::agent::safety::SafetyConfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = SafetyConfig::from_json(&String::from_utf8_lossy(data));
});
