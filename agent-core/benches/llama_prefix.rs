//! Prompt evaluation per step with and without the prefix cache of
//! `LlamaPolicy`, as a ratio, on the bundled tiny model.
//!
//! An episode-like sequence of observations — the virtual phone's home
//! screen, the BTL prompt with a history growing by one Plan per step — is
//! answered once with `reuse_prefix` on and once with it off; the table gives
//! the summed prompt-evaluation time (`encode_ms` + `prefill_ms`: text,
//! image encoding and image decoding) of the steps after the first, where the cache can help, and
//! the ratio. Two frame sizes: the training `max_pixels` (3,354 image tokens
//! for a 1080×2400 screen, which dominate) and a small 200k-pixel frame (where
//! the text does).
//!
//! Run with `cargo bench -p agent-core --features llama --bench llama_prefix`.

use agent_core::model::llama::{LlamaConfig, LlamaPolicy};
use agent_core::model::{Observation, Policy};
use agent_core::protocol::{FrameMap, Profile, Prompt, Size, TRAINING_MAX_PIXELS, Task};
use agent_core::sim::phone::{Phone, PhoneConfig};

const STEPS: usize = 4;

fn model(reuse_prefix: bool) -> LlamaPolicy {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/tiny-qwen25vl");
    let mut config = LlamaConfig::new(
        format!("{dir}/tiny-qwen25vl-f16.gguf"),
        format!("{dir}/mmproj-tiny-qwen25vl-f16.gguf"),
    );
    config.max_tokens = 16;
    config.grammar = false;
    config.reuse_prefix = reuse_prefix;
    LlamaPolicy::load(config).expect("the bundled tiny model loads")
}

/// Summed prompt-evaluation milliseconds of steps 2.. and cached tokens.
fn episode(reuse_prefix: bool, max_pixels: u64) -> (f64, u32) {
    let mut policy = model(reuse_prefix);
    let screenshot = Phone::new(PhoneConfig::default()).render();
    let frame = FrameMap::new(
        Size::new(screenshot.width(), screenshot.height()),
        max_pixels,
    )
    .expect("a phone screen fits");
    let mut history = Vec::new();
    let (mut ms, mut cached) = (0.0, 0);
    for step in 0..STEPS {
        let prompt = Prompt::new(
            &Task::Navigation {
                goal: "Turn on Wi-Fi.",
                step_instruction: None,
                history: &history,
                screen: &[],
            },
            Profile::BtlUi,
            None,
        );
        let answer = policy
            .act(&Observation {
                screenshot: Some(&screenshot),
                frame,
                prompt: &prompt,
                profile: Profile::BtlUi,
                ui_tree: None,
                screen: &[],
                seed: step as u64,
            })
            .expect("an answer");
        if step > 0 {
            ms += answer.stats.encode_ms + answer.stats.prefill_ms;
            cached += answer.stats.cached_prompt_tokens;
        }
        history.push(format!("Step {}: tap the thing number {step}.", step + 1));
    }
    (ms, cached)
}

fn main() {
    println!(
        "{:<34} {:>12} {:>12} {:>8} {:>14}",
        "frame", "reuse (ms)", "no reuse", "ratio", "cached tokens"
    );
    for (label, max_pixels) in [
        ("1080x2400 at training max_pixels", TRAINING_MAX_PIXELS),
        ("1080x2400 at 200k pixels", 200_704),
    ] {
        let (with, cached) = episode(true, max_pixels);
        let (without, _) = episode(false, max_pixels);
        println!(
            "{label:<34} {with:>12.0} {without:>12.0} {:>7.2}x {cached:>14}",
            with / without
        );
    }
}
