//! host-trainer's integration tests: one binary, one module per subject.
//!
//! The model's expected numbers come from transformers, written to `data/`
//! by `scripts/make-trainer-reference/make_reference.py` (each test names
//! the case it reads); the model under test never produced them. The data
//! tests take theirs from agent-core: its oracles, parser and rewards.

// Shared loading of the tiny checkpoint and the golden file, comparisons.
mod util;

// Pixel values → vision tower, positions, logits and greedy ids vs transformers (float32).
mod parity;
// GRPO-style loss and gradients vs transformers in float64; every weight gets a gradient.
mod gradients;
// Checkpoint formats (4.x config, shards, dtypes) and the errors bad checkpoints and inputs give.
mod checkpoint;
// Supervised fine-tuning: masked cross-entropy vs transformers in float64; memorising an answer.
mod sft;
// The copying warm-up: its loss is SFT's answer loss; the command trains and resumes.
mod induction;
// GRPO objective with LoRA vs transformers + PEFT (float64, and bfloat16 autocast); merging adapters.
mod grpo;
// Training runs: the reward rises on a toy task, resume is exact, bad input is named.
mod training;
// Samples from oracle trajectories on the virtual phone: boxes, ROIs, rewards, ms-swift export, CLI.
mod data;
// GGUF files of llama.cpp's tools read and written back byte for byte; damaged files refused.
mod gguf;
// Export to GGUF reproduces llama.cpp's converter output; bad weights and templates are refused.
mod export;
// PEFT LoRA adapters read and written; the GGUF adapter matches llama.cpp's convert_lora_to_gguf.py.
mod adapter;
// btl-train init: a new model's GGUFs as the converter writes them, loaded by transformers and llama.cpp.
mod init;
// Export of a trained checkpoint: llama.cpp runs the GGUFs as the trainer runs the model.
mod phone;
// Every btl and btl-train command in the README and docs/ parses as the CLIs define them.
mod docs;
