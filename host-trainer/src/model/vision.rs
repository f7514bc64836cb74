//! The Qwen2.5-VL vision tower: flattened patches in, one embedding per
//! merged 2×2 patch group out (in the text model's width).
//!
//! - Patch embedding: the checkpoint's Conv3d, with kernel = stride =
//!   (temporal, patch, patch), over patches that the processor already
//!   flattened (column order C, T, row, column). Mathematically a linear map
//!   of each patch, but kept a convolution: its float32 sums then match
//!   transformers' to the last bits (a matmul differs by ~1e-6 relative,
//!   which 32 blocks amplify past the 1e-4 parity budget).
//! - Blocks: pre-norm (RMSNorm) attention with a 2-D rotary (the first half of
//!   the rotary frequencies follow the patch row, the second the column), then a
//!   biased SwiGLU MLP. Blocks in `fullatt_block_indexes` attend within each
//!   frame; the others within windows of `window_size` pixels. Tokens are
//!   reordered by window once before the blocks and restored after the merger.
//! - Merger: RMSNorm, then each 2×2 group's four vectors concatenated, then
//!   Linear, GELU, Linear.
//!
//! Attention is `scaled_dot_product_attention`, run on equal-length windows
//! stacked as a batch (flash/memory-efficient kernels on CUDA, with backward).

use tch::{Device, Kind, Tensor, nn};

use super::layers::{Linear, Mlp, RmsNorm, apply_rotary, compute_kind, inverse_frequencies};
use super::positions::{Grid, frame_lengths, patch_positions, windows};
use crate::config::VisionConfig;
use crate::error::{Error, Result};

/// RMSNorm epsilon of the vision tower (fixed in transformers, not in the config).
const VISION_NORM_EPS: f64 = 1e-6;

struct VisionAttention {
    qkv: Linear,
    proj: Linear,
    num_heads: i64,
    head_dim: i64,
}

impl VisionAttention {
    fn new(p: &nn::Path, cfg: &VisionConfig) -> Result<Self> {
        let dim = cfg.hidden_size;
        Ok(Self {
            qkv: Linear::new(&(p / "qkv"), dim, 3 * dim, true)?,
            proj: Linear::new(&(p / "proj"), dim, dim, true)?,
            num_heads: cfg.num_heads,
            head_dim: cfg.head_dim(),
        })
    }

    /// `x`: (patches, dim) in window order; `runs`: consecutive spans of
    /// equal-length attention chunks, as (chunk length, number of chunks).
    fn forward(&self, x: &Tensor, runs: &[(i64, i64)], rope: &Rotary) -> Result<Tensor> {
        let (seq, dim) = x.size2()?;
        let qkv = self
            .qkv
            .forward(x)?
            .f_reshape([seq, 3, self.num_heads, self.head_dim])?
            .f_permute([1, 0, 2, 3])?;
        let kind = x.kind();
        let rotate = |t: Tensor| -> Result<Tensor> {
            let wide = t.f_to_kind(rope.cos.kind())?;
            Ok(apply_rotary(&wide, &rope.cos, &rope.sin)?.f_to_kind(kind)?)
        };
        let q = rotate(qkv.f_select(0, 0)?)?;
        let k = rotate(qkv.f_select(0, 1)?)?;
        let v = qkv.f_select(0, 2)?;
        let scale = (self.head_dim as f64).powf(-0.5);
        let mut outputs = Vec::with_capacity(runs.len());
        let mut start = 0;
        for &(len, count) in runs {
            // (count·len, heads, d) → (count, heads, len, d)
            let chunk = |t: &Tensor| -> Result<Tensor> {
                Ok(t.f_narrow(0, start, len * count)?
                    .f_reshape([count, len, self.num_heads, self.head_dim])?
                    .f_transpose(1, 2)?)
            };
            let out = Tensor::f_scaled_dot_product_attention(
                &chunk(&q)?,
                &chunk(&k)?,
                &chunk(&v)?,
                None::<&Tensor>,
                0.0,
                false,
                scale,
                false,
            )?;
            outputs.push(out.f_transpose(1, 2)?.f_reshape([len * count, dim])?);
            start += len * count;
        }
        self.proj.forward(&Tensor::f_cat(&outputs, 0)?)
    }
}

struct VisionBlock {
    norm1: RmsNorm,
    norm2: RmsNorm,
    attn: VisionAttention,
    mlp: Mlp,
}

impl VisionBlock {
    fn new(p: &nn::Path, cfg: &VisionConfig) -> Result<Self> {
        Ok(Self {
            norm1: RmsNorm::new(&(p / "norm1"), cfg.hidden_size, VISION_NORM_EPS)?,
            norm2: RmsNorm::new(&(p / "norm2"), cfg.hidden_size, VISION_NORM_EPS)?,
            attn: VisionAttention::new(&(p / "attn"), cfg)?,
            mlp: Mlp::new(&(p / "mlp"), cfg.hidden_size, cfg.intermediate_size, true)?,
        })
    }

    fn forward(&self, x: &Tensor, runs: &[(i64, i64)], rope: &Rotary) -> Result<Tensor> {
        let x = x.f_add(&self.attn.forward(&self.norm1.forward(x)?, runs, rope)?)?;
        Ok(x.f_add(&self.mlp.forward(&self.norm2.forward(&x)?)?)?)
    }
}

struct PatchMerger {
    ln_q: RmsNorm,
    fc1: Linear,
    fc2: Linear,
    group_dim: i64,
}

impl PatchMerger {
    fn new(p: &nn::Path, cfg: &VisionConfig) -> Result<Self> {
        let group_dim = cfg.hidden_size * cfg.spatial_merge_size * cfg.spatial_merge_size;
        let mlp = p / "mlp";
        Ok(Self {
            ln_q: RmsNorm::new(&(p / "ln_q"), cfg.hidden_size, VISION_NORM_EPS)?,
            fc1: Linear::new(&(&mlp / 0), group_dim, group_dim, true)?,
            fc2: Linear::new(&(&mlp / 2), group_dim, cfg.out_hidden_size, true)?,
            group_dim,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let grouped = self.ln_q.forward(x)?.f_reshape([-1, self.group_dim])?;
        // nn.GELU() in transformers: the exact (erf) form.
        let hidden = self.fc1.forward(&grouped)?.f_gelu("none")?;
        self.fc2.forward(&hidden)
    }
}

/// cos/sin of the 2-D rotary, one row per patch (in window order), in the
/// dtype the rotation runs in.
struct Rotary {
    cos: Tensor,
    sin: Tensor,
}

/// The vision tower.
pub(crate) struct VisionTower {
    patch_embed: Tensor,
    blocks: Vec<VisionBlock>,
    merger: PatchMerger,
    cfg: VisionConfig,
}

impl VisionTower {
    pub(crate) fn new(p: &nn::Path, cfg: &VisionConfig) -> Result<Self> {
        let patch_embed = (p / "patch_embed" / "proj").f_zeros(
            "weight",
            &[
                cfg.hidden_size,
                cfg.in_channels,
                cfg.temporal_patch_size,
                cfg.patch_size,
                cfg.patch_size,
            ],
        )?;
        let blocks = (0..cfg.depth)
            .map(|i| VisionBlock::new(&(p / "blocks" / i), cfg))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            patch_embed,
            blocks,
            merger: PatchMerger::new(&(p / "merger"), cfg)?,
            cfg: cfg.clone(),
        })
    }

    /// `pixel_values`: (patches, C·T·P·P) for `grids` in order; returns
    /// (merged tokens, out_hidden_size) in the same image order.
    pub(crate) fn forward(&self, pixel_values: &Tensor, grids: &[Grid]) -> Result<Tensor> {
        let cfg = &self.cfg;
        let merge = cfg.spatial_merge_size;
        let unit = merge * merge;
        for grid in grids {
            grid.check(merge).map_err(Error::Input)?;
        }
        let patches: i64 = grids.iter().map(Grid::patches).sum();
        if pixel_values.size() != [patches, cfg.patch_dim()] {
            return Err(Error::Input(format!(
                "pixel_values has shape {:?}; the image grids need ({patches}, {})",
                pixel_values.size(),
                cfg.patch_dim()
            )));
        }
        let device = self.patch_embed.device();
        let kind = self.patch_embed.kind();
        let (t, p) = (cfg.temporal_patch_size, cfg.patch_size);
        let x = pixel_values
            .f_to_device(device)?
            .f_to_kind(kind)?
            .f_reshape([patches, cfg.in_channels, t, p, p])?
            .f_conv3d(
                &self.patch_embed,
                None::<&Tensor>,
                [t, p, p],
                [0, 0, 0],
                [1, 1, 1],
                1,
            )?
            .f_reshape([patches, cfg.hidden_size])?;

        let win = windows(grids, merge, cfg.merged_window_size());
        let order = Tensor::f_from_slice(&win.order)?.f_to_device(device)?;
        // Moves whole merge groups (`unit` consecutive patches) into window order.
        let to_windows = |t: &Tensor| -> Result<Tensor> {
            let width = t.size()[1];
            Ok(t.f_reshape([patches / unit, unit, width])?
                .f_index_select(0, &order)?
                .f_reshape([patches, width])?)
        };
        let x = to_windows(&x)?;
        let rope = self.rotary(grids, device, compute_kind(kind), &to_windows)?;

        let window_runs = runs(&win.lengths);
        let frame_runs = runs(&frame_lengths(grids));
        let mut x = x;
        for (i, block) in self.blocks.iter().enumerate() {
            let full = cfg.fullatt_block_indexes.contains(&(i as i64));
            x = block.forward(&x, if full { &frame_runs } else { &window_runs }, &rope)?;
        }
        let merged = self.merger.forward(&x)?;
        let restore = order.f_argsort(0, false)?;
        Ok(merged.f_index_select(0, &restore)?)
    }

    /// The rotary tables, computed in float32 as transformers does (a float64
    /// model widens them afterwards), in window order.
    fn rotary(
        &self,
        grids: &[Grid],
        device: Device,
        rope_kind: Kind,
        to_windows: &dyn Fn(&Tensor) -> Result<Tensor>,
    ) -> Result<Rotary> {
        let head_dim = self.cfg.head_dim();
        let inv_freq = inverse_frequencies(self.cfg.rope_theta, head_dim / 2, device)?;
        let positions: Vec<i64> = patch_positions(grids, self.cfg.spatial_merge_size)
            .into_iter()
            .flatten()
            .collect();
        let n = positions.len() as i64 / 2;
        // (n, 2, 1) × (k) → (n, 2, k): row frequencies then column frequencies
        let freqs = Tensor::f_from_slice(&positions)?
            .f_to_device(device)?
            .f_reshape([n, 2, 1])?
            .f_to_kind(Kind::Float)?
            .f_mul(&inv_freq)?
            .f_reshape([n, -1])?;
        let table = |t: Tensor| -> Result<Tensor> {
            let doubled = Tensor::f_cat(&[&t, &t], -1)?;
            // (n, head_dim) → (n, 1, head_dim): broadcast over heads
            Ok(to_windows(&doubled)?.f_to_kind(rope_kind)?.f_unsqueeze(1)?)
        };
        Ok(Rotary {
            cos: table(freqs.f_cos()?)?,
            sin: table(freqs.f_sin()?)?,
        })
    }
}

/// Groups consecutive equal lengths: `[64, 64, 16, 64]` → `[(64, 2), (16, 1), (64, 1)]`.
fn runs(lengths: &[i64]) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = Vec::new();
    for &len in lengths {
        match out.last_mut() {
            Some((l, count)) if *l == len => *count += 1,
            _ => out.push((len, 1)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::runs;

    #[test]
    fn runs_group_consecutive_equal_lengths() {
        assert_eq!(runs(&[64, 64, 16, 64]), [(64, 2), (16, 1), (64, 1)]);
        assert_eq!(runs(&[]), []);
    }
}
