//! Qwen2.5-VL on libtorch, trainable: every weight is a variable of one
//! [`nn::VarStore`], named as in the Hugging Face checkpoint.
//!
//! Reference: transformers' `Qwen2_5_VLForConditionalGeneration` (5.23), which
//! the tests match in float32 (logits) and float64 (loss and gradients).
//!
//! Layout, one file per block family:
//! - `positions`: M-RoPE positions, patch positions, attention windows (integers only);
//! - `layers`: linear, RMSNorm, SwiGLU, rotary helpers;
//! - `vision`: the vision tower (`visual.*`);
//! - `text`: the Qwen2 decoder (`model.*`) and its [`KvCache`];
//! - this file: [`Qwen25Vl`], which puts image embeddings in place of the image
//!   tokens, applies `lm_head` and generates.

mod layers;
pub mod positions;
mod text;
mod vision;

use std::path::Path;

use tch::{Device, Kind, Tensor, nn};

pub use self::positions::{Grid, MropePositions};
pub use self::text::KvCache;
use self::text::TextModel;
use self::vision::VisionTower;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::lora::{Lora, LoraInit, generator};
use crate::weights::Checkpoint;

/// The images of a batch: patches of every image, in the order their image
/// tokens appear (sequence by sequence), and each image's grid.
pub struct Images<'a> {
    /// (patches, C·T·P·P), as the Qwen2-VL image processor emits them.
    pub pixel_values: &'a Tensor,
    pub grids: &'a [Grid],
}

/// A batch of token sequences of equal length, with their images.
pub struct Batch<'a> {
    pub input_ids: &'a [Vec<i64>],
    pub images: Option<Images<'a>>,
}

/// Qwen2.5-VL for conditional generation.
pub struct Qwen25Vl {
    config: Config,
    vars: nn::VarStore,
    visual: VisionTower,
    model: TextModel,
    lm_head: Option<Tensor>,
    lora: Option<Lora>,
}

impl Qwen25Vl {
    /// Builds the model with zero weights, as variables of `kind` on `device`.
    pub fn new(config: Config, device: Device, kind: Kind) -> Result<Self> {
        Self::with_lora(config, device, kind, None)
    }

    /// [`Self::new`] with LoRA adapters on the projections `lora` targets,
    /// initialised as PEFT does from torch's generator seeded with `lora.seed`.
    pub fn with_lora(
        config: Config,
        device: Device,
        kind: Kind,
        lora: Option<LoraInit>,
    ) -> Result<Self> {
        let _generator = lora.map(|init| {
            let guard = generator();
            tch::manual_seed(init.seed as i64);
            guard
        });
        let mut vars = nn::VarStore::new(device);
        vars.set_kind(kind);
        // Adapters over half-precision base weights stay float32 (their
        // updates are small next to the weights).
        let adapter_kind = match kind {
            Kind::BFloat16 | Kind::Half => Kind::Float,
            other => other,
        };
        let mut adapters = lora
            .map(|init| Lora::new(init.config.clone(), device, adapter_kind))
            .transpose()?;
        let root = vars.root();
        let visual = VisionTower::new(&(&root / "visual"), &config.vision)?;
        let model = TextModel::new(&(&root / "model"), &config.text, &mut adapters)?;
        let lm_head = if config.tie_word_embeddings {
            None
        } else {
            Some(
                (&root / "lm_head")
                    .f_zeros("weight", &[config.text.vocab_size, config.text.hidden_size])?,
            )
        };
        Ok(Self {
            config,
            vars,
            visual,
            model,
            lm_head,
            lora: adapters,
        })
    }

    /// Loads a Hugging Face checkpoint directory (`config.json` + safetensors).
    pub fn from_checkpoint(dir: &Path, device: Device, kind: Kind) -> Result<Self> {
        Self::from_checkpoint_with_lora(dir, device, kind, None)
    }

    /// Loads a checkpoint and adds fresh LoRA adapters (see [`Self::with_lora`]).
    pub fn from_checkpoint_with_lora(
        dir: &Path,
        device: Device,
        kind: Kind,
        lora: Option<LoraInit>,
    ) -> Result<Self> {
        let config = Config::from_dir(dir)?;
        let checkpoint = Checkpoint::open(dir)?;
        let model = Self::with_lora(config, device, kind, lora)?;
        checkpoint.load_into(&model.vars, model.config.tie_word_embeddings)?;
        Ok(model)
    }

    /// Stops gradients to every base weight (the adapters stay trainable).
    pub fn freeze_base(&mut self) {
        self.vars.freeze();
    }

    /// The LoRA adapters, if the model has them.
    pub fn lora(&self) -> Option<&Lora> {
        self.lora.as_ref()
    }

    /// Turns the adapters off (the base model) or on; no effect without adapters.
    pub fn set_lora_enabled(&self, enabled: bool) {
        if let Some(lora) = &self.lora {
            lora.switch().set_enabled(enabled);
        }
    }

    /// Training mode turns the adapters' dropout on.
    pub fn set_training(&self, training: bool) {
        if let Some(lora) = &self.lora {
            lora.switch().set_training(training);
        }
    }

    /// Every base weight by checkpoint name, with the adapters' updates
    /// `(alpha / r) · B A` added to the weights they adapt: the model a merged
    /// checkpoint holds. Without adapters, the weights themselves.
    pub fn merged_weights(&self) -> Result<Vec<(String, Tensor)>> {
        let updates: std::collections::HashMap<String, Tensor> = match &self.lora {
            Some(lora) => tch::no_grad(|| {
                lora.modules()
                    .iter()
                    .map(|(module, a, b)| {
                        let update = b.f_matmul(a)?.f_mul_scalar(lora.config().scale())?;
                        Ok((format!("{module}.weight"), update))
                    })
                    .collect::<Result<_>>()
            })?,
            None => Default::default(),
        };
        let mut out: Vec<(String, Tensor)> = tch::no_grad(|| {
            self.vars
                .variables()
                .into_iter()
                .map(|(name, weight)| {
                    let merged = match updates.get(&name) {
                        Some(update) => weight.f_add(&update.f_to_kind(weight.kind())?)?,
                        None => weight.f_detach_copy()?,
                    };
                    Ok((name, merged))
                })
                .collect::<Result<_>>()
        })?;
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The variables (for optimizers, freezing, saving).
    pub fn vars(&self) -> &nn::VarStore {
        &self.vars
    }

    pub fn device(&self) -> Device {
        self.vars.device()
    }

    /// M-RoPE positions of each sequence, consuming `grids` in order.
    pub fn positions(&self, input_ids: &[Vec<i64>], grids: &[Grid]) -> Result<Vec<MropePositions>> {
        let mut grid_iter = grids.iter().copied();
        let out = input_ids
            .iter()
            .map(|ids| {
                positions::mrope_positions(
                    ids,
                    self.config.image_token_id,
                    &mut grid_iter,
                    self.config.vision.spatial_merge_size,
                )
                .map_err(Error::Input)
            })
            .collect::<Result<Vec<_>>>()?;
        if grid_iter.next().is_some() {
            return Err(Error::Input(format!(
                "{} image grid(s) given but the sequences have fewer images",
                grids.len()
            )));
        }
        Ok(out)
    }

    /// The vision tower alone: one embedding per merged patch group.
    pub fn image_embeddings(&self, images: &Images) -> Result<Tensor> {
        self.visual.forward(images.pixel_values, images.grids)
    }

    /// Final hidden states (batch, tokens, hidden), before `lm_head`.
    pub fn hidden_states(&self, batch: &Batch) -> Result<Tensor> {
        let (embeds, positions, _) = self.prepare(batch)?;
        self.model.forward(&embeds, &positions, None)
    }

    /// `lm_head` on hidden states: logits over the vocabulary.
    pub fn logits(&self, hidden: &Tensor) -> Result<Tensor> {
        let weight = self.lm_head.as_ref().unwrap_or(self.model.embed_weight());
        Ok(hidden.f_linear(weight, None::<&Tensor>)?)
    }

    /// Logits (batch, tokens, vocab) of a batch.
    pub fn forward(&self, batch: &Batch) -> Result<Tensor> {
        self.logits(&self.hidden_states(batch)?)
    }

    /// Logits of a batch that continues `cache` (empty: a new prompt, images
    /// allowed; otherwise only text tokens, placed after everything cached).
    /// Appends the batch's keys and values to `cache`.
    pub fn forward_cached(&self, batch: &Batch, cache: &mut KvCache) -> Result<Tensor> {
        self.logits(&self.hidden_cached(batch, cache)?)
    }

    /// [`Self::forward_cached`] before `lm_head`.
    pub fn hidden_cached(&self, batch: &Batch, cache: &mut KvCache) -> Result<Tensor> {
        let (embeds, positions) = if cache.is_empty() {
            let (embeds, positions, deltas) = self.prepare(batch)?;
            cache.deltas = deltas;
            (embeds, positions)
        } else {
            if batch.images.is_some() {
                return Err(Error::Input(
                    "images can only come with the first tokens of a cached sequence".to_owned(),
                ));
            }
            self.continuation(batch.input_ids, cache)?
        };
        self.model.forward(&embeds, &positions, Some(cache))
    }

    /// Final hidden states (1, tokens, hidden) of `suffix`, the rest of a
    /// sequence whose text-only start `prefix` is in `cache` (one row, as
    /// [`Self::hidden_cached`] left it), images allowed in the suffix. The
    /// cache is not changed, so several suffixes can follow one prefix, and
    /// gradients flow back to its one evaluation. Positions are those of the
    /// whole sequence, as if it had been evaluated at once.
    pub fn hidden_after_prefix(
        &self,
        prefix: &[i64],
        cache: &KvCache,
        suffix: &[i64],
        images: Option<&Images>,
    ) -> Result<Tensor> {
        if cache.len() != prefix.len() as i64 || cache.deltas.len() != 1 {
            return Err(Error::Input(format!(
                "the cache holds {} token(s) of {} sequence(s), not the prefix's {}",
                cache.len(),
                cache.deltas.len(),
                prefix.len()
            )));
        }
        if prefix.contains(&self.config.image_token_id) {
            return Err(Error::Input(
                "a shared prefix must hold text only (its images would be encoded once per suffix)"
                    .to_owned(),
            ));
        }
        if suffix.is_empty() {
            return Err(Error::Input("empty suffix".to_owned()));
        }
        let ids = [suffix.to_vec()];
        self.model.check_ids(&ids)?;
        let whole: Vec<i64> = prefix.iter().chain(suffix).copied().collect();
        let grids = images.map_or(&[][..], |i| i.grids);
        let positions = self.positions(std::slice::from_ref(&whole), grids)?;
        let device = self.device();
        let t = suffix.len() as i64;
        let embeds = self.embed_with_images(suffix, [1, t], images)?;
        let start = prefix.len();
        let rows: Vec<i64> = positions[0]
            .rows
            .iter()
            .flat_map(|row| row[start..].iter().copied())
            .collect();
        let positions = Tensor::f_from_slice(&rows)?
            .f_reshape([3, 1, t])?
            .f_to_device(device)?;
        let mut cache = cache.share();
        self.model.forward(&embeds, &positions, Some(&mut cache))
    }

    /// Greedy decoding of one sequence with a KV cache: up to `max_new_tokens`
    /// ids, stopping after the first id in `stop`.
    pub fn generate_greedy(
        &self,
        prompt: &[i64],
        images: Option<Images>,
        max_new_tokens: usize,
        stop: &[i64],
    ) -> Result<Vec<i64>> {
        let mut cache = KvCache::new();
        let prompt = [prompt.to_vec()];
        tch::no_grad(|| {
            let first = Batch {
                input_ids: &prompt,
                images,
            };
            // Only the last position's logits are needed: a long prompt's full
            // logits would be tokens × vocabulary (GBs for Qwen's 152k).
            let mut hidden = self.hidden_cached(&first, &mut cache)?;
            let mut out = Vec::with_capacity(max_new_tokens);
            while out.len() < max_new_tokens {
                let next = self
                    .logits(&hidden.f_select(1, -1)?)?
                    .f_argmax(-1, false)?
                    .f_int64_value(&[0])?;
                out.push(next);
                if stop.contains(&next) || out.len() == max_new_tokens {
                    break;
                }
                let step = Batch {
                    input_ids: &[vec![next]],
                    images: None,
                };
                hidden = self.hidden_cached(&step, &mut cache)?;
            }
            Ok(out)
        })
    }

    /// Embeddings and positions of text tokens that follow the cached ones:
    /// generated tokens are text, on all three rows at index + delta.
    fn continuation(&self, ids: &[Vec<i64>], cache: &KvCache) -> Result<(Tensor, Tensor)> {
        let t = check_lengths(ids)?;
        if ids.len() != cache.deltas.len() {
            return Err(Error::Input(format!(
                "the cache holds {} sequence(s), the batch has {}",
                cache.deltas.len(),
                ids.len()
            )));
        }
        self.model.check_ids(ids)?;
        let device = self.device();
        let past = cache.len();
        let rows: Vec<i64> = (0..3)
            .flat_map(|_| {
                cache
                    .deltas
                    .iter()
                    .flat_map(move |d| (0..t as i64).map(move |i| past + i + d))
            })
            .collect();
        let b = ids.len() as i64;
        let positions = Tensor::f_from_slice(&rows)?
            .f_reshape([3, b, t as i64])?
            .f_to_device(device)?;
        let flat: Vec<i64> = ids.iter().flatten().copied().collect();
        let id_tensor = Tensor::f_from_slice(&flat)?
            .f_reshape([b, t as i64])?
            .f_to_device(device)?;
        Ok((self.model.embed(&id_tensor)?, positions))
    }

    /// Embeddings (batch, tokens, hidden) of `ids` (`shape` rows, flattened),
    /// the images' embeddings in place of the image tokens. Callers have
    /// matched every image-token run to its grid (`positions`), so the
    /// counts agree; the rows are scattered in order of appearance.
    fn embed_with_images(
        &self,
        ids: &[i64],
        [b, t]: [i64; 2],
        images: Option<&Images>,
    ) -> Result<Tensor> {
        let device = self.device();
        let id_tensor = Tensor::f_from_slice(ids)?
            .f_reshape([b, t])?
            .f_to_device(device)?;
        let embeds = self.model.embed(&id_tensor)?;
        let Some(images) = images else {
            return Ok(embeds);
        };
        let image_embeds = self.visual.forward(images.pixel_values, images.grids)?;
        let slots: Vec<i64> = ids
            .iter()
            .enumerate()
            .filter(|&(_, &id)| id == self.config.image_token_id)
            .map(|(i, _)| i as i64)
            .collect();
        let slots = Tensor::f_from_slice(&slots)?.f_to_device(device)?;
        let hidden = embeds.size()[2];
        Ok(embeds
            .f_reshape([b * t, hidden])?
            .f_index_copy(0, &slots, &image_embeds.f_to_kind(embeds.kind())?)?
            .f_reshape([b, t, hidden])?)
    }

    /// Token embeddings with the image embeddings in place of the image
    /// tokens, the (3, batch, tokens) positions and each sequence's M-RoPE delta.
    fn prepare(&self, batch: &Batch) -> Result<(Tensor, Tensor, Vec<i64>)> {
        let ids = batch.input_ids;
        let len = check_lengths(ids)?;
        self.model.check_ids(ids)?;
        let grids = batch.images.as_ref().map_or(&[][..], |i| i.grids);
        let positions = self.positions(ids, grids)?;
        let device = self.device();
        let flat: Vec<i64> = ids.iter().flatten().copied().collect();
        let (b, t) = (ids.len() as i64, len as i64);
        let embeds = self.embed_with_images(&flat, [b, t], batch.images.as_ref())?;
        let rows: Vec<i64> = (0..3)
            .flat_map(|r| {
                positions
                    .iter()
                    .flat_map(move |p| p.rows[r].iter().copied())
            })
            .collect();
        let deltas = positions.iter().map(|p| p.delta).collect();
        let positions = Tensor::f_from_slice(&rows)?
            .f_reshape([3, b, t])?
            .f_to_device(device)?;
        Ok((embeds, positions, deltas))
    }
}

/// The common length of a batch's sequences, which must be non-empty and equal.
fn check_lengths(ids: &[Vec<i64>]) -> Result<usize> {
    let Some(first) = ids.first() else {
        return Err(Error::Input("empty batch".to_owned()));
    };
    let len = first.len();
    if len == 0 || ids.iter().any(|s| s.len() != len) {
        return Err(Error::Input(format!(
            "sequences must be non-empty and of equal length (lengths {:?})",
            ids.iter().map(Vec::len).collect::<Vec<_>>()
        )));
    }
    Ok(len)
}
