//! Which Hugging Face checkpoint tensor each llama.cpp tensor is made from.
//!
//! Two GGUF files come out of one Qwen2.5-VL checkpoint (facts read from
//! llama.cpp's `convert_hf_to_gguf.py`, `conversion/qwenvl.py`, and checked
//! against the files it wrote, see `tests/export.rs`):
//! - the text model, architecture `qwen2vl`: a plain renaming of the Qwen2
//!   decoder (no permutation of q/k, unlike llama), `lm_head` → `output`;
//! - the projector, architecture `clip` with projector type
//!   `qwen2.5vl_merger`: the vision tower and its merger. The fused `qkv`
//!   projection of each block is split into thirds along its rows (q, k, v),
//!   and the Conv3d patch embedding (hidden, channels, 2, patch, patch) into
//!   its two temporal slices, `v.patch_embd.weight` and `…weight.1`.
//!
//! GGUF dimensions are the torch shape reversed, so a torch `(out, in)`
//! matrix is stored as it is in memory; nothing is transposed.
//!
//! Names here are checkpoint names (`model.layers.N…`, `visual.…`); the
//! caller maps transformers 5's module names to them first.

/// Which of the two GGUF files a template is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `general.architecture = qwen2vl`: the language model.
    Text,
    /// `general.architecture = clip`, `clip.projector_type = qwen2.5vl_merger`.
    Projector,
}

/// The GGUF architecture of the text model.
pub const TEXT_ARCH: &str = "qwen2vl";
/// The GGUF architecture of projector files.
pub const PROJECTOR_ARCH: &str = "clip";
/// The projector type of Qwen2.5-VL in `clip.projector_type`.
pub const PROJECTOR_TYPE: &str = "qwen2.5vl_merger";

impl Family {
    /// From a template's `general.architecture` and `clip.projector_type`.
    pub fn detect(architecture: Option<&str>, projector: Option<&str>) -> Result<Self, String> {
        match (architecture, projector) {
            (Some(TEXT_ARCH), _) => Ok(Family::Text),
            (Some(PROJECTOR_ARCH), Some(PROJECTOR_TYPE)) => Ok(Family::Projector),
            (Some(PROJECTOR_ARCH), other) => Err(format!(
                "the projector type is {}; only Qwen2.5-VL's {PROJECTOR_TYPE} is supported",
                other.map_or("missing".to_owned(), |p| format!("{p:?}"))
            )),
            (Some(other), _) => Err(format!(
                "general.architecture is {other:?}; a Qwen2.5-VL export needs a {TEXT_ARCH} text model or a {PROJECTOR_ARCH} projector"
            )),
            (None, _) => Err("the template has no general.architecture string".to_owned()),
        }
    }
}

/// How a GGUF tensor is cut out of its checkpoint tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The tensor as it is.
    Whole,
    /// Third `index` (0 = q, 1 = k, 2 = v) of a fused qkv tensor, along dim 0.
    QkvThird(i64),
    /// Slice `index` of dim 2 (the temporal one) of a Conv3d weight.
    Temporal(i64),
}

/// The checkpoint tensor a GGUF tensor is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub checkpoint: String,
    pub part: Part,
}

/// Per decoder layer: GGUF name in `blk.N.`, checkpoint module in `model.layers.N.`.
const TEXT_LAYER: &[(&str, &str)] = &[
    ("attn_norm", "input_layernorm"),
    ("ffn_norm", "post_attention_layernorm"),
    ("attn_q", "self_attn.q_proj"),
    ("attn_k", "self_attn.k_proj"),
    ("attn_v", "self_attn.v_proj"),
    ("attn_output", "self_attn.o_proj"),
    ("ffn_gate", "mlp.gate_proj"),
    ("ffn_up", "mlp.up_proj"),
    ("ffn_down", "mlp.down_proj"),
];

/// Outside the layers.
const TEXT_GLOBAL: &[(&str, &str)] = &[
    ("token_embd", "model.embed_tokens"),
    ("output_norm", "model.norm"),
    ("output", "lm_head"),
];

/// Per vision block: GGUF name in `v.blk.N.`, checkpoint module in `visual.blocks.N.`
/// (q, k and v come from `attn.qkv`, see [`source`]).
const VISION_BLOCK: &[(&str, &str)] = &[
    ("attn_out", "attn.proj"),
    ("ln1", "norm1"),
    ("ln2", "norm2"),
    ("ffn_gate", "mlp.gate_proj"),
    ("ffn_up", "mlp.up_proj"),
    ("ffn_down", "mlp.down_proj"),
];

const VISION_GLOBAL: &[(&str, &str)] = &[
    ("v.post_ln", "visual.merger.ln_q"),
    ("mm.0", "visual.merger.mlp.0"),
    ("mm.2", "visual.merger.mlp.2"),
];

const QKV: &[&str] = &["attn_q", "attn_k", "attn_v"];

/// Splits `name.weight` / `name.bias` into the module and the suffix.
fn split_param(name: &str) -> Option<(&str, &str)> {
    let (module, param) = name.rsplit_once('.')?;
    matches!(param, "weight" | "bias").then_some((module, param))
}

/// `prefix` + a layer number + `.` + rest → (number, rest).
fn split_layer<'a>(module: &'a str, prefix: &str) -> Option<(u64, &'a str)> {
    let (index, rest) = module.strip_prefix(prefix)?.split_once('.')?;
    // Only canonical numbers: `blk.01` is no tensor llama.cpp looks for.
    if index.is_empty() || (index.len() > 1 && index.starts_with('0')) {
        return None;
    }
    Some((index.parse().ok()?, rest))
}

fn lookup<'a>(table: &[(&'a str, &'a str)], key: &str, by_gguf: bool) -> Option<&'a str> {
    table.iter().find_map(|&(gguf, hf)| {
        let (k, v) = if by_gguf { (gguf, hf) } else { (hf, gguf) };
        (k == key).then_some(v)
    })
}

/// The checkpoint tensor behind GGUF tensor `name`, or `None` if `name` is not
/// a tensor of this family.
pub fn source(family: Family, name: &str) -> Option<Source> {
    let whole = |checkpoint: String| Source {
        checkpoint,
        part: Part::Whole,
    };
    match family {
        Family::Text => {
            let (module, param) = split_param(name)?;
            if let Some((layer, rest)) = split_layer(module, "blk.") {
                let hf = lookup(TEXT_LAYER, rest, true)?;
                return Some(whole(format!("model.layers.{layer}.{hf}.{param}")));
            }
            let hf = lookup(TEXT_GLOBAL, module, true)?;
            Some(whole(format!("{hf}.{param}")))
        }
        Family::Projector => {
            if let Some(rest) = name.strip_prefix("v.patch_embd.weight") {
                let index = match rest {
                    "" => 0,
                    ".1" => 1,
                    _ => return None,
                };
                return Some(Source {
                    checkpoint: "visual.patch_embed.proj.weight".to_owned(),
                    part: Part::Temporal(index),
                });
            }
            let (module, param) = split_param(name)?;
            if let Some((block, rest)) = split_layer(module, "v.blk.") {
                if let Some(third) = QKV.iter().position(|&q| q == rest) {
                    return Some(Source {
                        checkpoint: format!("visual.blocks.{block}.attn.qkv.{param}"),
                        part: Part::QkvThird(third as i64),
                    });
                }
                let hf = lookup(VISION_BLOCK, rest, true)?;
                return Some(whole(format!("visual.blocks.{block}.{hf}.{param}")));
            }
            let hf = lookup(VISION_GLOBAL, module, true)?;
            Some(whole(format!("{hf}.{param}")))
        }
    }
}

/// The GGUF tensors made from checkpoint tensor `checkpoint` in `family`'s
/// file: the inverse of [`source`] (three for a fused qkv tensor, two for the
/// patch embedding, none for a tensor of the other file). Used to lay out a
/// new file when there is no template.
pub fn targets(family: Family, checkpoint: &str) -> Vec<String> {
    let Some((module, param)) = split_param(checkpoint) else {
        return Vec::new();
    };
    let named = |gguf: Option<String>| gguf.into_iter().collect();
    match family {
        Family::Text => {
            if let Some((layer, rest)) = split_layer(module, "model.layers.") {
                return named(
                    lookup(TEXT_LAYER, rest, false).map(|g| format!("blk.{layer}.{g}.{param}")),
                );
            }
            named(lookup(TEXT_GLOBAL, module, false).map(|g| format!("{g}.{param}")))
        }
        Family::Projector => {
            if checkpoint == "visual.patch_embed.proj.weight" {
                return vec![
                    "v.patch_embd.weight".to_owned(),
                    "v.patch_embd.weight.1".to_owned(),
                ];
            }
            if let Some((block, rest)) = split_layer(module, "visual.blocks.") {
                if rest == "attn.qkv" {
                    return QKV
                        .iter()
                        .map(|q| format!("v.blk.{block}.{q}.{param}"))
                        .collect();
                }
                return named(
                    lookup(VISION_BLOCK, rest, false).map(|g| format!("v.blk.{block}.{g}.{param}")),
                );
            }
            named(lookup(VISION_GLOBAL, module, false).map(|g| format!("{g}.{param}")))
        }
    }
}

/// The GGUF weight a LoRA on checkpoint module `module` (e.g.
/// `model.layers.0.self_attn.q_proj`) adapts in the text model, e.g.
/// `blk.0.attn_q.weight`; `None` for a module that is not a linear layer of
/// the text model (llama.cpp applies adapters to the text model only).
pub fn text_lora_target(module: &str) -> Option<String> {
    if let Some((layer, rest)) = split_layer(module, "model.layers.") {
        let gguf = lookup(TEXT_LAYER, rest, false)?;
        // Norms are not linear layers.
        return (!gguf.ends_with("_norm")).then(|| format!("blk.{layer}.{gguf}.weight"));
    }
    // A LoRA on the embedding is stored differently by PEFT (lora_embedding_A/B).
    (module == "lm_head").then(|| "output.weight".to_owned())
}

#[cfg(test)]
mod tests {
    use super::{Family, Part, Source, source, targets, text_lora_target};

    fn whole(name: &str) -> Option<Source> {
        Some(Source {
            checkpoint: name.to_owned(),
            part: Part::Whole,
        })
    }

    #[test]
    fn text_names_follow_llama_cpp() {
        let cases = [
            ("token_embd.weight", "model.embed_tokens.weight"),
            ("output_norm.weight", "model.norm.weight"),
            ("output.weight", "lm_head.weight"),
            (
                "blk.0.attn_norm.weight",
                "model.layers.0.input_layernorm.weight",
            ),
            (
                "blk.1.ffn_norm.weight",
                "model.layers.1.post_attention_layernorm.weight",
            ),
            (
                "blk.27.attn_q.weight",
                "model.layers.27.self_attn.q_proj.weight",
            ),
            (
                "blk.27.attn_q.bias",
                "model.layers.27.self_attn.q_proj.bias",
            ),
            ("blk.3.attn_k.bias", "model.layers.3.self_attn.k_proj.bias"),
            (
                "blk.3.attn_v.weight",
                "model.layers.3.self_attn.v_proj.weight",
            ),
            (
                "blk.3.attn_output.weight",
                "model.layers.3.self_attn.o_proj.weight",
            ),
            (
                "blk.10.ffn_gate.weight",
                "model.layers.10.mlp.gate_proj.weight",
            ),
            ("blk.10.ffn_up.weight", "model.layers.10.mlp.up_proj.weight"),
            (
                "blk.10.ffn_down.weight",
                "model.layers.10.mlp.down_proj.weight",
            ),
        ];
        for (gguf, hf) in cases {
            assert_eq!(source(Family::Text, gguf), whole(hf), "{gguf}");
        }
    }

    #[test]
    fn projector_names_follow_llama_cpp() {
        let cases = [
            (
                "v.blk.0.attn_out.weight",
                "visual.blocks.0.attn.proj.weight",
            ),
            ("v.blk.0.attn_out.bias", "visual.blocks.0.attn.proj.bias"),
            ("v.blk.31.ln1.weight", "visual.blocks.31.norm1.weight"),
            ("v.blk.31.ln2.weight", "visual.blocks.31.norm2.weight"),
            (
                "v.blk.2.ffn_gate.bias",
                "visual.blocks.2.mlp.gate_proj.bias",
            ),
            (
                "v.blk.2.ffn_up.weight",
                "visual.blocks.2.mlp.up_proj.weight",
            ),
            (
                "v.blk.2.ffn_down.weight",
                "visual.blocks.2.mlp.down_proj.weight",
            ),
            ("v.post_ln.weight", "visual.merger.ln_q.weight"),
            ("mm.0.weight", "visual.merger.mlp.0.weight"),
            ("mm.0.bias", "visual.merger.mlp.0.bias"),
            ("mm.2.weight", "visual.merger.mlp.2.weight"),
        ];
        for (gguf, hf) in cases {
            assert_eq!(source(Family::Projector, gguf), whole(hf), "{gguf}");
        }
        for (third, q) in ["attn_q", "attn_k", "attn_v"].into_iter().enumerate() {
            assert_eq!(
                source(Family::Projector, &format!("v.blk.4.{q}.bias")),
                Some(Source {
                    checkpoint: "visual.blocks.4.attn.qkv.bias".to_owned(),
                    part: Part::QkvThird(third as i64),
                })
            );
        }
        for (slice, name) in ["v.patch_embd.weight", "v.patch_embd.weight.1"]
            .into_iter()
            .enumerate()
        {
            assert_eq!(
                source(Family::Projector, name),
                Some(Source {
                    checkpoint: "visual.patch_embed.proj.weight".to_owned(),
                    part: Part::Temporal(slice as i64),
                })
            );
        }
    }

    #[test]
    fn names_of_the_other_family_or_malformed_have_no_source() {
        for name in [
            "v.blk.0.attn_q.weight",
            "blk.x.attn_q.weight",
            "blk.01.attn_q.weight",
            "blk.0.attn_q",
            "blk.0.attn_q.scale",
            "rope_freqs.weight",
            "output",
            "",
        ] {
            assert_eq!(source(Family::Text, name), None, "{name}");
        }
        for name in [
            "blk.0.attn_q.weight",
            "v.patch_embd.weight.2",
            "v.blk.0.attn_qkv.weight",
            "mm.1.weight",
            "v.position_embd.weight",
        ] {
            assert_eq!(source(Family::Projector, name), None, "{name}");
        }
    }

    #[test]
    fn families_come_from_the_architecture() {
        assert_eq!(Family::detect(Some("qwen2vl"), None), Ok(Family::Text));
        assert_eq!(
            Family::detect(Some("clip"), Some("qwen2.5vl_merger")),
            Ok(Family::Projector)
        );
        let err = Family::detect(Some("clip"), Some("qwen2vl_merger")).unwrap_err();
        assert!(err.contains("qwen2vl_merger"), "{err}");
        let err = Family::detect(Some("llama"), None).unwrap_err();
        assert!(err.contains("llama"), "{err}");
        assert!(Family::detect(None, None).is_err());
    }

    #[test]
    fn lora_targets_are_the_text_model_s_linear_layers() {
        assert_eq!(
            text_lora_target("model.layers.0.self_attn.q_proj").as_deref(),
            Some("blk.0.attn_q.weight")
        );
        assert_eq!(
            text_lora_target("model.layers.12.mlp.down_proj").as_deref(),
            Some("blk.12.ffn_down.weight")
        );
        assert_eq!(
            text_lora_target("lm_head").as_deref(),
            Some("output.weight")
        );
        for module in [
            "model.layers.0.input_layernorm",
            "model.embed_tokens",
            "visual.blocks.0.attn.qkv",
            "model.layers.0.self_attn",
        ] {
            assert_eq!(text_lora_target(module), None, "{module}");
        }
    }

    #[test]
    fn targets_invert_source() {
        let checkpoint = [
            "model.embed_tokens.weight",
            "model.norm.weight",
            "lm_head.weight",
            "model.layers.3.input_layernorm.weight",
            "model.layers.3.self_attn.q_proj.bias",
            "model.layers.11.mlp.down_proj.weight",
            "visual.patch_embed.proj.weight",
            "visual.blocks.5.attn.qkv.weight",
            "visual.blocks.5.attn.qkv.bias",
            "visual.blocks.0.norm2.weight",
            "visual.blocks.0.mlp.up_proj.bias",
            "visual.merger.ln_q.weight",
            "visual.merger.mlp.2.bias",
        ];
        for name in checkpoint {
            let text = targets(Family::Text, name);
            let projector = targets(Family::Projector, name);
            let expected = if name.starts_with("visual.") {
                assert!(text.is_empty(), "{name}: {text:?}");
                (Family::Projector, &projector)
            } else {
                assert!(projector.is_empty(), "{name}: {projector:?}");
                (Family::Text, &text)
            };
            let count = match name {
                "visual.patch_embed.proj.weight" => 2,
                n if n.contains(".qkv.") => 3,
                _ => 1,
            };
            assert_eq!(expected.1.len(), count, "{name}: {:?}", expected.1);
            for gguf in expected.1 {
                let back = source(expected.0, gguf).unwrap_or_else(|| panic!("{gguf}"));
                assert_eq!(back.checkpoint, name, "{gguf}");
            }
        }
        for name in [
            "visual.blocks.0.attn",
            "model.layers.0.self_attn.rotary.inv_freq",
            "lm_head",
            "",
        ] {
            assert!(targets(Family::Text, name).is_empty(), "{name}");
            assert!(targets(Family::Projector, name).is_empty(), "{name}");
        }
    }
}
