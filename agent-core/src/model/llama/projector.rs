//! What a Qwen2.5-VL vision projector file must hold before llama.cpp's
//! `mtmd` is given it. `mtmd` checks little of it: a header value that does
//! not fit the tensors, a tensor of another shape or type, or a missing one
//! its loader takes as optional makes ggml assert, which aborts the whole
//! process while the graph is built (at load, or at the first image)
//! instead of failing the load. So btl refuses such a file first, in words,
//! from its header alone ([`check`], pure; the file is read by
//! `gguf::read_header`).

use std::collections::{BTreeMap, HashMap};

/// `clip.projector_type` of Qwen2.5-VL's projector, the one btl runs.
pub(crate) const PROJECTOR_TYPE: &str = "qwen2.5vl_merger";

/// The most vision blocks: Qwen2.5-VL's tower has 32, and a graph of a
/// few hundred passes ggml's node budget, on which it asserts.
const MAX_BLOCKS: u32 = 128;

/// The widest patch: a window attention of 112 pixels holds no merged
/// patch past 56, and llama.cpp's window loop then never advances.
const MAX_PATCH: u32 = 56;

/// A metadata value, as far as the checks read it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    Str(String),
    /// A value of another GGUF type, by the type's name.
    Other(String),
}

/// How a tensor's elements are stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Storage {
    F32,
    F16,
    Bf16,
    /// A block-quantized type, by its name.
    Quantized(String),
    /// Any other ggml type, by its name.
    Other(String),
}

/// A tensor of the file: its ggml sizes (`ne`, innermost first, padded
/// with 1s), storage, and where its data ends in the file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Tensor {
    pub ne: [i64; 4],
    pub storage: Storage,
    pub end: u64,
}

/// A projector file's keys and tensors, without the tensors' data.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Header {
    pub keys: HashMap<String, Value>,
    pub tensors: BTreeMap<String, Tensor>,
    /// The file's length in bytes.
    pub len: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyType {
    U32,
    I32,
    F32,
    Bool,
    Str,
}

impl KeyType {
    fn name(self) -> &'static str {
        match self {
            KeyType::U32 => "u32",
            KeyType::I32 => "i32",
            KeyType::F32 => "f32",
            KeyType::Bool => "bool",
            KeyType::Str => "string",
        }
    }

    fn of(value: &Value) -> Result<Self, &str> {
        Ok(match value {
            Value::U32(_) => KeyType::U32,
            Value::I32(_) => KeyType::I32,
            Value::F32(_) => KeyType::F32,
            Value::Bool(_) => KeyType::Bool,
            Value::Str(_) => KeyType::Str,
            Value::Other(name) => return Err(name),
        })
    }
}

/// The keys llama.cpp reads of this projector with a getter that asserts
/// the stored type, and whether the file must have them.
const KEYS: &[(&str, KeyType, bool)] = &[
    ("clip.projector_type", KeyType::Str, false),
    ("clip.vision.embedding_length", KeyType::U32, true),
    ("clip.vision.attention.head_count", KeyType::U32, true),
    ("clip.vision.feed_forward_length", KeyType::U32, true),
    ("clip.vision.block_count", KeyType::U32, true),
    ("clip.vision.projection_dim", KeyType::U32, true),
    ("clip.vision.image_size", KeyType::U32, true),
    ("clip.vision.patch_size", KeyType::U32, true),
    ("clip.vision.n_wa_pattern", KeyType::U32, true),
    (
        "clip.vision.attention.layer_norm_epsilon",
        KeyType::F32,
        true,
    ),
    ("clip.has_vision_encoder", KeyType::Bool, true),
    ("general.name", KeyType::Str, false),
    ("general.description", KeyType::Str, false),
    ("clip.vision.projector_type", KeyType::Str, false),
    ("clip.vision.mm_patch_merge_type", KeyType::Str, false),
    ("clip.has_audio_encoder", KeyType::Bool, false),
    ("clip.has_gen_audio_encoder", KeyType::Bool, false),
    ("clip.use_gelu", KeyType::Bool, false),
    ("clip.use_silu", KeyType::Bool, false),
    ("clip.vision.attention.head_dim", KeyType::U32, false),
    ("clip.vision.attention.head_count_kv", KeyType::U32, false),
    ("clip.minicpmv_query_num", KeyType::U32, false),
    ("clip.vision.spatial_merge_size", KeyType::U32, false),
    ("clip.minicpmv_version", KeyType::I32, false),
];

/// Refuses, in words, a projector llama.cpp would abort on, or one whose
/// output is not `text_width` wide (the text model's embeddings).
pub(crate) fn check(header: &Header, text_width: i64) -> Result<(), String> {
    let text = |key: &str| match header.keys.get(key) {
        Some(Value::Str(kind)) if !kind.is_empty() => Some(kind),
        _ => None,
    };
    // llama.cpp reads the second key where the first is missing or empty.
    match text("clip.projector_type").or_else(|| text("clip.vision.projector_type")) {
        Some(kind) if kind == PROJECTOR_TYPE => {}
        Some(kind) => {
            return Err(format!(
                "clip.projector_type is {kind:?}; btl runs Qwen2.5-VL's projector, {PROJECTOR_TYPE:?}"
            ));
        }
        _ => return Err("it has no clip.projector_type string: no vision projector".into()),
    }
    for &(key, wanted, required) in KEYS {
        match header.keys.get(key).map(KeyType::of) {
            None if required => return Err(format!("it has no {key}")),
            Some(Ok(found)) if found != wanted => {
                return Err(format!(
                    "{key} is stored as a {}, where llama.cpp reads a {}",
                    found.name(),
                    wanted.name()
                ));
            }
            Some(Err(found)) => {
                return Err(format!(
                    "{key} is stored as a {found}, where llama.cpp reads a {}",
                    wanted.name()
                ));
            }
            _ => {}
        }
    }
    let flag = |key: &str| matches!(header.keys.get(key), Some(Value::Bool(true)));
    if !flag("clip.has_vision_encoder") {
        return Err("clip.has_vision_encoder is false: it has no vision encoder".into());
    }
    if flag("clip.has_audio_encoder") || flag("clip.has_gen_audio_encoder") {
        return Err("it has an audio encoder too, which Qwen2.5-VL's projector has not".into());
    }
    let hparams = Hparams::of(header)?;
    tensors(header, &hparams, text_width)
}

/// The header values the graph is built from, checked against each other.
struct Hparams {
    width: i64,
    blocks: u32,
    patch: i64,
    projection: i64,
}

impl Hparams {
    fn of(header: &Header) -> Result<Self, String> {
        let number = |key: &str| match header.keys.get(key) {
            Some(Value::U32(n)) => *n,
            _ => 0,
        };
        let width = number("clip.vision.embedding_length");
        let blocks = number("clip.vision.block_count");
        if !(1..=MAX_BLOCKS).contains(&blocks) {
            return Err(format!(
                "clip.vision.block_count is {blocks}; btl takes 1 to {MAX_BLOCKS} vision blocks"
            ));
        }
        if number("clip.vision.n_wa_pattern") == 1 {
            return Err(
                "clip.vision.n_wa_pattern is 1: no block would attend within windows, and llama.cpp \
                 asserts on the window mask its graph then lacks (0 for none, else at least 2)"
                    .into(),
            );
        }
        let heads = number("clip.vision.attention.head_count");
        if heads == 0 {
            return Err("clip.vision.attention.head_count is 0".into());
        }
        let head = match header.keys.get("clip.vision.attention.head_dim") {
            Some(Value::U32(d)) if *d > 0 => *d,
            _ => width / heads,
        };
        if head == 0 || u64::from(head) * u64::from(heads) != u64::from(width) {
            return Err(format!(
                "clip.vision.embedding_length {width} is not clip.vision.attention.head_count {heads} heads of {head}"
            ));
        }
        if head % 4 != 0 {
            return Err(format!(
                "a vision head is {head} wide; its 2-D rotary embedding needs a multiple of 4"
            ));
        }
        let patch = number("clip.vision.patch_size");
        if !(1..=MAX_PATCH).contains(&patch) {
            return Err(format!(
                "clip.vision.patch_size is {patch}; btl takes 1 to {MAX_PATCH} pixels (Qwen2.5-VL's is 14)"
            ));
        }
        if let Some(Value::U32(merge)) = header.keys.get("clip.vision.spatial_merge_size")
            && *merge != 2
        {
            return Err(format!(
                "clip.vision.spatial_merge_size is {merge}; Qwen2.5-VL merges 2 × 2 patches"
            ));
        }
        match header.keys.get("clip.vision.attention.layer_norm_epsilon") {
            Some(Value::F32(eps)) if eps.is_finite() && *eps >= 0.0 => {}
            Some(Value::F32(eps)) => {
                return Err(format!(
                    "clip.vision.attention.layer_norm_epsilon is {eps}; it must be a number, at least 0"
                ));
            }
            _ => {}
        }
        Ok(Self {
            width: i64::from(width),
            blocks,
            patch: i64::from(patch),
            projection: i64::from(number("clip.vision.projection_dim")),
        })
    }
}

/// What a tensor of the projector must be.
struct Expected {
    ne: Vec<i64>,
    storage: fn(&Storage) -> bool,
    what: &'static str,
}

fn vector(ne: i64) -> Expected {
    Expected {
        ne: vec![ne],
        storage: |s| *s == Storage::F32,
        what: "f32",
    }
}

fn matrix(input: i64, output: i64) -> Expected {
    Expected {
        ne: vec![input, output],
        storage: |s| !matches!(s, Storage::Other(_)),
        what: "floats or a quantized type",
    }
}

/// Checks every tensor's name, shape and type, that none the graph uses
/// is missing, and that the output is `text_width` wide.
fn tensors(header: &Header, h: &Hparams, text_width: i64) -> Result<(), String> {
    let out_of = |name: &str, axis: usize| header.tensors.get(name).map(|t| t.ne[axis]);
    let missing = |name: &str| format!("it has no tensor {name}");
    let merged = out_of("mm.0.weight", 1).ok_or_else(|| missing("mm.0.weight"))?;
    let blocks = (0..h.blocks)
        .map(|i| {
            let up = format!("v.blk.{i}.ffn_up.weight");
            out_of(&up, 1).ok_or_else(|| missing(&up))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut required = vec![
        "v.patch_embd.weight".to_owned(),
        "v.patch_embd.weight.1".to_owned(),
        "mm.2.weight".to_owned(),
    ];
    for i in 0..h.blocks {
        for part in [
            "attn_q.weight",
            "attn_q.bias",
            "attn_k.weight",
            "attn_k.bias",
            "attn_v.weight",
            "attn_v.bias",
            "attn_out.weight",
            "ffn_down.weight",
        ] {
            required.push(format!("v.blk.{i}.{part}"));
        }
    }
    if let Some(name) = required.iter().find(|n| !header.tensors.contains_key(*n)) {
        return Err(missing(name));
    }
    let (w, p) = (h.width, h.patch);
    for (name, tensor) in &header.tensors {
        let expected = match name.as_str() {
            "v.patch_embd.weight" | "v.patch_embd.weight.1" => Expected {
                ne: vec![p, p, 3, w],
                storage: |s| matches!(s, Storage::F32 | Storage::F16),
                what: "f32 or f16",
            },
            "v.pre_ln.weight" | "v.pre_ln.bias" | "v.post_ln.weight" | "v.post_ln.bias" => {
                vector(w)
            }
            "mm.0.weight" => matrix(4 * w, merged),
            "mm.0.bias" => vector(merged),
            "mm.2.weight" => matrix(merged, h.projection),
            "mm.2.bias" => vector(h.projection),
            _ => match block_part(name).filter(|(i, _)| *i < h.blocks) {
                Some((i, part)) => {
                    let ffn = blocks[i as usize];
                    match part {
                        "ln1.weight" | "ln1.bias" | "ln2.weight" | "ln2.bias" => vector(w),
                        "attn_q.weight" | "attn_k.weight" | "attn_v.weight" | "attn_out.weight" => {
                            matrix(w, w)
                        }
                        "attn_q.bias" | "attn_k.bias" | "attn_v.bias" | "attn_out.bias" => {
                            vector(w)
                        }
                        "ffn_up.weight" | "ffn_gate.weight" => matrix(w, ffn),
                        "ffn_up.bias" | "ffn_gate.bias" => vector(ffn),
                        "ffn_down.weight" => matrix(ffn, w),
                        "ffn_down.bias" => vector(w),
                        _ => return Err(foreign(name)),
                    }
                }
                None => return Err(foreign(name)),
            },
        };
        let mut ne = expected.ne.clone();
        ne.resize(4, 1);
        if tensor.ne[..] != ne[..] || ne.contains(&0) {
            // A side of 0 (a merger or MLP width read off another tensor)
            // would leave a graph of empty tensors that divides by it.
            return Err(format!(
                "tensor {name} is {}, where clip.vision's sizes make it {}{}",
                sizes(&tensor.ne),
                sizes(&ne),
                if ne.contains(&0) {
                    ", with a side of 0"
                } else {
                    ""
                }
            ));
        }
        if !(expected.storage)(&tensor.storage) {
            return Err(format!(
                "tensor {name} is stored as {}, where llama.cpp takes {}",
                storage_name(&tensor.storage),
                expected.what
            ));
        }
        if tensor.end > header.len {
            return Err(format!(
                "tensor {name}'s data ends at byte {}, past the file's {} bytes",
                tensor.end, header.len
            ));
        }
    }
    if h.projection != text_width {
        return Err(format!(
            "its output is {} wide (clip.vision.projection_dim, tensor mm.2.weight); the text model's embeddings are {text_width} wide",
            h.projection
        ));
    }
    Ok(())
}

/// `v.blk.I.PART` as (I, PART).
fn block_part(name: &str) -> Option<(u32, &str)> {
    let (index, part) = name.strip_prefix("v.blk.")?.split_once('.')?;
    let plain = !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit());
    Some((index.parse().ok().filter(|_| plain)?, part))
}

fn foreign(name: &str) -> String {
    format!("it holds a tensor {name}, which Qwen2.5-VL's projector has not")
}

fn sizes(ne: &[i64]) -> String {
    let mut shown: Vec<String> = ne.iter().map(i64::to_string).collect();
    while shown.len() > 1 && shown.last().is_some_and(|d| d == "1") {
        shown.pop();
    }
    format!("[{}]", shown.join(", "))
}

fn storage_name(storage: &Storage) -> &str {
    match storage {
        Storage::F32 => "f32",
        Storage::F16 => "f16",
        Storage::Bf16 => "bf16",
        Storage::Quantized(name) | Storage::Other(name) => name,
    }
}

#[cfg(test)]
mod tests;
