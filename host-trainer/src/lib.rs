//! Host-side trainer for BTL models: Qwen2.5-VL on libtorch (through tch),
//! trainable end to end and matched to transformers.
//!
//! Layout:
//! - [`config`]: `config.json` of a Hugging Face Qwen2.5-VL checkpoint, in the
//!   transformers 4.x and 5.x styles;
//! - [`weights`]: safetensors checkpoints (one file or sharded), F32/BF16/F16;
//! - [`model`]: the vision tower, the Qwen2 decoder with M-RoPE, the combined
//!   model with `lm_head`, and greedy generation with a KV cache;
//! - [`lora`]: LoRA adapters on the text model's projections;
//! - [`grpo`]: GRPO training with the BTL reward (sampling, objective,
//!   optimizer, checkpoints);
//! - [`init`]: a new model of a chosen size with random weights, or with
//!   the weights of its GGUF files (HF directory and GGUFs);
//! - [`grow`]: a deeper model that starts from a trained shallower one's
//!   function (each layer followed by copies with zero outputs);
//! - [`import`]: weights read back from GGUF files (the inverse of
//!   [`export`]);
//! - [`sft`]: supervised fine-tuning's objective, masked cross-entropy on
//!   the answer tokens;
//! - [`induction`]: the copying warm-up of a fresh model (random strings
//!   written again), so that it can type what a goal names;
//! - [`data`]: training samples from trajectories (target boxes and ranked
//!   ROIs from the UI tree) and dataset exports (ms-swift);
//! - [`cli`]: the `btl-train` command line; `src/main.rs` only calls
//!   [`cli::main`];
//! - [`export`]: GGUF files for llama.cpp (text model, projector, LoRA
//!   adapter) made from trained weights with the user's GGUF files as templates;
//! - [`peft`]: LoRA adapters in Hugging Face PEFT's directory layout;
//! - [`autocast`]: libtorch's mixed precision in bfloat16 (or float16);
//! - [`profile`]: libtorch's profiler over chosen training steps;
//! - [`bench_plot`]: per-template success of several `btl bench` runs, as
//!   a PNG;
//! - [`error`]: the error type.
//!
//! The crate links the libtorch of torch 2.13.0 (tch 0.26). `scripts/test`
//! installs a CPU copy; on a GPU host, a CUDA build of the same release (see
//! docs/training.md, "Training on a GPU host"). Tests run on the CPU in float32 and
//! float64; training runs on CUDA under bfloat16 autocast.

mod atomic;
pub mod autocast;
pub mod bench_plot;
pub mod cli;
pub mod config;
pub mod data;
pub mod error;
pub mod export;
pub mod grow;
pub mod grpo;
pub mod import;
pub mod induction;
pub mod init;
pub mod lora;
pub mod model;
pub mod peft;
pub mod profile;
pub mod sft;
pub mod weights;

pub use config::Config;
pub use error::{Error, Result};
pub use model::{Batch, Grid, Images, KvCache, Qwen25Vl};
pub use weights::Checkpoint;
