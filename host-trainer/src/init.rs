//! A new Qwen2.5-VL of a chosen size with random weights (`btl-train init`),
//! or with the weights of GGUF files of that size (`--from-gguf`):
//! the Hugging Face directory the trainer (and transformers) loads, and the
//! text and projector GGUFs llama.cpp runs and `btl-train export` later uses
//! as templates, all written without Python.
//!
//! The GGUF metadata is what llama.cpp's converter writes for Qwen2.5-VL
//! (`tests/init.rs` compares it key by key with the fixture's converted
//! files); the tokenizer goes in as the converter puts a Qwen2 BPE tokenizer:
//! tokens in id order, added tokens typed control (special, or `<|…|>`) or
//! user-defined, ids up to the vocabulary size filled with `[PADn]`.
//! Initialisation follows transformers' `_init_weights` for the family:
//! matrices and embeddings normal(0, `init_std`), biases 0, norms 1.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Value as Json, json};
use tch::{Device, Kind, Tensor};

use crate::config::{Config, TextConfig, VisionConfig};
use crate::error::{Error, Result};
use crate::export::gguf::{Array, GgufFile, Header, Value, ValueType};
use crate::export::{Precision, write_new_gguf};
use crate::import::{Imported, gguf_tokens, load_gguf_weights};
use crate::lora::generator;
use crate::model::Qwen25Vl;

/// `MODEL.toml`: the size of the model and where its vocabulary comes from.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// `general.name` of the GGUF files.
    pub name: String,
    /// A Hugging Face `tokenizer.json` (byte-level BPE with Qwen2's added
    /// tokens); a relative path is read from the TOML file's directory.
    pub tokenizer: PathBuf,
    #[serde(default)]
    pub seed: u64,
    #[serde(default = "default_init_std")]
    pub init_std: f64,
    #[serde(default)]
    pub tie_word_embeddings: bool,
    /// Rows of the embedding; by default the tokenizer's size rounded up to
    /// a multiple of 128, as Qwen's checkpoints are padded.
    pub vocab_size: Option<i64>,
    pub text: TextSpec,
    pub vision: VisionSpec,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextSpec {
    pub layers: i64,
    pub hidden: i64,
    pub intermediate: i64,
    pub heads: i64,
    pub kv_heads: i64,
    #[serde(default = "default_rope_theta")]
    pub rope_theta: f64,
    #[serde(default = "default_context")]
    pub max_position_embeddings: i64,
    #[serde(default = "default_eps")]
    pub rms_norm_eps: f64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VisionSpec {
    pub depth: i64,
    pub hidden: i64,
    pub intermediate: i64,
    pub heads: i64,
    /// Every n-th block attends over the whole image, the others within
    /// windows (Qwen2.5-VL-3B: 8 of 32 blocks; llama.cpp needs this pattern).
    pub full_attention_every: i64,
    /// Side of an attention window in pixels.
    #[serde(default = "default_window")]
    pub window_size: i64,
}

fn default_init_std() -> f64 {
    0.02
}
fn default_rope_theta() -> f64 {
    1_000_000.0
}
fn default_context() -> i64 {
    32_768
}
fn default_eps() -> f64 {
    1e-6
}
fn default_window() -> i64 {
    112
}

/// Qwen2.5-VL's fixed vision geometry and image statistics (the CLIP ones).
const PATCH: i64 = 14;
const MERGE: i64 = 2;
const TEMPORAL_PATCH: i64 = 2;
const VISION_ROPE_THETA: f64 = 10_000.0;
/// The vision tower's RMSNorm epsilon, fixed in the architecture.
const VISION_EPS: f32 = 1e-6;
const IMAGE_MEAN: [f32; 3] = [0.481_454_66, 0.457_827_5, 0.408_210_73];
const IMAGE_STD: [f32; 3] = [0.268_629_54, 0.261_302_6, 0.275_777_1];
/// llama.cpp's converter writes this for every Qwen2.5-VL projector; the
/// encoder takes any size.
const CLIP_IMAGE_SIZE: u32 = 560;

impl ModelSpec {
    /// Reads a `MODEL.toml`; a relative tokenizer path is made relative to it.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
        let mut spec: Self = toml::from_str(&text).map_err(|e| Error::Config {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        if spec.tokenizer.is_relative() {
            let base = path.parent().unwrap_or(Path::new("."));
            spec.tokenizer = base.join(&spec.tokenizer);
        }
        Ok(spec)
    }
}

/// A tokenizer as the GGUF stores it.
#[derive(Debug, Clone, PartialEq)]
pub struct Vocabulary {
    /// Every id's token, up to the model's vocabulary size.
    pub tokens: Vec<String>,
    /// llama.cpp's token types: 1 normal, 3 control, 4 user-defined, 5 unused.
    pub types: Vec<i32>,
    /// BPE merges as `"left right"`.
    pub merges: Vec<String>,
    /// Ids of the added tokens by text.
    pub added: HashMap<String, i64>,
}

const NORMAL: i32 = 1;
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;
const UNUSED: i32 = 5;

impl Vocabulary {
    /// Reads `tokenizer.json`: every id up to the largest, gaps filled
    /// with `[PADn]`.
    pub fn from_tokenizer_json(path: &Path) -> Result<Self> {
        let bad = |message: String| Error::Config {
            path: path.to_owned(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
        let root: Json = serde_json::from_str(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
        let model = &root["model"];
        if model["type"].as_str() != Some("BPE") {
            return Err(bad(format!(
                "model.type is {}; a Qwen2 tokenizer is byte-level BPE",
                model["type"]
            )));
        }
        let id_of = |v: &Json, what: &str| {
            v.as_i64()
                .filter(|&id| (0..1 << 24).contains(&id))
                .ok_or_else(|| bad(format!("{what} has no valid id: {v}")))
        };
        let mut by_id: HashMap<i64, (String, i32)> = HashMap::new();
        let vocab = model["vocab"]
            .as_object()
            .ok_or_else(|| bad("model.vocab is not an object".to_owned()))?;
        for (token, id) in vocab {
            let id = id_of(id, &format!("model.vocab[{token:?}]"))?;
            if by_id.insert(id, (token.clone(), NORMAL)).is_some() {
                return Err(bad(format!("id {id} is given twice")));
            }
        }
        let mut added = HashMap::new();
        for (i, token) in root["added_tokens"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let content = token["content"]
                .as_str()
                .ok_or_else(|| bad(format!("added_tokens[{i}] has no content")))?;
            let id = id_of(&token["id"], &format!("added_tokens[{i}]"))?;
            let special = token["special"].as_bool().unwrap_or(false);
            // As the converter does: `<|…|>` is control whatever the flag says.
            let looks_special = content.starts_with("<|") && content.ends_with("|>");
            let kind = if special || looks_special {
                CONTROL
            } else {
                USER_DEFINED
            };
            match by_id.insert(id, (content.to_owned(), kind)) {
                Some((old, _)) if old != content => {
                    return Err(bad(format!(
                        "id {id} is {old:?} in the vocabulary and {content:?} in added_tokens"
                    )));
                }
                _ => {}
            }
            added.insert(content.to_owned(), id);
        }
        let count = by_id.keys().max().map_or(0, |&m| m + 1);
        let (mut tokens, mut types) = (Vec::new(), Vec::new());
        for id in 0..count {
            let (token, kind) = by_id
                .remove(&id)
                .unwrap_or_else(|| (format!("[PAD{id}]"), UNUSED));
            tokens.push(token);
            types.push(kind);
        }
        let merges = model["merges"]
            .as_array()
            .ok_or_else(|| bad("model.merges is not a list".to_owned()))?
            .iter()
            .enumerate()
            .map(|(i, m)| match m {
                Json::String(s) => Ok(s.clone()),
                Json::Array(pair) => match pair.as_slice() {
                    [Json::String(a), Json::String(b)] => Ok(format!("{a} {b}")),
                    _ => Err(bad(format!("model.merges[{i}] is not a pair of strings"))),
                },
                _ => Err(bad(format!(
                    "model.merges[{i}] is neither a string nor a pair"
                ))),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            tokens,
            types,
            merges,
            added,
        })
    }

    /// Fills ids up to `size` with `[PADn]`, as the converter pads a
    /// vocabulary to the embedding's rows; `path` names the tokenizer in
    /// the error when it already has more.
    fn pad_to(&mut self, size: i64, path: &Path) -> Result<()> {
        let count = self.tokens.len() as i64;
        if size < count {
            return Err(Error::Config {
                path: path.to_owned(),
                message: format!(
                    "the tokenizer has ids up to {}, more than vocab_size {size}",
                    count - 1
                ),
            });
        }
        for id in count..size {
            self.tokens.push(format!("[PAD{id}]"));
            self.types.push(UNUSED);
        }
        Ok(())
    }

    /// The id of added token `token`, or an error naming it.
    fn added_id(&self, token: &str, path: &Path) -> Result<i64> {
        self.added.get(token).copied().ok_or_else(|| Error::Config {
            path: path.to_owned(),
            message: format!("the tokenizer has no added token {token}, which Qwen2.5-VL needs"),
        })
    }
}

/// The special tokens that tie the text model to the images and the chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SpecialIds {
    image: i64,
    video: i64,
    vision_start: i64,
    vision_end: i64,
    /// `<|endoftext|>`: BOS and padding.
    endoftext: i64,
    /// `<|im_end|>`: the end of a turn.
    im_end: i64,
}

impl SpecialIds {
    fn of(vocab: &Vocabulary, path: &Path) -> Result<Self> {
        Ok(Self {
            image: vocab.added_id("<|image_pad|>", path)?,
            video: vocab.added_id("<|video_pad|>", path)?,
            vision_start: vocab.added_id("<|vision_start|>", path)?,
            vision_end: vocab.added_id("<|vision_end|>", path)?,
            endoftext: vocab.added_id("<|endoftext|>", path)?,
            im_end: vocab.added_id("<|im_end|>", path)?,
        })
    }

    /// `config` with the image and vision-marker tokens these ids name.
    fn tie(self, config: Config) -> Config {
        Config {
            image_token_id: self.image,
            video_token_id: self.video,
            vision_start_token_id: self.vision_start,
            vision_end_token_id: self.vision_end,
            ..config
        }
    }
}

/// How M-RoPE splits a head's `head_dim / 2` frequencies between time,
/// height and width: a quarter to time, the rest halved (Qwen2.5-VL-3B/7B:
/// 128 → [16, 24, 24]).
pub fn mrope_section(head_dim: i64) -> Vec<i64> {
    let half = head_dim / 2;
    let t = half / 4;
    let h = (half - t) / 2;
    vec![t, h, half - t - h]
}

/// The most embedding rows: token ids a tokenizer may give stay below it.
const MAX_VOCAB: i64 = 1 << 24;

/// Refuses a model whose float32 weights alone would not fit in `memory`
/// bytes (this machine's, where it is known): making them would end in an
/// out-of-memory kill, or in a libtorch allocation failure that names no
/// key of the spec.
fn check_fits(config: &Config, memory: Option<u64>, path: &Path) -> Result<()> {
    let Some(memory) = memory else {
        return Ok(());
    };
    let parameters = parameters_at_least(config);
    let bytes = parameters * 4.0;
    if bytes <= memory as f64 {
        return Ok(());
    }
    let gib = |bytes: f64| bytes / f64::from(1u32 << 30);
    let (t, v) = (&config.text, &config.vision);
    Err(Error::Config {
        path: path.to_owned(),
        message: format!(
            "the model would have at least {parameters:.0} parameters, {:.1} GiB as float32, more than this machine's {:.1} GiB of memory (vocab_size {}, text.hidden {}, text.intermediate {}, text.layers {}, vision.hidden {}, vision.intermediate {}, vision.depth {})",
            gib(bytes),
            gib(memory as f64),
            t.vocab_size,
            t.hidden_size,
            t.intermediate_size,
            t.num_hidden_layers,
            v.hidden_size,
            v.intermediate_size,
            v.depth
        ),
    })
}

/// The weights of the matrices a Qwen2.5-VL model of `config` has at the
/// least (the embedding and an untied head, each layer's projections,
/// each vision block's, the patch embedding and the merger; no biases or
/// norms), in floating point so that no size a spec may hold overflows.
fn parameters_at_least(config: &Config) -> f64 {
    let t = &config.text;
    let (h, i, layers) = (
        t.hidden_size as f64,
        t.intermediate_size as f64,
        t.num_hidden_layers as f64,
    );
    let kv = t.num_key_value_heads as f64 * t.head_dim() as f64;
    let heads = if config.tie_word_embeddings { 1.0 } else { 2.0 };
    let text =
        heads * t.vocab_size as f64 * h + layers * (2.0 * h * h + 2.0 * h * kv + 3.0 * h * i);
    let v = &config.vision;
    let (vh, vi) = (v.hidden_size as f64, v.intermediate_size as f64);
    let merged = 4.0 * vh;
    let vision = v.depth as f64 * (4.0 * vh * vh + 3.0 * vh * vi)
        + v.patch_dim() as f64 * vh
        + merged * merged
        + merged * v.out_hidden_size as f64;
    text + vision
}

/// This machine's memory in bytes, where `/proc/meminfo` tells it.
fn total_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib = text
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?;
    kib.checked_mul(1024)
}

/// The spec as the trainer's [`Config`], checked; errors name the key.
pub fn model_config(spec: &ModelSpec, vocab_size: i64, path: &Path) -> Result<Config> {
    let bad = |message: String| Error::Config {
        path: path.to_owned(),
        message,
    };
    let (t, v) = (&spec.text, &spec.vision);
    for (key, value) in [
        ("text.layers", t.layers),
        ("text.hidden", t.hidden),
        ("text.intermediate", t.intermediate),
        ("text.heads", t.heads),
        ("text.kv_heads", t.kv_heads),
        ("text.max_position_embeddings", t.max_position_embeddings),
        ("vision.depth", v.depth),
        ("vision.hidden", v.hidden),
        ("vision.intermediate", v.intermediate),
        ("vision.heads", v.heads),
        ("vision.full_attention_every", v.full_attention_every),
        ("vision.window_size", v.window_size),
    ] {
        if value <= 0 {
            return Err(bad(format!("{key} is {value}; it must be positive")));
        }
    }
    if t.hidden % t.heads != 0 {
        return Err(bad(format!(
            "text.hidden {} is not divisible by text.heads {}",
            t.hidden, t.heads
        )));
    }
    if t.heads % t.kv_heads != 0 {
        return Err(bad(format!(
            "text.heads {} is not a multiple of text.kv_heads {}",
            t.heads, t.kv_heads
        )));
    }
    let head_dim = t.hidden / t.heads;
    if head_dim % 2 != 0 || head_dim < 8 {
        return Err(bad(format!(
            "a text head has {head_dim} dimensions; M-RoPE needs an even number, at least 8"
        )));
    }
    if v.hidden % v.heads != 0 || (v.hidden / v.heads) % 4 != 0 {
        return Err(bad(format!(
            "vision.hidden {} over vision.heads {} must give a head width divisible by 4 (2-D rotary)",
            v.hidden, v.heads
        )));
    }
    if v.window_size % (PATCH * MERGE) != 0 {
        return Err(bad(format!(
            "vision.window_size {} is not a multiple of {} pixels (a merged patch)",
            v.window_size,
            PATCH * MERGE
        )));
    }
    if v.full_attention_every > v.depth {
        return Err(bad(format!(
            "vision.full_attention_every {} exceeds vision.depth {}: no block would attend over the whole image",
            v.full_attention_every, v.depth
        )));
    }
    // A rotary base or a norm epsilon at 0, below or NaN makes every logit
    // NaN, found only as a diverged first step of training.
    for (key, value) in [
        ("init_std", spec.init_std),
        ("text.rope_theta", t.rope_theta),
        ("text.rms_norm_eps", t.rms_norm_eps),
    ] {
        if !(value.is_finite() && value > 0.0) {
            return Err(bad(format!(
                "{key} is {value}; it must be a positive number"
            )));
        }
    }
    if vocab_size <= 0 {
        return Err(bad(format!(
            "vocab_size is {vocab_size}; it must be positive"
        )));
    }
    Ok(Config {
        text: TextConfig {
            vocab_size,
            hidden_size: t.hidden,
            intermediate_size: t.intermediate,
            num_hidden_layers: t.layers,
            num_attention_heads: t.heads,
            num_key_value_heads: t.kv_heads,
            rms_norm_eps: t.rms_norm_eps,
            rope_theta: t.rope_theta,
            mrope_section: mrope_section(head_dim),
            max_position_embeddings: t.max_position_embeddings,
        },
        vision: VisionConfig {
            depth: v.depth,
            hidden_size: v.hidden,
            intermediate_size: v.intermediate,
            num_heads: v.heads,
            in_channels: 3,
            patch_size: PATCH,
            temporal_patch_size: TEMPORAL_PATCH,
            spatial_merge_size: MERGE,
            window_size: v.window_size,
            fullatt_block_indexes: (1..=v.depth / v.full_attention_every)
                .map(|k| k * v.full_attention_every - 1)
                .collect(),
            out_hidden_size: t.hidden,
            rope_theta: VISION_ROPE_THETA,
        },
        image_token_id: 0,
        video_token_id: 0,
        vision_start_token_id: 0,
        vision_end_token_id: 0,
        tie_word_embeddings: spec.tie_word_embeddings,
    })
}

/// `config.json` in transformers 5's layout, as `save_pretrained` writes it.
fn config_json(config: &Config, ids: SpecialIds, init_std: f64) -> Json {
    let (t, v) = (&config.text, &config.vision);
    json!({
        "architectures": ["Qwen2_5_VLForConditionalGeneration"],
        "dtype": "float32",
        "image_token_id": ids.image,
        "model_type": "qwen2_5_vl",
        "text_config": {
            "attention_dropout": 0.0,
            "bos_token_id": ids.endoftext,
            "eos_token_id": ids.im_end,
            "hidden_act": "silu",
            "hidden_size": t.hidden_size,
            "initializer_range": init_std,
            "intermediate_size": t.intermediate_size,
            "layer_types": vec!["full_attention"; t.num_hidden_layers as usize],
            "max_position_embeddings": t.max_position_embeddings,
            "max_window_layers": t.num_hidden_layers,
            "model_type": "qwen2_5_vl_text",
            "num_attention_heads": t.num_attention_heads,
            "num_hidden_layers": t.num_hidden_layers,
            "num_key_value_heads": t.num_key_value_heads,
            "pad_token_id": ids.endoftext,
            "rms_norm_eps": t.rms_norm_eps,
            "rope_parameters": {
                "mrope_section": t.mrope_section,
                "rope_theta": t.rope_theta,
                "rope_type": "default"
            },
            "sliding_window": null,
            "use_cache": true,
            "use_sliding_window": false,
            "vocab_size": t.vocab_size
        },
        "tie_word_embeddings": config.tie_word_embeddings,
        "video_token_id": ids.video,
        "vision_config": {
            "depth": v.depth,
            "fullatt_block_indexes": v.fullatt_block_indexes,
            "hidden_act": "silu",
            "hidden_size": v.hidden_size,
            "in_channels": v.in_channels,
            "initializer_range": init_std,
            "intermediate_size": v.intermediate_size,
            "model_type": "qwen2_5_vl_vision",
            "num_heads": v.num_heads,
            "out_hidden_size": v.out_hidden_size,
            "patch_size": v.patch_size,
            "rope_parameters": {"rope_theta": v.rope_theta, "rope_type": "axial"},
            "spatial_merge_size": v.spatial_merge_size,
            "temporal_patch_size": v.temporal_patch_size,
            "tokens_per_second": 2,
            "window_size": v.window_size
        },
        "vision_end_token_id": ids.vision_end,
        "vision_start_token_id": ids.vision_start
    })
}

fn string(s: &str) -> Value {
    Value::String(s.to_owned())
}

fn array(element: ValueType, items: Vec<Value>) -> Value {
    Value::Array(Array::new(element, items).expect("items of one type"))
}

fn u32_of(v: i64) -> Value {
    Value::U32(u32::try_from(v).unwrap_or(u32::MAX))
}

/// The text GGUF's metadata, key for key as llama.cpp's converter writes it.
fn text_metadata(name: &str, config: &Config, vocab: &Vocabulary, ids: SpecialIds) -> Header {
    let t = &config.text;
    let mut h = Header::default();
    let mut sections: Vec<Value> = t
        .mrope_section
        .iter()
        .map(|&s| Value::I32(s as i32))
        .collect();
    sections.resize(4, Value::I32(0));
    let pairs = [
        ("general.architecture", string("qwen2vl")),
        ("general.type", string("model")),
        ("general.name", string(name)),
        ("qwen2vl.block_count", u32_of(t.num_hidden_layers)),
        ("qwen2vl.context_length", u32_of(t.max_position_embeddings)),
        ("qwen2vl.embedding_length", u32_of(t.hidden_size)),
        ("qwen2vl.feed_forward_length", u32_of(t.intermediate_size)),
        (
            "qwen2vl.attention.head_count",
            u32_of(t.num_attention_heads),
        ),
        (
            "qwen2vl.attention.head_count_kv",
            u32_of(t.num_key_value_heads),
        ),
        (
            "qwen2vl.rope.dimension_sections",
            array(ValueType::I32, sections),
        ),
        ("qwen2vl.rope.freq_base", Value::F32(t.rope_theta as f32)),
        (
            "qwen2vl.attention.layer_norm_rms_epsilon",
            Value::F32(t.rms_norm_eps as f32),
        ),
        ("general.file_type", Value::U32(0)),
        ("general.quantization_version", Value::U32(2)),
        ("tokenizer.ggml.model", string("gpt2")),
        ("tokenizer.ggml.pre", string("qwen2")),
        (
            "tokenizer.ggml.tokens",
            array(
                ValueType::String,
                vocab.tokens.iter().map(|s| string(s)).collect(),
            ),
        ),
        (
            "tokenizer.ggml.token_type",
            array(
                ValueType::I32,
                vocab.types.iter().map(|&k| Value::I32(k)).collect(),
            ),
        ),
        (
            "tokenizer.ggml.merges",
            array(
                ValueType::String,
                vocab.merges.iter().map(|s| string(s)).collect(),
            ),
        ),
        ("tokenizer.ggml.eos_token_id", u32_of(ids.im_end)),
        ("tokenizer.ggml.padding_token_id", u32_of(ids.endoftext)),
        ("tokenizer.ggml.bos_token_id", u32_of(ids.endoftext)),
        ("tokenizer.ggml.add_bos_token", Value::Bool(false)),
        ("tokenizer.ggml.add_eos_token", Value::Bool(false)),
    ];
    for (key, value) in pairs {
        h.set(key, value);
    }
    h
}

/// The projector GGUF's metadata, as llama.cpp's converter writes it.
fn projector_metadata(name: &str, config: &Config) -> Header {
    let v = &config.vision;
    let mut h = Header::default();
    let floats = |xs: [f32; 3]| array(ValueType::F32, xs.iter().map(|&x| Value::F32(x)).collect());
    let pairs = [
        ("general.architecture", string("clip")),
        ("general.type", string("mmproj")),
        ("general.name", string(name)),
        ("general.file_type", Value::U32(0)),
        ("clip.has_vision_encoder", Value::Bool(true)),
        ("clip.vision.projection_dim", u32_of(v.out_hidden_size)),
        ("clip.vision.image_size", Value::U32(CLIP_IMAGE_SIZE)),
        ("clip.vision.patch_size", u32_of(v.patch_size)),
        ("clip.vision.embedding_length", u32_of(v.hidden_size)),
        (
            "clip.vision.feed_forward_length",
            u32_of(v.intermediate_size),
        ),
        ("clip.vision.block_count", u32_of(v.depth)),
        ("clip.vision.attention.head_count", u32_of(v.num_heads)),
        ("clip.vision.image_mean", floats(IMAGE_MEAN)),
        ("clip.vision.image_std", floats(IMAGE_STD)),
        ("clip.projector_type", string("qwen2.5vl_merger")),
        ("clip.use_silu", Value::Bool(true)),
        (
            "clip.vision.n_wa_pattern",
            u32_of(v.fullatt_block_indexes.first().map_or(v.depth, |&i| i + 1)),
        ),
        (
            "clip.vision.attention.layer_norm_epsilon",
            Value::F32(VISION_EPS),
        ),
        ("general.quantization_version", Value::U32(2)),
    ];
    for (key, value) in pairs {
        h.set(key, value);
    }
    h
}

/// Fills every weight of `model` as transformers initialises the family,
/// from torch's generator seeded with `seed`, in name order.
fn randomize(model: &Qwen25Vl, seed: u64, std: f64) -> Result<()> {
    let _guard = generator();
    tch::manual_seed(seed as i64);
    let mut vars: Vec<(String, Tensor)> = model.vars().variables().into_iter().collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    tch::no_grad(|| -> Result<()> {
        for (name, mut var) in vars {
            let value = if name.ends_with(".bias") {
                var.f_zeros_like()?
            } else if var.dim() == 1 {
                var.f_ones_like()?
            } else {
                var.f_randn_like()?.f_mul_scalar(std)?
            };
            var.f_copy_(&value)?;
        }
        Ok(())
    })
}

/// What [`init`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Initialised {
    /// The Hugging Face directory (config, weights, tokenizer).
    pub hf: PathBuf,
    pub text: PathBuf,
    pub mmproj: PathBuf,
    pub text_parameters: i64,
    pub vision_parameters: i64,
    /// What was read, when the weights came from GGUF files.
    pub imported: Option<Imported>,
}

/// The safetensors bytes of `tensors` (float32 on the CPU), marked as
/// PyTorch's as `save_pretrained` does.
fn safetensors_bytes(tensors: &[(String, Tensor)], path: &Path) -> Result<Vec<u8>> {
    let bad = |message: String| Error::Checkpoint {
        path: path.to_owned(),
        message,
    };
    let mut stored = Vec::with_capacity(tensors.len());
    for (name, t) in tensors {
        let t = t.f_detach()?.f_to_kind(Kind::Float)?.f_contiguous()?;
        let mut data = vec![0u8; t.numel() * 4];
        t.f_copy_data_u8(&mut data, t.numel())?;
        let shape: Vec<usize> = t.size().iter().map(|&d| d as usize).collect();
        stored.push((name.as_str(), shape, data));
    }
    let views = stored
        .iter()
        .map(|(name, shape, data)| {
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), data)
                .map(|v| (*name, v))
                .map_err(|e| bad(format!("tensor {name}: {e:?}")))
        })
        .collect::<Result<Vec<_>>>()?;
    let metadata = Some([("format".to_owned(), "pt".to_owned())].into());
    safetensors::tensor::serialize(views, &metadata).map_err(|e| bad(format!("{e:?}")))
}

/// Where a new model's weights come from.
#[derive(Debug, Clone, Copy)]
pub enum Weights<'a> {
    /// Random, as transformers initialises the family (the spec's seed).
    Random,
    /// A text model and projector GGUF of a model of the spec's size and
    /// tokenizer (e.g. the shipped default model), dequantized.
    Gguf { text: &'a Path, projector: &'a Path },
    /// GGUF files of a shallower model of the spec's width and tokenizer,
    /// grown to the spec's depth ([`crate::grow`]): the new model starts
    /// out computing what they compute.
    Grown { text: &'a Path, projector: &'a Path },
}

/// Writes a new model into `out`: `hf/` (config.json, model.safetensors in
/// float32, the tokenizer files), `model-<precision>.gguf` and
/// `mmproj-<precision>.gguf`, its weights as `weights` says. `spec_path`
/// names the spec in errors. The directory is replaced atomically.
pub fn init(
    spec: &ModelSpec,
    spec_path: &Path,
    weights: Weights<'_>,
    precision: Precision,
    out: &Path,
) -> Result<Initialised> {
    let mut vocab = Vocabulary::from_tokenizer_json(&spec.tokenizer)?;
    let vocab_size = spec
        .vocab_size
        .unwrap_or_else(|| (vocab.tokens.len() as i64 + 127) / 128 * 128);
    if vocab_size > MAX_VOCAB {
        return Err(Error::Config {
            path: spec_path.to_owned(),
            message: format!(
                "vocab_size is {vocab_size}; at most {MAX_VOCAB}, the ids a tokenizer here may give"
            ),
        });
    }
    // Weighed before the vocabulary is padded to its rows, which for a
    // size refused here is millions of strings.
    let config = model_config(spec, vocab_size, spec_path)?;
    check_fits(&config, total_memory(), spec_path)?;
    vocab.pad_to(vocab_size, &spec.tokenizer)?;
    let ids = SpecialIds::of(&vocab, &spec.tokenizer)?;
    let config = ids.tie(config);

    let model = Qwen25Vl::new(config.clone(), Device::Cpu, Kind::Float)?;
    let imported = match weights {
        Weights::Random => {
            randomize(&model, spec.seed, spec.init_std)?;
            None
        }
        Weights::Gguf { text, projector } => {
            let text = GgufFile::open(text)?;
            check_vocabulary(&text, &vocab, &spec.tokenizer)?;
            Some(load_gguf_weights(
                &model,
                &text,
                &GgufFile::open(projector)?,
            )?)
        }
        Weights::Grown { text, projector } => {
            let (text, projector) = (GgufFile::open(text)?, GgufFile::open(projector)?);
            check_vocabulary(&text, &vocab, &spec.tokenizer)?;
            let layers = block_count(&text, "qwen2vl.block_count")?;
            let depth = block_count(&projector, "clip.vision.block_count")?;
            let growth = growth(spec, layers, depth, &text, &projector)?;
            let mut small_spec = spec.clone();
            small_spec.text.layers = layers;
            small_spec.vision.depth = depth;
            let small_config = ids.tie(model_config(&small_spec, vocab_size, spec_path)?);
            let small = Qwen25Vl::new(small_config, Device::Cpu, Kind::Float)?;
            let imported = load_gguf_weights(&small, &text, &projector)?;
            crate::grow::grow_into(&model, &small, growth)?;
            Some(imported)
        }
    };
    let mut weights: Vec<(String, Tensor)> = model.vars().variables().into_iter().collect();
    weights.sort_by(|a, b| a.0.cmp(&b.0));
    let count = |vision: bool| -> i64 {
        weights
            .iter()
            .filter(|(n, _)| n.starts_with("visual.") == vision)
            .map(|(_, t)| t.numel() as i64)
            .sum()
    };
    let (text_parameters, vision_parameters) = (count(false), count(true));
    let by_name: HashMap<String, Tensor> = weights
        .iter()
        .map(|(n, t)| (n.clone(), t.shallow_clone()))
        .collect();
    let config_text = serde_json::to_string_pretty(&config_json(&config, ids, spec.init_std))
        .expect("JSON values serialize");
    let tag = match precision {
        Precision::F16 => "f16",
        Precision::F32 | Precision::Template => "f32",
    };
    let (text_name, mmproj_name) = (format!("model-{tag}.gguf"), format!("mmproj-{tag}.gguf"));
    crate::atomic::write_dir(out, |staging| {
        let hf = staging.join("hf");
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| Error::Io { path, source }
        };
        std::fs::create_dir_all(&hf).map_err(io(&hf))?;
        let path = hf.join("config.json");
        std::fs::write(&path, config_text.as_bytes()).map_err(io(&path))?;
        let path = hf.join("model.safetensors");
        std::fs::write(&path, safetensors_bytes(&weights, &path)?).map_err(io(&path))?;
        // The tokenizer travels with the checkpoint, so the directory alone
        // is enough for the trainer; its config (chat template) if it has one.
        std::fs::copy(&spec.tokenizer, hf.join("tokenizer.json")).map_err(io(&spec.tokenizer))?;
        let tokenizer_config = spec.tokenizer.with_file_name("tokenizer_config.json");
        if tokenizer_config.is_file() {
            std::fs::copy(&tokenizer_config, hf.join("tokenizer_config.json"))
                .map_err(io(&tokenizer_config))?;
        }
        write_new_gguf(
            text_metadata(&spec.name, &config, &vocab, ids),
            &by_name,
            precision,
            &staging.join(&text_name),
        )?;
        write_new_gguf(
            projector_metadata(&spec.name, &config),
            &by_name,
            precision,
            &staging.join(&mmproj_name),
        )?;
        Ok(())
    })?;
    Ok(Initialised {
        hf: out.join("hf"),
        text: out.join(text_name),
        mmproj: out.join(mmproj_name),
        text_parameters,
        vision_parameters,
        imported,
    })
}

fn block_count(file: &GgufFile, key: &str) -> Result<i64> {
    match file.header().get(key) {
        Some(Value::U32(n)) if *n > 0 => Ok(i64::from(*n)),
        other => Err(Error::Gguf {
            path: file.path().to_owned(),
            message: format!("{key} is {other:?}, not a positive u32"),
        }),
    }
}

/// How `spec`'s depth grows from a model of `layers` text layers and a
/// vision tower `depth` deep: each a whole multiple, the vision tower's in
/// groups of its attention pattern.
fn growth(
    spec: &ModelSpec,
    layers: i64,
    depth: i64,
    text: &GgufFile,
    projector: &GgufFile,
) -> Result<crate::grow::Growth> {
    let every = spec.vision.full_attention_every;
    let bad = |file: &GgufFile, message: String| Error::Gguf {
        path: file.path().to_owned(),
        message,
    };
    if spec.text.layers % layers != 0 {
        return Err(bad(
            text,
            format!(
                "it has {layers} text layers; the spec's {} is no whole multiple of them",
                spec.text.layers
            ),
        ));
    }
    if depth % every != 0 || spec.vision.depth % depth != 0 {
        return Err(bad(
            projector,
            format!(
                "its vision tower is {depth} blocks deep; the spec's {} is no whole multiple of them \
                 in groups of full_attention_every = {every}",
                spec.vision.depth
            ),
        ));
    }
    Ok(crate::grow::Growth {
        text_factor: spec.text.layers / layers,
        vision_factor: spec.vision.depth / depth,
        full_attention_every: every,
    })
}

/// Refuses a text GGUF whose vocabulary is not the spec's tokenizer's: its
/// embedding rows would belong to other tokens.
fn check_vocabulary(text: &GgufFile, vocab: &Vocabulary, tokenizer: &Path) -> Result<()> {
    let bad = |message: String| Error::Gguf {
        path: text.path().to_owned(),
        message,
    };
    let tokens = gguf_tokens(text)
        .ok_or_else(|| bad("it has no tokenizer.ggml.tokens string array".to_owned()))?;
    if tokens.len() != vocab.tokens.len() {
        return Err(bad(format!(
            "its vocabulary has {} tokens, {} gives {}",
            tokens.len(),
            tokenizer.display(),
            vocab.tokens.len()
        )));
    }
    if let Some(id) = (0..tokens.len()).find(|&i| tokens[i] != vocab.tokens[i]) {
        return Err(bad(format!(
            "token {id} is {:?} there and {:?} in {}",
            tokens[id],
            vocab.tokens[id],
            tokenizer.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The count `check_fits` weighs is a lower bound of the parameters
    /// the model really has, and close to it (biases and norms are left
    /// out); a machine with less memory than its float32 weights need is
    /// refused in words naming the sizes.
    #[test]
    fn a_model_is_weighed_by_its_parameters_before_it_is_made() {
        let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/models/btl-mini.toml"));
        let spec = ModelSpec::from_file(path).unwrap();
        let config = model_config(&spec, 1536, path).unwrap();
        let model = Qwen25Vl::new(config.clone(), Device::Cpu, Kind::Float).unwrap();
        let made: u64 = model
            .vars()
            .variables()
            .values()
            .map(|t| t.numel() as u64)
            .sum();
        let bound = parameters_at_least(&config);
        assert!(
            bound <= made as f64 && bound >= 0.98 * made as f64,
            "{bound} of {made}"
        );
        let enough = made * 4;
        check_fits(&config, Some(enough), path).unwrap();
        check_fits(&config, None, path).unwrap();
        let e = check_fits(&config, Some(1 << 20), path)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("at least {bound:.0} parameters"))
                && e.contains("more than this machine's 0.0 GiB of memory")
                && e.contains("text.hidden 256"),
            "{e}"
        );
    }

    #[test]
    fn mrope_sections_are_qwen_s() {
        // Qwen2.5-VL-3B/7B (head_dim 128) and the tiny fixture (32).
        assert_eq!(mrope_section(128), [16, 24, 24]);
        assert_eq!(mrope_section(32), [4, 6, 6]);
        assert_eq!(mrope_section(64), [8, 12, 12]);
        for head_dim in (8..=256).step_by(2) {
            assert_eq!(mrope_section(head_dim).iter().sum::<i64>(), head_dim / 2);
        }
    }
}
