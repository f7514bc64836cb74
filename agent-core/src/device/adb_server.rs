//! A private adb server: Debian's (or the SDK's) `adb` started on its own
//! port, with its own `HOME` and the emulator port scan off, stopped when
//! dropped.
//!
//! Tests, benchmarks and data collection on the virtual phone use one so they
//! neither disturb nor depend on a user's adb server on 5037 (which would also
//! pick up the user's real devices), and several can run side by side.

use std::ffi::OsStr;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::{Command, Output};

/// Longest any one `adb` invocation may take before it is killed: `adb`
/// commands have no timeouts of their own.
const ADB_TIMEOUT_SECS: &str = "60";

pub struct PrivateAdbServer {
    port: u16,
    home: tempfile::TempDir,
}

impl PrivateAdbServer {
    /// Starts a server on a free port outside 5555–5585.
    pub fn start() -> io::Result<Self> {
        let port = crate::sim::adbd::bind_listener(None)?.local_addr()?.port();
        let server = Self {
            port,
            home: tempfile::tempdir()?,
        };
        let out = server.adb(["start-server"]).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot run adb ({e}); install it, e.g. apt-get install adb"),
            )
        })?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "adb start-server failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(server)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn addr(&self) -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::LOCALHOST, self.port)
    }

    /// Runs `adb -P PORT args…` against this server.
    pub fn adb<I, S>(&self, args: I) -> io::Result<Output>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Command::new("timeout")
            .args(["-k", "5", ADB_TIMEOUT_SECS, "adb", "-P"])
            .arg(self.port.to_string())
            .args(args)
            .env("ADB_EMU", "0")
            .env("HOME", self.home.path())
            .output()
    }
}

impl Drop for PrivateAdbServer {
    fn drop(&mut self) {
        let _ = self.adb(["kill-server"]);
    }
}
