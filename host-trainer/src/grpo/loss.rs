//! The GRPO objective (spec §7): group-relative advantages, the token-level
//! clipped surrogate and the k3 KL estimate to the reference model.
//!
//! For completion `i` with advantage `Aᵢ` and token log-probabilities
//! `logp` (policy), `old` (the policy that sampled it) and `ref` (the
//! reference), each token contributes
//!
//! ```text
//! ratio = exp(logp − old)
//! −min(ratio · Aᵢ, clamp(ratio, 1 − ε, 1 + ε) · Aᵢ) + β · (exp(ref − logp) − (ref − logp) − 1)
//! ```
//!
//! averaged over the completion's tokens, then over completions — ms-swift's
//! and TRL's `loss_type = "grpo"`.

use tch::{Kind, Tensor};

use crate::error::{Error, Result};

/// Added to the group's standard deviation, as in the official recipe.
pub const ADVANTAGE_EPSILON: f64 = 1e-4;

/// `(r − mean) / (std + 1e-4)` over one group, with the unbiased (n − 1)
/// standard deviation that `torch.std` computes, as ms-swift and TRL do.
/// `None` for fewer than two rewards, where no spread exists.
pub fn group_advantages(rewards: &[f64]) -> Option<Vec<f64>> {
    let n = rewards.len();
    if n < 2 {
        return None;
    }
    let mean = rewards.iter().sum::<f64>() / n as f64;
    let var = rewards.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let std = var.sqrt();
    Some(
        rewards
            .iter()
            .map(|r| (r - mean) / (std + ADVANTAGE_EPSILON))
            .collect(),
    )
}

/// All rewards equal: every advantage is 0, so only the KL term could train.
pub fn is_flat(rewards: &[f64]) -> bool {
    rewards.windows(2).all(|w| w[0] == w[1])
}

/// Constants of the objective.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Objective {
    /// KL weight β (0 skips the reference model).
    pub beta: f64,
    /// Clip range ε of the ratio.
    pub epsilon: f64,
}

/// The objective's value per completion and what the logs report.
pub struct Terms {
    /// (completions,): each completion's mean token loss.
    pub per_sequence: Tensor,
    /// Mean KL per token over the unmasked tokens (0 without a reference).
    pub mean_kl: f64,
    /// Fraction of unmasked tokens whose ratio was clipped.
    pub clip_fraction: f64,
}

/// Log-probabilities (batch, tokens) of `targets` under `logits`
/// (batch, tokens, vocab) divided by the sampling temperature, as TRL and
/// ms-swift score completions; computed in at least float32.
pub fn token_log_probs(logits: &Tensor, targets: &Tensor, temperature: f64) -> Result<Tensor> {
    let kind = match logits.kind() {
        Kind::Double => Kind::Double,
        _ => Kind::Float,
    };
    let scaled = if temperature > 0.0 && temperature != 1.0 {
        logits.f_div_scalar(temperature)?
    } else {
        logits.shallow_clone()
    };
    Ok(scaled
        .f_log_softmax(-1, kind)?
        .f_gather(-1, &targets.f_unsqueeze(-1)?, false)?
        .f_squeeze_dim(-1)?)
}

/// The objective for a batch of completions: `logp`, `old` and `reference`
/// are (batch, tokens); `mask` (batch, tokens) is 1 on completion tokens and
/// 0 on padding; `advantages` (batch,).
pub fn objective(
    logp: &Tensor,
    old: &Tensor,
    reference: Option<&Tensor>,
    advantages: &Tensor,
    mask: &Tensor,
    constants: Objective,
) -> Result<Terms> {
    if logp.size() != mask.size() || old.size() != mask.size() {
        return Err(Error::Input(format!(
            "log-prob shapes {:?} / {:?} differ from the mask's {:?}",
            logp.size(),
            old.size(),
            mask.size()
        )));
    }
    let mask = mask.f_to_kind(logp.kind())?;
    let advantages = advantages.f_to_kind(logp.kind())?.f_unsqueeze(-1)?;
    let ratio = logp.f_sub(old)?.f_exp()?;
    let unclipped = ratio.f_mul(&advantages)?;
    let clipped = ratio
        .f_clamp(1.0 - constants.epsilon, 1.0 + constants.epsilon)?
        .f_mul(&advantages)?;
    let mut per_token = unclipped.f_minimum(&clipped)?.f_neg()?;
    let tokens = mask.f_sum(Kind::Double)?.f_double_value(&[])?.max(1.0);
    let mut mean_kl = 0.0;
    if let Some(reference) = reference
        && constants.beta != 0.0
    {
        let delta = reference.f_sub(logp)?;
        let kl = delta.f_exp()?.f_sub(&delta)?.f_sub_scalar(1.0)?;
        mean_kl = tch::no_grad(|| -> Result<f64> {
            Ok(kl.f_mul(&mask)?.f_sum(Kind::Double)?.f_double_value(&[])? / tokens)
        })?;
        per_token = per_token.f_add(&kl.f_mul_scalar(constants.beta)?)?;
    }
    let clip_fraction = tch::no_grad(|| -> Result<f64> {
        let outside = ratio
            .f_lt(1.0 - constants.epsilon)?
            .f_logical_or(&ratio.f_gt(1.0 + constants.epsilon)?)?
            .f_to_kind(mask.kind())?;
        Ok(outside
            .f_mul(&mask)?
            .f_sum(Kind::Double)?
            .f_double_value(&[])?
            / tokens)
    })?;
    let lengths = mask
        .f_sum_dim_intlist(-1, false, mask.kind())?
        .f_clamp_min(1.0)?;
    let per_sequence = per_token
        .f_mul(&mask)?
        .f_sum_dim_intlist(-1, false, mask.kind())?
        .f_div(&lengths)?;
    Ok(Terms {
        per_sequence,
        mean_kl,
        clip_fraction,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand calculation: rewards 1, 0, 0, 1 have mean 0.5 and unbiased std
    /// √(4 · 0.25 / 3) = 0.57735; advantages ±0.5 / (0.57735 + 1e-4).
    #[test]
    fn advantages_use_the_unbiased_std() {
        let a = group_advantages(&[1.0, 0.0, 0.0, 1.0]).unwrap();
        let expected = 0.5 / ((1.0f64 / 3.0).sqrt() + 1e-4);
        for (got, sign) in a.iter().zip([1.0, -1.0, -1.0, 1.0]) {
            assert!((got - sign * expected).abs() < 1e-12, "{a:?}");
        }
        assert_eq!(group_advantages(&[0.3]), None);
        let flat = group_advantages(&[0.2; 4]).unwrap();
        assert!(flat.iter().all(|&x| x == 0.0));
        assert!(is_flat(&[0.2; 4]) && !is_flat(&[0.2, 0.3]));
    }

    /// One completion of two tokens (the second masked), advantage 2, β 0.5,
    /// ε 0.2. Token 1: logp = old, so ratio 1 and the surrogate is −2; ref −
    /// logp = ln 2 gives KL 2 − ln 2 − 1 = 0.30685. Loss −2 + 0.5 · 0.30685.
    /// The gradient of the surrogate w.r.t. logp is −A · ratio = −2, of the KL
    /// term β · (1 − exp(ref − logp)) = 0.5 · (1 − 2) = −0.5.
    #[test]
    fn objective_matches_a_hand_calculation() {
        let logp = Tensor::from_slice(&[-1.0f64, -3.0])
            .reshape([1, 2])
            .set_requires_grad(true);
        let old = logp.detach();
        let reference = Tensor::from_slice(&[-1.0 + 2f64.ln(), 0.0]).reshape([1, 2]);
        let mask = Tensor::from_slice(&[1.0f64, 0.0]).reshape([1, 2]);
        let adv = Tensor::from_slice(&[2.0f64]);
        let c = Objective {
            beta: 0.5,
            epsilon: 0.2,
        };
        let terms = objective(&logp, &old, Some(&reference), &adv, &mask, c).unwrap();
        let kl = 2.0 - 2f64.ln() - 1.0;
        let loss = terms.per_sequence.double_value(&[0]);
        assert!((loss - (-2.0 + 0.5 * kl)).abs() < 1e-12, "{loss}");
        assert!((terms.mean_kl - kl).abs() < 1e-12);
        assert_eq!(terms.clip_fraction, 0.0);
        terms.per_sequence.sum(Kind::Double).backward();
        let grad = logp.grad();
        assert!((grad.double_value(&[0, 0]) - (-2.0 - 0.5)).abs() < 1e-12);
        assert_eq!(grad.double_value(&[0, 1]), 0.0);
    }

    /// A ratio of 1.5 with a positive advantage is clipped at 1.2: the loss
    /// is −1.2 · A and no gradient flows; with a negative advantage the
    /// unclipped branch (the smaller one) stays: −1.5 · (−1).
    #[test]
    fn the_ratio_is_clipped_on_the_side_the_advantage_favours() {
        let logp = Tensor::from_slice(&[1.5f64.ln(), 1.5f64.ln()])
            .reshape([2, 1])
            .set_requires_grad(true);
        let old = Tensor::zeros([2, 1], (Kind::Double, tch::Device::Cpu));
        let adv = Tensor::from_slice(&[1.0f64, -1.0]);
        let mask = Tensor::ones([2, 1], (Kind::Double, tch::Device::Cpu));
        let c = Objective {
            beta: 0.0,
            epsilon: 0.2,
        };
        let terms = objective(&logp, &old, None, &adv, &mask, c).unwrap();
        assert!((terms.per_sequence.double_value(&[0]) - (-1.2)).abs() < 1e-12);
        assert!((terms.per_sequence.double_value(&[1]) - 1.5).abs() < 1e-12);
        assert_eq!(terms.clip_fraction, 1.0);
        terms.per_sequence.sum(Kind::Double).backward();
        let grad = logp.grad();
        assert_eq!(grad.double_value(&[0, 0]), 0.0);
        // d/dlogp of −ratio · A = −A · ratio = 1.5.
        assert!((grad.double_value(&[1, 0]) - 1.5).abs() < 1e-12);
    }
}
