//! LoRA adapters in the layout of Hugging Face PEFT: a directory with
//! `adapter_config.json` and `adapter_model.safetensors`.
//!
//! The safetensors keys are `base_model.model.<module>.lora_A.weight` (A,
//! shape (r, in)) and `….lora_B.weight` (B, shape (out, r)); the adapted
//! weight is W + (lora_alpha / r)·B·A (with `use_rslora`, lora_alpha / √r).
//! Modules are named here as in checkpoint files (`model.layers.N…`,
//! `visual.…`). Reading accepts those and transformers 5's module names
//! (`model.language_model.layers.N…`, `model.visual.…`), which is what PEFT
//! writes under transformers 5; writing uses the latter, so PEFT loads the
//! adapter onto a transformers 5 model.
//!
//! Configuration keys host-trainer does not model are kept as they are, so
//! reading and writing an adapter loses nothing; features that change what
//! the weights mean and that host-trainer does not implement (DoRA, bias
//! training, per-module ranks, …) are refused when reading.

use std::collections::BTreeMap;
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tch::{Device, Kind, Tensor};

use crate::atomic;
use crate::error::{Error, Result};
use crate::weights::canonical_name;

pub const CONFIG_FILE: &str = "adapter_config.json";
pub const WEIGHTS_FILE: &str = "adapter_model.safetensors";
const KEY_PREFIX: &str = "base_model.model.";
const A_SUFFIX: &str = ".lora_A.weight";
const B_SUFFIX: &str = ".lora_B.weight";

/// `adapter_config.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeftConfig {
    /// The rank.
    pub r: i64,
    #[serde(serialize_with = "alpha_as_written")]
    pub lora_alpha: f64,
    #[serde(default)]
    pub lora_dropout: f64,
    /// Module names or suffixes (`q_proj`), or one regular expression.
    pub target_modules: TargetModules,
    /// Scale by lora_alpha / √r instead of lora_alpha / r.
    #[serde(default)]
    pub use_rslora: bool,
    /// Every other key, kept verbatim.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// PEFT types lora_alpha as an int: an integral alpha is written as one, so a
/// config read and written again is unchanged.
fn alpha_as_written<S: serde::Serializer>(
    alpha: &f64,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    if alpha.fract() == 0.0 && alpha.abs() < 1e15 {
        s.serialize_i64(*alpha as i64)
    } else {
        s.serialize_f64(*alpha)
    }
}

/// PEFT's `target_modules`: a list of names or one regular expression.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TargetModules {
    Names(Vec<String>),
    Regex(String),
}

impl PeftConfig {
    /// A plain LoRA configuration, with the keys PEFT needs to load it.
    pub fn new(r: i64, lora_alpha: f64, lora_dropout: f64, target_modules: Vec<String>) -> Self {
        let mut other = Map::new();
        other.insert("peft_type".into(), "LORA".into());
        other.insert("bias".into(), "none".into());
        other.insert("fan_in_fan_out".into(), false.into());
        other.insert("use_dora".into(), false.into());
        other.insert("inference_mode".into(), true.into());
        Self {
            r,
            lora_alpha,
            lora_dropout,
            target_modules: TargetModules::Names(target_modules),
            use_rslora: false,
            other,
        }
    }

    /// The factor of B·A in the adapted weight.
    pub fn scale(&self) -> f64 {
        if self.use_rslora {
            self.lora_alpha / (self.r as f64).sqrt()
        } else {
            self.lora_alpha / self.r as f64
        }
    }

    /// The alpha to give llama.cpp, which always scales by alpha / r.
    pub fn llama_cpp_alpha(&self) -> f64 {
        self.scale() * self.r as f64
    }

    /// Refuses what would change the adapter's meaning unnoticed.
    fn check(&self) -> std::result::Result<(), String> {
        if self.r <= 0 {
            return Err(format!("r is {}; it must be positive", self.r));
        }
        match self.other.get("peft_type") {
            Some(Value::String(t)) if t == "LORA" => {}
            other => {
                return Err(format!(
                    "peft_type is {other:?}; only \"LORA\" is supported"
                ));
            }
        }
        let is = |key: &str, fine: &dyn Fn(&Value) -> bool| match self.other.get(key) {
            None | Some(Value::Null) => true,
            Some(v) => fine(v),
        };
        let unsupported = [
            ("use_dora", is("use_dora", &|v| v == &Value::Bool(false))),
            ("bias", is("bias", &|v| v == "none")),
            (
                "fan_in_fan_out",
                is("fan_in_fan_out", &|v| v == &Value::Bool(false)),
            ),
            (
                "rank_pattern",
                is("rank_pattern", &|v| {
                    v.as_object().is_some_and(Map::is_empty)
                }),
            ),
            (
                "alpha_pattern",
                is("alpha_pattern", &|v| {
                    v.as_object().is_some_and(Map::is_empty)
                }),
            ),
            (
                "modules_to_save",
                is("modules_to_save", &|v| {
                    v.as_array().is_some_and(Vec::is_empty)
                }),
            ),
        ];
        match unsupported.iter().find(|(_, fine)| !fine) {
            Some((key, _)) => Err(format!(
                "{key} is {}; host-trainer supports plain LoRA only (use_dora false, bias \"none\", fan_in_fan_out false, no rank_pattern, alpha_pattern or modules_to_save)",
                self.other[*key]
            )),
            None => Ok(()),
        }
    }
}

/// The LoRA pair of one linear module.
#[derive(Debug)]
pub struct LoraWeights {
    /// Checkpoint-style module name, e.g. `model.layers.0.self_attn.q_proj`.
    pub module: String,
    /// (r, in).
    pub a: Tensor,
    /// (out, r).
    pub b: Tensor,
}

impl LoraWeights {
    /// Checks the shapes against each other and the rank.
    fn check(&self, r: i64) -> std::result::Result<(), String> {
        let (a, b) = (self.a.size(), self.b.size());
        if a.len() != 2 || b.len() != 2 || a[0] != r || b[1] != r {
            return Err(format!(
                "module {}: A has shape {a:?} and B {b:?}; with rank {r} they must be (r, in) and (out, r)",
                self.module
            ));
        }
        Ok(())
    }
}

/// A PEFT LoRA adapter.
#[derive(Debug)]
pub struct PeftAdapter {
    pub config: PeftConfig,
    /// Sorted by module name.
    pub modules: Vec<LoraWeights>,
}

/// transformers 5's module name of a checkpoint-style one (what PEFT writes).
fn module_name_v5(module: &str) -> String {
    if let Some(rest) = module.strip_prefix("model.") {
        format!("model.language_model.{rest}")
    } else if let Some(rest) = module.strip_prefix("visual.") {
        format!("model.visual.{rest}")
    } else {
        module.to_owned()
    }
}

fn kind_of(dtype: Dtype) -> Option<Kind> {
    match dtype {
        Dtype::F32 => Some(Kind::Float),
        Dtype::F16 => Some(Kind::Half),
        Dtype::BF16 => Some(Kind::BFloat16),
        Dtype::F64 => Some(Kind::Double),
        _ => None,
    }
}

fn dtype_of(kind: Kind) -> Option<Dtype> {
    match kind {
        Kind::Float => Some(Dtype::F32),
        Kind::Half => Some(Dtype::F16),
        Kind::BFloat16 => Some(Dtype::BF16),
        Kind::Double => Some(Dtype::F64),
        _ => None,
    }
}

impl PeftAdapter {
    /// Reads and checks an adapter directory.
    pub fn read(dir: &Path) -> Result<Self> {
        let config_path = dir.join(CONFIG_FILE);
        let text = std::fs::read_to_string(&config_path).map_err(|source| Error::Io {
            path: config_path.clone(),
            source,
        })?;
        let bad_config = |message: String| Error::Adapter {
            path: config_path.clone(),
            message,
        };
        let config: PeftConfig = serde_json::from_str(&text)
            .map_err(|e| bad_config(format!("not a PEFT adapter config: {e}")))?;
        config.check().map_err(bad_config)?;

        let weights_path = dir.join(WEIGHTS_FILE);
        let bytes = std::fs::read(&weights_path).map_err(|source| Error::Io {
            path: weights_path.clone(),
            source,
        })?;
        let bad = |message: String| Error::Adapter {
            path: weights_path.clone(),
            message,
        };
        let file = SafeTensors::deserialize(&bytes)
            .map_err(|e| bad(format!("not a valid safetensors file: {e:?}")))?;

        let mut pairs: BTreeMap<String, (Option<Tensor>, Option<Tensor>)> = BTreeMap::new();
        for (key, view) in file.tensors() {
            let parsed = key.strip_prefix(KEY_PREFIX).and_then(|rest| {
                rest.strip_suffix(A_SUFFIX)
                    .map(|m| (m, true))
                    .or_else(|| rest.strip_suffix(B_SUFFIX).map(|m| (m, false)))
            });
            let Some((module, is_a)) = parsed else {
                return Err(bad(format!(
                    "tensor {key} is not a LoRA matrix ({KEY_PREFIX}<module>{A_SUFFIX} or {B_SUFFIX}); adapters that train other weights are not supported"
                )));
            };
            let kind = kind_of(view.dtype()).ok_or_else(|| {
                bad(format!(
                    "tensor {key} is stored as {:?}; expected F32, F64, F16 or BF16",
                    view.dtype()
                ))
            })?;
            let shape: Vec<i64> = view.shape().iter().map(|&d| d as i64).collect();
            let tensor = Tensor::f_from_data_size(view.data(), &shape, kind)?;
            let slot = pairs.entry(canonical_name(module)).or_default();
            let place = if is_a { &mut slot.0 } else { &mut slot.1 };
            if place.replace(tensor).is_some() {
                return Err(bad(format!(
                    "module {module} has two {} matrices (under two module names)",
                    if is_a { "A" } else { "B" }
                )));
            }
        }
        let modules = pairs
            .into_iter()
            .map(|(module, pair)| match pair {
                (Some(a), Some(b)) => {
                    let weights = LoraWeights { module, a, b };
                    weights.check(config.r).map_err(bad)?;
                    Ok(weights)
                }
                (a, _) => Err(bad(format!(
                    "module {module} has no lora_{} matrix",
                    if a.is_none() { "A" } else { "B" }
                ))),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { config, modules })
    }

    /// Writes the adapter directory atomically, replacing any previous one.
    /// Tensors keep their dtype (F32, F64, F16 or BF16) and go to the CPU.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let invalid = |message: String| Error::Adapter {
            path: dir.to_owned(),
            message,
        };
        self.config.check().map_err(invalid)?;
        let mut names = std::collections::HashSet::new();
        let mut stored = Vec::with_capacity(2 * self.modules.len());
        for m in &self.modules {
            m.check(self.config.r).map_err(invalid)?;
            if !names.insert(m.module.as_str()) {
                return Err(invalid(format!("module {} is given twice", m.module)));
            }
            let prefix = format!("{KEY_PREFIX}{}", module_name_v5(&m.module));
            for (suffix, t) in [(A_SUFFIX, &m.a), (B_SUFFIX, &m.b)] {
                let t = t.f_detach()?.f_to_device(Device::Cpu)?.f_contiguous()?;
                let dtype = dtype_of(t.kind()).ok_or_else(|| {
                    invalid(format!(
                        "module {}: tensors of kind {:?} cannot be written; use F32, F64, F16 or BF16",
                        m.module,
                        t.kind()
                    ))
                })?;
                let mut data = vec![0u8; t.numel() * t.kind().elt_size_in_bytes()];
                t.f_copy_data_u8(&mut data, t.numel())?;
                let shape: Vec<usize> = t.size().iter().map(|&d| d as usize).collect();
                stored.push((format!("{prefix}{suffix}"), dtype, shape, data));
            }
        }
        let views = stored
            .iter()
            .map(|(name, dtype, shape, data)| {
                TensorView::new(*dtype, shape.clone(), data)
                    .map(|v| (name.as_str(), v))
                    .map_err(|e| invalid(format!("tensor {name}: {e:?}")))
            })
            .collect::<Result<Vec<_>>>()?;
        // PEFT marks its files as PyTorch's, as safetensors.torch.save_file does.
        let metadata = Some([("format".to_owned(), "pt".to_owned())].into());
        let weights = safetensors::tensor::serialize(views, &metadata)
            .map_err(|e| invalid(format!("serializing the weights: {e:?}")))?;
        let config = serde_json::to_string_pretty(&self.config)
            .map_err(|e| invalid(format!("serializing the config: {e}")))?;
        atomic::write_dir(dir, |staging| {
            for (file, bytes) in [(CONFIG_FILE, config.as_bytes()), (WEIGHTS_FILE, &weights)] {
                let path = staging.join(file);
                std::fs::write(&path, bytes).map_err(|source| Error::Io { path, source })?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests;
