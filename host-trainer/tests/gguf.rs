//! The GGUF reader and writer on the files llama.cpp's tools wrote: reading
//! and writing each gives the same bytes, and damaged copies are refused.

use std::borrow::Cow;
use std::path::PathBuf;

use host_trainer::export::gguf::{self, GgufFile};
use proptest::prelude::*;

use crate::util::gguf_dir;

fn fixtures() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(gguf_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "gguf"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_fixture_is_written_back_byte_for_byte() {
    let files = fixtures();
    // text f16 and q8_0 (converter, quantizer), two projectors.
    assert!(files.len() >= 4, "{files:?}");
    let dir = tempfile::tempdir().unwrap();
    for path in files {
        let file = GgufFile::open(&path).unwrap();
        let out = dir.path().join("copy.gguf");
        gguf::write(&out, file.header(), |i| {
            Ok(Cow::Borrowed(file.tensor_data(i)))
        })
        .unwrap();
        let (expected, found) = (std::fs::read(&path).unwrap(), std::fs::read(&out).unwrap());
        assert!(
            expected == found,
            "{} differs after a round trip",
            path.display()
        );
    }
}

#[test]
fn the_fixtures_read_as_gguf_py_lists_them() {
    // Counts and a few entries as gguf-py 0.19 prints them (`tests/data/tiny-qwen25vl/README.md`).
    let text = GgufFile::open(&gguf_dir().join("tiny-qwen25vl-f16.gguf")).unwrap();
    let h = text.header();
    assert_eq!((h.metadata.len(), h.tensors.len()), (26, 27));
    assert_eq!(
        h.get("general.architecture").and_then(|v| v.as_str()),
        Some("qwen2vl")
    );
    let first = &h.tensors[0];
    assert_eq!(
        (first.name.as_str(), &first.dims[..]),
        ("output.weight", &[128, 1536][..])
    );
    assert_eq!(first.ggml_type, gguf::GgmlType::F16);
    let projector = GgufFile::open(&gguf_dir().join("mmproj-tiny-qwen25vl-f16.gguf")).unwrap();
    let h = projector.header();
    assert_eq!((h.metadata.len(), h.tensors.len()), (20, 71));
    let last = h.tensors.last().unwrap();
    assert_eq!(
        (last.name.as_str(), &last.dims[..]),
        ("v.patch_embd.weight.1", &[14, 14, 3, 64][..])
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_cut_projector_file_is_refused_and_a_damaged_one_never_panics(
        cut in any::<prop::sample::Index>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
    ) {
        let mut bytes = std::fs::read(gguf_dir().join("mmproj-tiny-qwen25vl-f16.gguf")).unwrap();
        // The last tensor ends at the end of the file: any cut loses data.
        prop_assert!(gguf::parse(&bytes[..cut.index(bytes.len())]).is_err());
        // Edits land in the header, where they change the structure.
        let header_len = gguf::parse(&bytes).unwrap().data_start as usize;
        for (at, byte) in edits {
            bytes[at.index(header_len)] = byte;
        }
        let _ = gguf::parse(&bytes);
    }
}
