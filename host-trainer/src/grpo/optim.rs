//! AdamW with gradient-norm clipping, and the warmup + cosine learning-rate
//! schedule.
//!
//! The optimizer is written out (rather than tch's `nn::Optimizer`, whose
//! state stays inside libtorch) so that its moments and step count can be
//! saved in a checkpoint and restored exactly: resuming must continue bit for
//! bit. The update is torch's `AdamW` (decoupled weight decay):
//!
//! ```text
//! p ← p · (1 − lr · λ)
//! m ← β₁ m + (1 − β₁) g        v ← β₂ v + (1 − β₂) g²
//! p ← p − lr / (1 − β₁ᵗ) · m / (√v / √(1 − β₂ᵗ) + ε)
//! ```

use std::collections::HashMap;
use std::f64::consts::PI;

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

use crate::error::{Error, Result};

/// AdamW's constants (the learning rate comes from the schedule).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdamWConfig {
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
}

impl Default for AdamWConfig {
    /// transformers' Trainer defaults, with ms-swift's weight decay 0.1.
    fn default() -> Self {
        Self {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.1,
        }
    }
}

struct Param {
    name: String,
    value: Tensor,
    decay: bool,
    m: Tensor,
    v: Tensor,
}

/// AdamW over named parameters.
pub struct AdamW {
    config: AdamWConfig,
    params: Vec<Param>,
    step: i64,
}

impl AdamW {
    /// `params`: (name, variable, whether weight decay applies).
    pub fn new(config: AdamWConfig, params: Vec<(String, Tensor, bool)>) -> Result<Self> {
        let params = params
            .into_iter()
            .map(|(name, value, decay)| {
                Ok(Param {
                    m: value.f_zeros_like()?,
                    v: value.f_zeros_like()?,
                    name,
                    value,
                    decay,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            config,
            params,
            step: 0,
        })
    }

    /// The parameters by name.
    pub fn params(&self) -> Vec<(String, Tensor)> {
        self.params
            .iter()
            .map(|p| (p.name.clone(), p.value.shallow_clone()))
            .collect()
    }

    /// Optimizer steps taken so far.
    pub fn steps(&self) -> i64 {
        self.step
    }

    pub fn zero_grad(&mut self) {
        for p in &mut self.params {
            let mut grad = p.value.grad();
            if grad.defined() {
                let _ = grad.zero_();
            }
        }
    }

    /// Scales the gradients so their global L2 norm is at most `max_norm`
    /// (torch's `clip_grad_norm_`); returns the norm before clipping.
    pub fn clip_grad_norm(&mut self, max_norm: f64) -> Result<f64> {
        let grads: Vec<Tensor> = self
            .params
            .iter()
            .map(|p| p.value.grad())
            .filter(|g| g.defined())
            .collect();
        let mut sum = 0.0;
        for g in &grads {
            sum += g
                .f_pow_tensor_scalar(2)?
                .f_sum(Kind::Double)?
                .f_double_value(&[])?;
        }
        let norm = sum.sqrt();
        let coef = (max_norm / (norm + 1e-6)).min(1.0);
        if max_norm > 0.0 && coef < 1.0 {
            tch::no_grad(|| -> Result<()> {
                for g in &grads {
                    let _ = g.shallow_clone().f_mul_scalar_(coef)?;
                }
                Ok(())
            })?;
        }
        Ok(norm)
    }

    /// One update at learning rate `lr`; parameters without a gradient stay.
    pub fn step(&mut self, lr: f64) -> Result<()> {
        self.step += 1;
        let c = self.config;
        let t = self.step as i32;
        let bias1 = 1.0 - c.beta1.powi(t);
        let bias2 = 1.0 - c.beta2.powi(t);
        tch::no_grad(|| -> Result<()> {
            for p in &mut self.params {
                let grad = p.value.grad();
                if !grad.defined() {
                    continue;
                }
                let mut value = p.value.shallow_clone();
                if p.decay && c.weight_decay != 0.0 {
                    let _ = value.f_mul_scalar_(1.0 - lr * c.weight_decay)?;
                }
                let _ =
                    p.m.f_mul_scalar_(c.beta1)?
                        .f_add_(&grad.f_mul_scalar(1.0 - c.beta1)?)?;
                let _ =
                    p.v.f_mul_scalar_(c.beta2)?
                        .f_add_(&grad.f_mul(&grad)?.f_mul_scalar(1.0 - c.beta2)?)?;
                let denom =
                    p.v.f_sqrt()?
                        .f_div_scalar(bias2.sqrt())?
                        .f_add_scalar(c.eps)?;
                let _ = value.f_sub_(&p.m.f_div(&denom)?.f_mul_scalar(lr / bias1)?)?;
            }
            Ok(())
        })
    }

    /// The moments by parameter name (`<name>.exp_avg`, `<name>.exp_avg_sq`).
    pub fn state(&self) -> Vec<(String, Tensor)> {
        self.params
            .iter()
            .flat_map(|p| {
                [
                    (format!("{}.exp_avg", p.name), p.m.shallow_clone()),
                    (format!("{}.exp_avg_sq", p.name), p.v.shallow_clone()),
                ]
            })
            .collect()
    }

    /// Restores [`Self::state`] and the step count; every parameter's
    /// moments must be present with its shape.
    pub fn load_state(&mut self, state: &HashMap<String, Tensor>, step: i64) -> Result<()> {
        for p in &mut self.params {
            for (suffix, slot) in [("exp_avg", &mut p.m), ("exp_avg_sq", &mut p.v)] {
                let key = format!("{}.{suffix}", p.name);
                let saved = state
                    .get(&key)
                    .ok_or_else(|| Error::Input(format!("the optimizer state lacks {key}")))?;
                if saved.size() != slot.size() {
                    return Err(Error::Input(format!(
                        "optimizer state {key} has shape {:?}, the parameter {:?}",
                        saved.size(),
                        slot.size()
                    )));
                }
                tch::no_grad(|| slot.f_copy_(saved))?;
            }
        }
        self.step = step;
        Ok(())
    }
}

/// Linear warmup then cosine decay to 0, as transformers'
/// `get_cosine_schedule_with_warmup`: the multiplier of the base rate for the
/// optimizer step that follows `done` completed steps.
pub fn cosine_with_warmup(done: i64, total: i64, warmup: i64) -> f64 {
    if done < warmup {
        return done as f64 / warmup.max(1) as f64;
    }
    let progress = (done - warmup) as f64 / (total - warmup).max(1) as f64;
    (0.5 * (1.0 + (PI * progress).cos())).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two steps of AdamW on p = 1 with gradient g = 0.5 both times, lr 0.1,
    /// λ 0.01, β (0.9, 0.999), ε 1e-8, by hand:
    /// step 1: p = 1 · (1 − 0.001) = 0.999; m = 0.05, v = 0.00025;
    ///   m̂ = 0.5, √v̂ = 0.5 → p = 0.999 − 0.1 · 0.5 / (0.5 + 1e-8).
    /// step 2: p ← p · 0.999; m = 0.095, v = 0.00049975; m̂ = 0.5, v̂ = 0.25.
    #[test]
    fn adamw_matches_a_hand_calculation() {
        let p = Tensor::from_slice(&[1.0f64]).set_requires_grad(true);
        let config = AdamWConfig {
            weight_decay: 0.01,
            ..AdamWConfig::default()
        };
        let mut opt = AdamW::new(config, vec![("p".into(), p.shallow_clone(), true)]).unwrap();
        let mut expected = 1.0f64;
        for _ in 0..2 {
            opt.zero_grad();
            (&p * 0.5).sum(Kind::Double).backward();
            opt.step(0.1).unwrap();
            expected = expected * (1.0 - 0.1 * 0.01) - 0.1 * 0.5 / (0.5 + 1e-8);
        }
        assert!((p.double_value(&[0]) - expected).abs() < 1e-12);
        assert_eq!(opt.steps(), 2);
    }

    #[test]
    fn clipping_scales_to_the_max_norm() {
        let a = Tensor::from_slice(&[3.0f64]).set_requires_grad(true);
        let b = Tensor::from_slice(&[0.0f64]).set_requires_grad(true);
        let mut opt = AdamW::new(
            AdamWConfig::default(),
            vec![
                ("a".into(), a.shallow_clone(), true),
                ("b".into(), b.shallow_clone(), true),
            ],
        )
        .unwrap();
        // Gradients 3 and 4: norm 5.
        (&a * 3.0 + &b * 4.0).sum(Kind::Double).backward();
        let norm = opt.clip_grad_norm(1.0).unwrap();
        assert!((norm - 5.0).abs() < 1e-12);
        assert!((a.grad().double_value(&[0]) - 3.0 / (5.0 + 1e-6)).abs() < 1e-12);
        assert!((b.grad().double_value(&[0]) - 4.0 / (5.0 + 1e-6)).abs() < 1e-12);
    }

    #[test]
    fn schedule_warms_up_then_follows_the_cosine() {
        assert_eq!(cosine_with_warmup(0, 10, 2), 0.0);
        assert_eq!(cosine_with_warmup(1, 10, 2), 0.5);
        assert_eq!(cosine_with_warmup(2, 10, 2), 1.0);
        // Halfway through the decay: cos(π/2) → 0.5.
        assert!((cosine_with_warmup(6, 10, 2) - 0.5).abs() < 1e-12);
        assert!(cosine_with_warmup(10, 10, 2).abs() < 1e-12);
        assert_eq!(cosine_with_warmup(0, 10, 0), 1.0);
    }
}
