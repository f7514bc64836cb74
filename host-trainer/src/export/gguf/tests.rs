//! The GGUF layout pinned with bytes written out by hand, round trips of
//! generated headers, and corrupt input that must give errors, never panics.

use std::borrow::Cow;
use std::path::Path;

use proptest::prelude::*;

use super::{
    ALIGNMENT_KEY, Array, GgmlType, GgufFile, Header, MAX_METADATA_VALUES, TensorInfo, Value,
    ValueType, parse, write,
};
use crate::error::Error;

/// Writes `header` with `data` through [`write`] and returns the file's bytes.
fn written(header: &Header, data: &[Vec<u8>]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.gguf");
    write(&path, header, |i| Ok(Cow::Borrowed(&data[i][..]))).unwrap();
    std::fs::read(path).unwrap()
}

fn le64(n: u64) -> [u8; 8] {
    n.to_le_bytes()
}

/// One string pair, one F32 tensor of 3 elements, default alignment 32.
fn small() -> (Header, Vec<Vec<u8>>) {
    let header = Header {
        metadata: vec![("a.b".into(), Value::String("xy".into()))],
        tensors: vec![TensorInfo {
            name: "t".into(),
            dims: vec![3],
            ggml_type: GgmlType::F32,
        }],
    };
    let data = [1.0f32, 2.0, -0.5]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    (header, vec![data])
}

#[test]
fn a_small_file_has_the_documented_bytes() {
    let (header, data) = small();
    let mut expected = Vec::new();
    expected.extend_from_slice(b"GGUF"); // magic
    expected.extend_from_slice(&3u32.to_le_bytes()); // version
    expected.extend_from_slice(&le64(1)); // tensor count
    expected.extend_from_slice(&le64(1)); // metadata count
    expected.extend_from_slice(&le64(3)); // key length
    expected.extend_from_slice(b"a.b"); // key
    expected.extend_from_slice(&8u32.to_le_bytes()); // value type: string
    expected.extend_from_slice(&le64(2)); // string length
    expected.extend_from_slice(b"xy"); // string
    expected.extend_from_slice(&le64(1)); // tensor name length
    expected.extend_from_slice(b"t"); // tensor name
    expected.extend_from_slice(&1u32.to_le_bytes()); // dimension count
    expected.extend_from_slice(&le64(3)); // ne0
    expected.extend_from_slice(&0u32.to_le_bytes()); // ggml type F32
    expected.extend_from_slice(&le64(0)); // data offset
    assert_eq!(expected.len(), 82);
    expected.resize(96, 0); // padding to 32
    expected.extend_from_slice(&[0x00, 0x00, 0x80, 0x3f]); // 1.0
    expected.extend_from_slice(&[0x00, 0x00, 0x00, 0x40]); // 2.0
    expected.extend_from_slice(&[0x00, 0x00, 0x00, 0xbf]); // -0.5
    expected.resize(128, 0); // the tensor padded to 32
    let bytes = written(&header, &data);
    assert_eq!(bytes, expected);

    let parsed = parse(&bytes).unwrap();
    assert_eq!(parsed.header, header);
    assert_eq!(parsed.data_start, 96);
    assert_eq!(parsed.offsets, vec![0]);
}

#[test]
fn every_value_type_round_trips() {
    let strings = Array::new(
        ValueType::String,
        vec![Value::String("ä".into()), Value::String(String::new())],
    )
    .unwrap();
    let nested = Array::new(
        ValueType::Array,
        vec![
            Value::Array(Array::new(ValueType::I32, vec![Value::I32(-1), Value::I32(7)]).unwrap()),
            Value::Array(Array::new(ValueType::U8, vec![]).unwrap()),
        ],
    )
    .unwrap();
    let header = Header {
        metadata: vec![
            ("u8".into(), Value::U8(200)),
            ("i8".into(), Value::I8(-100)),
            ("u16".into(), Value::U16(60000)),
            ("i16".into(), Value::I16(-30000)),
            ("u32".into(), Value::U32(4_000_000_000)),
            ("i32".into(), Value::I32(-2_000_000_000)),
            ("f32".into(), Value::F32(1e-6)),
            ("bool".into(), Value::Bool(true)),
            ("string".into(), Value::String("chat {{ template }}".into())),
            ("strings".into(), Value::Array(strings)),
            ("nested".into(), Value::Array(nested)),
            ("u64".into(), Value::U64(u64::MAX)),
            ("i64".into(), Value::I64(i64::MIN)),
            ("f64".into(), Value::F64(-2.5e300)),
        ],
        tensors: vec![],
    };
    let bytes = written(&header, &[]);
    assert_eq!(parse(&bytes).unwrap().header, header);
}

#[test]
fn arrays_hold_one_element_type() {
    assert!(Array::new(ValueType::U32, vec![Value::U32(1), Value::I32(1)]).is_none());
}

#[test]
fn the_alignment_key_sets_the_padding() {
    let (mut header, data) = small();
    header.set(ALIGNMENT_KEY, Value::U32(64));
    header.tensors.push(TensorInfo {
        name: "u".into(),
        dims: vec![2, 1],
        ggml_type: GgmlType::F16,
    });
    let data = vec![data[0].clone(), vec![1, 2, 3, 4]];
    let bytes = written(&header, &data);
    let parsed = parse(&bytes).unwrap();
    assert_eq!(parsed.data_start % 64, 0);
    assert_eq!(parsed.offsets, vec![0, 64]);
    assert_eq!(bytes.len() as u64, parsed.data_start + 128);
}

#[test]
fn a_q8_0_tensor_takes_34_bytes_per_block_of_32() {
    assert_eq!(GgmlType(8).byte_size(&[64, 3]), Some(2 * 34 * 3));
    assert_eq!(GgmlType(8).byte_size(&[48]), None);
    assert_eq!(GgmlType(8).name(), "Q8_0");
    assert_eq!(GgmlType(99).byte_size(&[1]), None);
    assert_eq!(GgmlType::F16.byte_size(&[u64::MAX, 2]), None);
}

#[test]
fn writing_refuses_data_of_the_wrong_size_and_keeps_the_old_file() {
    let (header, _) = small();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.gguf");
    std::fs::write(&path, b"old").unwrap();
    let err = write(&path, &header, |_| Ok(Cow::Owned(vec![0u8; 8]))).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("tensor t: 8 bytes") && text.contains("need 12"),
        "{text}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), b"old");
}

#[test]
fn writing_refuses_a_bad_alignment() {
    let (mut header, data) = small();
    header.set(ALIGNMENT_KEY, Value::U32(24));
    let dir = tempfile::tempdir().unwrap();
    let err = write(&dir.path().join("t.gguf"), &header, |i| {
        Ok(Cow::Borrowed(&data[i][..]))
    })
    .unwrap_err();
    assert!(err.to_string().contains("power of two"), "{err}");
}

/// Parses `bytes` and returns the error text, which must exist.
fn parse_error(bytes: &[u8]) -> String {
    let e = parse(bytes).expect_err("corrupt input must be refused");
    format!("at byte {}: {}", e.offset, e.message)
}

#[test]
fn corrupt_files_are_refused_with_what_and_where() {
    let (header, data) = small();
    let good = written(&header, &data);
    let patched = |at: usize, bytes: &[u8]| {
        let mut b = good.clone();
        b[at..at + bytes.len()].copy_from_slice(bytes);
        b
    };
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"GGML".to_vec(), "not a GGUF file"),
        (patched(4, &2u32.to_le_bytes()), "version 2"),
        (good[..10].to_vec(), "truncated: the tensor count"),
        (
            patched(24, &le64(1 << 40)),
            "truncated: the key of metadata pair 0",
        ),
        (
            patched(35, &13u32.to_le_bytes()),
            "a.b has unknown value type id 13",
        ),
        (patched(35, &7u32.to_le_bytes()), "a.b: bool value 2"),
        (
            patched(32, b"\xff"),
            "the key of metadata pair 0 is not UTF-8",
        ),
        (
            patched(58, &5u32.to_le_bytes()),
            "tensor t has 5 dimensions",
        ),
        (patched(62, &le64(u64::MAX)), "do not fit type F32"),
        (patched(70, &31u32.to_le_bytes()), "unknown ggml type id 31"),
        (patched(70, &8u32.to_le_bytes()), "do not fit type Q8_0"),
        (patched(74, &le64(8)), "not a multiple of the alignment"),
        (patched(74, &le64(32)), "lie outside the file"),
        (good[..100].to_vec(), "lie outside the file"),
        (good[..90].to_vec(), "ends before the data section"),
    ];
    for (bytes, needle) in cases {
        let text = parse_error(&bytes);
        assert!(text.contains(needle), "expected {needle:?} in {text:?}");
    }
}

#[test]
fn duplicates_and_overlaps_are_refused() {
    let (mut header, data) = small();
    header.metadata.push(("a.b".into(), Value::U8(1)));
    let text = parse_error(&written(&header, &data));
    assert!(text.contains("metadata key a.b appears twice"), "{text}");

    let (mut header, mut data) = small();
    header.tensors.push(header.tensors[0].clone());
    data.push(data[0].clone());
    let text = parse_error(&written(&header, &data));
    assert!(text.contains("tensor t appears twice"), "{text}");

    // Two tensors whose offsets both say 0.
    let (mut header, mut data) = small();
    header.tensors.push(TensorInfo {
        name: "u".into(),
        ..header.tensors[0].clone()
    });
    data.push(data[0].clone());
    let mut bytes = written(&header, &data);
    // After the 82 bytes of `small`'s header and the 33 of the second info.
    let second_offset = 82 + 33 - 8;
    assert_eq!(bytes[second_offset..second_offset + 8], le64(32));
    bytes[second_offset..second_offset + 8].copy_from_slice(&le64(0));
    let text = parse_error(&bytes);
    assert!(
        text.contains("the data of tensors t and u overlap"),
        "{text}"
    );
}

/// An array's length counts toward the file's metadata values before its
/// elements are read: one that would pass the bound is refused at its
/// length, however few bytes follow, as is one that passes it together
/// with an earlier array.
#[test]
fn arrays_past_the_metadata_value_bound_are_refused_at_their_length() {
    let array_of = |key: &str, len: u64| {
        let mut b = Vec::new();
        b.extend(le64(key.len() as u64));
        b.extend(key.as_bytes());
        b.extend(9u32.to_le_bytes()); // array
        b.extend(0u32.to_le_bytes()); // of u8
        b.extend(le64(len));
        b
    };
    let file = |pairs: &[Vec<u8>]| {
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend(le64(0));
        b.extend(le64(pairs.len() as u64));
        for pair in pairs {
            b.extend(pair);
        }
        b
    };
    // The array's own value is the first; its elements may be the rest.
    let text = parse_error(&file(&[array_of("big", MAX_METADATA_VALUES)]));
    assert_eq!(
        text,
        "at byte 43: big: an array of 16777216 values takes the metadata past its 16777216"
    );
    let mut first = array_of("a", 3);
    first.extend([1, 2, 3]);
    let bytes = file(&[first, array_of("b", MAX_METADATA_VALUES - 4)]);
    assert_eq!(
        parse_error(&bytes),
        "at byte 69: b: an array of 16777212 values takes the metadata past its 16777216"
    );
    // One fewer fits: the file is then refused as cut short.
    let mut first = array_of("a", 3);
    first.extend([1, 2, 3]);
    let text = parse_error(&file(&[first, array_of("b", MAX_METADATA_VALUES - 5)]));
    assert!(text.contains("truncated"), "{text}");
}

#[test]
fn deeply_nested_arrays_are_refused() {
    let mut value = Value::U8(0);
    for _ in 0..10 {
        let element = value.value_type();
        value = Value::Array(Array::new(element, vec![value]).unwrap());
    }
    let header = Header {
        metadata: vec![("deep".into(), value)],
        tensors: vec![],
    };
    let text = parse_error(&written(&header, &[]));
    assert!(text.contains("deep: arrays nested deeper than 8"), "{text}");
}

#[test]
fn opening_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.gguf");
    std::fs::write(&path, b"GGUF").unwrap();
    let Err(err) = GgufFile::open(&path) else {
        panic!("a 4-byte file opened")
    };
    assert!(matches!(err, Error::Gguf { .. }));
    let text = err.to_string();
    assert!(text.starts_with(&path.display().to_string()), "{text}");
    assert!(text.contains("at byte 4: truncated: the version"), "{text}");

    let empty = dir.path().join("empty.gguf");
    std::fs::write(&empty, b"").unwrap();
    assert!(GgufFile::open(&empty).is_err());
    assert!(matches!(
        GgufFile::open(Path::new("/nonexistent/x.gguf")),
        Err(Error::Io { .. })
    ));
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<u8>().prop_map(Value::U8),
        any::<i16>().prop_map(Value::I16),
        any::<u32>().prop_map(Value::U32),
        any::<i64>().prop_map(Value::I64),
        // Compared with ==, so no NaN.
        (-1e30f32..1e30).prop_map(Value::F32),
        any::<bool>().prop_map(Value::Bool),
        ".{0,12}".prop_map(Value::String),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => scalar(),
        1 => (scalar(), 0..5usize).prop_map(|(v, n)| {
            let element = v.value_type();
            Value::Array(Array::new(element, vec![v; n]).unwrap())
        }),
    ]
}

fn tensor() -> impl Strategy<Value = TensorInfo> {
    let types = prop_oneof![
        Just((GgmlType::F32, 1u64)),
        Just((GgmlType::F16, 1)),
        Just((GgmlType::BF16, 1)),
        Just((GgmlType(8), 32)),
    ];
    (types, prop::collection::vec(1u64..4, 0..4)).prop_map(|((ggml_type, block), mut dims)| {
        dims.insert(0, block * 2);
        TensorInfo {
            name: String::new(),
            dims,
            ggml_type,
        }
    })
}

prop_compose! {
    fn file()(
        metadata in prop::collection::btree_map("[a-z.]{1,10}", value(), 0..6),
        tensors in prop::collection::vec(tensor(), 0..5),
        fill in any::<u8>(),
    ) -> (Header, Vec<Vec<u8>>) {
        let tensors: Vec<TensorInfo> = tensors
            .into_iter()
            .enumerate()
            .map(|(i, t)| TensorInfo { name: format!("blk.{i}.w"), ..t })
            .collect();
        let data = tensors
            .iter()
            .map(|t| vec![fill; t.byte_size().unwrap() as usize])
            .collect();
        (Header { metadata: metadata.into_iter().collect(), tensors }, data)
    }
}

proptest! {
    #[test]
    fn written_files_parse_back_to_the_same_header_and_data((header, data) in file()) {
        let bytes = written(&header, &data);
        let parsed = parse(&bytes).unwrap();
        prop_assert_eq!(&parsed.header, &header);
        for (i, d) in data.iter().enumerate() {
            let start = (parsed.data_start + parsed.offsets[i]) as usize;
            prop_assert_eq!(&bytes[start..start + d.len()], &d[..]);
        }
    }

    #[test]
    fn truncated_files_are_refused((header, data) in file(), cut in any::<prop::sample::Index>()) {
        let bytes = written(&header, &data);
        // Only trailing padding may go without losing anything a reader needs.
        let parsed = parse(&bytes).unwrap();
        let needed = header
            .tensors
            .iter()
            .zip(&parsed.offsets)
            .map(|(t, o)| parsed.data_start + o + t.byte_size().unwrap())
            .max()
            .unwrap_or(0) as usize;
        let len = cut.index(bytes.len());
        if len < needed.max(24) {
            prop_assert!(parse(&bytes[..len]).is_err());
        }
    }

    #[test]
    fn mutated_files_never_panic(
        (header, data) in file(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut bytes = written(&header, &data);
        for (at, byte) in edits {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        // Ok or Err; what matters is that it returns.
        let _ = parse(&bytes);
    }
}
