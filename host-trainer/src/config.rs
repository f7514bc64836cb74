//! The model configuration, read from a Hugging Face checkpoint's `config.json`.
//!
//! Qwen2.5-VL checkpoints come in two styles:
//! - transformers 4.x (the released Qwen and BTL-UI checkpoints): the text
//!   model's fields sit at the top level, with `rope_theta` and
//!   `rope_scaling: {"type": "mrope", "mrope_section": [..]}`;
//! - transformers 5.x: the text fields are in `text_config`, the rotary
//!   settings in `rope_parameters: {"rope_type", "rope_theta", "mrope_section"}`.
//!
//! Both resolve to one [`Config`]. Fields the checkpoint leaves out take
//! transformers' defaults for Qwen2.5-VL; fields this model cannot honour
//! (another activation, another rotary type) are errors, never ignored.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::error::{Error, Result};

/// Qwen2.5-VL as host-trainer builds it: the Qwen2 text model, the vision
/// tower and the special token ids that join them.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub text: TextConfig,
    pub vision: VisionConfig,
    /// `<|image_pad|>`: one per merged image patch in the prompt.
    pub image_token_id: i64,
    pub video_token_id: i64,
    pub vision_start_token_id: i64,
    pub vision_end_token_id: i64,
    /// The output projection is the token embedding (3B) or its own `lm_head` (7B).
    pub tie_word_embeddings: bool,
}

/// The Qwen2 decoder.
#[derive(Debug, Clone, PartialEq)]
pub struct TextConfig {
    pub vocab_size: i64,
    pub hidden_size: i64,
    pub intermediate_size: i64,
    pub num_hidden_layers: i64,
    pub num_attention_heads: i64,
    pub num_key_value_heads: i64,
    pub rms_norm_eps: f64,
    pub rope_theta: f64,
    /// How the rotary frequencies (head_dim / 2 of them) are split between
    /// the temporal, height and width position rows, in that order.
    pub mrope_section: Vec<i64>,
    pub max_position_embeddings: i64,
}

impl TextConfig {
    pub fn head_dim(&self) -> i64 {
        self.hidden_size / self.num_attention_heads
    }
}

/// The vision tower.
#[derive(Debug, Clone, PartialEq)]
pub struct VisionConfig {
    pub depth: i64,
    pub hidden_size: i64,
    pub intermediate_size: i64,
    pub num_heads: i64,
    pub in_channels: i64,
    pub patch_size: i64,
    pub temporal_patch_size: i64,
    pub spatial_merge_size: i64,
    /// Side of an attention window in pixels.
    pub window_size: i64,
    /// Blocks that attend over the whole image; the others attend within windows.
    pub fullatt_block_indexes: Vec<i64>,
    /// Width of the merged image tokens (= the text model's hidden size).
    pub out_hidden_size: i64,
    pub rope_theta: f64,
}

impl VisionConfig {
    pub fn head_dim(&self) -> i64 {
        self.hidden_size / self.num_heads
    }

    /// Values of one flattened patch: channels × temporal × patch × patch.
    pub fn patch_dim(&self) -> i64 {
        self.in_channels * self.temporal_patch_size * self.patch_size * self.patch_size
    }

    /// Side of an attention window in merged tokens.
    pub fn merged_window_size(&self) -> i64 {
        self.window_size / self.spatial_merge_size / self.patch_size
    }
}

/// Rotary settings as either style writes them.
#[derive(Deserialize, Default)]
struct RawRope {
    #[serde(alias = "type")]
    rope_type: Option<String>,
    rope_theta: Option<f64>,
    mrope_section: Option<Vec<i64>>,
}

/// Text fields; in the 4.x style they are read from the top level.
#[derive(Deserialize, Default)]
struct RawText {
    vocab_size: Option<i64>,
    hidden_size: Option<i64>,
    intermediate_size: Option<i64>,
    num_hidden_layers: Option<i64>,
    num_attention_heads: Option<i64>,
    num_key_value_heads: Option<i64>,
    rms_norm_eps: Option<f64>,
    rope_theta: Option<f64>,
    rope_scaling: Option<RawRope>,
    rope_parameters: Option<RawRope>,
    max_position_embeddings: Option<i64>,
    hidden_act: Option<String>,
    tie_word_embeddings: Option<bool>,
}

#[derive(Deserialize)]
struct RawVision {
    depth: i64,
    hidden_size: i64,
    intermediate_size: i64,
    num_heads: i64,
    #[serde(alias = "in_chans")]
    in_channels: Option<i64>,
    patch_size: Option<i64>,
    temporal_patch_size: Option<i64>,
    spatial_merge_size: Option<i64>,
    window_size: Option<i64>,
    fullatt_block_indexes: Vec<i64>,
    out_hidden_size: i64,
    hidden_act: Option<String>,
    rope_parameters: Option<RawRope>,
}

#[derive(Deserialize)]
struct RawConfig {
    model_type: Option<String>,
    text_config: Option<RawText>,
    vision_config: Option<RawVision>,
    image_token_id: Option<i64>,
    video_token_id: Option<i64>,
    vision_start_token_id: Option<i64>,
    vision_end_token_id: Option<i64>,
    tie_word_embeddings: Option<bool>,
    #[serde(flatten)]
    flat: RawText,
}

impl Config {
    /// Reads `config.json` from a checkpoint directory.
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        Self::from_json(&text).map_err(|message| Error::Config { path, message })
    }

    /// Parses the text of a `config.json`; the error is a sentence naming the field.
    pub fn from_json(text: &str) -> std::result::Result<Self, String> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
        let raw: RawConfig =
            serde_json::from_value(value).map_err(|e| format!("unexpected content: {e}"))?;
        if let Some(model_type) = &raw.model_type
            && model_type != "qwen2_5_vl"
        {
            return Err(format!(
                "model_type is {model_type:?}; host-trainer builds only \"qwen2_5_vl\""
            ));
        }
        let vision = raw
            .vision_config
            .ok_or("missing vision_config (not a Qwen2.5-VL config)")?;
        // 5.x nests the text model; 4.x keeps it flat.
        let text = raw.text_config.unwrap_or(raw.flat);
        let tie_word_embeddings = raw
            .tie_word_embeddings
            .or(text.tie_word_embeddings)
            .unwrap_or(false);
        let config = Config {
            text: resolve_text(text)?,
            vision: resolve_vision(vision)?,
            image_token_id: raw.image_token_id.unwrap_or(151655),
            video_token_id: raw.video_token_id.unwrap_or(151656),
            vision_start_token_id: raw.vision_start_token_id.unwrap_or(151652),
            vision_end_token_id: raw.vision_end_token_id.unwrap_or(151653),
            tie_word_embeddings,
        };
        config.validate()?;
        Ok(config)
    }

    /// The checks whose failure would otherwise surface as a shape error deep in a forward pass.
    fn validate(&self) -> std::result::Result<(), String> {
        let t = &self.text;
        let v = &self.vision;
        let positive = [
            ("vocab_size", t.vocab_size),
            ("hidden_size", t.hidden_size),
            ("intermediate_size", t.intermediate_size),
            ("num_hidden_layers", t.num_hidden_layers),
            ("num_attention_heads", t.num_attention_heads),
            ("num_key_value_heads", t.num_key_value_heads),
            ("vision_config.depth", v.depth),
            ("vision_config.hidden_size", v.hidden_size),
            ("vision_config.intermediate_size", v.intermediate_size),
            ("vision_config.num_heads", v.num_heads),
            ("vision_config.in_channels", v.in_channels),
            ("vision_config.patch_size", v.patch_size),
            ("vision_config.temporal_patch_size", v.temporal_patch_size),
            ("vision_config.spatial_merge_size", v.spatial_merge_size),
            ("vision_config.window_size", v.window_size),
            ("vision_config.out_hidden_size", v.out_hidden_size),
        ];
        for (name, value) in positive {
            if value <= 0 {
                return Err(format!("{name} must be positive, got {value}"));
            }
        }
        // A rotary base or a norm epsilon at 0, below or NaN makes every
        // logit NaN, found only as a diverged first step.
        let positive_reals = [
            ("rms_norm_eps", t.rms_norm_eps),
            ("rope_theta", t.rope_theta),
            ("vision_config.rope_theta", v.rope_theta),
        ];
        for (name, value) in positive_reals {
            if !(value > 0.0 && value.is_finite()) {
                return Err(format!(
                    "{name} must be a positive finite number, got {value}"
                ));
            }
        }
        if t.hidden_size % t.num_attention_heads != 0 {
            return Err(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                t.hidden_size, t.num_attention_heads
            ));
        }
        if t.num_attention_heads % t.num_key_value_heads != 0 {
            return Err(format!(
                "num_attention_heads {} is not a multiple of num_key_value_heads {}",
                t.num_attention_heads, t.num_key_value_heads
            ));
        }
        // Checked: a file's numbers may be as large as `i64` holds.
        let twice_sections = t
            .mrope_section
            .iter()
            .try_fold(0i64, |sum, &s| sum.checked_add(s))
            .and_then(|sum| sum.checked_mul(2));
        if t.mrope_section.len() != 3
            || t.mrope_section.iter().any(|&s| s < 0)
            || twice_sections != Some(t.head_dim())
        {
            return Err(format!(
                "mrope_section {:?} must be three sizes summing to head_dim / 2 = {}",
                t.mrope_section,
                t.head_dim() / 2
            ));
        }
        if v.hidden_size % v.num_heads != 0 || v.head_dim() % 4 != 0 {
            return Err(format!(
                "vision hidden_size {} / num_heads {} must give a head_dim divisible by 4 (2-D rotary)",
                v.hidden_size, v.num_heads
            ));
        }
        let patch_dim = [v.temporal_patch_size, v.patch_size, v.patch_size]
            .into_iter()
            .try_fold(v.in_channels, i64::checked_mul);
        if patch_dim.is_none() {
            return Err(format!(
                "vision in_channels {} × temporal_patch_size {} × patch_size {}² is too large",
                v.in_channels, v.temporal_patch_size, v.patch_size
            ));
        }
        let window = v.patch_size.checked_mul(v.spatial_merge_size);
        if window.is_none_or(|w| v.window_size % w != 0) {
            return Err(format!(
                "vision window_size {} is not a multiple of patch_size {} × spatial_merge_size {}",
                v.window_size, v.patch_size, v.spatial_merge_size
            ));
        }
        if let Some(&bad) = v
            .fullatt_block_indexes
            .iter()
            .find(|&&i| i < 0 || i >= v.depth)
        {
            return Err(format!(
                "vision fullatt_block_indexes has {bad}, outside 0..{}",
                v.depth
            ));
        }
        if v.out_hidden_size != t.hidden_size {
            return Err(format!(
                "vision out_hidden_size {} differs from the text hidden_size {}",
                v.out_hidden_size, t.hidden_size
            ));
        }
        for (name, id) in [
            ("image_token_id", self.image_token_id),
            ("video_token_id", self.video_token_id),
            ("vision_start_token_id", self.vision_start_token_id),
            ("vision_end_token_id", self.vision_end_token_id),
        ] {
            if id < 0 || id >= t.vocab_size {
                return Err(format!(
                    "{name} {id} is outside the vocabulary (vocab_size {})",
                    t.vocab_size
                ));
            }
        }
        Ok(())
    }
}

fn required(value: Option<i64>, name: &str) -> std::result::Result<i64, String> {
    value.ok_or_else(|| format!("missing {name}"))
}

fn check_act(act: Option<&str>, what: &str) -> std::result::Result<(), String> {
    match act {
        None | Some("silu") => Ok(()),
        Some(other) => Err(format!(
            "{what} hidden_act {other:?} is not supported (Qwen2.5-VL uses \"silu\")"
        )),
    }
}

fn resolve_text(raw: RawText) -> std::result::Result<TextConfig, String> {
    check_act(raw.hidden_act.as_deref(), "text")?;
    // 5.x: rope_parameters; 4.x: rope_scaling (+ top-level rope_theta).
    let rope = raw.rope_parameters.or(raw.rope_scaling).unwrap_or_default();
    match rope.rope_type.as_deref() {
        None | Some("default") | Some("mrope") => {}
        Some(other) => {
            return Err(format!(
                "text rope type {other:?} is not supported (expected \"mrope\" or \"default\")"
            ));
        }
    }
    let hidden_size = required(raw.hidden_size, "hidden_size")?;
    let num_attention_heads = required(raw.num_attention_heads, "num_attention_heads")?;
    let mrope_section = rope
        .mrope_section
        .ok_or("missing mrope_section (rope_scaling or rope_parameters)")?;
    Ok(TextConfig {
        vocab_size: required(raw.vocab_size, "vocab_size")?,
        hidden_size,
        intermediate_size: required(raw.intermediate_size, "intermediate_size")?,
        num_hidden_layers: required(raw.num_hidden_layers, "num_hidden_layers")?,
        num_attention_heads,
        num_key_value_heads: raw.num_key_value_heads.unwrap_or(num_attention_heads),
        rms_norm_eps: raw.rms_norm_eps.unwrap_or(1e-6),
        rope_theta: rope.rope_theta.or(raw.rope_theta).unwrap_or(1_000_000.0),
        mrope_section,
        max_position_embeddings: raw.max_position_embeddings.unwrap_or(128_000),
    })
}

fn resolve_vision(raw: RawVision) -> std::result::Result<VisionConfig, String> {
    check_act(raw.hidden_act.as_deref(), "vision")?;
    let rope = raw.rope_parameters.unwrap_or_default();
    match rope.rope_type.as_deref() {
        None | Some("axial") | Some("default") => {}
        Some(other) => {
            return Err(format!(
                "vision rope type {other:?} is not supported (expected \"axial\")"
            ));
        }
    }
    Ok(VisionConfig {
        depth: raw.depth,
        hidden_size: raw.hidden_size,
        intermediate_size: raw.intermediate_size,
        num_heads: raw.num_heads,
        in_channels: raw.in_channels.unwrap_or(3),
        patch_size: raw.patch_size.unwrap_or(14),
        temporal_patch_size: raw.temporal_patch_size.unwrap_or(2),
        spatial_merge_size: raw.spatial_merge_size.unwrap_or(2),
        window_size: raw.window_size.unwrap_or(112),
        fullatt_block_indexes: raw.fullatt_block_indexes,
        out_hidden_size: raw.out_hidden_size,
        rope_theta: rope.rope_theta.unwrap_or(10_000.0),
    })
}

#[cfg(test)]
mod tests;
