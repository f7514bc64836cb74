//! LoRA: low-rank adapters on the text model's linear projections.
//!
//! An adapted projection computes `W x + b + (α / r) · B A dropout(x)` with
//! the base `W` frozen, `A` (r × in) and `B` (out × r) trained — PEFT's
//! `LoraLayer` with its default initialisation: `A` uniform in ±1/√in (what
//! `kaiming_uniform_(a=√5)` gives), `B` zero, so training starts from the base
//! model exactly.
//!
//! The adapters live in their own [`nn::VarStore`], apart from the base
//! weights, so the optimizer, checkpoints and the PEFT files see only them.
//! One `LoraSwitch` turns every adapter off at once: GRPO's reference
//! model is the base model, and evaluating it with the adapters off costs no
//! second copy of the weights.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor, nn};

use crate::error::{Error, Result};

/// Torch's global generator, which adapter initialisation and dropout draw
/// from. Whoever seeds it and draws holds this lock for the whole sequence, so
/// two trainers or models built in one process (tests, sweeps) cannot
/// interleave draws and every run stays reproducible.
static GENERATOR: Mutex<()> = Mutex::new(());

pub(crate) fn generator() -> MutexGuard<'static, ()> {
    // The guarded value is (); a panic elsewhere leaves nothing inconsistent.
    GENERATOR.lock().unwrap_or_else(|e| e.into_inner())
}

/// Adapters to add to a model, and the seed of their initialisation.
#[derive(Debug, Clone, Copy)]
pub struct LoraInit<'a> {
    pub config: &'a LoraConfig,
    pub seed: u64,
}

/// The projections of every Qwen2 decoder layer that can carry an adapter.
pub const TEXT_PROJECTIONS: [&str; 7] = [
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
];

/// Which projections get adapters and how large they are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoraConfig {
    /// Rank of `A` and `B`.
    pub r: i64,
    /// The update is scaled by `alpha / r`.
    pub alpha: f64,
    /// Dropout on the adapter's input while training.
    pub dropout: f64,
    /// Projection names (the last part of a module name, as PEFT matches a
    /// list), among [`TEXT_PROJECTIONS`].
    pub target_modules: Vec<String>,
}

impl Default for LoraConfig {
    /// ms-swift's LoRA defaults (`lora_rank` 8, `lora_alpha` 32,
    /// `lora_dropout` 0.05) on every projection of the text model.
    fn default() -> Self {
        Self {
            r: 8,
            alpha: 32.0,
            dropout: 0.05,
            target_modules: TEXT_PROJECTIONS.iter().map(|s| s.to_string()).collect(),
        }
    }
}

impl LoraConfig {
    pub fn scale(&self) -> f64 {
        self.alpha / self.r as f64
    }

    /// Rejects a configuration no adapter can be built from.
    pub fn validate(&self) -> Result<()> {
        let bad = |message: String| Err(Error::Input(format!("lora: {message}")));
        if self.r < 1 {
            return bad(format!("r must be at least 1, not {}", self.r));
        }
        if !(self.alpha.is_finite() && self.alpha > 0.0) {
            return bad(format!("alpha must be positive, not {}", self.alpha));
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return bad(format!("dropout must be in [0, 1), not {}", self.dropout));
        }
        if self.target_modules.is_empty() {
            return bad("target_modules is empty".to_owned());
        }
        if let Some(unknown) = self
            .target_modules
            .iter()
            .find(|m| !TEXT_PROJECTIONS.contains(&m.as_str()))
        {
            return bad(format!(
                "unknown target module '{unknown}' (expected some of {})",
                TEXT_PROJECTIONS.join(", ")
            ));
        }
        Ok(())
    }
}

/// Turns all adapters of a model on or off, and their dropout.
#[derive(Clone, Default)]
pub(crate) struct LoraSwitch(Arc<SwitchState>);

#[derive(Default)]
struct SwitchState {
    disabled: AtomicBool,
    training: AtomicBool,
}

impl LoraSwitch {
    pub(crate) fn set_enabled(&self, enabled: bool) {
        self.0.disabled.store(!enabled, Ordering::Relaxed);
    }

    pub(crate) fn enabled(&self) -> bool {
        !self.0.disabled.load(Ordering::Relaxed)
    }

    pub(crate) fn set_training(&self, training: bool) {
        self.0.training.store(training, Ordering::Relaxed);
    }

    fn training(&self) -> bool {
        self.0.training.load(Ordering::Relaxed)
    }
}

/// One adapted projection's `A`, `B` and settings.
pub(crate) struct Adapter {
    pub(crate) a: Tensor,
    pub(crate) b: Tensor,
    scale: f64,
    dropout: f64,
    switch: LoraSwitch,
}

impl Adapter {
    /// `base + scale · B A dropout(x)`, or `base` while the switch is off.
    pub(crate) fn apply(&self, x: &Tensor, base: Tensor) -> Result<Tensor> {
        if !self.switch.enabled() {
            return Ok(base);
        }
        let training = self.switch.training() && self.dropout > 0.0;
        let x = x.f_to_kind(self.a.kind())?;
        let input = if training {
            x.f_dropout(self.dropout, true)?
        } else {
            x
        };
        let update = input
            .f_linear(&self.a, None::<&Tensor>)?
            .f_linear(&self.b, None::<&Tensor>)?
            .f_mul_scalar(self.scale)?;
        Ok(base.f_add(&update.f_to_kind(base.kind())?)?)
    }
}

/// The adapters of one model: their variables, the switch and where each sits.
pub struct Lora {
    config: LoraConfig,
    vars: nn::VarStore,
    switch: LoraSwitch,
    /// Checkpoint-style module name (`model.layers.0.self_attn.q_proj`) → (A, B).
    modules: Vec<(String, Tensor, Tensor)>,
}

impl Lora {
    pub(crate) fn new(config: LoraConfig, device: Device, kind: Kind) -> Result<Self> {
        config.validate()?;
        let mut vars = nn::VarStore::new(device);
        vars.set_kind(kind);
        Ok(Self {
            config,
            vars,
            switch: LoraSwitch::default(),
            modules: Vec::new(),
        })
    }

    /// The adapter for `module` (checkpoint-style name ending in a projection
    /// name) if the configuration targets it.
    pub(crate) fn adapter(
        &mut self,
        module: &str,
        in_dim: i64,
        out_dim: i64,
    ) -> Result<Option<Adapter>> {
        let short = module.rsplit('.').next().unwrap_or(module);
        if !self.config.target_modules.iter().any(|t| t == short) {
            return Ok(None);
        }
        let r = self.config.r;
        // An update of a weight has at most its smaller side's rank; a
        // larger r buys nothing and its factors could fill the memory.
        if r > in_dim.min(out_dim) {
            return Err(Error::Input(format!(
                "lora: r = {r} is above the rank of {module}'s {out_dim}×{in_dim} weight, at most {}",
                in_dim.min(out_dim)
            )));
        }
        let bound = 1.0 / (in_dim as f64).sqrt();
        let root = self.vars.root();
        // VarStore paths may not contain dots.
        let p = &root / module.replace('.', "_");
        let a = p.f_var(
            "lora_A",
            &[r, in_dim],
            nn::Init::Uniform {
                lo: -bound,
                up: bound,
            },
        )?;
        let b = p.f_var("lora_B", &[out_dim, r], nn::Init::Const(0.0))?;
        self.modules
            .push((module.to_owned(), a.shallow_clone(), b.shallow_clone()));
        Ok(Some(Adapter {
            a,
            b,
            scale: self.config.scale(),
            dropout: self.config.dropout,
            switch: self.switch.clone(),
        }))
    }

    pub fn config(&self) -> &LoraConfig {
        &self.config
    }

    /// The trainable variables (every `A` and `B`).
    pub fn vars(&self) -> &nn::VarStore {
        &self.vars
    }

    /// Each adapted module with its `A` (r × in) and `B` (out × r), in model order.
    pub fn modules(&self) -> &[(String, Tensor, Tensor)] {
        &self.modules
    }

    pub(crate) fn switch(&self) -> &LoraSwitch {
        &self.switch
    }

    /// Copies adapter values into this model's adapters: every module must be
    /// given, with the shapes this configuration implies.
    pub fn load(&self, weights: &[(String, Tensor, Tensor)]) -> Result<()> {
        let given: std::collections::HashMap<&str, (&Tensor, &Tensor)> = weights
            .iter()
            .map(|(m, a, b)| (m.as_str(), (a, b)))
            .collect();
        let mut missing = Vec::new();
        for (module, a, b) in &self.modules {
            let Some((new_a, new_b)) = given.get(module.as_str()) else {
                missing.push(module.clone());
                continue;
            };
            for (name, var, new) in [("A", a, new_a), ("B", b, new_b)] {
                if var.size() != new.size() {
                    return Err(Error::Input(format!(
                        "adapter {module}: lora_{name} has shape {:?}, this model needs {:?}",
                        new.size(),
                        var.size()
                    )));
                }
            }
            tch::no_grad(|| -> Result<()> {
                a.shallow_clone().f_copy_(&new_a.f_to_kind(a.kind())?)?;
                b.shallow_clone().f_copy_(&new_b.f_to_kind(b.kind())?)?;
                Ok(())
            })?;
        }
        if !missing.is_empty() {
            return Err(Error::Input(format!(
                "the adapter lacks {} module(s) the configuration targets: {}",
                missing.len(),
                missing.join(", ")
            )));
        }
        let known: std::collections::HashSet<&str> =
            self.modules.iter().map(|(m, _, _)| m.as_str()).collect();
        let extra: Vec<&str> = given
            .keys()
            .copied()
            .filter(|m| !known.contains(m))
            .collect();
        if !extra.is_empty() {
            return Err(Error::Input(format!(
                "the adapter has module(s) the configuration does not target: {}",
                extra.join(", ")
            )));
        }
        Ok(())
    }
}
