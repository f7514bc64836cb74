//! Fuzzes the shell protocol v2 packet decoder (`adb shell` stdin and window
//! size packets from any ADB client).
//!
//! Beyond "never panics": every decoded packet lies within the buffer and
//! encodes back to the bytes it came from.

#![no_main]

use agent_core::sim::adbd::shell_v2::{decode_packet, encode_packet};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    while let Some((packet, used)) = decode_packet(rest) {
        assert!(
            used > 0 && used <= rest.len(),
            "used {used} of {}",
            rest.len()
        );
        let mut again = Vec::new();
        encode_packet(packet.id, packet.data, &mut again);
        assert_eq!(
            again,
            &rest[..used],
            "a packet does not encode to its bytes"
        );
        rest = &rest[used..];
    }
});
