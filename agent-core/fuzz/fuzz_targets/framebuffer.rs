//! Fuzzes what the `framebuffer:` service sends: its header, then the
//! pixels.
//!
//! Beyond "never panics": a header that passes promises no more pixels
//! than the largest screen has, and pixels that decode make an image of
//! the header's size.

#![no_main]

use agent_core::device::MAX_SCREEN_PIXELS;
use agent_core::device::framebuffer::{FramebufferHeader, header_len};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(version) = data.get(..4) else { return };
    let Ok(length) = header_len(version.try_into().unwrap()) else {
        return;
    };
    let Some(header) = data.get(..length) else {
        return;
    };
    let Ok(header) = FramebufferHeader::parse(header) else {
        return;
    };
    assert!(header.pixel_bytes() as u64 <= MAX_SCREEN_PIXELS * 4);
    if let Ok(image) = header.decode(data[length..].to_vec()) {
        assert_eq!(image.dimensions(), header.dimensions());
    }
});
