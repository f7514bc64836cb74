//! Fuzzes the uiautomator XML reader (a device's `uiautomator dump`, read by
//! the adb backend and the trajectory converter).
//!
//! Beyond "never panics": a dump that parses writes back (as the virtual
//! phone writes its dumps) to XML that parses, and writing is stable: the
//! re-parsed tree writes the same XML. Writing is not the identity: as
//! AOSP's dumper does, it turns characters XML cannot hold into '.'.

#![no_main]

use agent_core::device::ui::{parse_uiautomator_xml, to_uiautomator_xml};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(root) = parse_uiautomator_xml(&text) {
        let written = to_uiautomator_xml(&root);
        let again = parse_uiautomator_xml(&written)
            .unwrap_or_else(|e| panic!("a written dump does not parse: {e}\n{written}"));
        assert_eq!(
            to_uiautomator_xml(&again),
            written,
            "the written dump changed on its way through the reader"
        );
    }
});
