//! Fuzzes the ADB frame decoder of the virtual phone's adbd (bytes from any
//! ADB client).
//!
//! Two kinds of input, by the first byte: raw bytes as they come off the
//! socket, or a valid frame built from the input (command, arguments and
//! payload) with a few of its bytes overwritten, so that the header's
//! length, checksum and magic fields are mutated around valid values.
//! Beyond "never panics": a decoded frame used no more bytes than it had,
//! and encodes to a frame that decodes to itself.

#![no_main]

use agent_core::sim::adbd::message::{Command, Message};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        check(rest);
        return;
    }
    let Some((head, rest)) = rest.split_first_chunk::<9>() else {
        return;
    };
    let command = Command::ALL[usize::from(head[0]) % Command::ALL.len()];
    let arg0 = u32::from_le_bytes([head[1], head[2], head[3], head[4]]);
    let arg1 = u32::from_le_bytes([head[5], head[6], head[7], head[8]]);
    // The first bytes after the header say which frame bytes to overwrite
    // (position, value pairs); the rest is the payload.
    let edits = usize::from(mode >> 1) % 4;
    let (patches, payload) = rest.split_at((edits * 2).min(rest.len()));
    let message = Message::new(command, arg0, arg1, payload.to_vec());
    let mut frame = message.encode();
    assert_eq!(
        Message::decode(&frame).ok(),
        Some((message, frame.len())),
        "a valid frame does not decode to itself"
    );
    for pair in patches.chunks_exact(2) {
        let at = usize::from(pair[0]) % frame.len();
        frame[at] = pair[1];
    }
    check(&frame);
});

fn check(bytes: &[u8]) {
    if let Ok((message, used)) = Message::decode(bytes) {
        assert!(used <= bytes.len(), "used {used} of {} bytes", bytes.len());
        let frame = message.encode();
        assert_eq!(
            Message::decode(&frame).ok(),
            Some((message, frame.len())),
            "a decoded frame does not encode to itself"
        );
    }
}
