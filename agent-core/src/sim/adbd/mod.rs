//! The device side of the ADB wire protocol over TCP: what makes the virtual
//! phone look like an emulator to Debian's `adb` and to `adb_client`.
//!
//! The transport knows nothing about phones. Every service request becomes a
//! call on an [`AdbBackend`](crate::sim::AdbBackend), run on tokio's
//! blocking pool so the I/O tasks never wait on the phone. The reference is
//! AOSP's `packages/modules/adb` (`docs/dev/protocol.md`, `services.md`,
//! `sync.md`, `shell_protocol.h`), checked on the wire against Debian's adb
//! 29 and adb_client 3.2.3.
//!
//! # Layout
//! - [`message`]: the 24-byte header and payload; check-then-parse decoding.
//! - `connection`: one host connection: framing, CNXN, routing messages to
//!   streams, the single writer.
//! - `stream`: a stream as a service sees it, with flow control done for it.
//! - `service`: parsing OPEN names; shell, exec, streamed install,
//!   framebuffer.
//! - [`shell_v2`]: the shell protocol v2 packets (stdout, stderr, exit code).
//! - `sync`: the `sync:` file-transfer sub-protocol (push, pull, ls).
//! - `server`: the accept loop with graceful drain, and the blocking [`Adbd`]
//!   handle.
//! - `fault`: [`Faults`], dropping the connection mid-command for tests.
//!
//! # What the device announces
//! `CNXN(min(host, 0x01000001), 1 MiB, "device::ro.product.name=…;
//! ro.product.model=…;ro.product.device=…;features=shell_v2,cmd")` with no
//! AUTH. `shell_v2` gives `adb shell` exit codes; `cmd` makes `adb install`
//! stream. Features it does not implement (`stat_v2`, `ls_v2`, `abb`,
//! `delayed_ack`, …) are not announced, so hosts fall back to the v1 forms.
//!
//! # Hostile input
//! A malformed message (bad magic, unknown command, a length over 1 MiB, or
//! over 4 KiB for CNXN/AUTH), a maxdata below 4 KiB, a host ignoring flow
//! control, or EOF mid-message closes that connection only. Connections and
//! streams are capped by [`MAX_CONNECTIONS`] and
//! [`MAX_STREAMS_PER_CONNECTION`].

mod connection;
mod fault;
pub mod message;
mod server;
mod service;
pub mod shell_v2;
mod stream;
pub mod sync;
#[cfg(test)]
mod tests;

pub use connection::MAX_STREAMS_PER_CONNECTION;
pub use fault::Faults;
pub use server::{Adbd, EMULATOR_PORTS, MAX_CONNECTIONS, bind_listener, run, run_with_faults};
