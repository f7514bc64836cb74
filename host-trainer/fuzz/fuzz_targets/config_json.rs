//! Fuzzes the reader of a checkpoint's `config.json` (transformers 4.x and
//! 5.x styles of Qwen2.5-VL). Beyond "never panics": a config it accepts
//! gives the sizes a model is built from without dividing by zero or
//! overflowing (head width, patch width, merged window).

#![no_main]

use host_trainer::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(config) = Config::from_json(text) else {
        return;
    };
    assert!(config.text.head_dim() > 0);
    assert!(config.vision.head_dim() > 0);
    assert!(config.vision.patch_dim() > 0);
    assert!(config.vision.merged_window_size() > 0);
});
