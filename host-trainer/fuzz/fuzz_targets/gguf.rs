//! Fuzzes the GGUF reader (`btl-train export` reads LoRA adapters and models
//! back with it; `btl-train init` edits their headers).
//!
//! Two kinds of input, by the first byte: raw bytes, or a valid GGUF (the
//! seeds are real files of the repository) with one of its counts,
//! dimensions or data offsets overwritten, so the reader meets wrong sizes
//! around valid values. The second byte picks the field, the next eight
//! the new value's change. Beyond "never panics": a file that parses has
//! its data section inside it and every tensor's bytes inside the data
//! section, aligned and without overlap.

#![no_main]

use host_trainer::export::gguf::{Parsed, parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        check(rest);
        return;
    }
    let Some(([field, change @ ..], file)) = rest.split_first_chunk::<9>() else {
        return;
    };
    let Ok(parsed) = parse(file) else {
        return;
    };
    let mut file = file.to_vec();
    let fields = count_and_size_fields(&file, &parsed);
    let at = fields[usize::from(*field) % fields.len()];
    let old = u64::from_le_bytes(file[at..at + 8].try_into().unwrap());
    let change = u64::from_le_bytes(*change);
    // Small steps around the stored value, or anything at all.
    let new = match mode >> 1 & 3 {
        0 => old.wrapping_add(change % 64),
        1 => old.wrapping_sub(change % 64),
        2 => old ^ (1 << (change % 64)),
        _ => change,
    };
    file[at..at + 8].copy_from_slice(&new.to_le_bytes());
    check(&file);
});

/// Where the 8-byte counts and sizes sit: the tensor and metadata counts,
/// then every place in the header holding one of the tensors' dimensions or
/// data offsets.
fn count_and_size_fields(file: &[u8], parsed: &Parsed) -> Vec<usize> {
    let values: Vec<u64> = parsed
        .header
        .tensors
        .iter()
        .flat_map(|t| t.dims.iter().copied())
        .chain(parsed.offsets.iter().copied())
        .collect();
    let header_end = (parsed.data_start as usize).min(file.len());
    let mut fields = vec![8, 16];
    fields.extend((24..header_end.saturating_sub(7)).filter(|&at| {
        let value = u64::from_le_bytes(file[at..at + 8].try_into().unwrap());
        values.contains(&value)
    }));
    fields
}

fn check(bytes: &[u8]) {
    let Ok(parsed) = parse(bytes) else {
        return;
    };
    let len = bytes.len() as u64;
    let alignment = parsed
        .header
        .alignment()
        .expect("a parsed header's alignment");
    assert!(parsed.data_start <= len || parsed.header.tensors.is_empty());
    assert_eq!(parsed.offsets.len(), parsed.header.tensors.len());
    let mut regions: Vec<(u64, u64)> = parsed
        .header
        .tensors
        .iter()
        .zip(&parsed.offsets)
        .map(|(t, &offset)| {
            assert_eq!(offset % alignment, 0, "tensor {} unaligned", t.name);
            let size = t.byte_size().expect("a parsed tensor's size");
            let start = parsed.data_start + offset;
            assert!(start + size <= len, "tensor {} outside the file", t.name);
            (start, start + size)
        })
        .collect();
    regions.sort_unstable();
    for pair in regions.windows(2) {
        assert!(pair[1].0 >= pair[0].1, "overlapping tensors");
    }
}
