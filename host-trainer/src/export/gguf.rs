//! GGUF version 3, the file format of llama.cpp: reading and writing.
//!
//! Layout (all little-endian): magic `GGUF`, version (u32), tensor count and
//! metadata count (u64); the metadata key/value pairs; one info record per
//! tensor (name, dimensions in ggml order — innermost first —, ggml type,
//! offset into the data section); zero padding to the alignment; the data
//! section, where every tensor starts at a multiple of the alignment
//! (`general.alignment`, default 32).
//!
//! Reading memory-maps the file and checks everything a later access relies
//! on (counts against the file size, type ids, UTF-8, dimensions, that each
//! tensor lies inside the file without overlapping another), so corrupt input
//! gives an error naming the file, the byte offset and the problem, never a
//! panic. Writing lays tensors out back to back in info order, each padded to
//! the alignment, which is what llama.cpp's gguf-py writes: a file read and
//! written again is byte-identical.
//!
//! Written from the format as llama.cpp's `gguf-py` defines it (its
//! constants: type ids, block sizes, the default alignment);
//! `tests/gguf.rs` checks the result against files llama.cpp's tools made.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt::Display;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::atomic;
use crate::error::{Error, Result};

// Tensor bytes are copied as they are in memory.
#[cfg(target_endian = "big")]
compile_error!(
    "GGUF files are little-endian; host-trainer writes them only on little-endian hosts"
);

const MAGIC: &[u8; 4] = b"GGUF";
const VERSION: u32 = 3;
/// The key that overrides [`DEFAULT_ALIGNMENT`].
pub const ALIGNMENT_KEY: &str = "general.alignment";
/// Data alignment when the metadata does not set one.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// ggml tensors have at most 4 dimensions.
const MAX_DIMS: usize = 4;
/// Nested arrays are legal but unused in practice; the bound keeps a crafted
/// file from exhausting the stack.
const MAX_ARRAY_DEPTH: usize = 8;
/// The most metadata values a file may hold, array elements included. The
/// largest vocabularies (262,144 tokens) put under a million in their
/// token, type and merge arrays; a value in memory takes up to 32 bytes
/// where its encoding may take one, so the bound keeps a crafted file of
/// a gigabyte from asking for tens.
const MAX_METADATA_VALUES: u64 = 1 << 24;
/// The most records reserved ahead of reading them: a count in the file
/// is a claim, and the vector grows past this as records do arrive.
const RESERVE_AHEAD: usize = 1 << 16;

/// The type of a metadata value, with its GGUF id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl ValueType {
    /// The fewest bytes one value of this type takes in a file (a string
    /// its length, an array its element type and length).
    fn min_encoded_size(self) -> usize {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => 1,
            U16 | I16 => 2,
            U32 | I32 | F32 => 4,
            U64 | I64 | F64 | String => 8,
            Array => 12,
        }
    }

    fn from_id(id: u32) -> Option<Self> {
        use ValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }
}

/// A metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    Array(Array),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl Value {
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
}

/// A metadata array: every item has the element type (checked on creation,
/// since the file stores the type once for all items).
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    element: ValueType,
    items: Vec<Value>,
}

impl Array {
    /// `None` if an item is not of type `element`.
    pub fn new(element: ValueType, items: Vec<Value>) -> Option<Self> {
        items
            .iter()
            .all(|v| v.value_type() == element)
            .then_some(Self { element, items })
    }

    pub fn element(&self) -> ValueType {
        self.element
    }

    pub fn items(&self) -> &[Value] {
        &self.items
    }
}

/// A ggml tensor type, by its id in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GgmlType(pub u32);

/// (id, name, elements per block, bytes per block), from gguf-py's
/// `GGML_QUANT_SIZES`.
const GGML_TYPES: &[(u32, &str, u64, u64)] = &[
    (0, "F32", 1, 4),
    (1, "F16", 1, 2),
    (2, "Q4_0", 32, 18),
    (3, "Q4_1", 32, 20),
    (6, "Q5_0", 32, 22),
    (7, "Q5_1", 32, 24),
    (8, "Q8_0", 32, 34),
    (9, "Q8_1", 32, 36),
    (10, "Q2_K", 256, 84),
    (11, "Q3_K", 256, 110),
    (12, "Q4_K", 256, 144),
    (13, "Q5_K", 256, 176),
    (14, "Q6_K", 256, 210),
    (15, "Q8_K", 256, 292),
    (16, "IQ2_XXS", 256, 66),
    (17, "IQ2_XS", 256, 74),
    (18, "IQ3_XXS", 256, 98),
    (19, "IQ1_S", 256, 50),
    (20, "IQ4_NL", 32, 18),
    (21, "IQ3_S", 256, 110),
    (22, "IQ2_S", 256, 82),
    (23, "IQ4_XS", 256, 136),
    (24, "I8", 1, 1),
    (25, "I16", 1, 2),
    (26, "I32", 1, 4),
    (27, "I64", 1, 8),
    (28, "F64", 1, 8),
    (29, "IQ1_M", 256, 56),
    (30, "BF16", 1, 2),
    (34, "TQ1_0", 256, 54),
    (35, "TQ2_0", 256, 66),
    (39, "MXFP4", 32, 17),
    (40, "NVFP4", 64, 36),
    (41, "Q1_0", 128, 18),
    (42, "Q2_0", 64, 18),
];

impl GgmlType {
    pub const F32: Self = Self(0);
    pub const F16: Self = Self(1);
    pub const BF16: Self = Self(30);

    fn entry(self) -> Option<&'static (u32, &'static str, u64, u64)> {
        GGML_TYPES.iter().find(|t| t.0 == self.0)
    }

    /// The name llama.cpp prints (`Q8_0`), or `type N` for an unknown id.
    pub fn name(self) -> Cow<'static, str> {
        match self.entry() {
            Some(t) => Cow::Borrowed(t.1),
            None => Cow::Owned(format!("type {}", self.0)),
        }
    }

    /// Bytes of a tensor of this type with these dimensions (ggml order);
    /// `None` for an unknown type, a first dimension that is not a whole
    /// number of blocks, or a size that overflows.
    pub fn byte_size(self, dims: &[u64]) -> Option<u64> {
        let &(_, _, block, block_bytes) = self.entry()?;
        let first = dims.first().copied().unwrap_or(1);
        if first % block != 0 {
            return None;
        }
        dims.iter()
            .skip(1)
            .try_fold((first / block).checked_mul(block_bytes)?, |n, &d| {
                n.checked_mul(d)
            })
            // ggml counts bytes and elements in int64.
            .filter(|&n| n <= i64::MAX as u64)
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// One tensor's name, dimensions (ggml order: innermost first, the reverse of
/// torch's shape) and type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
}

impl TensorInfo {
    /// The torch shape: the dimensions outermost first.
    pub fn shape(&self) -> Vec<i64> {
        self.dims.iter().rev().map(|&d| d as i64).collect()
    }

    /// Bytes of data; `None` if the type or dimensions are invalid.
    pub fn byte_size(&self) -> Option<u64> {
        self.ggml_type.byte_size(&self.dims)
    }
}

/// Everything but the tensor data: metadata in file order, tensor infos in
/// file order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Header {
    pub metadata: Vec<(String, Value)>,
    pub tensors: Vec<TensorInfo>,
}

impl Header {
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Replaces the value of `key` where it stands, or appends it.
    pub fn set(&mut self, key: &str, value: Value) {
        match self.metadata.iter_mut().find(|(k, _)| k == key) {
            Some(entry) => entry.1 = value,
            None => self.metadata.push((key.to_owned(), value)),
        }
    }

    /// The data alignment, or why `general.alignment` is unusable.
    pub fn alignment(&self) -> std::result::Result<u64, String> {
        match self.get(ALIGNMENT_KEY) {
            None => Ok(DEFAULT_ALIGNMENT),
            Some(Value::U32(a)) if a.is_power_of_two() => Ok(u64::from(*a)),
            Some(Value::U32(a)) => {
                Err(format!("{ALIGNMENT_KEY} is {a}; it must be a power of two"))
            }
            Some(other) => Err(format!(
                "{ALIGNMENT_KEY} has type {:?}; it must be U32",
                other.value_type()
            )),
        }
    }

    /// Where each tensor's data starts in the data section when tensors are
    /// laid out back to back, each aligned.
    fn layout(&self, alignment: u64) -> std::result::Result<Vec<u64>, String> {
        let mut offsets = Vec::with_capacity(self.tensors.len());
        let mut end = 0u64;
        for t in &self.tensors {
            let size = t.byte_size().ok_or_else(|| {
                format!(
                    "tensor {}: dimensions {:?} do not fit type {}",
                    t.name, t.dims, t.ggml_type
                )
            })?;
            offsets.push(end);
            end = end
                .checked_add(size)
                .and_then(|e| align(e, alignment))
                .ok_or("the data section's size overflows")?;
        }
        Ok(offsets)
    }
}

fn align(n: u64, alignment: u64) -> Option<u64> {
    n.checked_next_multiple_of(alignment)
}

/// A problem found while parsing, at a byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub offset: u64,
    pub message: String,
}

/// A parsed GGUF image: the header, where the data section starts and where
/// each tensor's data starts in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub header: Header,
    pub data_start: u64,
    pub offsets: Vec<u64>,
}

/// Parses and checks a whole GGUF file held in `bytes`. Pure; never panics.
pub fn parse(bytes: &[u8]) -> std::result::Result<Parsed, ParseError> {
    let mut r = Reader {
        bytes,
        pos: 0,
        values: 0,
    };
    let magic = r.take(4, &"the magic")?;
    if magic != MAGIC {
        return Err(r.error_at(
            0,
            format!("not a GGUF file (magic {magic:02x?}, expected \"GGUF\")"),
        ));
    }
    let version = r.u32(&"the version")?;
    if version != VERSION {
        return Err(r.error_at(
            4,
            format!("GGUF version {version}; only version {VERSION} is supported"),
        ));
    }
    let n_tensors = r.u64(&"the tensor count")?;
    let n_kv = r.u64(&"the metadata count")?;

    // Each pair takes at least 13 bytes (key length, type, one byte of value),
    // each tensor info at least 24: counts beyond that cannot be right.
    let mut header = Header::default();
    header.metadata.reserve(r.capacity_for(n_kv, 13));
    let mut keys = HashSet::new();
    for i in 0..n_kv {
        let start = r.pos;
        let key = r.string(&format!("the key of metadata pair {i}"))?;
        if !keys.insert(key.clone()) {
            return Err(r.error_at(start, format!("metadata key {key} appears twice")));
        }
        let type_at = r.pos;
        let id = r.u32(&format!("the type of {key}"))?;
        let value_type = ValueType::from_id(id)
            .ok_or_else(|| r.error_at(type_at, format!("{key} has unknown value type id {id}")))?;
        let value = r.value(value_type, &key, 0)?;
        header.metadata.push((key, value));
    }
    let alignment = header.alignment().map_err(|m| r.error_at(r.pos, m))?;

    header.tensors.reserve(r.capacity_for(n_tensors, 24));
    let mut stored_offsets = Vec::with_capacity(header.tensors.capacity());
    let mut names = HashSet::new();
    for i in 0..n_tensors {
        let start = r.pos;
        let name = r.string(&format!("the name of tensor {i}"))?;
        if !names.insert(name.clone()) {
            return Err(r.error_at(start, format!("tensor {name} appears twice")));
        }
        let n_dims_at = r.pos;
        let n_dims = r.u32(&format!("the dimension count of tensor {name}"))?;
        if n_dims as usize > MAX_DIMS {
            return Err(r.error_at(
                n_dims_at,
                format!("tensor {name} has {n_dims} dimensions; ggml allows at most {MAX_DIMS}"),
            ));
        }
        let dims = (0..n_dims)
            .map(|_| r.u64(&format!("the dimensions of tensor {name}")))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let type_at = r.pos;
        let ggml_type = GgmlType(r.u32(&format!("the type of tensor {name}"))?);
        if ggml_type.entry().is_none() {
            return Err(r.error_at(
                type_at,
                format!("tensor {name} has unknown ggml type id {}", ggml_type.0),
            ));
        }
        let offset_at = r.pos;
        let offset = r.u64(&format!("the data offset of tensor {name}"))?;
        if offset % alignment != 0 {
            return Err(r.error_at(offset_at, format!("tensor {name}: data offset {offset} is not a multiple of the alignment {alignment}")));
        }
        let info = TensorInfo {
            name,
            dims,
            ggml_type,
        };
        if info.byte_size().is_none() {
            return Err(r.error_at(n_dims_at, format!(
                "tensor {}: dimensions {:?} do not fit type {} (the first must be a whole number of blocks; the size must fit in 63 bits)",
                info.name, info.dims, info.ggml_type
            )));
        }
        header.tensors.push(info);
        stored_offsets.push(offset);
    }

    let file_len = bytes.len() as u64;
    let data_start = align(r.pos as u64, alignment)
        .filter(|&s| s <= file_len || header.tensors.is_empty())
        .ok_or_else(|| {
            r.error_at(
                r.pos,
                format!("the file ends before the data section (needs padding to {alignment})"),
            )
        })?;

    // Data regions, sorted by offset, must lie inside the file and not overlap.
    let mut regions: Vec<(u64, u64, usize)> = Vec::with_capacity(header.tensors.len());
    for (i, (t, &offset)) in header.tensors.iter().zip(&stored_offsets).enumerate() {
        let size = t.byte_size().unwrap_or(0);
        let end = data_start
            .checked_add(offset)
            .and_then(|s| s.checked_add(size))
            .filter(|&e| e <= file_len)
            .ok_or_else(|| r.error_at(file_len, format!(
                "tensor {}: its {size} bytes at data offset {offset} lie outside the file ({file_len} bytes, data section at {data_start}); the file is truncated or corrupt",
                t.name
            )))?;
        regions.push((data_start + offset, end, i));
    }
    regions.sort_unstable();
    for pair in regions.windows(2) {
        let ((_, end_a, a), (start_b, _, b)) = (pair[0], pair[1]);
        if start_b < end_a {
            return Err(r.error_at(
                start_b,
                format!(
                    "the data of tensors {} and {} overlap",
                    header.tensors[a].name, header.tensors[b].name
                ),
            ));
        }
    }
    Ok(Parsed {
        header,
        data_start,
        offsets: stored_offsets,
    })
}

/// A cursor over the file's bytes whose reads check the bounds.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Metadata values read so far, array elements included.
    values: u64,
}

/// What a read is of, in words: `the value of` and a key.
struct Of<'k>(&'static str, &'k str);

impl Display for Of<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.0, self.1)
    }
}

impl<'a> Reader<'a> {
    fn error_at(&self, offset: impl TryInto<u64>, message: String) -> ParseError {
        ParseError {
            offset: offset.try_into().unwrap_or(u64::MAX),
            message,
        }
    }

    /// `what` is said only in an error: building it for every element of a
    /// long array under a long key was quadratic.
    fn take(&mut self, n: u64, what: &dyn Display) -> std::result::Result<&'a [u8], ParseError> {
        let left = self.bytes.len() - self.pos;
        match usize::try_from(n) {
            Ok(n) if n <= left => {
                let slice = &self.bytes[self.pos..self.pos + n];
                self.pos += n;
                Ok(slice)
            }
            _ => Err(self.error_at(
                self.pos,
                format!("truncated: {what} needs {n} bytes, {left} are left"),
            )),
        }
    }

    fn array<const N: usize>(
        &mut self,
        what: &dyn Display,
    ) -> std::result::Result<[u8; N], ParseError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N as u64, what)?);
        Ok(out)
    }

    fn u32(&mut self, what: &dyn Display) -> std::result::Result<u32, ParseError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &dyn Display) -> std::result::Result<u64, ParseError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A reservation for `count` records of at least `min_size` bytes each
    /// that the remaining bytes could hold, and at most [`RESERVE_AHEAD`]:
    /// never trusts the count alone.
    fn capacity_for(&self, count: u64, min_size: usize) -> usize {
        let fit = ((self.bytes.len() - self.pos) / min_size).min(RESERVE_AHEAD);
        usize::try_from(count).map_or(fit, |c| c.min(fit))
    }

    fn string(&mut self, what: &dyn Display) -> std::result::Result<String, ParseError> {
        let len = self.u64(what)?;
        let start = self.pos;
        let raw = self.take(len, what)?;
        match std::str::from_utf8(raw) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(self.error_at(start, format!("{what} is not UTF-8: {e}"))),
        }
    }

    fn value(
        &mut self,
        value_type: ValueType,
        key: &str,
        depth: usize,
    ) -> std::result::Result<Value, ParseError> {
        let what = &Of("the value of", key);
        self.values += 1;
        if self.values > MAX_METADATA_VALUES {
            return Err(self.error_at(
                self.pos,
                format!("{key}: the metadata holds more than {MAX_METADATA_VALUES} values"),
            ));
        }
        Ok(match value_type {
            ValueType::U8 => Value::U8(u8::from_le_bytes(self.array(what)?)),
            ValueType::I8 => Value::I8(i8::from_le_bytes(self.array(what)?)),
            ValueType::U16 => Value::U16(u16::from_le_bytes(self.array(what)?)),
            ValueType::I16 => Value::I16(i16::from_le_bytes(self.array(what)?)),
            ValueType::U32 => Value::U32(self.u32(what)?),
            ValueType::I32 => Value::I32(i32::from_le_bytes(self.array(what)?)),
            ValueType::F32 => Value::F32(f32::from_le_bytes(self.array(what)?)),
            ValueType::U64 => Value::U64(self.u64(what)?),
            ValueType::I64 => Value::I64(i64::from_le_bytes(self.array(what)?)),
            ValueType::F64 => Value::F64(f64::from_le_bytes(self.array(what)?)),
            ValueType::Bool => {
                let at = self.pos;
                match self.array::<1>(what)?[0] {
                    0 => Value::Bool(false),
                    1 => Value::Bool(true),
                    b => {
                        return Err(
                            self.error_at(at, format!("{key}: bool value {b} (must be 0 or 1)"))
                        );
                    }
                }
            }
            ValueType::String => Value::String(self.string(what)?),
            ValueType::Array => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(self.error_at(
                        self.pos,
                        format!("{key}: arrays nested deeper than {MAX_ARRAY_DEPTH}"),
                    ));
                }
                let type_at = self.pos;
                let id = self.u32(&Of("the array type of", key))?;
                let element = ValueType::from_id(id).ok_or_else(|| {
                    self.error_at(
                        type_at,
                        format!("{key}: unknown array element type id {id}"),
                    )
                })?;
                let len_at = self.pos;
                let len = self.u64(&Of("the array length of", key))?;
                if len > MAX_METADATA_VALUES - self.values {
                    return Err(self.error_at(
                        len_at,
                        format!(
                            "{key}: an array of {len} values takes the metadata past its \
                             {MAX_METADATA_VALUES}"
                        ),
                    ));
                }
                let mut items =
                    Vec::with_capacity(self.capacity_for(len, element.min_encoded_size()));
                for _ in 0..len {
                    items.push(self.value(element, key, depth + 1)?);
                }
                Value::Array(Array { element, items })
            }
        })
    }
}

/// A GGUF file opened for reading: its checked header and its tensors' bytes.
pub struct GgufFile {
    path: PathBuf,
    map: Mmap,
    parsed: Parsed,
}

impl GgufFile {
    pub fn open(path: &Path) -> Result<Self> {
        let io = |source| Error::Io {
            path: path.to_owned(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        // SAFETY: read-only map; changing a template while it is exported is
        // outside what is supported (as for the checkpoints in `weights`).
        let map = unsafe { Mmap::map(&file) }.map_err(io)?;
        let parsed = parse(&map).map_err(|e| Error::Gguf {
            path: path.to_owned(),
            message: format!("at byte {}: {}", e.offset, e.message),
        })?;
        Ok(Self {
            path: path.to_owned(),
            map,
            parsed,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn header(&self) -> &Header {
        &self.parsed.header
    }

    /// The bytes of tensor `index` (in info order).
    pub fn tensor_data(&self, index: usize) -> &[u8] {
        let info = &self.parsed.header.tensors[index];
        // `parse` checked that the region lies inside the file.
        let start = (self.parsed.data_start + self.parsed.offsets[index]) as usize;
        let size = info.byte_size().unwrap_or(0) as usize;
        &self.map[start..start + size]
    }
}

/// The bytes of everything before the data section, padding included, for
/// tensors laid out as [`Header::layout`] says.
fn encode_header(header: &Header, offsets: &[u64], alignment: u64) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(header.tensors.len() as u64).to_le_bytes());
    out.extend_from_slice(&(header.metadata.len() as u64).to_le_bytes());
    for (key, value) in &header.metadata {
        encode_string(&mut out, key);
        out.extend_from_slice(&(value.value_type() as u32).to_le_bytes());
        encode_value(&mut out, value);
    }
    for (t, offset) in header.tensors.iter().zip(offsets) {
        encode_string(&mut out, &t.name);
        out.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
        for d in &t.dims {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.extend_from_slice(&t.ggml_type.0.to_le_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
    }
    let padded = (out.len() as u64).next_multiple_of(alignment);
    out.resize(padded as usize, 0);
    out
}

fn encode_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn encode_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::U8(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I8(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::Bool(v) => out.push(u8::from(*v)),
        Value::String(s) => encode_string(out, s),
        Value::Array(a) => {
            out.extend_from_slice(&(a.element as u32).to_le_bytes());
            out.extend_from_slice(&(a.items.len() as u64).to_le_bytes());
            for item in &a.items {
                encode_value(out, item);
            }
        }
        Value::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
    }
}

/// Writes a GGUF file atomically: `header`, then each tensor's bytes as
/// `data(index)` returns them (one tensor in memory at a time), padded to the
/// alignment. A tensor whose bytes do not match its type and dimensions is an
/// error, and `path` is then left as it was.
pub fn write<'a>(
    path: &Path,
    header: &Header,
    mut data: impl FnMut(usize) -> Result<Cow<'a, [u8]>>,
) -> Result<()> {
    let invalid = |message: String| Error::Gguf {
        path: path.to_owned(),
        message,
    };
    let alignment = header.alignment().map_err(invalid)?;
    let offsets = header.layout(alignment).map_err(invalid)?;
    let head = encode_header(header, &offsets, alignment);
    atomic::write_file(path, |w| {
        let io = |source| Error::Io {
            path: path.to_owned(),
            source,
        };
        w.write_all(&head).map_err(io)?;
        let zeros = vec![0u8; alignment as usize];
        for (index, info) in header.tensors.iter().enumerate() {
            let bytes = data(index)?;
            let expected = info.byte_size().unwrap_or(0);
            if bytes.len() as u64 != expected {
                return Err(invalid(format!(
                    "tensor {}: {} bytes of data given, its type {} and dimensions {:?} need {expected}",
                    info.name,
                    bytes.len(),
                    info.ggml_type,
                    info.dims
                )));
            }
            w.write_all(&bytes).map_err(io)?;
            let pad = expected.next_multiple_of(alignment) - expected;
            w.write_all(&zeros[..pad as usize]).map_err(io)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests;
