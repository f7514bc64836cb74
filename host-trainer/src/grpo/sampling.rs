//! Choosing the next token of a sampled completion: temperature, top-k and
//! top-p (nucleus) over the candidates' logits, then one draw.
//!
//! The order is transformers' logits processors': scale by the temperature,
//! keep the `top_k` largest, then the smallest prefix of the remaining tokens
//! (most probable first) whose probability reaches `top_p`; at least one token
//! always survives. Pure: the caller brings the uniform draw, so a seeded
//! generator makes every completion reproducible.

use serde::{Deserialize, Serialize};

/// How completions are sampled.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SamplingParams {
    /// 0 means greedy.
    pub temperature: f64,
    /// 1.0 keeps every token.
    pub top_p: f64,
    /// 0 keeps every token.
    pub top_k: i64,
}

impl Default for SamplingParams {
    /// The BTL-UI recipe (spec §7).
    fn default() -> Self {
        Self {
            temperature: 0.9,
            top_p: 0.9,
            top_k: 50,
        }
    }
}

impl SamplingParams {
    /// How many of the largest logits the sampler needs to see (`vocab` for all).
    pub fn candidates(&self, vocab: i64) -> i64 {
        if self.temperature == 0.0 {
            1
        } else if self.top_k > 0 {
            self.top_k.min(vocab)
        } else {
            vocab
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err(format!("temperature must be ≥ 0, not {}", self.temperature));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(format!("top_p must be in (0, 1], not {}", self.top_p));
        }
        if self.top_k < 0 {
            return Err(format!("top_k must be ≥ 0, not {}", self.top_k));
        }
        Ok(())
    }
}

/// Picks one id from `candidates` (logit, id), sorted by decreasing logit,
/// given `uniform` in [0, 1).
///
/// Returns `None` only for an empty candidate list.
pub fn sample(candidates: &[(f32, i64)], params: &SamplingParams, uniform: f64) -> Option<i64> {
    let (best, _) = candidates.first()?;
    if params.temperature == 0.0 {
        return candidates.first().map(|&(_, id)| id);
    }
    let k = if params.top_k > 0 {
        (params.top_k as usize).min(candidates.len())
    } else {
        candidates.len()
    };
    let kept = &candidates[..k];
    // Relative to the largest logit, so exp never overflows.
    let weights: Vec<f64> = kept
        .iter()
        .map(|&(logit, _)| ((f64::from(logit) - f64::from(*best)) / params.temperature).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    let mut nucleus = 0;
    let mut mass = 0.0;
    for w in &weights {
        if nucleus > 0 && mass >= params.top_p * total {
            break;
        }
        mass += w;
        nucleus += 1;
    }
    let target = uniform.clamp(0.0, 1.0) * mass;
    let mut acc = 0.0;
    for (w, &(_, id)) in weights[..nucleus].iter().zip(kept) {
        acc += w;
        if target < acc {
            return Some(id);
        }
    }
    kept.get(nucleus - 1).map(|&(_, id)| id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn params(temperature: f64, top_p: f64, top_k: i64) -> SamplingParams {
        SamplingParams {
            temperature,
            top_p,
            top_k,
        }
    }

    #[test]
    fn greedy_takes_the_largest() {
        let c = [(3.0, 7), (2.0, 1), (-1.0, 4)];
        assert_eq!(sample(&c, &params(0.0, 1.0, 0), 0.99), Some(7));
    }

    /// Hand calculation: logits ln 6, ln 3, ln 1 at T = 1 give probabilities
    /// 0.6, 0.3, 0.1. With top_p 0.85 the nucleus is {a, b} (the mass before
    /// b is 0.6 < 0.85, before c 0.9 ≥ 0.85), renormalised to 2/3, 1/3.
    #[test]
    fn nucleus_and_draws_match_a_hand_calculation() {
        let c = [(6f32.ln(), 10), (3f32.ln(), 20), (1f32.ln(), 30)];
        let all = params(1.0, 1.0, 0);
        assert_eq!(sample(&c, &all, 0.59), Some(10));
        assert_eq!(sample(&c, &all, 0.61), Some(20));
        assert_eq!(sample(&c, &all, 0.91), Some(30));
        let nucleus = params(1.0, 0.85, 0);
        assert_eq!(sample(&c, &nucleus, 0.66), Some(10));
        assert_eq!(sample(&c, &nucleus, 0.67), Some(20));
        assert_eq!(sample(&c, &nucleus, 0.999), Some(20));
        let top1 = params(1.0, 1.0, 1);
        assert_eq!(sample(&c, &top1, 0.999), Some(10));
        // T = 0.5 squares the odds: 36 : 9 : 1 → the first has 36/46 ≈ 0.783.
        let cold = params(0.5, 1.0, 0);
        assert_eq!(sample(&c, &cold, 0.78), Some(10));
        assert_eq!(sample(&c, &cold, 0.79), Some(20));
    }

    #[test]
    fn empty_candidates_give_none() {
        assert_eq!(sample(&[], &SamplingParams::default(), 0.5), None);
    }

    proptest! {
        #[test]
        fn the_draw_is_always_among_the_allowed(
            mut logits in proptest::collection::vec(-30f32..30.0, 1..40),
            temperature in 0.05f64..3.0,
            top_p in 0.01f64..=1.0,
            top_k in 0i64..10,
            uniform in 0f64..1.0,
        ) {
            logits.sort_by(|a, b| b.total_cmp(a));
            let c: Vec<(f32, i64)> = logits.iter().enumerate().map(|(i, &l)| (l, i as i64)).collect();
            let id = sample(&c, &params(temperature, top_p, top_k), uniform).unwrap();
            prop_assert!(id >= 0 && (id as usize) < c.len());
            if top_k > 0 {
                prop_assert!(id < top_k, "id {} outside the top {}", id, top_k);
            }
            // top_p below the largest token's probability leaves only it.
            let w: Vec<f64> = logits.iter().map(|&l| ((l - logits[0]) as f64 / temperature).exp()).collect();
            let k = if top_k > 0 { (top_k as usize).min(w.len()) } else { w.len() };
            let first = w[0] / w[..k].iter().sum::<f64>();
            if top_p < first * 0.999 {
                prop_assert_eq!(id, 0);
            }
        }
    }
}
