//! agent-core: the runtime of btl, a Blink-Think-Link GUI agent for Android,
//! and the host tooling around it.
//!
//! # Layout
//! The runtime, what a phone runs (always built):
//! - [`protocol`]: prompts, the BTL answer grammar (parser and renderer), the
//!   action space, `smart_resize` and model ↔ device coordinates. Pure.
//! - [`reward`]: the rule-based BTL reward in its `released` and `paper`
//!   modes. Pure.
//! - [`metrics`]: offline step metrics (Type / GR / SR, ScreenSpot accuracy)
//!   with the presets published tables use. Pure.
//! - [`sample`]: the official training-sample format and completion lines.
//! - [`device`]: the [`device::Device`] trait, the UI tree
//!   ([`device::ui::UiNode`]) and, on the host, its backends (adb, the
//!   in-process virtual phone).
//! - [`model`]: the [`model::Policy`] seam from observation to raw answer;
//!   llama.cpp, scripted and oracle policies.
//! - [`agent`]: the agent loop, its safety gate, screen-stability wait and
//!   crash-safe trajectories.
//! - [`atomic`]: crash-safe output files (staging, rename, the sweep of
//!   what killed writers left).
//! - [`hash`]: the fixed hash seeds are mixed with. Pure.
//! - [`json_diff`]: the leaves where two JSON values differ, which refusals
//!   of a recorded run's other settings name. Pure.
//! - [`terminal`]: text from a device, a model or a file with its control
//!   characters escaped for the terminal. Pure.
//!
//! Host tooling, behind the default feature `host` (btl-android leaves it
//! out, so none of it reaches a phone):
//! - `sim`: the virtual phone, reached over the real ADB protocol, with its
//!   task suite and oracles.
//! - `report`: a trajectory as a self-contained HTML page.
//! - `process`: exit codes and error printing, shared by `btl` and
//!   `btl-train`.
//! - `cli`: the `btl` command line; `src/main.rs` only calls `cli::main`.

pub mod agent;
pub mod atomic;
#[cfg(feature = "host")]
pub mod cli;
pub mod device;
pub mod hash;
pub mod json_diff;
pub mod metrics;
pub mod model;
#[cfg(feature = "host")]
pub mod process;
pub mod protocol;
#[cfg(feature = "host")]
pub mod report;
pub mod reward;
pub mod sample;
#[cfg(feature = "host")]
pub mod sim;
pub mod terminal;
