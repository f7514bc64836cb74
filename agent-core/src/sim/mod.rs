//! The virtual phone: an in-process Android-like device that speaks the
//! device side of the real ADB protocol, so Debian's `adb` and the
//! `adb_client` crate drive it exactly as they drive an emulator.
//!
//! # Layout
//! - [`adbd`]: the device side of the ADB wire protocol over TCP, serving an
//!   [`AdbBackend`].
//! - [`backend`]: the [`AdbBackend`] seam between transport and phone.
//! - [`memory_phone`]: an [`AdbBackend`] that is a file system and a given
//!   shell only (transport tests, ADB clients' tests).
//! - [`vfs`]: the phone's in-memory file system.
//! - [`apk`]: what the package manager reads of an APK (binary manifest,
//!   signature presence).
//! - [`packages`]: packages installed over ADB and install sessions.
//! - [`phone`]: the phone model: screens, apps, input, rendering and the
//!   `uiautomator` tree, deterministic for a seed.
//! - [`shell`]: Android's `sh` and tools (`input`, `screencap`,
//!   `uiautomator`, `am`, …) over the phone and its file system.
//! - [`virtual_phone`]: phone, file system and shell behind one lock; the
//!   [`AdbBackend`] the ADB server serves.
//! - [`tasks`]: the task suite: goal templates with seeded parameters,
//!   set-ups, success checks over the phone's state and UI-only oracles.
//! - [`env`](mod@env): the phone as a reinforcement-learning environment over JSON
//!   lines (`btl sim env`): episodes of the agent loop whose answers a
//!   client gives, with process and outcome rewards.
//!
//! [`phone_style_config`] is how episodes on an in-process phone are run
//! when they are to be judged as on a real one.

pub mod adbd;
pub mod apk;
pub mod backend;
pub mod env;
pub mod memory_phone;
pub mod packages;
pub mod phone;
pub mod shell;
pub mod tasks;
pub mod vfs;
pub mod virtual_phone;

pub use backend::AdbBackend;

use crate::agent::AgentConfig;
use crate::agent::safety::{Confirm, SafetyConfig};
use crate::agent::stability::StabilityConfig;
use crate::protocol::Profile;

/// The agent's settings for an episode on an in-process virtual phone that
/// is judged as on a real one (online GRPO, `btl sim env`): the checker
/// never ends it, sensitive actions go ahead (nothing here can be harmed),
/// and the screen is taken as settled quickly (the phone draws every
/// change at once).
pub fn phone_style_config(
    goal: String,
    profile: Profile,
    max_pixels: u64,
    max_steps: u32,
    seed: u64,
) -> AgentConfig {
    AgentConfig {
        goal,
        profile,
        max_pixels,
        max_steps,
        seed,
        safety: SafetyConfig {
            on_sensitive: Confirm::Allow,
            ..SafetyConfig::default()
        },
        stability: StabilityConfig {
            poll_interval_ms: 20,
            timeout_ms: 200,
        },
        stop_on_success: false,
        ..AgentConfig::default()
    }
}
