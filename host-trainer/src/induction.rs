//! The copying warm-up (`btl-train induction`): a fresh model learns to
//! copy before it learns BTL.
//!
//! A BTL answer types what its goal names (a contact's name, a note's
//! text, an alarm's hour) and writes it three times: in the thought, the
//! Plan and the typed text. A small model trained on BTL samples alone
//! does not learn to copy: the value tokens are a small share of each
//! answer's loss, and it settles for each template's most frequent value
//! (measured in docs/training.md). Copying in a transformer is an
//! induction circuit (one head marks each token with the one before it,
//! another finds the earlier occurrence of the current token and predicts
//! what followed it), and it forms suddenly, after a plateau, when the
//! data rewards nothing else. This objective is that data: a string of
//! random ordinary tokens between two source markers, amid random noise,
//! then written again one or more times, each copy between two copy
//! markers. Only the copies and their closing markers are learned, and no
//! copied token can be predicted except by copying.
//!
//! Batches are drawn from a seed (the run's seed and the step), so a
//! resumed run sees the strings it would have seen.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tch::{Kind, Reduction, Tensor};

use crate::error::{Error, Result};
use crate::grpo::config::InductionSection;
use crate::model::{Batch, Qwen25Vl};

/// The label of a position that learns nothing (transformers' `-100`).
pub const IGNORE: i64 = -100;

/// The token ids the warm-up writes with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyTokens {
    /// Strings and noise are drawn from ids `0..ordinary`, the tokenizer's
    /// vocabulary without its special tokens.
    pub ordinary: i64,
    /// Opens and closes the string's first occurrence.
    pub source: [i64; 2],
    /// Opens and closes each copy.
    pub copy: [i64; 2],
    /// Starts every sequence, and pads short ones at the end.
    pub pad: i64,
}

impl CopyTokens {
    /// Qwen's tokenizer ids: Qwen's object-reference marks around the
    /// source, its box marks around the copies (BTL text uses neither), and
    /// `<|endoftext|>`. `ordinary` is the lowest id of an added token.
    pub fn from_tokenizer(tokenizer: &tokenizers::Tokenizer) -> Result<Self> {
        let id = |token: &str| {
            tokenizer
                .token_to_id(token)
                .map(i64::from)
                .ok_or_else(|| Error::Input(format!("the tokenizer has no {token} token")))
        };
        let ordinary = tokenizer
            .get_added_tokens_decoder()
            .keys()
            .min()
            .map(|&id| i64::from(id))
            .unwrap_or_else(|| i64::from(tokenizer.get_vocab_size(true) as u32));
        let tokens = Self {
            ordinary,
            source: [id("<|object_ref_start|>")?, id("<|object_ref_end|>")?],
            copy: [id("<|box_start|>")?, id("<|box_end|>")?],
            pad: id("<|endoftext|>")?,
        };
        if tokens.ordinary < 2 {
            return Err(Error::Input(format!(
                "the tokenizer has {} ordinary token(s); random strings need at least 2",
                tokens.ordinary
            )));
        }
        Ok(tokens)
    }
}

/// One step's sequences, right-padded to one length, and what each
/// position must predict (the next token, or [`IGNORE`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyBatch {
    pub ids: Vec<Vec<i64>>,
    pub targets: Vec<Vec<i64>>,
}

impl CopyBatch {
    /// Positions that learn something.
    pub fn learned(&self) -> usize {
        self.targets
            .iter()
            .flatten()
            .filter(|&&t| t != IGNORE)
            .count()
    }
}

/// The sequences of one step, drawn from `seed`:
/// `pad noise source₀ string source₁ (noise copy₀ string copy₁)×k`, with
/// the string 1..=`max_len` tokens, k in 1..=`max_copies` and each noise
/// run 0..=`max_noise` tokens long. Every token of each copy, and the
/// copy's closing mark, is a target; nothing else is.
pub fn copy_batch(tokens: &CopyTokens, section: &InductionSection, seed: u64) -> CopyBatch {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut rows: Vec<(Vec<i64>, Vec<bool>)> = (0..section.sequences_per_step)
        .map(|_| {
            let random = |rng: &mut ChaCha8Rng, n: usize| -> Vec<i64> {
                (0..n)
                    .map(|_| rng.random_range(0..tokens.ordinary))
                    .collect()
            };
            let len = rng.random_range(1..=section.max_len);
            let copies = rng.random_range(1..=section.max_copies);
            let string = random(&mut rng, len);
            let (mut ids, mut learned) = (vec![tokens.pad], vec![false]);
            let mut put = |part: &[i64], learn: bool| {
                ids.extend_from_slice(part);
                learned.extend(std::iter::repeat_n(learn, part.len()));
            };
            let noise_len = rng.random_range(0..=section.max_noise);
            put(&random(&mut rng, noise_len), false);
            put(&[tokens.source[0]], false);
            put(&string, false);
            put(&[tokens.source[1]], false);
            for _ in 0..copies {
                let noise_len = rng.random_range(0..=section.max_noise);
                put(&random(&mut rng, noise_len), false);
                put(&[tokens.copy[0]], false);
                put(&string, true);
                put(&[tokens.copy[1]], true);
            }
            (ids, learned)
        })
        .collect();
    let width = rows.iter().map(|(ids, _)| ids.len()).max().unwrap_or(0);
    let mut batch = CopyBatch {
        ids: Vec::with_capacity(rows.len()),
        targets: Vec::with_capacity(rows.len()),
    };
    for (ids, learned) in &mut rows {
        // Position i predicts token i + 1.
        let mut targets: Vec<i64> = (1..ids.len())
            .map(|i| if learned[i] { ids[i] } else { IGNORE })
            .collect();
        targets.resize(width, IGNORE);
        ids.resize(width, tokens.pad);
        batch.ids.push(std::mem::take(ids));
        batch.targets.push(targets);
    }
    batch
}

/// What the model makes of a batch: the mean cross-entropy over every
/// target (to backpropagate) and how many targets its most likely next
/// token got right.
pub struct CopyLoss {
    pub loss: Tensor,
    pub right: usize,
    pub targets: usize,
}

/// [`CopyLoss`] of `batch`, text only, in one pass.
pub fn copy_loss(model: &Qwen25Vl, batch: &CopyBatch) -> Result<CopyLoss> {
    let logits = model.forward(&Batch {
        input_ids: &batch.ids,
        images: None,
    })?;
    let vocab = logits.size().last().copied().unwrap_or(0);
    let flat: Vec<i64> = batch.targets.iter().flatten().copied().collect();
    let targets = Tensor::f_from_slice(&flat)?.f_to_device(logits.device())?;
    let logits = logits.f_reshape([-1, vocab])?;
    let loss =
        logits.f_cross_entropy_loss::<Tensor>(&targets, None, Reduction::Mean, IGNORE, 0.0)?;
    let learned = targets.f_ne(IGNORE)?;
    let right = logits
        .f_argmax(-1, false)?
        .f_eq_tensor(&targets)?
        .f_logical_and(&learned)?
        .f_sum(Kind::Int64)?
        .f_int64_value(&[])?;
    Ok(CopyLoss {
        loss,
        right: right as usize,
        targets: batch.learned(),
    })
}

#[cfg(test)]
mod tests;
