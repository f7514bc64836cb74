//! Fuzzes the package manager's APK reader (bytes a host sends with `adb
//! install`): the zip, Android's binary XML manifest and the signature
//! lookup. Beyond "never panics": what it accepts names a valid package.

#![no_main]

use agent_core::sim::apk::{parse_manifest, read, valid_package_name};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Whole APKs rarely get past the zip reader, so the binary XML reader
    // is also fed the bytes directly.
    for manifest in [read(data), parse_manifest(data)].into_iter().flatten() {
        assert!(
            valid_package_name(&manifest.package),
            "accepted package {:?}",
            manifest.package
        );
    }
});
