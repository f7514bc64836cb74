//! The policy seam: whatever turns an observation into a BTL answer.
//!
//! A [`Policy`] returns raw text only. The agent parses it itself, with the
//! mode its configuration names, so every backend (scripted, llama.cpp, a
//! remote server) is judged by the same parser and a backend cannot smuggle
//! in a more forgiving reading of its own output.
//!
//! # Layout
//! - `llama` (feature `llama`): `LlamaPolicy`, Qwen2.5-VL GGUF + mmproj on
//!   llama.cpp.
//! - [`lora`]: [`LoraAdapter`], a LoRA adapter GGUF and its scale, as the
//!   llama.cpp backend loads it and `--lora FILE[:SCALE]` names it.
//! - [`scripted`]: [`ScriptedPolicy`], which replays fixed answers (tests,
//!   demos, replays of recorded trajectories).
//! - [`grammar`]: the GBNF grammar of the canonical BTL answer, for
//!   grammar-constrained decoding.
//! - `quantize` (features `llama` and `host`): llama.cpp's quantizer for
//!   text GGUFs.
//! - `oracle` (feature `host`): `OraclePolicy`, a virtual-phone task's
//!   oracle answering in BTL (reference runs, demonstrations).
//! - [`relabel`]: [`Relabelled`], a student policy whose every answer
//!   carries a teacher's answer for the same screen (DAgger collection).
//! - [`settings`]: [`ModelSettings`], the profile and screenshot size a
//!   model file says it was trained with.
//! - [`spec`]: [`PolicySpec`], the policy an episode runs as the CLI and
//!   the app name it, loaded with this build's features; [`LlamaConfig`].
//! - [`preprocess`]: Qwen2.5-VL's image preprocessing as in training
//!   (Pillow's BICUBIC resize, transformers' `pixel_values`), bit for bit.

pub mod grammar;
#[cfg(feature = "llama")]
pub mod llama;
pub mod lora;
#[cfg(feature = "host")]
pub mod oracle;
pub mod preprocess;
#[cfg(all(feature = "llama", feature = "host"))]
pub mod quantize;
pub mod relabel;
pub mod scripted;
pub mod settings;
pub mod spec;

pub use lora::LoraAdapter;
#[cfg(feature = "host")]
pub use oracle::OraclePolicy;
pub use relabel::Relabelled;
pub use scripted::ScriptedPolicy;
pub use settings::ModelSettings;
pub use spec::{LlamaConfig, LoadPolicyError, PolicySpec};

use crate::device::ui::UiNode;
use crate::protocol::{FrameMap, Profile, Prompt, ScreenElement};
use image::RgbaImage;
use thiserror::Error;

/// What a policy sees at one step.
#[derive(Debug, Clone, Copy)]
pub struct Observation<'a> {
    /// The screenshot in device pixels; the backend resizes it to
    /// `frame.model` itself, so it can pick its own resampling filter.
    /// `None` for a text-only sample (`btl predict` on samples recorded
    /// without it), whose prompt then holds no image placeholder.
    pub screenshot: Option<&'a RgbaImage>,
    pub frame: FrameMap,
    pub prompt: &'a Prompt,
    /// The prompt's action space: constrained decoding admits only its
    /// actions.
    pub profile: Profile,
    /// The UI tree when the device offers one. A BTL model reads it only
    /// as the prompt's `## Screen Elements` (profile `btl-screen-text`);
    /// oracle and hybrid policies read it whole.
    pub ui_tree: Option<&'a UiNode>,
    /// The prompt's `## Screen Elements` lines; empty when the profile
    /// lists none or the device has no tree. Constrained decoding binds a
    /// Plan that quotes one of them to its point (`grammar::btl_grammar`).
    pub screen: &'a [ScreenElement],
    /// Sampling seed; the agent changes it when it asks again after an
    /// answer it could not use.
    pub seed: u64,
}

/// Token counts and time spent producing one answer. Backends without a
/// tokenizer (scripted replays) leave everything at zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GenerationStats {
    pub prompt_tokens: u32,
    /// Prompt tokens whose KV cache was reused rather than evaluated (a
    /// prefix shared with the previous call, or, for later candidates of
    /// one observation, all but the last).
    #[serde(default)]
    pub cached_prompt_tokens: u32,
    pub generated_tokens: u32,
    /// The vision encoder's time.
    pub encode_ms: f64,
    /// The rest of prompt evaluation: the text, and the image's embeddings
    /// through the language model.
    pub prefill_ms: f64,
    pub decode_ms: f64,
    /// Tokens the unconstrained sampler chose and the grammar refused, each
    /// followed by a draw constrained over the whole vocabulary (see
    /// `GrammarCheck::Lazy`); 0 without a grammar or when it is checked
    /// first.
    #[serde(default)]
    pub grammar_refusals: u32,
}

/// One answer of a policy.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyOutput {
    pub raw: String,
    pub stats: GenerationStats,
    /// A teacher's answer to the same observation, when the policy is
    /// [`Relabelled`]; the agent records it with the step as the training
    /// target for that state.
    pub target: Option<String>,
    /// The student's own answer when [`Relabelled`] executes the teacher's
    /// instead (then `raw` is the teacher's).
    pub overruled: Option<String>,
    /// What the policy's environment scored this answer, where one does
    /// (`btl sim env`, online GRPO); the agent records it with the attempt.
    pub reward: Option<f64>,
}

/// Why a policy produced no answer at all (an unusable answer is not an
/// error here: it is returned and the agent's parser rejects it).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A scripted policy has replayed every answer it was given.
    #[error("the script is exhausted after {given} answers")]
    Exhausted { given: usize },
    /// The backend failed (model not loaded, out of memory, server gone).
    #[error("policy backend failed: {0}")]
    Backend(String),
}

/// How a model's answers are decoded: what, besides its weights, decides
/// which answer it gives. Recorded with each episode, so that an episode
/// decoded otherwise (another temperature, no grammar, a smaller budget) is
/// not resumed or read back as this run's.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Decoding {
    /// Longest answer in tokens.
    pub max_tokens: u32,
    /// 0 decodes greedily.
    pub temperature: f32,
    pub top_p: f32,
    pub top_k: i32,
    /// Whether the BTL grammar constrains the answer.
    pub grammar: bool,
}

/// A model, or anything standing in for one.
pub trait Policy: Send {
    /// A short name recorded in trajectories (model file, "scripted").
    fn name(&self) -> String;

    fn act(&mut self, obs: &Observation) -> Result<PolicyOutput, PolicyError>;

    /// What tells the weights behind [`Self::name`] apart, for a policy
    /// that has any: two model files of one name with other weights (the
    /// next training run's export) differ here. Recorded with each episode,
    /// so a bench does not read another model's episodes as its own.
    fn fingerprint(&self) -> Option<String> {
        None
    }

    /// How the model wants to be run, as far as its file says.
    fn settings(&self) -> ModelSettings {
        ModelSettings::default()
    }

    /// How its answers are decoded, for a policy that samples a model.
    fn decoding(&self) -> Option<Decoding> {
        None
    }

    /// One answer per seed for the same observation (test-time voting,
    /// GRPO rollouts). Backends that can share work between the answers,
    /// such as encoding the screenshot once, override this.
    fn act_many(
        &mut self,
        obs: &Observation,
        seeds: &[u64],
    ) -> Result<Vec<PolicyOutput>, PolicyError> {
        seeds
            .iter()
            .map(|&seed| self.act(&Observation { seed, ..*obs }))
            .collect()
    }
}
