//! Fault injection for tests: make the device vanish in the middle of a
//! command, the way a phone does when its cable is pulled.
//!
//! A test arms a one-shot fault with [`Faults::drop_connection_on`] (or
//! [`Faults::drop_connection_on_nth`]). The next (or n-th) `shell`/`exec`
//! command (on any connection of that device; streamed installs excluded)
//! whose text contains the given needle is accepted — the
//! host gets its `OKAY` — and then the device closes the TCP connection
//! without running the command or sending `CLSE`. Host-side code sees EOF
//! while it waits for output: exactly the situation its timeouts and error
//! messages must handle.
//!
//! Faults live in the transport rather than in an [`AdbBackend`] so any
//! backend, including the real phone, can be faulted without knowing it.
//!
//! [`AdbBackend`]: crate::sim::AdbBackend

use std::sync::{Arc, Mutex, PoisonError};

/// Shared switchboard of armed faults; clones control the same device.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    drop_on: Arc<Mutex<Option<Armed>>>,
}

/// A fault waiting for its command.
#[derive(Debug)]
struct Armed {
    needle: String,
    /// Matching commands still to let through before the one that fires.
    pass: u32,
}

impl Faults {
    /// Arms the fault for the next shell or exec command containing `needle`
    /// (an empty needle matches any command). Re-arming replaces the needle.
    pub fn drop_connection_on(&self, needle: impl Into<String>) {
        self.drop_connection_on_nth(needle, 1);
    }

    /// Arms the fault for the `n`-th matching command from now (`n` of 0
    /// counts as 1): the ones before it run as usual, so a test can let an
    /// episode take its first steps and lose the device in the middle.
    pub fn drop_connection_on_nth(&self, needle: impl Into<String>, n: u32) {
        *self.lock() = Some(Armed {
            needle: needle.into(),
            pass: n.saturating_sub(1),
        });
    }

    /// Whether a fault is armed and has not fired yet.
    pub fn is_armed(&self) -> bool {
        self.lock().is_some()
    }

    /// Fires (and disarms) the fault if `command` matches it.
    pub(super) fn trip(&self, command: &str) -> bool {
        let mut armed = self.lock();
        let Some(fault) = armed.as_mut() else {
            return false;
        };
        if !command.contains(&fault.needle) {
            return false;
        }
        if fault.pass > 0 {
            fault.pass -= 1;
            return false;
        }
        *armed = None;
        true
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Armed>> {
        // The guarded value is a plain Option; a panic elsewhere cannot leave
        // it half-written.
        self.drop_on.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_fires_once_and_only_on_a_match() {
        let faults = Faults::default();
        assert!(!faults.trip("echo hi"));
        faults.drop_connection_on("boom");
        assert!(faults.clone().is_armed());
        assert!(!faults.trip("echo hi"));
        assert!(faults.trip("echo boom"));
        assert!(!faults.is_armed());
        assert!(!faults.trip("echo boom"));
    }

    #[test]
    fn an_nth_fault_lets_the_earlier_matches_through() {
        let faults = Faults::default();
        faults.drop_connection_on_nth("input tap", 3);
        assert!(!faults.trip("input tap 1 1"));
        assert!(!faults.trip("screencap -p"));
        assert!(!faults.trip("input tap 2 2"));
        assert!(faults.trip("input tap 3 3"));
        assert!(!faults.trip("input tap 4 4"));
    }
}
