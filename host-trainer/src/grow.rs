//! Depth growth: a deeper model that starts out computing exactly what a
//! trained shallower one computes, so training adds capacity without first
//! losing what the small model learned.
//!
//! Every layer of the small model is followed by `factor - 1` copies of
//! itself whose output projections (attention and MLP) are zero: a residual
//! block whose output is zero adds nothing to the stream, so the grown model
//! keeps the small one's function, while its copied inputs give the new
//! blocks useful features and non-zero gradients from the first step. In the
//! vision tower the unit copied is a group of `full_attention_every` blocks
//! (windowed ones, then a full-attention one), so each original block keeps
//! its kind of attention in the grown model's pattern.

use std::collections::HashMap;

use tch::Tensor;

use crate::error::{Error, Result};
use crate::model::Qwen25Vl;
use crate::weights::canonical_name;

/// How the small model's depth maps onto the grown one's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Growth {
    /// Text layers of the grown model per layer of the small one.
    pub text_factor: i64,
    /// Vision blocks of the grown model per block of the small one.
    pub vision_factor: i64,
    /// The vision tower's `full_attention_every`, the unit that is copied.
    pub full_attention_every: i64,
}

/// The small model's weight that fills `name` of the grown model, and
/// whether it is zeroed there (an output projection of a copy). `None` for
/// a name of neither a text layer nor a vision block: the same name.
pub fn source_of(name: &str, growth: Growth) -> Option<(String, bool)> {
    const TEXT: &str = "model.layers.";
    const VISION: &str = "visual.blocks.";
    let (prefix, rest) = if let Some(rest) = name.strip_prefix(TEXT) {
        (TEXT, rest)
    } else {
        (VISION, name.strip_prefix(VISION)?)
    };
    let (index, tail) = rest.split_once('.')?;
    let index: i64 = index.parse().ok()?;
    let (source, copy, zeroed) = if prefix == TEXT {
        let f = growth.text_factor;
        (
            index / f,
            index % f != 0,
            matches!(tail, "self_attn.o_proj.weight" | "mlp.down_proj.weight"),
        )
    } else {
        let (f, every) = (growth.vision_factor, growth.full_attention_every);
        let (group, within) = (index / every, index % every);
        (
            group / f * every + within,
            group % f != 0,
            matches!(
                tail,
                "attn.proj.weight"
                    | "attn.proj.bias"
                    | "mlp.down_proj.weight"
                    | "mlp.down_proj.bias"
            ),
        )
    };
    Some((format!("{prefix}{source}.{tail}"), copy && zeroed))
}

/// Fills every weight of `grown` from `small` as [`source_of`] maps it.
pub fn grow_into(grown: &Qwen25Vl, small: &Qwen25Vl, growth: Growth) -> Result<()> {
    let from: HashMap<String, Tensor> = small
        .vars()
        .variables()
        .into_iter()
        .map(|(n, t)| (canonical_name(&n), t))
        .collect();
    tch::no_grad(|| -> Result<()> {
        for (name, mut var) in grown.vars().variables() {
            let name = canonical_name(&name);
            let (source, zeroed) =
                source_of(&name, growth).unwrap_or_else(|| (name.clone(), false));
            let value = from.get(&source).ok_or_else(|| {
                Error::Input(format!(
                    "weight {name} of the grown model has no source {source}"
                ))
            })?;
            if value.size() != var.size() {
                return Err(Error::Input(format!(
                    "weight {name} is {:?} in the grown model but {source} is {:?}: only the depth may grow",
                    var.size(),
                    value.size()
                )));
            }
            let value = if zeroed {
                value.f_zeros_like()?
            } else {
                value.shallow_clone()
            };
            var.f_copy_(&value)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWICE: Growth = Growth {
        text_factor: 2,
        vision_factor: 2,
        full_attention_every: 2,
    };

    fn source(name: &str) -> (String, bool) {
        source_of(name, TWICE).unwrap()
    }

    #[test]
    fn each_text_layer_is_followed_by_its_copy_with_zero_outputs() {
        assert_eq!(
            source("model.layers.0.self_attn.q_proj.weight"),
            ("model.layers.0.self_attn.q_proj.weight".into(), false)
        );
        assert_eq!(
            source("model.layers.1.self_attn.q_proj.bias"),
            ("model.layers.0.self_attn.q_proj.bias".into(), false)
        );
        assert_eq!(
            source("model.layers.1.self_attn.o_proj.weight"),
            ("model.layers.0.self_attn.o_proj.weight".into(), true)
        );
        assert_eq!(
            source("model.layers.7.mlp.down_proj.weight"),
            ("model.layers.3.mlp.down_proj.weight".into(), true)
        );
        // An original layer keeps its outputs.
        assert_eq!(
            source("model.layers.6.mlp.down_proj.weight"),
            ("model.layers.3.mlp.down_proj.weight".into(), false)
        );
        assert_eq!(
            source("model.layers.5.post_attention_layernorm.weight"),
            (
                "model.layers.2.post_attention_layernorm.weight".into(),
                false
            )
        );
    }

    #[test]
    fn vision_blocks_are_copied_in_groups_so_each_keeps_its_attention() {
        // Blocks 1, 3, 5, 7 attend fully in both models (every second one):
        // the small model's (0 windowed, 1 full) become 0, 1 and copies 2, 3.
        let from = |i: i64| source(&format!("visual.blocks.{i}.attn.qkv.weight")).0;
        let expected =
            [0, 1, 0, 1, 2, 3, 2, 3].map(|i| format!("visual.blocks.{i}.attn.qkv.weight"));
        assert_eq!((0..8).map(from).collect::<Vec<_>>(), expected);
        let zeroed = |i: i64| source(&format!("visual.blocks.{i}.mlp.down_proj.bias")).1;
        assert_eq!(
            (0..8).map(zeroed).collect::<Vec<_>>(),
            [false, false, true, true, false, false, true, true]
        );
        assert!(source("visual.blocks.3.attn.proj.weight").1);
        assert!(!source("visual.blocks.3.norm1.weight").1);
        // Three blocks to a group, grown three times.
        let thrice = Growth {
            text_factor: 3,
            vision_factor: 3,
            full_attention_every: 3,
        };
        let from = |i: i64| {
            source_of(&format!("visual.blocks.{i}.attn.qkv.bias"), thrice)
                .unwrap()
                .0
        };
        assert_eq!(from(8), "visual.blocks.2.attn.qkv.bias");
        assert_eq!(from(9), "visual.blocks.3.attn.qkv.bias");
        assert_eq!(from(17), "visual.blocks.5.attn.qkv.bias");
    }

    #[test]
    fn other_weights_keep_their_names() {
        for name in [
            "model.embed_tokens.weight",
            "lm_head.weight",
            "model.norm.weight",
            "visual.merger.mlp.0.weight",
            "visual.patch_embed.proj.weight",
        ] {
            assert_eq!(source_of(name, TWICE), None, "{name}");
        }
    }
}
