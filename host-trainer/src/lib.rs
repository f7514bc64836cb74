//! Host-side trainer for BTL models.
//!
//! Not built yet: this crate only reserves its place in the workspace. The
//! trainable Qwen2.5-VL on libtorch and GRPO with the BTL reward are tracked by
//! the two host-trainer issues.
