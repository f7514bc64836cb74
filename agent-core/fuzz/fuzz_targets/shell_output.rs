//! Fuzzes what the adb backend reads from a device's shell: `wm size`
//! output and the exit-code marker it appends to every command.
//!
//! Beyond "never panics": a split exit code leaves stdout a prefix of what
//! the device sent.

#![no_main]

use agent_core::device::adb::{parse_wm_size, split_exit_code};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = parse_wm_size(&String::from_utf8_lossy(data));
    if let Some(result) = split_exit_code(data.to_vec(), Vec::new()) {
        assert!(data.starts_with(&result.stdout), "stdout is not a prefix");
    }
});
