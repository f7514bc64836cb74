//! Sampling a group of completions for one prompt, and scoring completions
//! under the policy and the reference.
//!
//! Both evaluate the prompt once: its KV cache is repeated for every
//! completion of the group. When scoring, the prompt runs with gradients, so
//! the repeated cache carries them back to the one prompt evaluation, and the
//! log-probability of each completion's first token comes from the prompt's
//! last position.

use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use tch::{Kind, Tensor};

use super::sampling::{SamplingParams, sample};
use crate::error::{Error, Result};
use crate::model::{Batch, Images, KvCache, Qwen25Vl};

/// A prompt's ids and its image, if any.
pub struct Prompt {
    pub ids: Vec<i64>,
    /// (patches, C·T·P·P) and the grid, as [`Images`] takes them.
    pub image: Option<(Tensor, [crate::model::Grid; 1])>,
}

impl Prompt {
    /// The prompt's image as the model takes it.
    pub fn images(&self) -> Option<Images<'_>> {
        self.image.as_ref().map(|(pixel_values, grids)| Images {
            pixel_values,
            grids,
        })
    }

    /// Final hidden state of the prompt's last position (1, hidden) and the
    /// prompt's KV cache, evaluated with whatever grad mode is current.
    fn prefill(&self, model: &Qwen25Vl) -> Result<(Tensor, KvCache)> {
        let ids = [self.ids.clone()];
        let mut cache = KvCache::new();
        let hidden = model.hidden_cached(
            &Batch {
                input_ids: &ids,
                images: self.images(),
            },
            &mut cache,
        )?;
        Ok((hidden.f_select(1, -1)?, cache))
    }
}

/// `n` completions of `prompt`, each ending at its first stop id (kept) or
/// after `max_new` tokens. Runs without gradients; the caller decides
/// whether the adapters are on.
pub fn sample_group(
    model: &Qwen25Vl,
    prompt: &Prompt,
    n: usize,
    max_new: usize,
    params: &SamplingParams,
    stop: &[i64],
    rng: &mut ChaCha8Rng,
) -> Result<Vec<Vec<i64>>> {
    if n == 0 || max_new == 0 {
        return Err(Error::Input(
            "a group needs at least one completion of at least one token".to_owned(),
        ));
    }
    tch::no_grad(|| {
        let (last, cache) = prompt.prefill(model)?;
        let mut cache = cache.repeat_rows(n as i64)?;
        let mut hidden = last.f_expand([n as i64, -1], false)?;
        let mut out: Vec<Vec<i64>> = vec![Vec::new(); n];
        let mut done = vec![false; n];
        let pad = stop.first().copied().unwrap_or(0);
        for _ in 0..max_new {
            let logits = model.logits(&hidden)?.f_to_kind(Kind::Float)?;
            let vocab = logits.size()[1];
            let k = params.candidates(vocab);
            let (values, indices) = logits.f_topk(k, -1, true, true)?;
            let values: Vec<f32> =
                Vec::<f32>::try_from(values.f_flatten(0, -1)?.f_to_device(tch::Device::Cpu)?)?;
            let indices: Vec<i64> =
                Vec::<i64>::try_from(indices.f_flatten(0, -1)?.f_to_device(tch::Device::Cpu)?)?;
            let mut next = Vec::with_capacity(n);
            for row in 0..n {
                let span = row * k as usize..(row + 1) * k as usize;
                let candidates: Vec<(f32, i64)> = values[span.clone()]
                    .iter()
                    .copied()
                    .zip(indices[span].iter().copied())
                    .collect();
                // One draw per row and step, finished or not, so a row's
                // tokens do not depend on when the others finish.
                let uniform: f64 = rng.random();
                let id = sample(&candidates, params, uniform).unwrap_or(pad);
                if done[row] {
                    next.push(pad);
                } else {
                    out[row].push(id);
                    done[row] = stop.contains(&id);
                    next.push(id);
                }
            }
            if done.iter().all(|&d| d) {
                break;
            }
            let step: Vec<Vec<i64>> = next.into_iter().map(|id| vec![id]).collect();
            hidden = model
                .hidden_cached(
                    &Batch {
                        input_ids: &step,
                        images: None,
                    },
                    &mut cache,
                )?
                .f_select(1, 0)?;
        }
        Ok(out)
    })
}

/// Completions right-padded with `pad` to one length, and their mask
/// (1 on completion tokens).
pub fn pad_completions(completions: &[Vec<i64>], pad: i64) -> (Vec<Vec<i64>>, Vec<Vec<f32>>) {
    let len = completions.iter().map(Vec::len).max().unwrap_or(0).max(1);
    completions
        .iter()
        .map(|c| {
            let mut ids = c.clone();
            ids.resize(len, pad);
            let mask = (0..len)
                .map(|i| if i < c.len() { 1.0 } else { 0.0 })
                .collect();
            (ids, mask)
        })
        .unzip()
}

/// Log-probabilities (completions, tokens) of `completions` (equal length)
/// following `prompt`, at the sampling `temperature`, with gradients if the
/// grad mode is on.
pub fn completion_log_probs(
    model: &Qwen25Vl,
    prompt: &Prompt,
    completions: &[Vec<i64>],
    temperature: f64,
) -> Result<Tensor> {
    let n = completions.len() as i64;
    let len = completions.first().map_or(0, Vec::len) as i64;
    if n == 0 || len == 0 {
        return Err(Error::Input("no completion tokens to score".to_owned()));
    }
    let (last, cache) = prompt.prefill(model)?;
    let first = last.f_unsqueeze(1)?.f_expand([n, 1, -1], false)?;
    let hidden = if len > 1 {
        let mut cache = cache.repeat_rows(n)?;
        let inputs: Vec<Vec<i64>> = completions
            .iter()
            .map(|c| c[..len as usize - 1].to_vec())
            .collect();
        let rest = model.hidden_cached(
            &Batch {
                input_ids: &inputs,
                images: None,
            },
            &mut cache,
        )?;
        Tensor::f_cat(&[first, rest], 1)?
    } else {
        first
    };
    let targets = Tensor::f_from_slice(&completions.concat())?
        .f_reshape([n, len])?
        .f_to_device(model.device())?;
    super::loss::token_log_probs(&model.logits(&hidden)?, &targets, temperature)
}
