//! The Qwen2 decoder of Qwen2.5-VL with multimodal rotary positions (M-RoPE).
//!
//! Pre-norm blocks: RMSNorm → attention (biased q/k/v, unbiased output,
//! grouped-query heads) → residual, RMSNorm → SwiGLU → residual; a final
//! RMSNorm. Each token has three positions (temporal, height, width; see
//! `positions`): the rotary frequencies are split into `mrope_section` parts
//! and each part turns with one of the three. The cos/sin tables are computed
//! in float32 and then cast to the model's dtype, exactly as transformers does.
//!
//! Attention is `scaled_dot_product_attention` with grouped-query heads. A
//! [`KvCache`] keeps each layer's keys and values for generation.

use tch::{Device, Kind, Tensor, nn};

use super::layers::{Linear, Mlp, RmsNorm, apply_rotary, inverse_frequencies};
use crate::config::TextConfig;
use crate::error::{Error, Result};
use crate::lora::Lora;

/// Keys and values of the tokens seen so far, per layer: (batch, kv heads,
/// tokens, head_dim); and each sequence's M-RoPE delta, which places the
/// tokens that follow the prompt.
#[derive(Default)]
pub struct KvCache {
    layers: Vec<Option<(Tensor, Tensor)>>,
    pub(crate) deltas: Vec<i64>,
}

impl KvCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of cached tokens.
    pub fn len(&self) -> i64 {
        match self.layers.first() {
            Some(Some((k, _))) => k.size()[2],
            _ => 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The same cached keys and values (shared, not copied) to continue
    /// separately: `forward` appends by replacing a layer's tensors, never
    /// by writing into them.
    pub fn share(&self) -> Self {
        Self {
            layers: self
                .layers
                .iter()
                .map(|slot| {
                    slot.as_ref()
                        .map(|(k, v)| (k.shallow_clone(), v.shallow_clone()))
                })
                .collect(),
            deltas: self.deltas.clone(),
        }
    }

    /// The cache of one sequence, repeated as `n` identical rows: the shared
    /// prompt of a group of sampled completions. Gradients flow back to the
    /// one prompt evaluation.
    pub fn repeat_rows(&self, n: i64) -> Result<Self> {
        if self.deltas.len() != 1 {
            return Err(Error::Input(format!(
                "only a cache of one sequence can be repeated, this one holds {}",
                self.deltas.len()
            )));
        }
        let layers = self
            .layers
            .iter()
            .map(|slot| {
                slot.as_ref()
                    .map(|(k, v)| -> Result<(Tensor, Tensor)> {
                        Ok((k.f_repeat([n, 1, 1, 1])?, v.f_repeat([n, 1, 1, 1])?))
                    })
                    .transpose()
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            layers,
            deltas: vec![self.deltas[0]; n as usize],
        })
    }
}

struct Attention {
    q_proj: Linear,
    k_proj: Linear,
    v_proj: Linear,
    o_proj: Linear,
    num_heads: i64,
    num_kv_heads: i64,
    head_dim: i64,
}

impl Attention {
    fn new(p: &nn::Path, module: &str, cfg: &TextConfig, lora: &mut Option<Lora>) -> Result<Self> {
        let head_dim = cfg.head_dim();
        let (h, kv) = (cfg.num_attention_heads, cfg.num_key_value_heads);
        let hidden = cfg.hidden_size;
        let mut proj = |name: &str, dims, bias| {
            Linear::adapted(&(p / name), &format!("{module}.{name}"), dims, bias, lora)
        };
        Ok(Self {
            q_proj: proj("q_proj", (hidden, h * head_dim), true)?,
            k_proj: proj("k_proj", (hidden, kv * head_dim), true)?,
            v_proj: proj("v_proj", (hidden, kv * head_dim), true)?,
            o_proj: proj("o_proj", (h * head_dim, hidden), false)?,
            num_heads: h,
            num_kv_heads: kv,
            head_dim,
        })
    }

    fn forward(
        &self,
        x: &Tensor,
        rope: &(Tensor, Tensor),
        cache: Option<&mut Option<(Tensor, Tensor)>>,
    ) -> Result<Tensor> {
        let (b, t, _) = x.size3()?;
        let heads = |proj: &Linear, n: i64| -> Result<Tensor> {
            Ok(proj
                .forward(x)?
                .f_view([b, t, n, self.head_dim])?
                .f_transpose(1, 2)?)
        };
        let (cos, sin) = rope;
        let q = apply_rotary(&heads(&self.q_proj, self.num_heads)?, cos, sin)?;
        let mut k = apply_rotary(&heads(&self.k_proj, self.num_kv_heads)?, cos, sin)?;
        let mut v = heads(&self.v_proj, self.num_kv_heads)?;
        let mut past = 0;
        if let Some(slot) = cache {
            if let Some((pk, pv)) = slot.as_ref() {
                past = pk.size()[2];
                k = Tensor::f_cat(&[pk, &k], 2)?;
                v = Tensor::f_cat(&[pv, &v], 2)?;
            }
            *slot = Some((k.shallow_clone(), v.shallow_clone()));
        }
        // Causal: query i (absolute position past + i) sees keys 0..=past + i.
        // SDPA's own is_causal aligns the query block to the first key, which
        // is right only when nothing is cached; one new token sees everything.
        let mask = if past > 0 && t > 1 {
            let rows = Tensor::f_arange(t, (Kind::Int64, x.device()))?.f_unsqueeze(1)?;
            let cols = Tensor::f_arange(past + t, (Kind::Int64, x.device()))?.f_unsqueeze(0)?;
            Some(cols.f_le_tensor(&rows.f_add_scalar(past)?)?)
        } else {
            None
        };
        let out = Tensor::f_scaled_dot_product_attention(
            &q,
            &k,
            &v,
            mask.as_ref(),
            0.0,
            past == 0 && t > 1,
            (self.head_dim as f64).powf(-0.5),
            self.num_heads != self.num_kv_heads,
        )?;
        self.o_proj
            .forward(&out.f_transpose(1, 2)?.f_reshape([b, t, -1])?)
    }
}

struct DecoderLayer {
    input_layernorm: RmsNorm,
    post_attention_layernorm: RmsNorm,
    self_attn: Attention,
    mlp: Mlp,
}

impl DecoderLayer {
    fn new(p: &nn::Path, module: &str, cfg: &TextConfig, lora: &mut Option<Lora>) -> Result<Self> {
        Ok(Self {
            input_layernorm: RmsNorm::new(
                &(p / "input_layernorm"),
                cfg.hidden_size,
                cfg.rms_norm_eps,
            )?,
            post_attention_layernorm: RmsNorm::new(
                &(p / "post_attention_layernorm"),
                cfg.hidden_size,
                cfg.rms_norm_eps,
            )?,
            self_attn: Attention::new(
                &(p / "self_attn"),
                &format!("{module}.self_attn"),
                cfg,
                lora,
            )?,
            mlp: Mlp::adapted(
                &(p / "mlp"),
                &format!("{module}.mlp"),
                cfg.hidden_size,
                cfg.intermediate_size,
                false,
                lora,
            )?,
        })
    }

    fn forward(
        &self,
        x: &Tensor,
        rope: &(Tensor, Tensor),
        cache: Option<&mut Option<(Tensor, Tensor)>>,
    ) -> Result<Tensor> {
        let attn = self
            .self_attn
            .forward(&self.input_layernorm.forward(x)?, rope, cache)?;
        let x = x.f_add(&attn)?;
        Ok(x.f_add(
            &self
                .mlp
                .forward(&self.post_attention_layernorm.forward(&x)?)?,
        )?)
    }
}

/// Token embedding, decoder layers and final norm (`model.*` in the checkpoint).
pub(crate) struct TextModel {
    embed_tokens: Tensor,
    layers: Vec<DecoderLayer>,
    norm: RmsNorm,
    cfg: TextConfig,
}

impl TextModel {
    /// The decoder, its projections adapted as `lora` says; checkpoint
    /// module names start with `model.`.
    pub(crate) fn new(p: &nn::Path, cfg: &TextConfig, lora: &mut Option<Lora>) -> Result<Self> {
        let layers = (0..cfg.num_hidden_layers)
            .map(|i| {
                DecoderLayer::new(&(p / "layers" / i), &format!("model.layers.{i}"), cfg, lora)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            embed_tokens: (p / "embed_tokens")
                .f_zeros("weight", &[cfg.vocab_size, cfg.hidden_size])?,
            layers,
            norm: RmsNorm::new(&(p / "norm"), cfg.hidden_size, cfg.rms_norm_eps)?,
            cfg: cfg.clone(),
        })
    }

    pub(crate) fn embed_weight(&self) -> &Tensor {
        &self.embed_tokens
    }

    /// (batch, tokens) ids → (batch, tokens, hidden) embeddings.
    pub(crate) fn embed(&self, ids: &Tensor) -> Result<Tensor> {
        Ok(Tensor::f_embedding(
            &self.embed_tokens,
            ids,
            -1,
            false,
            false,
        )?)
    }

    /// Runs the decoder on `embeds` (batch, tokens, hidden) at `positions`
    /// (3, batch, tokens), appending to `cache` when given.
    pub(crate) fn forward(
        &self,
        embeds: &Tensor,
        positions: &Tensor,
        mut cache: Option<&mut KvCache>,
    ) -> Result<Tensor> {
        if let Some(cache) = cache.as_deref_mut()
            && cache.layers.is_empty()
        {
            cache.layers = (0..self.layers.len()).map(|_| None).collect();
        }
        let rope = self.rotary(positions, embeds.kind(), embeds.device())?;
        let mut x = embeds.shallow_clone();
        for (i, layer) in self.layers.iter().enumerate() {
            let slot = cache.as_deref_mut().map(|c| &mut c.layers[i]);
            x = layer.forward(&x, &rope, slot)?;
        }
        self.norm.forward(&x)
    }

    /// M-RoPE cos/sin, (batch, 1, tokens, head_dim), in the model's dtype.
    fn rotary(&self, positions: &Tensor, kind: Kind, device: Device) -> Result<(Tensor, Tensor)> {
        let cfg = &self.cfg;
        let inv_freq = inverse_frequencies(cfg.rope_theta, cfg.head_dim(), device)?;
        let freqs = positions
            .f_to_device(device)?
            .f_to_kind(Kind::Float)?
            .f_unsqueeze(-1)?
            .f_mul(&inv_freq)?;
        let table = |t: Tensor| -> Result<Tensor> {
            // Section i of the frequencies turns with position row i (t, h, w).
            let parts = t.f_split_with_sizes(cfg.mrope_section.as_slice(), -1)?;
            let picked = parts
                .iter()
                .enumerate()
                .map(|(i, part)| part.f_select(0, i as i64))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let half = Tensor::f_cat(&picked, -1)?;
            Ok(Tensor::f_cat(&[&half, &half], -1)?
                .f_to_kind(kind)?
                .f_unsqueeze(1)?)
        };
        Ok((table(freqs.f_cos()?)?, table(freqs.f_sin()?)?))
    }

    pub(crate) fn check_ids(&self, ids: &[Vec<i64>]) -> Result<()> {
        for (b, seq) in ids.iter().enumerate() {
            if let Some((i, id)) = seq
                .iter()
                .enumerate()
                .find(|&(_, &id)| id < 0 || id >= self.cfg.vocab_size)
            {
                return Err(Error::Input(format!(
                    "token id {id} at sequence {b}, position {i} is outside the vocabulary (vocab_size {})",
                    self.cfg.vocab_size
                )));
            }
        }
        Ok(())
    }
}
