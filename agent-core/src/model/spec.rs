//! Which policy an episode runs, named as its callers name it (the `btl`
//! CLI, the app's JNI bridge), and [`PolicySpec::load`], the one place where
//! a backend this build lacks becomes an error naming the feature.
//!
//! [`LlamaConfig`] lives here rather than beside `LlamaPolicy` so a caller
//! can describe a model in any build and learn at load time whether this
//! one can run it.

use super::grammar::{DEFAULT_MAX_TOKENS, GrammarCheck};
use super::{LoraAdapter, Policy, ScriptedPolicy};
use std::path::PathBuf;
use thiserror::Error;

/// A policy to load.
#[derive(Debug, Clone, PartialEq)]
pub enum PolicySpec {
    /// A Qwen2.5-VL / BTL-UI model on llama.cpp (feature `llama`).
    Llama(LlamaConfig),
    /// Fixed answers replayed in order: demos and tests.
    Scripted(Vec<String>),
    /// A virtual-phone suite task's oracle, answering in BTL (feature
    /// `host`, which has the suite).
    Oracle { task: String, seed: u64 },
}

/// Why a policy could not be loaded.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LoadPolicyError {
    #[error("{what} needs a build with the `{feature}` feature")]
    NotBuilt {
        what: &'static str,
        feature: &'static str,
    },
    #[error("no task named '{0}'")]
    NoTask(String),
    /// The model files could not be loaded (llama.cpp's reason).
    #[error("{0}")]
    Model(String),
}

impl PolicySpec {
    pub fn load(self) -> Result<Box<dyn Policy>, LoadPolicyError> {
        match self {
            PolicySpec::Llama(config) => load_llama(config),
            PolicySpec::Scripted(answers) => Ok(Box::new(ScriptedPolicy::new(answers))),
            PolicySpec::Oracle { task, seed } => load_oracle(&task, seed),
        }
    }
}

#[cfg(feature = "llama")]
fn load_llama(config: LlamaConfig) -> Result<Box<dyn Policy>, LoadPolicyError> {
    super::llama::LlamaPolicy::load(config)
        .map(|p| Box::new(p) as Box<dyn Policy>)
        .map_err(|e| LoadPolicyError::Model(e.to_string()))
}

#[cfg(not(feature = "llama"))]
fn load_llama(_: LlamaConfig) -> Result<Box<dyn Policy>, LoadPolicyError> {
    Err(LoadPolicyError::NotBuilt {
        what: "a llama.cpp model",
        feature: "llama",
    })
}

#[cfg(feature = "host")]
fn load_oracle(task: &str, seed: u64) -> Result<Box<dyn Policy>, LoadPolicyError> {
    crate::sim::tasks::sample(task, seed)
        .map(|t| Box::new(super::oracle::OraclePolicy::new(t)) as Box<dyn Policy>)
        .ok_or_else(|| LoadPolicyError::NoTask(task.to_owned()))
}

#[cfg(not(feature = "host"))]
fn load_oracle(_: &str, _: u64) -> Result<Box<dyn Policy>, LoadPolicyError> {
    Err(LoadPolicyError::NotBuilt {
        what: "the oracle policy",
        feature: "host",
    })
}

/// The most threads llama.cpp takes (ggml's `GGML_MAX_N_THREADS`); past
/// it ggml throws from its graph, which aborts the whole process.
pub const MAX_THREADS: i32 = 512;

/// How a model is loaded and sampled.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LlamaConfig {
    /// Text model GGUF.
    pub model: PathBuf,
    /// Vision projector GGUF (`mmproj-…`).
    pub mmproj: PathBuf,
    /// 1 to [`MAX_THREADS`].
    pub threads: i32,
    /// Context window in tokens (prompt, image and answer together).
    pub context_tokens: u32,
    /// Longest answer in tokens.
    pub max_tokens: u32,
    /// 0 samples greedily; above 0, top-k, top-p and temperature apply.
    pub temperature: f32,
    pub top_p: f32,
    pub top_k: i32,
    /// Constrain decoding to the canonical BTL answer (see
    /// [`super::grammar`]); on by default.
    #[serde(default = "yes")]
    pub grammar: bool,
    /// When the grammar is checked against the whole vocabulary: only when
    /// it refuses the unconstrained choice (the default), or before every
    /// token.
    #[serde(default)]
    pub grammar_check: GrammarCheck,
    /// Keep the KV cache of the prompt's text before the screenshot (the
    /// system prompt, the action space, the goal and the history so far)
    /// between calls and evaluate only what changed; on by default.
    #[serde(default = "yes")]
    pub reuse_prefix: bool,
    /// LoRA adapters laid over the text model for the session. llama-cpp-2
    /// 0.1.160 sets one adapter per context (its `lora_adapter_set` replaces
    /// the context's set), so loading refuses more than one.
    #[serde(default)]
    pub adapters: Vec<LoraAdapter>,
    /// Transformer layers offloaded to the GPU backend ([`ALL_LAYERS`]: every
    /// one). 0 runs everything on the CPU, the vision encoder included;
    /// above 0 the vision encoder runs on the GPU too. Without a GPU backend
    /// compiled in (features `vulkan`, `cuda`) the count has no effect.
    #[serde(default = "default_gpu_layers")]
    pub gpu_layers: u32,
    /// Map the text model's file instead of reading it into memory.
    /// llama.cpp repacks quantized weights for the CPU's kernels into
    /// memory of its own, and the mapped pages it read them from stay
    /// resident beside that copy: at Qwen2.5-VL-3B's size (q4_0), mapping
    /// measured 1.56 GB more peak memory at the same speed. Off by default.
    #[serde(default)]
    pub mmap: bool,
}

/// `gpu_layers` for "all of them": llama.cpp caps the count at the model's.
pub const ALL_LAYERS: u32 = u32::MAX;

/// Whether this build has a GPU backend of llama.cpp to offload to.
pub const GPU_BACKEND: bool = cfg!(any(feature = "vulkan", feature = "cuda"));

/// Everything on the GPU when there is a GPU backend, else the CPU.
pub fn default_gpu_layers() -> u32 {
    if GPU_BACKEND { ALL_LAYERS } else { 0 }
}

fn yes() -> bool {
    true
}

impl LlamaConfig {
    /// The fingerprint the loaded model will report
    /// ([`Policy::fingerprint`]), read from the files without loading
    /// them; `None` in a build without the `llama` feature.
    pub fn fingerprint(&self) -> Result<Option<String>, LoadPolicyError> {
        #[cfg(feature = "llama")]
        return super::llama::files_fingerprint(self)
            .map(Some)
            .map_err(|e| LoadPolicyError::Model(e.to_string()));
        #[cfg(not(feature = "llama"))]
        Ok(None)
    }

    /// Defaults for a model pair: greedy decoding, 2 threads, 8k context.
    pub fn new(model: impl Into<PathBuf>, mmproj: impl Into<PathBuf>) -> Self {
        Self {
            model: model.into(),
            mmproj: mmproj.into(),
            threads: 2,
            context_tokens: 8192,
            max_tokens: DEFAULT_MAX_TOKENS,
            temperature: 0.0,
            top_p: 0.9,
            top_k: 50,
            grammar: true,
            grammar_check: GrammarCheck::Lazy,
            reuse_prefix: true,
            adapters: Vec::new(),
            gpu_layers: default_gpu_layers(),
            mmap: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_model_is_named_or_the_missing_feature_is() {
        let spec = PolicySpec::Llama(LlamaConfig::new("/nowhere/model.gguf", "/nowhere/p.gguf"));
        let err = spec.load().err().expect("no model there");
        if cfg!(feature = "llama") {
            assert!(matches!(&err, LoadPolicyError::Model(m) if m.contains("/nowhere/model.gguf")));
        } else {
            assert!(matches!(
                err,
                LoadPolicyError::NotBuilt {
                    feature: "llama",
                    ..
                }
            ));
        }
    }

    #[test]
    fn oracles_exist_for_suite_tasks_in_host_builds_only() {
        let known = PolicySpec::Oracle {
            task: "wifi_on".into(),
            seed: 0,
        }
        .load();
        let unknown = PolicySpec::Oracle {
            task: "make_coffee".into(),
            seed: 0,
        }
        .load();
        if cfg!(feature = "host") {
            assert_eq!(
                known.map(|p| p.name()).ok().as_deref(),
                Some("oracle of wifi_on")
            );
            assert!(
                matches!(unknown.err(), Some(LoadPolicyError::NoTask(t)) if t == "make_coffee")
            );
        } else {
            assert!(matches!(
                known.err(),
                Some(LoadPolicyError::NotBuilt {
                    feature: "host",
                    ..
                })
            ));
        }
    }
}
