//! The training loop, GRPO or supervised: one [`Trainer::step`] is one
//! optimizer step.
//!
//! Every random choice of a step derives from `(seed, step)`: the data order
//! of each epoch, the sampling draws and torch's generator (LoRA dropout) are
//! reseeded from it, so a run resumed from a checkpoint continues bit for bit
//! without saving generator states.

use std::path::{Path, PathBuf};
use std::sync::{Arc, MutexGuard};
use std::time::Instant;

use agent_core::metrics::{Preset, evaluate};
use agent_core::model::preprocess::{PixelValues, Qwen2VlImageProcessor};
use agent_core::protocol::TRAINING_MAX_PIXELS;
use agent_core::reward::{RewardBreakdown, RewardMode, Weights};
use agent_core::sample::{Sample, parse_samples};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use super::config::{Batching, Precision, TrainConfig, TrainMode, TrainObjective};
use super::loss::{Objective, group_advantages, is_flat, objective};
use super::online;
use super::optim::{AdamW, cosine_with_warmup};
use super::prompt::PromptTokenizer;
use super::rollout::{Prompt, completion_log_probs, pad_completions, sample_group};
use crate::autocast::autocast;
use crate::error::{Error, Result};
use crate::induction::{CopyBatch, CopyTokens, copy_batch, copy_loss};
use crate::lora::{LoraInit, generator};
use crate::model::{Grid, Qwen25Vl};
use crate::sft::{
    Answer, answer_loss, in_frame, padded_batch_loss, shared_prefix_loss, target_answer,
    weighted_nll,
};

/// Scores one completion of a sample.
pub trait Reward {
    fn score(&self, sample: &Sample, completion: &str) -> RewardBreakdown;
}

/// The BTL reward of agent-core (spec §4).
pub struct BtlReward {
    pub mode: RewardMode,
    pub weights: Weights,
}

impl Reward for BtlReward {
    fn score(&self, sample: &Sample, completion: &str) -> RewardBreakdown {
        agent_core::reward::score(sample, completion, self.mode, self.weights)
    }
}

/// What one step did, as logged; what a kind of step does not measure
/// stays at its default (0, or absent).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepMetrics {
    /// Steps done after this one (1 for the first).
    pub step: u64,
    pub lr: f64,
    pub loss: f64,
    pub reward_mean: f64,
    pub reward_std: f64,
    pub format: f64,
    pub blink: f64,
    pub link: f64,
    /// Mean per-token KL to the reference over the trained groups.
    pub kl: f64,
    pub clip_fraction: f64,
    /// Gradient norm before clipping (0 when no group trained).
    pub grad_norm: f64,
    pub groups: usize,
    /// Groups whose rewards were all equal (skipped unless
    /// `grpo.skip_flat_groups` is off).
    pub flat_groups: usize,
    pub completion_tokens_mean: f64,
    /// SFT: the step's prompt tokens (image tokens included), so that
    /// throughput counts whole sequences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<usize>,
    pub seconds: f64,
    /// Mean answer loss over the held-out samples (`data.heldout`), at
    /// checkpoint steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heldout_loss: Option<f64>,
    /// Share of held-out samples whose greedy answer has the right action
    /// and arguments (the `btl` preset's SR), at checkpoint steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heldout_accuracy: Option<f64>,
    /// Online GRPO: the step's episodes, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub episodes: Option<usize>,
    /// … how many of them ended with the task done (the checker's verdict
    /// when the episode ended), …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub episodes_done: Option<usize>,
    /// … and the mean outcome term over the completions (the share that
    /// said Finish on a screen where the task was done).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<f64>,
    /// Induction, and SFT with `induction.sft_weight`: the share of the
    /// step's copied tokens that the model's most likely next token got
    /// right, before the update (every step's strings are new, so this
    /// measures copying, not memory). An SFT step's `loss` stays its
    /// answers' alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_accuracy: Option<f64>,
}

/// How the model does on the held-out samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeldOut {
    /// Mean −log p over every held-out answer token.
    pub loss: f64,
    /// Share of the held-out samples (those whose solution is an action)
    /// whose greedy answer's action is right under the `btl` preset.
    pub accuracy: f64,
}

/// What backpropagating one group added to a step.
#[derive(Debug, Clone, Copy, Default)]
struct GroupTerms {
    loss: f64,
    kl: f64,
    clip_fraction: f64,
}

/// What a GRPO step's groups added up to.
#[derive(Debug, Default)]
struct Tally {
    /// Every completion's reward, in order.
    rewards: Vec<f64>,
    /// Format, blink and link terms, summed over the completions.
    parts: [f64; 3],
    completion_tokens: usize,
    groups: usize,
    flat: usize,
    trained: usize,
    loss: f64,
    kl: f64,
    clip_fraction: f64,
}

impl Tally {
    /// One completion of `tokens` tokens, its reward terms and total.
    fn scored(&mut self, tokens: usize, terms: &RewardBreakdown, total: f64) {
        self.completion_tokens += tokens;
        self.parts[0] += terms.format;
        self.parts[1] += terms.blink;
        self.parts[2] += terms.link;
        self.rewards.push(total);
    }
}

/// One training sample and the directory its image paths are relative to.
struct Item {
    sample: Sample,
    base: PathBuf,
}

/// A prompt before it becomes tensors: what the CPU makes of a sample (its
/// token ids, its screenshot decoded and preprocessed), free of libtorch so
/// that several are made at once.
struct PromptInput {
    ids: Vec<i64>,
    pixels: Option<PixelValues>,
}

/// The [`PromptInput`] of a sample, its screenshot read from disk and
/// resized within `max_pixels` (`data.max_pixels`), else the sample's own.
fn prompt_input(
    tokenizer: &PromptTokenizer,
    max_pixels: Option<u64>,
    merge: i64,
    item: &Item,
) -> Result<PromptInput> {
    let Some(image) = item.sample.images.first() else {
        return Ok(PromptInput {
            ids: tokenizer.prompt_ids(&item.sample.messages, 0)?,
            pixels: None,
        });
    };
    let path = item.base.join(image);
    let rgb = read_sample_image(&path, item.sample.image_sizes.first())
        .map_err(|why| Error::Input(format!("{}: {why}", path.display())))?;
    let max_pixels = max_pixels.unwrap_or(item.sample.max_pixels);
    image_prompt_input(tokenizer, merge, &item.sample.messages, &rgb, max_pixels).map_err(|e| {
        match e {
            Error::Input(why) => Error::Input(format!("{}: {why}", path.display())),
            other => other,
        }
    })
}

/// A sample's screenshot, refused in words when it is larger than any
/// phone's screen (checked from its header, before decoding) or not the
/// size the sample gives it (`size`, its `image_sizes` entry), whose frame
/// the answer's coordinates are in.
fn read_sample_image(
    path: &Path,
    size: Option<&[u32; 2]>,
) -> std::result::Result<image::RgbImage, String> {
    let image = agent_core::agent::trajectory::read_screenshot(path, None)
        .map_err(|e| format!("cannot read the image: {e}"))?;
    agent_core::sample::check_image_size(image.width(), image.height(), size)?;
    Ok(image.to_rgb8())
}

/// The [`PromptInput`]s of several samples, their screenshots decoded and
/// preprocessed in parallel: done one by one, that is a third of an SFT
/// step's time on the CPU and most of it on a GPU.
fn prompt_inputs(
    tokenizer: &PromptTokenizer,
    max_pixels: Option<u64>,
    merge: i64,
    items: &[&Item],
) -> Result<Vec<PromptInput>> {
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let per_thread = items.len().div_ceil(threads).max(1);
    let inputs = std::thread::scope(|scope| {
        let workers: Vec<_> = items
            .chunks(per_thread)
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|item| prompt_input(tokenizer, max_pixels, merge, item))
                        .collect::<Result<Vec<_>>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect::<Result<Vec<_>>>()
    })?;
    Ok(inputs.into_iter().flatten().collect())
}

/// The next SFT step's prompt inputs, made in the background while the
/// current step trains.
struct Prefetch {
    step: u64,
    inputs: std::thread::JoinHandle<Result<Vec<PromptInput>>>,
}

/// The [`PromptInput`] of messages with one screenshot, resized within
/// `max_pixels`.
fn image_prompt_input(
    tokenizer: &PromptTokenizer,
    merge: i64,
    messages: &[agent_core::sample::Message],
    rgb: &image::RgbImage,
    max_pixels: u64,
) -> Result<PromptInput> {
    let pixels = Qwen2VlImageProcessor::new(max_pixels)
        .preprocess(rgb)
        .map_err(|e| Error::Input(e.to_string()))?;
    let [t, h, w] = pixels.grid_thw.map(i64::from);
    let tokens = (t * h * w / (merge * merge)) as usize;
    Ok(PromptInput {
        ids: tokenizer.prompt_ids(messages, tokens)?,
        pixels: Some(pixels),
    })
}

/// A GRPO run in progress.
pub struct Trainer {
    config: TrainConfig,
    model: Qwen25Vl,
    /// The frozen base model for the KL term in full fine-tuning (LoRA turns
    /// its adapters off instead).
    reference: Option<Qwen25Vl>,
    /// Shared with the thread that prepares the next SFT step.
    tokenizer: Arc<PromptTokenizer>,
    optimizer: AdamW,
    items: Arc<[Item]>,
    /// `data.heldout`: evaluated, never trained on.
    heldout: Vec<Item>,
    /// The sample and held-out files as they were read.
    inputs: Vec<InputDigest>,
    reward: Box<dyn Reward>,
    /// `online.tasks`, resolved (empty without `[online]`).
    online_tasks: Vec<&'static str>,
    done: u64,
    /// The dtype forward passes autocast to (`precision = "bf16"`).
    autocast: Option<Kind>,
    prefetched: Option<Prefetch>,
    /// The induction warm-up's token ids: that objective's, and SFT's with
    /// `induction.sft_weight` above 0.
    copy_tokens: Option<CopyTokens>,
}

/// What a step's warm-up strings gave ([`Trainer::copy_term`]).
struct CopyTerm {
    /// The share of copied tokens the model's most likely token got right,
    /// before the update, on strings it has never seen.
    accuracy: f64,
    /// The unweighted copy loss.
    loss: f64,
    batch: CopyBatch,
}

/// [`derive_seed`]'s stream for the induction warm-up's strings, apart
/// from the others (which count up from 1, and LoRA's `u64::MAX`).
const INDUCTION_STREAM: u64 = u64::MAX - 1;

/// A well-mixed 64-bit value from a seed and two counters (SplitMix64's finalizer).
pub(crate) fn derive_seed(seed: u64, a: u64, b: u64) -> u64 {
    agent_core::hash::splitmix64(
        seed.wrapping_add(a.wrapping_mul(agent_core::hash::SPLITMIX64_GAMMA))
            .wrapping_add(b.wrapping_mul(0xD1B5_4A32_D192_ED03)),
    )
}

/// `cpu`, `cuda`, `cuda:N`; none: CUDA if available. A CUDA device this
/// build or machine does not have is refused in words here, not by
/// libtorch's dispatcher at the first tensor.
pub fn parse_device(text: Option<&str>) -> Result<Device> {
    let index = match text {
        None => return Ok(Device::cuda_if_available()),
        Some("cpu") => return Ok(Device::Cpu),
        Some("cuda") => 0,
        Some(other) => other
            .strip_prefix("cuda:")
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| {
                Error::Input(format!(
                    "config: model.device: '{other}' is not cpu, cuda or cuda:N"
                ))
            })?,
    };
    let count = tch::Cuda::device_count().max(0) as usize;
    if index >= count {
        return Err(Error::Input(format!(
            "config: model.device: cuda:{index}, but {}",
            match count {
                0 => "this build or machine has no CUDA device (cpu trains here)".to_owned(),
                n => format!(
                    "this machine has {n} CUDA device(s), cuda:0 to cuda:{}",
                    n - 1
                ),
            }
        )));
    }
    Ok(Device::Cuda(index))
}

/// What a run read from one of its sample files: a resumed run is
/// refused when its file now holds other bytes, since the data order and
/// every sample drawn from the step on would differ from the run's.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InputDigest {
    pub path: PathBuf,
    pub bytes: u64,
    /// FNV-1a (64-bit) of the file's bytes, in hex.
    pub fnv1a: String,
}

impl InputDigest {
    fn of(path: &Path, text: &str) -> Self {
        Self {
            path: path.to_owned(),
            bytes: text.len() as u64,
            fnv1a: format!("{:016x}", agent_core::hash::fnv1a(&[text.as_bytes()])),
        }
    }
}

/// Reads the samples of every file, in order; errors name the file and line.
fn load_items(files: &[PathBuf], read: &mut Vec<InputDigest>) -> Result<Vec<Item>> {
    let mut items = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).map_err(|source| Error::Io {
            path: file.clone(),
            source,
        })?;
        read.push(InputDigest::of(file, &text));
        let samples = parse_samples(&text).map_err(|e| Error::Config {
            path: file.clone(),
            message: e.to_string(),
        })?;
        let base = file.parent().unwrap_or(Path::new(".")).to_owned();
        for (index, sample) in samples.into_iter().enumerate() {
            if sample.images.len() > 1 {
                return Err(Error::Config {
                    path: file.clone(),
                    message: format!(
                        "sample {index} has {} images; BTL prompts carry one screenshot",
                        sample.images.len()
                    ),
                });
            }
            // A missing screenshot found here costs nothing; found when the
            // sample is drawn, or at the first held-out evaluation, it ends
            // a run that may have trained for an hour without a checkpoint.
            if let Some(image) = sample.images.first().map(|i| base.join(i))
                && !image.is_file()
            {
                return Err(Error::Config {
                    path: file.clone(),
                    message: format!(
                        "sample {index}'s screenshot {} is not a file",
                        image.display()
                    ),
                });
            }
            items.push(Item {
                sample,
                base: base.clone(),
            });
        }
    }
    if items.is_empty() {
        return Err(Error::Input(format!(
            "no samples in {}",
            files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(items)
}

impl Trainer {
    /// A fresh run: the checkpoint with new adapters (seeded by `run.seed`)
    /// or, in full mode, with its text model trainable.
    pub fn new(config: TrainConfig, reward: Box<dyn Reward>) -> Result<Self> {
        config.validate()?;
        let device = parse_device(config.model.device.as_deref())?;
        let precision = match config.model.precision {
            Some(precision) => precision,
            None if device.is_cuda() => Precision::Bf16,
            None => Precision::F32,
        };
        // Frozen weights, trained weights (the optimizer's master copy) and
        // the dtype every forward pass autocasts to.
        let (frozen_kind, trained_kind, autocast) = match precision {
            Precision::F64 => (Kind::Double, Kind::Double, None),
            Precision::F32 => (Kind::Float, Kind::Float, None),
            Precision::Bf16 => (Kind::BFloat16, Kind::Float, Some(Kind::BFloat16)),
        };
        let mut inputs = Vec::new();
        let items = if config.data.samples.is_empty() {
            Vec::new()
        } else {
            load_items(&config.data.samples, &mut inputs)?
        };
        let online_tasks = match &config.online {
            Some(online) => online.task_names()?,
            None => Vec::new(),
        };
        let heldout = if config.data.heldout.is_empty() {
            Vec::new()
        } else {
            load_items(&config.data.heldout, &mut inputs)?
        };
        let tokenizer = PromptTokenizer::from_file(&config.tokenizer_path())?;
        let copy_tokens = match config.run.objective {
            TrainObjective::Induction => true,
            TrainObjective::Sft => config.induction.sft_weight > 0.0,
            TrainObjective::Grpo => false,
        }
        .then(|| CopyTokens::from_tokenizer(tokenizer.tokenizer()))
        .transpose()?;
        let (model, reference, params) = match config.model.mode {
            TrainMode::Lora => {
                let mut model = Qwen25Vl::from_checkpoint_with_lora(
                    &config.model.checkpoint,
                    device,
                    frozen_kind,
                    Some(LoraInit {
                        config: &config.lora,
                        seed: derive_seed(config.run.seed, u64::MAX, 0),
                    }),
                )?;
                model.freeze_base();
                let lora = model.lora().ok_or_else(|| {
                    Error::Input("the model was built without adapters".to_owned())
                })?;
                let params = lora
                    .vars()
                    .variables()
                    .into_iter()
                    .map(|(name, t)| (name, t, true))
                    .collect::<Vec<_>>();
                (model, None, params)
            }
            TrainMode::Full => {
                let model =
                    Qwen25Vl::from_checkpoint(&config.model.checkpoint, device, trained_kind)?;
                let mut reference =
                    Qwen25Vl::from_checkpoint(&config.model.checkpoint, device, frozen_kind)?;
                reference.freeze_base();
                let mut params = Vec::new();
                for (name, t) in model.vars().variables() {
                    let trainable = config.model.train_vision || !name.starts_with("visual.");
                    if trainable {
                        // No decay on biases and norm scales, as transformers' Trainer.
                        let decay = t.dim() > 1;
                        params.push((name, t, decay));
                    } else {
                        let _ = t.set_requires_grad(false);
                    }
                }
                (model, Some(reference), params)
            }
        };
        let mut params = params;
        params.sort_by(|a, b| a.0.cmp(&b.0));
        let optimizer = AdamW::new(config.optim.adamw, params)?;
        Ok(Self {
            config,
            model,
            reference,
            tokenizer: Arc::new(tokenizer),
            optimizer,
            items: items.into(),
            heldout,
            inputs,
            reward,
            online_tasks,
            done: 0,
            autocast,
            prefetched: None,
            copy_tokens,
        })
    }

    pub fn config(&self) -> &TrainConfig {
        &self.config
    }

    pub fn model(&self) -> &Qwen25Vl {
        &self.model
    }

    pub fn tokenizer(&self) -> &PromptTokenizer {
        &self.tokenizer
    }

    /// Where the model computes.
    pub fn device(&self) -> Device {
        self.model.device()
    }

    /// The sample and held-out files as this trainer read them.
    pub fn inputs(&self) -> &[InputDigest] {
        &self.inputs
    }

    /// Optimizer steps done so far.
    pub fn steps_done(&self) -> u64 {
        self.done
    }

    pub(crate) fn set_steps_done(&mut self, done: u64) {
        self.done = done;
    }

    pub(crate) fn optimizer_steps(&self) -> i64 {
        self.optimizer.steps()
    }

    pub(crate) fn optimizer_state(&self) -> Vec<(String, Tensor)> {
        self.optimizer.state()
    }

    pub(crate) fn load_optimizer_state(
        &mut self,
        state: &std::collections::HashMap<String, Tensor>,
        steps: i64,
    ) -> Result<()> {
        self.optimizer.load_state(state, steps)
    }

    /// The weights the optimizer updates, by name (full mode's checkpoint).
    pub(crate) fn trainable_weights(&self) -> Vec<(String, Tensor)> {
        self.optimizer.params()
    }

    /// Restores [`Self::trainable_weights`]; every one must be given.
    pub(crate) fn load_trainable_weights(
        &mut self,
        weights: &std::collections::HashMap<String, Tensor>,
    ) -> Result<()> {
        for (name, var) in self.optimizer.params() {
            let saved = weights
                .get(&name)
                .ok_or_else(|| Error::Input(format!("the checkpoint lacks weight {name}")))?;
            if saved.size() != var.size() {
                return Err(Error::Input(format!(
                    "weight {name} has shape {:?}, the model {:?}",
                    saved.size(),
                    var.size()
                )));
            }
            tch::no_grad(|| var.shallow_clone().f_copy_(saved))?;
        }
        Ok(())
    }

    /// The sample at position `index` of the run's stream: epoch after
    /// epoch, each a seeded permutation (or the file order without shuffling).
    fn item_at(&self, index: u64) -> &Item {
        &self.items[self.position_at(index)]
    }

    /// Where in `items` the sample at position `index` of the stream is.
    fn position_at(&self, index: u64) -> usize {
        let n = self.items.len() as u64;
        let (epoch, offset) = (index / n, index % n);
        if !self.config.data.shuffle {
            return offset as usize;
        }
        let mut order: Vec<usize> = (0..self.items.len()).collect();
        let mut rng = ChaCha8Rng::seed_from_u64(derive_seed(self.config.run.seed, 1, epoch));
        order.shuffle(&mut rng);
        order[offset as usize]
    }

    /// Ids and image tensor of a sample's prompt.
    fn prompt(&self, item: &Item) -> Result<Prompt> {
        let input = prompt_input(
            &self.tokenizer,
            self.config.data.max_pixels,
            self.merge(),
            item,
        )?;
        self.to_prompt(input)
    }

    /// The prompt inputs of SFT step `step`: made in the background during
    /// the step before, or now.
    fn step_inputs(&mut self, step: u64) -> Result<Vec<PromptInput>> {
        match self.prefetched.take() {
            Some(prefetch) if prefetch.step == step => prefetch
                .inputs
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            _ => {
                let items: Vec<&Item> = self
                    .step_positions(step)
                    .into_iter()
                    .map(|p| &self.items[p])
                    .collect();
                prompt_inputs(
                    &self.tokenizer,
                    self.config.data.max_pixels,
                    self.merge(),
                    &items,
                )
            }
        }
    }

    /// Starts making SFT step `step`'s prompt inputs in the background.
    fn prefetch(&mut self, step: u64) {
        let positions = self.step_positions(step);
        let (items, tokenizer) = (Arc::clone(&self.items), Arc::clone(&self.tokenizer));
        let (max_pixels, merge) = (self.config.data.max_pixels, self.merge());
        let inputs = std::thread::spawn(move || {
            let chosen: Vec<&Item> = positions.iter().map(|&p| &items[p]).collect();
            prompt_inputs(&tokenizer, max_pixels, merge, &chosen)
        });
        self.prefetched = Some(Prefetch { step, inputs });
    }

    /// Where in `items` SFT step `step`'s samples are.
    fn step_positions(&self, step: u64) -> Vec<usize> {
        let per_step = self.config.sft.samples_per_step as u64;
        (0..per_step)
            .map(|slot| self.position_at(step * per_step + slot))
            .collect()
    }

    /// Ids and image tensor of a prompt with one screenshot, resized within
    /// `max_pixels`.
    fn image_prompt(
        &self,
        messages: &[agent_core::sample::Message],
        rgb: &image::RgbImage,
        max_pixels: u64,
    ) -> Result<Prompt> {
        let input = image_prompt_input(&self.tokenizer, self.merge(), messages, rgb, max_pixels)?;
        self.to_prompt(input)
    }

    /// The side of the vision merger's square: merge² patches make one
    /// image token.
    fn merge(&self) -> i64 {
        self.model.config().vision.spatial_merge_size
    }

    /// A prompt's tensors, on the model's device.
    fn to_prompt(&self, input: PromptInput) -> Result<Prompt> {
        let image = match input.pixels {
            None => None,
            Some(pixels) => {
                let [t, h, w] = pixels.grid_thw.map(i64::from);
                let values = Tensor::f_from_slice(&pixels.data)?
                    .f_reshape([pixels.rows as i64, pixels.cols as i64])?
                    .f_to_device(self.model.device())?;
                Some((values, [Grid::new(t, h, w)]))
            }
        };
        Ok(Prompt {
            ids: input.ids,
            image,
        })
    }

    /// Runs a forward pass in the run's precision: under autocast for
    /// `bf16`, as is. Backward passes run outside, as in PyTorch.
    fn forward<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        match self.autocast {
            Some(dtype) => autocast(self.model.device(), dtype, f)?,
            None => f(),
        }
    }

    /// The dtype forward passes autocast to, if any.
    pub fn autocast(&self) -> Option<Kind> {
        self.autocast
    }

    /// The model on the held-out samples, or `None` without any: the
    /// answer loss of each sample's [`target_answer`] (no gradient) and
    /// whether greedy decoding, up to twice the target's length, writes an
    /// answer whose action is right (`metrics::evaluate`, `btl` preset,
    /// judged in the run's screenshot frame). Adapters on, dropout off.
    pub fn evaluate(&self) -> Result<Option<HeldOut>> {
        if self.heldout.is_empty() {
            return Ok(None);
        }
        let cfg = &self.config;
        self.model.set_lora_enabled(true);
        self.model.set_training(false);
        let stop = self.tokenizer.stop_ids();
        let (mut loss, mut tokens, mut right, mut counted) = (0.0, 0usize, 0usize, 0usize);
        for item in &self.heldout {
            let max_pixels = cfg.data.max_pixels.unwrap_or(item.sample.max_pixels);
            let sample = in_frame(&item.sample, max_pixels)?;
            let text = target_answer(&item.sample, max_pixels, cfg.sft.max_regions)?;
            let mut ids = self.tokenizer.encode_text(&text)?;
            ids.push(stop[0]);
            let prompt = self.prompt(item)?;
            let out = self.forward(|| {
                tch::no_grad(|| {
                    answer_loss(
                        &self.model,
                        &prompt,
                        std::slice::from_ref(&ids),
                        self.tokenizer.pad_id(),
                    )
                })
            })?;
            loss += out.loss.f_double_value(&[])? * ids.len() as f64;
            tokens += ids.len();
            let images = prompt.images();
            let greedy = self.forward(|| {
                self.model
                    .generate_greedy(&prompt.ids, images, 2 * ids.len(), &stop)
            })?;
            let answer = self.tokenizer.decode(&greedy)?;
            // A sample whose solution is no action has no verdict to count.
            if let Some(success) = evaluate(&sample, &answer, Preset::Btl)
                .ok()
                .and_then(|o| o.success)
            {
                counted += 1;
                right += usize::from(success);
            }
        }
        Ok(Some(HeldOut {
            loss: loss / tokens.max(1) as f64,
            accuracy: right as f64 / counted.max(1) as f64,
        }))
    }

    /// One optimizer step of the run's objective.
    pub fn step(&mut self) -> Result<StepMetrics> {
        match self.config.run.objective {
            TrainObjective::Grpo if self.config.online.is_some() => self.online_step(),
            TrainObjective::Grpo => self.grpo_step(),
            TrainObjective::Sft => self.sft_step(),
            TrainObjective::Induction => self.induction_step(),
        }
    }

    /// What every kind of step starts with: torch's generator held and
    /// seeded for this step (so draws do not interleave with another
    /// trainer's and a resumed run draws the same), cleared gradients, and
    /// the step's learning rate on the warmup-cosine schedule.
    fn begin_step(&mut self) -> (MutexGuard<'static, ()>, f64) {
        let cfg = &self.config;
        let step = self.done;
        let generator = generator();
        tch::manual_seed(derive_seed(cfg.run.seed, 2, step) as i64);
        let lr = cfg.optim.lr
            * cosine_with_warmup(step as i64, cfg.run.steps as i64, cfg.warmup_steps());
        self.optimizer.zero_grad();
        (generator, lr)
    }

    /// One supervised step: the masked cross-entropy of `samples_per_step`
    /// samples' canonical answers ([`crate::sft`]), averaged over all their
    /// answer tokens, the gradients accumulated sample by sample, or micro-
    /// batch by micro-batch (`sft.micro_batch`) with the prompts' common text
    /// prefix evaluated once per micro-batch. Logged
    /// with the GRPO fields that have no meaning here at 0;
    /// `completion_tokens_mean` is the answers' mean length.
    fn sft_step(&mut self) -> Result<StepMetrics> {
        let started = Instant::now();
        let cfg = self.config.clone();
        let per_step = cfg.sft.samples_per_step;
        let step = self.done;
        let (_generator, lr) = self.begin_step();
        let weight = cfg.induction.sft_weight;
        let copy_accuracy = if weight > 0.0 {
            Some(self.copy_term(step, weight)?.accuracy)
        } else {
            None
        };
        let im_end = self.tokenizer.stop_ids()[0];
        // The answers first: the step's mean is over every answer token.
        let mut answers = Vec::with_capacity(per_step);
        for position in self.step_positions(step) {
            let sample = &self.items[position].sample;
            let max_pixels = cfg.data.max_pixels.unwrap_or(sample.max_pixels);
            let text = target_answer(sample, max_pixels, cfg.sft.max_regions)?;
            let encoded = self.tokenizer.encode_text_spans(&text)?;
            answers.push(Answer::for_sample(
                sample,
                &text,
                encoded,
                im_end,
                cfg.sft.value_weight,
            ));
        }
        let tokens: usize = answers.iter().map(|a| a.ids.len()).sum();
        let inputs = self.step_inputs(step)?;
        if step + 1 < cfg.last_step() {
            self.prefetch(step + 1);
        }
        let prompts = inputs
            .into_iter()
            .map(|input| self.to_prompt(input))
            .collect::<Result<Vec<_>>>()?;
        let prompt_tokens = prompts.iter().map(|p| p.ids.len()).sum();
        let mut loss_sum = 0.0;
        self.model.set_lora_enabled(true);
        if cfg.sft.micro_batch > 1 {
            for (chunk, prompts) in answers
                .chunks(cfg.sft.micro_batch)
                .zip(prompts.chunks(cfg.sft.micro_batch))
            {
                let batch: Vec<(&Prompt, &Answer)> = prompts.iter().zip(chunk).collect();
                self.model.set_training(true);
                let padded = match cfg.sft.batching {
                    Batching::Auto => self.model.device().is_cuda(),
                    Batching::Padded => true,
                    Batching::SharedPrefix => false,
                };
                let pad = self.tokenizer.pad_id();
                let loss = self.forward(|| match padded {
                    true => padded_batch_loss(&self.model, &batch, tokens, pad),
                    false => shared_prefix_loss(&self.model, &batch, tokens),
                });
                self.model.set_training(false);
                let loss = loss?;
                loss.f_backward()?;
                loss_sum += loss.f_double_value(&[])?;
            }
            return self.finish_sft_step(
                started,
                lr,
                loss_sum,
                tokens,
                prompt_tokens,
                copy_accuracy,
            );
        }
        for (answer, prompt) in answers.iter().zip(&prompts) {
            self.model.set_training(true);
            let out = self.forward(|| {
                answer_loss(
                    &self.model,
                    prompt,
                    std::slice::from_ref(&answer.ids),
                    self.tokenizer.pad_id(),
                )
            });
            self.model.set_training(false);
            let share = weighted_nll(&out?.token_log_probs, answer.weights.as_deref(), tokens)?;
            share.f_backward()?;
            loss_sum += share.f_double_value(&[])?;
        }
        self.finish_sft_step(started, lr, loss_sum, tokens, prompt_tokens, copy_accuracy)
    }

    /// One step of the copying warm-up ([`crate::induction`]):
    /// `induction.sequences_per_step` new random strings and their copies,
    /// the mean cross-entropy over the copied tokens, one optimizer step.
    /// `copy_accuracy` is measured before the update, on strings the model
    /// has never seen.
    fn induction_step(&mut self) -> Result<StepMetrics> {
        let started = Instant::now();
        let cfg = self.config.clone();
        let step = self.done;
        let (_generator, lr) = self.begin_step();
        let CopyTerm {
            accuracy,
            loss,
            batch,
        } = self.copy_term(step, 1.0)?;
        let grad_norm = self.optimizer.clip_grad_norm(cfg.optim.max_grad_norm)?;
        self.optimizer.step(lr)?;
        self.done += 1;
        let sequences = batch.ids.len();
        Ok(StepMetrics {
            step: self.done,
            lr,
            loss,
            grad_norm,
            groups: sequences,
            completion_tokens_mean: batch.learned() as f64 / sequences as f64,
            prompt_tokens: Some(batch.ids.iter().map(Vec::len).sum()),
            seconds: started.elapsed().as_secs_f64(),
            copy_accuracy: Some(accuracy),
            ..StepMetrics::default()
        })
    }

    /// Backpropagates `weight` times the copy loss of step `step`'s
    /// warm-up strings.
    fn copy_term(&self, step: u64, weight: f64) -> Result<CopyTerm> {
        let cfg = &self.config;
        let tokens = self.copy_tokens.ok_or_else(|| {
            Error::Input("the run learns no warm-up strings (see induction.sft_weight)".to_owned())
        })?;
        let batch = copy_batch(
            &tokens,
            &cfg.induction,
            derive_seed(cfg.run.seed, INDUCTION_STREAM, step),
        );
        self.model.set_lora_enabled(true);
        self.model.set_training(true);
        let out = self.forward(|| copy_loss(&self.model, &batch));
        self.model.set_training(false);
        let out = out?;
        out.loss.f_mul_scalar(weight)?.f_backward()?;
        let loss = out.loss.f_double_value(&[])?;
        Ok(CopyTerm {
            accuracy: out.right as f64 / out.targets.max(1) as f64,
            loss,
            batch,
        })
    }

    /// The optimizer step that ends a supervised step, and its metrics.
    fn finish_sft_step(
        &mut self,
        started: Instant,
        lr: f64,
        loss_sum: f64,
        tokens: usize,
        prompt_tokens: usize,
        copy_accuracy: Option<f64>,
    ) -> Result<StepMetrics> {
        let cfg = &self.config;
        let per_step = cfg.sft.samples_per_step;
        let grad_norm = self.optimizer.clip_grad_norm(cfg.optim.max_grad_norm)?;
        self.optimizer.step(lr)?;
        self.done += 1;
        Ok(StepMetrics {
            step: self.done,
            lr,
            loss: loss_sum,
            grad_norm,
            groups: per_step,
            completion_tokens_mean: tokens as f64 / per_step as f64,
            prompt_tokens: Some(prompt_tokens),
            seconds: started.elapsed().as_secs_f64(),
            copy_accuracy,
            ..StepMetrics::default()
        })
    }

    /// Backpropagates one group's GRPO objective (its rewards turned into
    /// advantages), in micro-batches, each sequence's loss divided by
    /// `total_sequences` (the step's). Returns the loss added and the
    /// group's mean KL and clip fraction.
    fn train_group(
        &self,
        prompt: &Prompt,
        completions: &[Vec<i64>],
        rewards: &[f64],
        total_sequences: f64,
    ) -> Result<GroupTerms> {
        let g = &self.config.grpo;
        let constants = Objective {
            beta: g.beta,
            epsilon: g.epsilon,
        };
        let micro = if g.micro_batch == 0 {
            completions.len()
        } else {
            g.micro_batch
        };
        let advantages = group_advantages(rewards)
            .ok_or_else(|| Error::Input("a group needs at least two completions".to_owned()))?;
        let (ids, mask) = pad_completions(completions, self.tokenizer.pad_id());
        let mut out = GroupTerms::default();
        for start in (0..ids.len()).step_by(micro) {
            let end = (start + micro).min(ids.len());
            let rows = &ids[start..end];
            let reference = if g.beta > 0.0 {
                Some(self.forward(|| {
                    tch::no_grad(|| match &self.reference {
                        Some(reference) => {
                            completion_log_probs(reference, prompt, rows, g.temperature)
                        }
                        None => {
                            self.model.set_lora_enabled(false);
                            let out =
                                completion_log_probs(&self.model, prompt, rows, g.temperature);
                            self.model.set_lora_enabled(true);
                            out
                        }
                    })
                })?)
            } else {
                None
            };
            self.model.set_training(true);
            let logp =
                self.forward(|| completion_log_probs(&self.model, prompt, rows, g.temperature));
            self.model.set_training(false);
            let logp = logp?;
            let old = logp.f_detach()?;
            let device = self.model.device();
            let mask_t = Tensor::f_from_slice(&mask[start..end].concat())?
                .f_reshape([(end - start) as i64, -1])?
                .f_to_device(device)?;
            let adv = Tensor::f_from_slice(&advantages[start..end])?.f_to_device(device)?;
            let terms = objective(&logp, &old, reference.as_ref(), &adv, &mask_t, constants)?;
            let loss = terms
                .per_sequence
                .f_sum(Kind::Double)?
                .f_div_scalar(total_sequences)?;
            loss.f_backward()?;
            out.loss += loss.f_double_value(&[])?;
            let share = (end - start) as f64 / ids.len() as f64;
            out.kl += terms.mean_kl * share;
            out.clip_fraction += terms.clip_fraction * share;
        }
        Ok(out)
    }

    /// One online GRPO step ([`super::online`]): `online.phones` episodes
    /// of the current policy, a group of G completions sampled and scored
    /// at every state they reach; then, in the order of (episode, state),
    /// each group's objective is backpropagated and one optimizer step
    /// taken. The loss is the offline step's.
    fn online_step(&mut self) -> Result<StepMetrics> {
        let started = Instant::now();
        let cfg = self.config.clone();
        let online = cfg
            .online
            .as_ref()
            .ok_or_else(|| Error::Input("config: the run has no [online] section".to_owned()))?;
        let g = &cfg.grpo;
        let step = self.done;
        let (_generator, lr) = self.begin_step();
        let plans = online::episodes(online, &self.online_tasks, step)?;
        let (dir, _temp) = online::rollout_dir(&cfg.run.output_dir, step, online.keep_rollouts)?;
        let settings = online::EpisodeSettings {
            profile: online.profile,
            max_pixels: cfg.data.max_pixels.unwrap_or(TRAINING_MAX_PIXELS),
            max_steps: online.max_steps,
            dir,
        };
        let stop = self.tokenizer.stop_ids();
        let sampling = g.sampling();
        let step_seed = derive_seed(cfg.run.seed, 7, step);
        let mut groups = Vec::new();
        self.model.set_lora_enabled(true);
        self.model.set_training(false);
        let episodes = online::run_episodes(plans, &settings, |request| {
            let rgb = image::DynamicImage::ImageRgba8(request.screenshot.clone()).to_rgb8();
            let prompt = self
                .image_prompt(&request.target.messages, &rgb, request.max_pixels)
                .map_err(|e| {
                    let at = request.target.id.as_deref().unwrap_or("a state");
                    Error::Input(format!("online step {}, {at}: {e}", step + 1))
                })?;
            // Keyed by the episode's slot and the observation's seed, not by
            // arrival (the phones' threads ask in any order); the slot tells
            // apart episodes of different templates on the same instance.
            let mut rng = ChaCha8Rng::seed_from_u64(derive_seed(
                step_seed,
                request.seed,
                request.slot as u64,
            ));
            let completions = self.forward(|| {
                sample_group(
                    &self.model,
                    &prompt,
                    g.num_generations,
                    g.max_completion_length,
                    &sampling,
                    &stop,
                    &mut rng,
                )
            })?;
            let mut scores = Vec::with_capacity(completions.len());
            let mut texts = Vec::with_capacity(completions.len());
            for c in &completions {
                let text = self.tokenizer.decode(c)?;
                scores.push(online::score(
                    self.reward.as_ref(),
                    &request,
                    &text,
                    online.outcome_weight,
                ));
                texts.push(text);
            }
            let totals: Vec<f64> = scores.iter().map(|s| s.total).collect();
            let pick = online.continue_with.pick(&totals);
            groups.push(((request.slot, request.index), prompt, completions, scores));
            Ok(online::Answer {
                completion: texts.swap_remove(pick),
                reward: totals[pick],
            })
        })?;
        groups.sort_by_key(|group| group.0);
        let total_sequences = (groups.len() * g.num_generations).max(1) as f64;
        let mut tally = Tally::default();
        let mut outcome = 0.0;
        for (_, prompt, completions, scores) in &groups {
            let rewards: Vec<f64> = scores.iter().map(|s| s.total).collect();
            for (c, s) in completions.iter().zip(scores) {
                tally.scored(c.len(), &s.process, s.total);
                outcome += s.outcome;
            }
            self.train_unless_flat(prompt, completions, &rewards, total_sequences, &mut tally)?;
        }
        let n = tally.rewards.len().max(1) as f64;
        let mut metrics = self.finish_grpo_step(started, lr, tally)?;
        metrics.episodes = Some(episodes.len());
        metrics.episodes_done = Some(
            episodes
                .iter()
                .filter(|e| e.outcome.success == Some(true))
                .count(),
        );
        metrics.outcome = Some(outcome / n);
        Ok(metrics)
    }

    /// One GRPO step.
    fn grpo_step(&mut self) -> Result<StepMetrics> {
        let started = Instant::now();
        let cfg = self.config.clone();
        let g = &cfg.grpo;
        let step = self.done;
        let (_generator, lr) = self.begin_step();
        let total_sequences = (g.prompts_per_step * g.num_generations) as f64;
        let mut tally = Tally::default();
        for slot in 0..g.prompts_per_step {
            let index = step * g.prompts_per_step as u64 + slot as u64;
            let item = self.item_at(index);
            let prompt = self.prompt(item)?;
            // Answers are written in the frame the image is resized to.
            let max_pixels = cfg.data.max_pixels.unwrap_or(item.sample.max_pixels);
            let sample = in_frame(&item.sample, max_pixels)?;
            self.model.set_lora_enabled(true);
            self.model.set_training(false);
            let mut rng =
                ChaCha8Rng::seed_from_u64(derive_seed(cfg.run.seed, 3 + slot as u64, step));
            let stop = self.tokenizer.stop_ids();
            let completions = self.forward(|| {
                sample_group(
                    &self.model,
                    &prompt,
                    g.num_generations,
                    g.max_completion_length,
                    &g.sampling(),
                    &stop,
                    &mut rng,
                )
            })?;
            let mut rewards = Vec::with_capacity(completions.len());
            for c in &completions {
                let text = self.tokenizer.decode(c)?;
                let r = self.reward.score(&sample, &text);
                tally.scored(c.len(), &r, r.total);
                rewards.push(r.total);
            }
            self.train_unless_flat(&prompt, &completions, &rewards, total_sequences, &mut tally)?;
        }
        self.finish_grpo_step(started, lr, tally)
    }

    /// Backpropagates a group ([`Self::train_group`]) unless its rewards are
    /// all equal and flat groups are skipped (`grpo.skip_flat_groups`, or
    /// β = 0, where nothing would be learned); counts it either way.
    fn train_unless_flat(
        &self,
        prompt: &Prompt,
        completions: &[Vec<i64>],
        rewards: &[f64],
        total_sequences: f64,
        tally: &mut Tally,
    ) -> Result<()> {
        tally.groups += 1;
        let g = &self.config.grpo;
        if is_flat(rewards) {
            tally.flat += 1;
            if g.skip_flat_groups || g.beta == 0.0 {
                return Ok(());
            }
        }
        let terms = self.train_group(prompt, completions, rewards, total_sequences)?;
        tally.loss += terms.loss;
        tally.kl += terms.kl;
        tally.clip_fraction += terms.clip_fraction;
        tally.trained += 1;
        Ok(())
    }

    /// The optimizer step that ends a GRPO step (none when no group
    /// trained), and the step's metrics.
    fn finish_grpo_step(&mut self, started: Instant, lr: f64, tally: Tally) -> Result<StepMetrics> {
        let mut grad_norm = 0.0;
        if tally.trained > 0 {
            grad_norm = self
                .optimizer
                .clip_grad_norm(self.config.optim.max_grad_norm)?;
            self.optimizer.step(lr)?;
        }
        self.done += 1;
        let n = tally.rewards.len().max(1) as f64;
        let mean = tally.rewards.iter().sum::<f64>() / n;
        let std = (tally
            .rewards
            .iter()
            .map(|r| (r - mean).powi(2))
            .sum::<f64>()
            / n)
            .sqrt();
        let per_group = |x: f64| {
            if tally.trained > 0 {
                x / tally.trained as f64
            } else {
                0.0
            }
        };
        Ok(StepMetrics {
            step: self.done,
            lr,
            loss: tally.loss,
            reward_mean: mean,
            reward_std: std,
            format: tally.parts[0] / n,
            blink: tally.parts[1] / n,
            link: tally.parts[2] / n,
            kl: per_group(tally.kl),
            clip_fraction: per_group(tally.clip_fraction),
            grad_norm,
            groups: tally.groups,
            flat_groups: tally.flat,
            completion_tokens_mean: tally.completion_tokens as f64 / n,
            seconds: started.elapsed().as_secs_f64(),
            ..StepMetrics::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device the machine lacks is named with what it has, before any
    /// tensor goes to it; a name that is no device is refused as such.
    #[test]
    fn devices_are_read_and_a_missing_one_is_refused() {
        assert_eq!(parse_device(Some("cpu")).unwrap(), Device::Cpu);
        let e = parse_device(Some("gpu")).unwrap_err().to_string();
        assert!(e.contains("'gpu' is not cpu, cuda or cuda:N"), "{e}");
        let count = tch::Cuda::device_count().max(0) as usize;
        let missing = format!("cuda:{count}");
        let e = parse_device(Some(&missing)).unwrap_err().to_string();
        assert!(e.contains(&format!("model.device: {missing}, but ")), "{e}");
        if count > 0 {
            assert_eq!(parse_device(Some("cuda")).unwrap(), Device::Cuda(0));
        }
    }

    /// A screenshot of another size than its sample gives is refused, as
    /// `btl predict` and the ms-swift export refuse it: the answer's
    /// coordinates are in the sample's frame.
    #[test]
    fn a_screenshot_of_another_size_than_its_sample_s_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.png");
        image::RgbImage::new(4, 3).save(&path).unwrap();
        assert_eq!(
            read_sample_image(&path, Some(&[4, 3]))
                .unwrap()
                .dimensions(),
            (4, 3)
        );
        assert_eq!(read_sample_image(&path, None).unwrap().dimensions(), (4, 3));
        assert_eq!(
            read_sample_image(&path, Some(&[3, 4])).unwrap_err(),
            "it is 4×3 but the sample says 3×4: its coordinates would not match"
        );
        std::fs::write(&path, b"not a png").unwrap();
        let e = read_sample_image(&path, None).unwrap_err();
        assert!(e.starts_with("cannot read the image: "), "{e}");
    }
}
