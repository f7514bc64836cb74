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
//! - [`env`]: the phone as a reinforcement-learning environment over JSON
//!   lines (`btl sim env`): episodes of the agent loop whose answers a
//!   client gives, with process and outcome rewards.

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
