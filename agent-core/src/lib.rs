//! agent-core: the runtime of btl, a Blink-Think-Link GUI agent for Android.
//!
//! # Layout
//! - [`protocol`]: prompts, the BTL answer grammar (parser and renderer), the
//!   action space, `smart_resize` and model ↔ device coordinates. Pure.
//! - [`reward`]: the rule-based BTL reward in its `released` and `paper`
//!   modes. Pure.
//! - [`metrics`]: offline step metrics (Type / GR / SR, ScreenSpot accuracy)
//!   with the presets published tables use. Pure.
//! - [`sample`]: the official training-sample format and completion lines.
//! - [`sim`]: the virtual phone, reached over the real ADB protocol.
//! - [`device`]: the [`device::Device`] trait and its backends (adb, the
//!   in-process virtual phone).
//! - [`model`]: the [`model::Policy`] seam from observation to raw answer;
//!   llama.cpp, scripted and oracle policies.
//! - [`agent`]: the agent loop, its safety gate, screen-stability wait and
//!   crash-safe trajectories.
//! - [`report`]: a trajectory as a self-contained HTML page.
//! - [`hash`]: the fixed hash seeds are mixed with. Pure.
//! - [`cli`]: the `btl` command line; `src/main.rs` only calls [`cli::main`].

pub mod agent;
pub mod cli;
pub mod device;
pub mod hash;
pub mod metrics;
pub mod model;
pub mod protocol;
pub mod report;
pub mod reward;
pub mod sample;
pub mod sim;
