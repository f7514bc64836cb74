//! Fuzzes the virtual phone's shell end to end: any command line an ADB
//! client sends (`adb shell LINE`) runs on a fresh phone. Beyond "never
//! panics": whatever the line asks for, what it prints stays within the
//! line's budget (and the messages saying so), so no client can make the
//! phone print without end.

#![no_main]

use agent_core::sim::phone::PhoneConfig;
use agent_core::sim::shell::LINE_OUTPUT;
use agent_core::sim::virtual_phone::VirtualPhone;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let phone = VirtualPhone::new(PhoneConfig::default());
    let out = phone.shell(&String::from_utf8_lossy(data));
    assert!(out.stdout.len() + out.stderr.len() <= LINE_OUTPUT + 4096);
});
