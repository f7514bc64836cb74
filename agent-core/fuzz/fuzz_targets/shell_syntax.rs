//! Fuzzes the virtual phone's shell command-line parser (`adb shell` command
//! lines from any ADB client).

#![no_main]

use agent_core::sim::shell::syntax::parse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = parse(&String::from_utf8_lossy(data));
});
