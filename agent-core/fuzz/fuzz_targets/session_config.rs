//! Fuzzes the Android app's session request (the JSON the app hands the JNI
//! bridge): any text is refused with an error or accepted as a request
//! that satisfies the bridge's own limits.

#![no_main]

use btl_android::config::{MAX_VOTE, PolicyConfig, SessionConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(config) = SessionConfig::from_json(&String::from_utf8_lossy(data)) else {
        return;
    };
    assert!((1..=MAX_VOTE).contains(&config.vote));
    assert!(!config.agent.goal.trim().is_empty());
    assert!(config.agent.max_steps > 0);
    if let PolicyConfig::Llama { threads, .. } = config.policy {
        assert!(threads > 0);
    }
});
