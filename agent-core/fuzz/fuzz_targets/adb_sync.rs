//! Fuzzes the virtual phone's sync-protocol request parser (`adb push`,
//! `pull`, `ls`: bytes from any ADB client), fed in chunks as WRTE payloads
//! bring them.
//!
//! Beyond "never panics": the parser stops (each request consumes bytes), and
//! the same bytes give the same requests however they are split.

#![no_main]

use agent_core::sim::adbd::sync::{Request, RequestParser, SyncError};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&split, bytes)) = data.split_first() else {
        return;
    };
    let whole = requests(&[bytes]);
    let chunk = usize::from(split).max(1);
    let chunks: Vec<&[u8]> = bytes.chunks(chunk).collect();
    assert_eq!(
        requests(&chunks),
        whole,
        "splitting the bytes every {chunk} changed the requests"
    );
});

/// The requests the chunks make, up to the first error.
fn requests(chunks: &[&[u8]]) -> (Vec<Request>, Option<SyncError>) {
    let mut parser = RequestParser::default();
    let mut out = Vec::new();
    for chunk in chunks {
        parser.push(chunk);
        loop {
            match parser.next_request() {
                Ok(Some(request)) => out.push(request),
                Ok(None) => break,
                Err(e) => return (out, Some(e)),
            }
        }
    }
    (out, None)
}
