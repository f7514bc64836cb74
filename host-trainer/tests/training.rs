//! Training runs on the tiny model: the reward rises on a toy task, a
//! resumed run continues bit for bit, bad configurations and data are
//! rejected with messages that say where.

use agent_core::reward::RewardBreakdown;
use agent_core::sample::Sample;
use host_trainer::grpo::{Reward, TrainConfig, Trainer};

use crate::util::{TORCH_RNG, checkpoint_dir, tokenizer_file};

/// Toy reward that varies inside groups: the share of the completion's
/// characters that are ASCII digits.
struct Digits;

impl Reward for Digits {
    fn score(&self, _: &Sample, completion: &str) -> RewardBreakdown {
        let chars = completion.chars().count().max(1);
        let digits = completion.chars().filter(char::is_ascii_digit).count();
        let total = digits as f64 / chars as f64;
        RewardBreakdown {
            format: 0.0,
            blink: 0.0,
            link: 0.0,
            total,
        }
    }
}

/// Three text-only prompts (no image) in the official sample format.
const SAMPLES: &str = r#"[
 {"images": [], "image_sizes": [[100, 100]], "bbox": [], "solution": "[{\"Action\": {\"function\": \"Back\"}}]",
  "messages": [{"role": "user", "content": "Count to five."}]},
 {"images": [], "image_sizes": [[100, 100]], "bbox": [], "solution": "[{\"Action\": {\"function\": \"Back\"}}]",
  "messages": [{"role": "user", "content": "Which year is it?"}]},
 {"images": [], "image_sizes": [[100, 100]], "bbox": [], "solution": "[{\"Action\": {\"function\": \"Back\"}}]",
  "messages": [{"role": "user", "content": "Open the Settings app and turn on Wi-Fi."}]}
]"#;

/// A toy run in `dir`: LoRA r 8 on every projection, G 8, 6 new tokens.
pub fn toy_config(dir: &std::path::Path, steps: u64) -> TrainConfig {
    std::fs::write(dir.join("samples.json"), SAMPLES).unwrap();
    let text = format!(
        r#"
[model]
checkpoint = "{checkpoint}"
tokenizer = "{tokenizer}"
precision = "f32"
device = "cpu"
[data]
samples = ["samples.json"]
[lora]
r = 8
alpha = 16
dropout = 0.05
[grpo]
num_generations = 8
max_completion_length = 6
temperature = 1.0
top_p = 1.0
top_k = 0
micro_batch = 4
[optim]
lr = 0.02
warmup_ratio = 0.0
[run]
steps = {steps}
seed = 7
output_dir = "out"
save_every = 3
"#,
        checkpoint = checkpoint_dir().display(),
        tokenizer = tokenizer_file().display(),
    );
    let file = dir.join("train.toml");
    std::fs::write(&file, text).unwrap();
    TrainConfig::from_file(&file).unwrap()
}

#[test]
fn reward_rises_on_a_toy_task() {
    let _rng = TORCH_RNG.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut trainer = Trainer::new(toy_config(dir.path(), 50), Box::new(Digits)).unwrap();
    let mut rewards = Vec::new();
    for _ in 0..50 {
        let m = trainer.step().unwrap();
        rewards.push(m.reward_mean);
    }
    let first = rewards[..10].iter().sum::<f64>() / 10.0;
    let last = rewards[40..].iter().sum::<f64>() / 10.0;
    assert!(
        last > first + 0.2,
        "mean reward {first:.3} → {last:.3}: no clear rise"
    );
}
