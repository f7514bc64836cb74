//! Fuzzes what the adb backend reads from a device's shell and from the
//! adb server: `wm size` output, the exit-code marker it appends to every
//! command, and the lines of `adb devices -l`.
//!
//! Beyond "never panics": a split exit code leaves stdout a prefix of what
//! the device sent, and a listed device has a serial and a state.

#![no_main]

use agent_core::device::adb::{parse_device_line, parse_wm_size, split_exit_code};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = parse_wm_size(&text);
    for line in text.lines() {
        if let Some(device) = parse_device_line(line) {
            assert!(
                !device.serial.is_empty() && !device.state.is_empty(),
                "{device:?}"
            );
        }
    }
    if let Some(result) = split_exit_code(data.to_vec(), Vec::new()) {
        assert!(data.starts_with(&result.stdout), "stdout is not a prefix");
    }
});
