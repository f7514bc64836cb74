//! GRPO training with the BTL reward (spec §7).
//!
//! One optimizer step: for each of `prompts_per_step` samples, sample G
//! completions with the KV cache ([`rollout`]), score them with the reward,
//! turn the group's rewards into advantages and backpropagate the clipped
//! surrogate with the KL penalty ([`loss`]) in micro-batches; then clip the
//! gradient norm and take an AdamW step on the warmup + cosine schedule
//! ([`optim`]). [`trainer`] runs the steps, [`checkpoint`] saves and resumes
//! them exactly, [`log`] records metrics and plots them, [`config`] holds
//! the settings. [`online`] rolls the policy out on virtual phones for
//! online GRPO, where the oracle's answer at each reached screen is the
//! sample.
//!
//! - [`sampling`]: temperature / top-k / top-p draws (pure);
//! - [`prompt`]: chat template and tokenizer.

pub mod checkpoint;
pub mod config;
pub mod log;
pub mod loss;
pub mod online;
pub mod optim;
pub mod prompt;
pub mod rollout;
pub mod run;
pub mod sampling;
pub mod trainer;

pub use config::TrainConfig;
pub use trainer::{BtlReward, Reward, StepMetrics, Trainer};
