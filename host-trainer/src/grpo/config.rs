//! The training configuration: a TOML file whose every field has the
//! official recipe's value by default (spec §7), and which command-line
//! flags override.
//!
//! Relative paths are taken from the configuration file's directory. Unknown
//! keys are errors, so a misspelt option never silently keeps its default.

use std::path::{Path, PathBuf};

use agent_core::protocol::MIN_PIXELS;
use agent_core::reward::{RewardMode, Weights};
use serde::{Deserialize, Serialize};

use super::online::OnlineSection;
use super::optim::AdamWConfig;
use super::sampling::SamplingParams;
use crate::error::{Error, Result};
use crate::lora::LoraConfig;

/// Everything a training run needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    pub model: ModelSection,
    #[serde(default)]
    pub data: DataSection,
    #[serde(default)]
    pub lora: LoraConfig,
    #[serde(default)]
    pub grpo: GrpoSection,
    #[serde(default)]
    pub sft: SftSection,
    #[serde(default)]
    pub induction: InductionSection,
    #[serde(default)]
    pub reward: RewardSection,
    #[serde(default)]
    pub optim: OptimSection,
    pub run: RunSection,
    /// GRPO on the virtual phone (see [`super::online`]) instead of on
    /// `data.samples`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub online: Option<OnlineSection>,
}

/// What is trained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrainMode {
    /// LoRA adapters on the text model; the base weights stay frozen.
    #[default]
    Lora,
    /// Every weight of the text model (small models: it needs a frozen copy
    /// as the KL reference and optimizer state for every weight).
    Full,
}

/// The most completions per prompt, and samples per SFT step, a run
/// takes.
pub const MAX_BATCH: usize = 65_536;

/// Numeric precision of the weights and activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    F32,
    F64,
    /// Mixed precision: every forward pass under bfloat16 autocast
    /// ([`crate::autocast`]), trained weights (adapters, or the text model
    /// in full mode) and the optimizer in float32, frozen weights stored in
    /// bfloat16. Meant for CUDA; the CPU runs it too.
    Bf16,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSection {
    /// Hugging Face checkpoint directory (`config.json` + safetensors).
    pub checkpoint: PathBuf,
    /// `tokenizer.json`; default: the checkpoint's.
    #[serde(default)]
    pub tokenizer: Option<PathBuf>,
    #[serde(default)]
    pub mode: TrainMode,
    /// Default: bf16 on CUDA, f32 on the CPU.
    #[serde(default)]
    pub precision: Option<Precision>,
    /// `cpu`, `cuda` or `cuda:N`; default: CUDA when available.
    #[serde(default)]
    pub device: Option<String>,
    /// Train the vision tower too (full mode only); frozen by default.
    #[serde(default)]
    pub train_vision: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataSection {
    /// Sample files in the official JSON format (spec §6).
    #[serde(default)]
    pub samples: Vec<PathBuf>,
    /// Overrides every sample's `max_pixels`.
    #[serde(default)]
    pub max_pixels: Option<u64>,
    /// Reshuffle the samples every epoch (seeded).
    #[serde(default = "yes")]
    pub shuffle: bool,
    /// Held-out sample files, never trained on: at every checkpoint the
    /// run logs their answer loss and the share whose greedy answer has the
    /// right action (`btl` metric preset).
    #[serde(default)]
    pub heldout: Vec<PathBuf>,
}

impl Default for DataSection {
    fn default() -> Self {
        Self {
            samples: Vec::new(),
            max_pixels: None,
            shuffle: true,
            heldout: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GrpoSection {
    /// Completions sampled per prompt (G).
    pub num_generations: usize,
    pub temperature: f64,
    pub top_p: f64,
    pub top_k: i64,
    /// KL weight β.
    pub beta: f64,
    /// Clip range ε.
    pub epsilon: f64,
    pub max_completion_length: usize,
    /// Prompts per optimizer step.
    pub prompts_per_step: usize,
    /// Completions per backward pass (gradient accumulation); 0 = the whole group.
    pub micro_batch: usize,
    /// Skip groups whose rewards are all equal (counted in the logs). Their
    /// advantages are 0, so only the β·KL term would train on them; false
    /// keeps that term, as TRL's and ms-swift's `grpo` loss do.
    pub skip_flat_groups: bool,
}

impl Default for GrpoSection {
    fn default() -> Self {
        let sampling = SamplingParams::default();
        Self {
            num_generations: 8,
            temperature: sampling.temperature,
            top_p: sampling.top_p,
            top_k: sampling.top_k,
            beta: 0.04,
            epsilon: 0.2,
            max_completion_length: 1280,
            prompts_per_step: 1,
            micro_batch: 0,
            skip_flat_groups: true,
        }
    }
}

impl GrpoSection {
    pub fn sampling(&self) -> SamplingParams {
        SamplingParams {
            temperature: self.temperature,
            top_p: self.top_p,
            top_k: self.top_k,
        }
    }
}

/// What a run optimises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrainObjective {
    /// GRPO with the BTL reward on sampled completions (`btl-train grpo`).
    #[default]
    Grpo,
    /// Supervised fine-tuning: masked cross-entropy on each sample's
    /// canonical answer ([`crate::sft`]; `btl-train sft`).
    Sft,
    /// The copying warm-up of a fresh model: random token strings written
    /// again, learned only where copied ([`crate::induction`];
    /// `btl-train induction`).
    Induction,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SftSection {
    /// Samples per optimizer step (their gradients accumulate; the loss is
    /// the mean over all their answer tokens).
    pub samples_per_step: usize,
    /// Most blink regions a target answer holds: the decoding grammar's
    /// limit, so the model learns answers it can write back under it.
    pub max_regions: usize,
    /// Samples per forward and backward pass; above 1 their prompts' common
    /// text prefix (system prompt, action space) is evaluated once per
    /// micro-batch. Without dropout the step is the same either way; LoRA's
    /// dropout draws one mask for the shared prefix.
    pub micro_batch: usize,
    /// How a micro-batch is evaluated ([`crate::sft`]).
    pub batching: Batching,
    /// How many times an answer token that writes a value the goal names
    /// (the text a Type action types, where the goal holds it) counts in
    /// the loss, the mean still dividing by the answer's tokens; 1 (the
    /// default) counts every token once ([`crate::sft`]).
    pub value_weight: f64,
}

/// How SFT evaluates a micro-batch of several samples; every choice gives
/// the same loss and gradients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Batching {
    /// `padded` on a GPU, `shared-prefix` on the CPU.
    #[default]
    Auto,
    /// The prompts' common text prefix once, then one pass per sample over
    /// its own tokens only: the least arithmetic.
    SharedPrefix,
    /// All samples in one pass, padded to the longest: the fewest kernel
    /// launches (on a GPU a step with one pass per sample spends most of
    /// its time launching small kernels).
    Padded,
}

/// A bound on a warm-up sequence's tokens, far above any warm-up's (the
/// default's longest is 105), so that a mistyped size is refused by name
/// instead of allocating without end.
pub const MAX_COPY_SEQUENCE: usize = 32_768;

/// The copying warm-up's strings ([`crate::induction`]); the defaults are
/// the ones the default model's warm-up used.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct InductionSection {
    /// Sequences per optimizer step, each with a new random string.
    pub sequences_per_step: usize,
    /// Longest string, in tokens (the shortest is one token).
    pub max_len: usize,
    /// Most copies of the string in a sequence (at least one).
    pub max_copies: usize,
    /// Most random tokens before the string and between its copies, so
    /// that a copy's position says nothing about where its source is.
    pub max_noise: usize,
    /// In a supervised run, each step also learns `sequences_per_step`
    /// warm-up strings, their copy loss added with this weight, so that a
    /// copying circuit is kept (or formed) while BTL is learned; 0 (the
    /// default) adds none.
    pub sft_weight: f64,
}

impl Default for InductionSection {
    fn default() -> Self {
        Self {
            sequences_per_step: 32,
            max_len: 30,
            max_copies: 1,
            max_noise: 20,
            sft_weight: 0.0,
        }
    }
}

impl Default for SftSection {
    fn default() -> Self {
        Self {
            samples_per_step: 8,
            micro_batch: 1,
            max_regions: agent_core::model::grammar::GrammarLimits::default().max_regions,
            batching: Batching::Auto,
            value_weight: 1.0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RewardSection {
    pub mode: RewardMode,
    pub weights: Weights,
}

/// The official recipe's learning rate for GRPO that updates every weight
/// (spec §7).
pub const FULL_GRPO_LR: f64 = 1e-6;

/// Whether a configuration's table sets `optim.lr`.
pub fn sets_lr(table: &toml::Table) -> bool {
    table.get("optim").and_then(|o| o.get("lr")).is_some()
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OptimSection {
    /// Peak learning rate: 1e-4, a rate for LoRA, unless set; a
    /// configuration of GRPO with `model.mode = "full"` read from TOML
    /// takes [`FULL_GRPO_LR`] instead ([`TrainConfig::default_lr_unless_set`]).
    pub lr: f64,
    #[serde(flatten)]
    pub adamw: AdamWConfig,
    /// Global gradient-norm limit; 0 turns clipping off.
    pub max_grad_norm: f64,
    /// Fraction of the steps spent warming up linearly.
    pub warmup_ratio: f64,
}

impl Default for OptimSection {
    fn default() -> Self {
        Self {
            lr: 1e-4,
            adamw: AdamWConfig::default(),
            max_grad_norm: 1.0,
            warmup_ratio: 0.05,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSection {
    /// `grpo`, `sft` or `induction`; set by the command (`btl-train grpo`,
    /// `sft`, `induction`).
    #[serde(default)]
    pub objective: TrainObjective,
    /// Optimizer steps in the whole run.
    pub steps: u64,
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Checkpoints, metrics and plots go here.
    pub output_dir: PathBuf,
    /// Stop after this step (with a checkpoint) although the schedule is
    /// `steps` long: where an earlier run was stopped, reproduced without
    /// running the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_at: Option<u64>,
    /// A checkpoint every this many steps (and at the end); 0 = only at the end.
    #[serde(default = "default_save_every")]
    pub save_every: u64,
    /// Record steps `[first, last]` (counted from 1) with libtorch's
    /// profiler into `output_dir/profile/` ([`crate::profile`]).
    #[serde(default)]
    pub profile_steps: Option<[u64; 2]>,
}

fn yes() -> bool {
    true
}

fn default_seed() -> u64 {
    42
}

fn default_save_every() -> u64 {
    50
}

impl TrainConfig {
    /// Reads a TOML file; relative paths become absolute paths under its
    /// directory.
    pub fn from_file(path: &Path) -> Result<Self> {
        let io = |source| Error::Io {
            path: path.to_owned(),
            source,
        };
        let text = std::fs::read_to_string(path).map_err(io)?;
        let mut config = Self::from_toml(&text).map_err(|message| Error::Config {
            path: path.to_owned(),
            message,
        })?;
        let base = std::path::absolute(path).map_err(io)?;
        config.resolve_paths(base.parent().unwrap_or(Path::new("/")));
        Ok(config)
    }

    /// Parses TOML text; the error names the line and the key.
    pub fn from_toml(text: &str) -> std::result::Result<Self, String> {
        let mut config: Self = toml::from_str(text).map_err(|e| e.to_string())?;
        let table: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
        config.default_lr_unless_set(sets_lr(&table));
        Ok(config)
    }

    /// Where the configuration sets no `optim.lr` (`set` false), GRPO that
    /// updates every weight takes the recipe's rate, [`FULL_GRPO_LR`]; the
    /// default otherwise is LoRA's, whose adapters start at zero.
    pub fn default_lr_unless_set(&mut self, set: bool) {
        if !set && self.run.objective == TrainObjective::Grpo && self.model.mode == TrainMode::Full
        {
            self.optim.lr = FULL_GRPO_LR;
        }
    }

    /// Makes relative paths relative to `base` (the configuration's directory).
    pub fn resolve_paths(&mut self, base: &Path) {
        for p in self.paths_mut() {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
    }

    fn paths_mut(&mut self) -> Vec<&mut PathBuf> {
        let mut paths = vec![&mut self.model.checkpoint];
        paths.extend(self.model.tokenizer.as_mut());
        paths.extend(self.data.samples.iter_mut());
        paths.extend(self.data.heldout.iter_mut());
        paths.push(&mut self.run.output_dir);
        paths
    }

    /// The tokenizer file: the configured one or the checkpoint's.
    pub fn tokenizer_path(&self) -> PathBuf {
        self.model
            .tokenizer
            .clone()
            .unwrap_or_else(|| self.model.checkpoint.join("tokenizer.json"))
    }

    /// Rejects values no run can use, naming the field.
    pub fn validate(&self) -> Result<()> {
        let bad =
            |field: &str, message: String| Err(Error::Input(format!("config: {field}: {message}")));
        let g = &self.grpo;
        if g.num_generations < 2 {
            return bad(
                "grpo.num_generations",
                format!(
                    "must be at least 2 (advantages compare completions), not {}",
                    g.num_generations
                ),
            );
        }
        // Sizes that are allocated before the first step: past these bounds
        // a typo would abort on allocation rather than be refused.
        if g.num_generations > MAX_BATCH {
            return bad(
                "grpo.num_generations",
                format!("must be at most {MAX_BATCH}, not {}", g.num_generations),
            );
        }
        if let Err(message) = g.sampling().validate() {
            return bad("grpo", message);
        }
        if g.max_completion_length == 0 {
            return bad("grpo.max_completion_length", "must be at least 1".into());
        }
        if g.prompts_per_step == 0 {
            return bad("grpo.prompts_per_step", "must be at least 1".into());
        }
        if !(g.beta >= 0.0 && g.beta.is_finite()) {
            return bad("grpo.beta", format!("must be ≥ 0, not {}", g.beta));
        }
        if !(g.epsilon > 0.0 && g.epsilon < 1.0) {
            return bad(
                "grpo.epsilon",
                format!("must be in (0, 1), not {}", g.epsilon),
            );
        }
        if !(1..=MAX_BATCH).contains(&self.sft.samples_per_step) {
            return bad(
                "sft.samples_per_step",
                format!(
                    "must be between 1 and {MAX_BATCH}, not {}",
                    self.sft.samples_per_step
                ),
            );
        }
        if self.sft.micro_batch == 0 || self.sft.micro_batch > self.sft.samples_per_step {
            return bad(
                "sft.micro_batch",
                format!(
                    "must be between 1 and sft.samples_per_step ({}), not {}",
                    self.sft.samples_per_step, self.sft.micro_batch
                ),
            );
        }
        let o = &self.optim;
        if !(o.lr > 0.0 && o.lr.is_finite()) {
            return bad("optim.lr", format!("must be positive, not {}", o.lr));
        }
        let a = &o.adamw;
        // Each of these left out of range turns every weight NaN in the
        // first step, or (a zero eps) wherever a gradient is zero.
        for (field, value) in [("optim.beta1", a.beta1), ("optim.beta2", a.beta2)] {
            if !(0.0..1.0).contains(&value) {
                return bad(field, format!("must be in [0, 1), not {value}"));
            }
        }
        if !(a.eps > 0.0 && a.eps.is_finite()) {
            return bad("optim.eps", format!("must be positive, not {}", a.eps));
        }
        if !(a.weight_decay >= 0.0 && a.weight_decay.is_finite()) {
            return bad(
                "optim.weight_decay",
                format!("must be ≥ 0, not {}", a.weight_decay),
            );
        }
        if !(o.max_grad_norm >= 0.0 && o.max_grad_norm.is_finite()) {
            return bad(
                "optim.max_grad_norm",
                format!(
                    "must be ≥ 0 (0 turns clipping off), not {}",
                    o.max_grad_norm
                ),
            );
        }
        let w = self.reward.weights;
        if ![w.format, w.blink, w.link].iter().all(|w| w.is_finite()) {
            return bad(
                "reward.weights",
                format!("must be finite, not {}, {}, {}", w.format, w.blink, w.link),
            );
        }
        if !(0.0..1.0).contains(&o.warmup_ratio) {
            return bad(
                "optim.warmup_ratio",
                format!("must be in [0, 1), not {}", o.warmup_ratio),
            );
        }
        if self.run.steps == 0 {
            return bad("run.steps", "must be at least 1".into());
        }
        if let Some(stop) = self.run.stop_at
            && !(1..=self.run.steps).contains(&stop)
        {
            return bad(
                "run.stop_at",
                format!(
                    "must be within 1..={} (run.steps), not {stop}",
                    self.run.steps
                ),
            );
        }
        if let Some([first, last]) = self.run.profile_steps
            && !(1 <= first && first <= last && last <= self.last_step())
        {
            return bad(
                "run.profile_steps",
                format!(
                    "[{first}, {last}] is not a range of steps within 1..={}",
                    self.last_step()
                ),
            );
        }
        if let Some(pixels) = self.data.max_pixels
            && pixels < MIN_PIXELS
        {
            return bad(
                "data.max_pixels",
                format!(
                    "must be at least {MIN_PIXELS} (the smallest screenshot Qwen2.5-VL resizes to), not {pixels}"
                ),
            );
        }
        let v = self.sft.value_weight;
        if !(v.is_finite() && v >= 0.0) {
            return bad(
                "sft.value_weight",
                format!("{v} is not a finite weight of at least 0"),
            );
        }
        if v != 1.0 && self.run.objective != TrainObjective::Sft {
            return bad(
                "sft.value_weight",
                "weighs the answers of supervised steps only (objective = \"sft\")".into(),
            );
        }
        let i = &self.induction;
        if i.sequences_per_step == 0 || i.max_len == 0 || i.max_copies == 0 {
            return bad(
                "induction",
                "sequences_per_step, max_len and max_copies must each be at least 1".into(),
            );
        }
        // The pad, then the source and each copy: noise, a mark, the
        // string, a mark.
        let longest = i
            .max_noise
            .checked_add(i.max_len)
            .and_then(|run| run.checked_add(2))
            .and_then(|run| run.checked_mul(i.max_copies.checked_add(1)?))
            .and_then(|runs| runs.checked_add(1));
        if longest.is_none_or(|tokens| tokens > MAX_COPY_SEQUENCE) {
            return bad(
                "induction",
                format!(
                    "1 + (max_noise + max_len + 2) × (max_copies + 1) tokens must be at most \
                     {MAX_COPY_SEQUENCE}: a sequence that long is a mistyped size"
                ),
            );
        }
        if !(i.sft_weight.is_finite() && i.sft_weight >= 0.0) {
            return bad(
                "induction.sft_weight",
                format!("{} is not a finite weight of at least 0", i.sft_weight),
            );
        }
        if i.sft_weight > 0.0 && self.run.objective != TrainObjective::Sft {
            return bad(
                "induction.sft_weight",
                "mixes the warm-up's strings into supervised steps only (objective = \"sft\")"
                    .into(),
            );
        }
        match (&self.online, self.run.objective) {
            (Some(_), TrainObjective::Sft) => {
                return bad(
                    "online",
                    "online training is GRPO's (objective = \"grpo\"); supervised fine-tuning learns from data.samples".into(),
                );
            }
            (Some(_), TrainObjective::Induction) => {
                return bad(
                    "online",
                    "online training is GRPO's (objective = \"grpo\"); the induction warm-up draws random strings".into(),
                );
            }
            (None, TrainObjective::Induction) if !self.data.samples.is_empty() => {
                return bad(
                    "data.samples",
                    "the induction warm-up draws its own random strings; give no sample files (data.heldout still evaluates)".into(),
                );
            }
            (None, TrainObjective::Induction) => {}
            (Some(online), TrainObjective::Grpo) => {
                online.validate()?;
                if !self.data.samples.is_empty() {
                    return bad(
                        "data.samples",
                        "online GRPO draws its states from the virtual phone; give no sample files (data.heldout still evaluates)".into(),
                    );
                }
            }
            (None, _) if self.data.samples.is_empty() => {
                return bad("data.samples", "no sample files given".into());
            }
            (None, _) => {}
        }
        if self.model.train_vision && self.model.mode != TrainMode::Full {
            return bad(
                "model.train_vision",
                "needs mode = \"full\" (LoRA adapts the text model only)".into(),
            );
        }
        if self.model.mode == TrainMode::Lora {
            self.lora.validate()?;
        }
        Ok(())
    }

    /// The step the run ends at: `run.stop_at`, else `run.steps`.
    pub fn last_step(&self) -> u64 {
        self.run.stop_at.unwrap_or(self.run.steps)
    }

    /// Warmup steps: `ceil(warmup_ratio · steps)`, as transformers counts them.
    pub fn warmup_steps(&self) -> i64 {
        (self.optim.warmup_ratio * self.run.steps as f64).ceil() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
[model]
checkpoint = "ckpt"
[data]
samples = ["train.json"]
[run]
steps = 10
output_dir = "out"
"#;

    #[test]
    fn defaults_are_the_official_recipe() {
        let c = TrainConfig::from_toml(MINIMAL).unwrap();
        assert_eq!(c.grpo.num_generations, 8);
        assert_eq!(
            c.grpo.sampling(),
            SamplingParams {
                temperature: 0.9,
                top_p: 0.9,
                top_k: 50
            }
        );
        assert_eq!(
            (c.grpo.beta, c.grpo.epsilon, c.grpo.max_completion_length),
            (0.04, 0.2, 1280)
        );
        assert_eq!(
            c.reward.weights,
            Weights {
                format: 0.1,
                blink: 0.3,
                link: 0.6
            }
        );
        assert_eq!(c.reward.mode, RewardMode::Released);
        assert_eq!(c.model.mode, TrainMode::Lora);
        assert_eq!(c.lora.r, 8);
        c.validate().unwrap();
        assert_eq!(c.warmup_steps(), 1);
    }

    /// Spec §7: GRPO on every weight defaults to the recipe's 1e-6, read
    /// from a file as from `btl-train grpo`'s flags; LoRA and SFT keep
    /// 1e-4; a rate given always wins.
    #[test]
    fn full_grpo_read_from_toml_takes_the_recipes_learning_rate() {
        let lr = |extra: &str| {
            let text = MINIMAL.replace("[data]", &format!("{extra}\n[data]"));
            TrainConfig::from_toml(&text).unwrap().optim.lr
        };
        assert_eq!(lr(""), 1e-4);
        assert_eq!(lr("mode = \"full\""), 1e-6);
        assert_eq!(lr("mode = \"full\"\n[optim]\nlr = 3e-5"), 3e-5);
        let sft = MINIMAL.replace("output_dir", "objective = \"sft\"\noutput_dir");
        let sft = sft.replace("[data]", "mode = \"full\"\n[data]");
        assert_eq!(TrainConfig::from_toml(&sft).unwrap().optim.lr, 1e-4);
    }

    #[test]
    fn unknown_keys_and_bad_values_are_named() {
        let typo = MINIMAL.replace("steps = 10", "steps = 10\nstep = 3");
        let e = TrainConfig::from_toml(&typo).unwrap_err();
        assert!(
            e.contains("unknown field `step`") && e.contains("line"),
            "{e}"
        );
        let wrong_type = MINIMAL.replace("steps = 10", "steps = \"ten\"");
        let e = TrainConfig::from_toml(&wrong_type).unwrap_err();
        assert!(e.contains("steps") || e.contains("line 9"), "{e}");
        let mut c = TrainConfig::from_toml(MINIMAL).unwrap();
        c.grpo.num_generations = 1;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("grpo.num_generations"), "{e}");
        c.grpo.num_generations = 65_537;
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains("grpo.num_generations: must be at most 65536, not 65537"),
            "{e}"
        );
        c.grpo.num_generations = 65_536;
        c.validate().unwrap();
        c.sft.samples_per_step = 1_000_000_000_000_000;
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains("sft.samples_per_step: must be between 1 and 65536, not 1000000000000000"),
            "{e}"
        );
        // AdamW's and the reward's numbers that would train a NaN model.
        type Spoil = fn(&mut TrainConfig);
        let cases: [(&str, Spoil); 8] = [
            ("optim.beta1", |c| c.optim.adamw.beta1 = 1.0),
            ("optim.beta2", |c| c.optim.adamw.beta2 = 5.0),
            ("optim.eps", |c| c.optim.adamw.eps = 0.0),
            ("optim.weight_decay", |c| {
                c.optim.adamw.weight_decay = f64::NAN
            }),
            ("optim.weight_decay", |c| c.optim.adamw.weight_decay = -0.1),
            ("optim.max_grad_norm", |c| {
                c.optim.max_grad_norm = f64::INFINITY
            }),
            ("reward.weights", |c| c.reward.weights.link = f64::NAN),
            // 3,135 pixels: one under 56 × 56, which every screenshot is
            // resized to at least.
            ("data.max_pixels", |c| c.data.max_pixels = Some(3135)),
        ];
        for (field, spoil) in cases {
            let mut c = TrainConfig::from_toml(MINIMAL).unwrap();
            spoil(&mut c);
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(&format!("config: {field}: must be")), "{e}");
        }
        let mut c = TrainConfig::from_toml(MINIMAL).unwrap();
        c.induction.max_len = 0;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("induction") && e.contains("max_len"), "{e}");
        // 1 + (1,000 + 30 + 2) × (31 + 1) = 33,025 tokens a sequence, past
        // the bound; usize's end, without overflowing; 1 + 1,022 × 32 =
        // 32,705 within it.
        for (noise, copies) in [(1_000, 31), (usize::MAX, 1)] {
            let mut c = TrainConfig::from_toml(MINIMAL).unwrap();
            (c.induction.max_noise, c.induction.max_copies) = (noise, copies);
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains("at most 32768: a sequence that long"), "{e}");
        }
        let mut c = TrainConfig::from_toml(MINIMAL).unwrap();
        (c.induction.max_noise, c.induction.max_copies) = (990, 31);
        assert!(c.validate().is_ok());
        let mut c = TrainConfig::from_toml(MINIMAL).unwrap();
        c.lora.target_modules = vec!["qkv".into()];
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("unknown target module 'qkv'"), "{e}");
        let profiled = MINIMAL.replace("steps = 10", "steps = 10\nprofile_steps = [3, 4]");
        let c = TrainConfig::from_toml(&profiled).unwrap();
        assert_eq!(c.run.profile_steps, Some([3, 4]));
        assert!(c.validate().is_ok());
        for bad in [[0, 2], [4, 3], [9, 11]] {
            let mut c = c.clone();
            c.run.profile_steps = Some(bad);
            let e = c.validate().unwrap_err().to_string();
            assert!(
                e.contains("run.profile_steps") && e.contains("1..=10"),
                "{bad:?}: {e}"
            );
        }
    }

    #[test]
    fn relative_paths_follow_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("train.toml");
        std::fs::write(&file, MINIMAL).unwrap();
        let c = TrainConfig::from_file(&file).unwrap();
        assert_eq!(c.model.checkpoint, dir.path().join("ckpt"));
        assert_eq!(c.tokenizer_path(), dir.path().join("ckpt/tokenizer.json"));
        assert_eq!(c.data.samples, vec![dir.path().join("train.json")]);
    }
}
