//! Checkpoints: everything a run needs to continue exactly where it was.
//!
//! `checkpoint-NNNNNN/` (NNNNNN = steps done) holds:
//! - the trained weights: the adapter in PEFT's layout (`adapter/` with
//!   `adapter_config.json` and `adapter_model.safetensors`, loadable by PEFT
//!   and ms-swift), or in
//!   full mode `model.safetensors` with the trainable weights by checkpoint name;
//! - `optimizer.safetensors`: AdamW's moments;
//! - `trainer_state.json`: steps done, optimizer steps and the configuration.
//!
//! The data position and every random stream derive from the seed and the
//! step count (see the trainer), so nothing else is needed for a bit-exact
//! continuation. A checkpoint directory appears under its final name only
//! once complete and synced; a crash mid-save leaves the previous ones intact.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tch::Tensor;

use super::config::{TrainConfig, TrainMode};
use super::trainer::{InputDigest, Trainer};
use crate::error::{Error, Result};
use crate::peft::{LoraWeights, PeftAdapter, PeftConfig};

const STATE_FILE: &str = "trainer_state.json";
/// The adapter, a PEFT directory of its own (`PeftModel.from_pretrained` takes it).
pub const ADAPTER_DIR: &str = "adapter";
const OPTIMIZER_FILE: &str = "optimizer.safetensors";
const FULL_WEIGHTS_FILE: &str = "model.safetensors";
const PREFIX: &str = "checkpoint-";
const FORMAT: &str = "btl-train-checkpoint/1";

/// `trainer_state.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct State {
    format: String,
    steps_done: u64,
    optimizer_steps: i64,
    config: TrainConfig,
    /// The sample and held-out files the run read (none recorded by runs
    /// from before this was).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    inputs: Vec<InputDigest>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_owned(),
        source,
    }
}

fn corrupt(path: &Path, message: String) -> Error {
    Error::Checkpoint {
        path: path.to_owned(),
        message,
    }
}

/// The directory name of the checkpoint after `steps` steps.
pub fn checkpoint_name(steps: u64) -> String {
    format!("{PREFIX}{steps:06}")
}

/// The checkpoint with the most steps in `output_dir`, if any.
pub fn latest(output_dir: &Path) -> Result<Option<PathBuf>> {
    if !output_dir.exists() {
        return Ok(None);
    }
    let mut best: Option<(u64, PathBuf)> = None;
    for entry in std::fs::read_dir(output_dir).map_err(io(output_dir))? {
        let path = entry.map_err(io(output_dir))?.path();
        if let Some(steps) = steps_in_name(&path)
            && path.join(STATE_FILE).is_file()
            && best.as_ref().is_none_or(|(b, _)| steps > *b)
        {
            best = Some((steps, path));
        }
    }
    Ok(best.map(|(_, p)| p))
}

/// The adapter of a LoRA run in PEFT's form.
pub fn adapter_of(trainer: &Trainer) -> Result<PeftAdapter> {
    adapter_of_model(trainer.model())
}

fn adapter_of_model(model: &crate::Qwen25Vl) -> Result<PeftAdapter> {
    let lora = model
        .lora()
        .ok_or_else(|| Error::Input("this run has no adapters".to_owned()))?;
    let c = lora.config();
    Ok(PeftAdapter {
        config: PeftConfig::new(c.r, c.alpha, c.dropout, c.target_modules.clone()),
        modules: lora
            .modules()
            .iter()
            .map(|(module, a, b)| LoraWeights {
                module: module.clone(),
                a: a.detach(),
                b: b.detach(),
            })
            .collect(),
    })
}

/// A model's adapters as PEFT module weights, and llama.cpp's alpha for them.
pub fn adapter_weights(model: &crate::Qwen25Vl) -> Result<(Vec<LoraWeights>, f64)> {
    let adapter = adapter_of_model(model)?;
    let alpha = adapter.config.llama_cpp_alpha();
    Ok((adapter.modules, alpha))
}

/// Saves the run's state under `output_dir/checkpoint-NNNNNN`; returns its path.
pub fn save(trainer: &Trainer) -> Result<PathBuf> {
    let config = trainer.config();
    let output_dir = &config.run.output_dir;
    std::fs::create_dir_all(output_dir).map_err(io(output_dir))?;
    let dir = output_dir.join(checkpoint_name(trainer.steps_done()));
    crate::atomic::write_dir(&dir, |staging| {
        match config.model.mode {
            TrainMode::Lora => adapter_of(trainer)?.write(&staging.join(ADAPTER_DIR))?,
            TrainMode::Full => {
                let weights = trainer.trainable_weights();
                write_tensors(&staging.join(FULL_WEIGHTS_FILE), &weights)?;
            }
        }
        write_tensors(&staging.join(OPTIMIZER_FILE), &trainer.optimizer_state())?;
        let state = State {
            format: FORMAT.to_owned(),
            steps_done: trainer.steps_done(),
            optimizer_steps: trainer.optimizer_steps(),
            config: config.clone(),
            inputs: trainer.inputs().to_vec(),
        };
        let text = serde_json::to_string_pretty(&state)
            .map_err(|e| Error::Input(format!("serializing the trainer state: {e}")))?;
        let path = staging.join(STATE_FILE);
        std::fs::write(&path, text).map_err(io(&path))
    })?;
    Ok(dir)
}

fn write_tensors(path: &Path, tensors: &[(String, Tensor)]) -> Result<()> {
    let cpu: Vec<(String, Tensor)> = tensors
        .iter()
        .map(|(n, t)| Ok((n.clone(), t.f_to_device(tch::Device::Cpu)?.f_contiguous()?)))
        .collect::<Result<_>>()?;
    Tensor::write_safetensors(&cpu, path).map_err(|e| corrupt(path, e.to_string()))
}

fn read_tensors(path: &Path) -> Result<HashMap<String, Tensor>> {
    Ok(Tensor::read_safetensors(path)
        .map_err(|e| corrupt(path, format!("unreadable: {e}")))?
        .into_iter()
        .collect())
}

/// Where [`resume`] continued from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resumed {
    /// The checkpoint directory.
    pub dir: PathBuf,
    pub steps_done: u64,
    /// `run.steps` as the checkpoint's run had it; the learning-rate
    /// schedule runs over the new `run.steps` from here when they differ.
    pub saved_steps: u64,
}

/// Continues the run saved in `dir` (a checkpoint directory, or an output
/// directory whose latest checkpoint is taken). `config` must describe the
/// same run; only `run.steps` may change (the schedule then differs from an
/// uninterrupted run of the new length, which [`Resumed::saved_steps`]
/// lets the caller say) and `run.stop_at`. A checkpoint older than the
/// output directory's latest is refused: training from it would cut the
/// metrics log back and leave the later checkpoints for the next resume to
/// pick up.
pub fn resume(dir: &Path, config: TrainConfig, trainer: &mut Trainer) -> Result<Resumed> {
    let named = dir.join(STATE_FILE).is_file();
    let dir = if named {
        dir.to_owned()
    } else {
        latest(dir)?.ok_or_else(|| {
            corrupt(
                dir,
                "no checkpoint-NNNNNN directory with a trainer_state.json".into(),
            )
        })?
    };
    let state_path = dir.join(STATE_FILE);
    let text = std::fs::read_to_string(&state_path).map_err(io(&state_path))?;
    let state: State = serde_json::from_str(&text)
        .map_err(|e| corrupt(&state_path, format!("not a trainer state: {e}")))?;
    if state.format != FORMAT {
        return Err(corrupt(
            &state_path,
            format!("format {} (expected {FORMAT})", state.format),
        ));
    }
    if named
        && let Some(last) = latest(&config.run.output_dir)?
        && steps_in_name(&last).is_some_and(|steps| steps > state.steps_done)
    {
        return Err(corrupt(
            &dir,
            format!(
                "{} holds a later checkpoint ({}): resuming from this one would drop the log \
                 of the steps after it and leave the later checkpoints for the next --resume \
                 to continue; move the later checkpoints out of the output directory first, \
                 or resume from the directory",
                config.run.output_dir.display(),
                last.display()
            ),
        ));
    }
    let mut saved = state.config.clone();
    // Runs before paths were stored absolute kept them as given, relative
    // to the directory they started in, and resume from there.
    saved.resolve_paths(&std::path::absolute(".").map_err(io(Path::new(".")))?);
    same_files(&mut saved, &config);
    saved.run.steps = config.run.steps;
    saved.run.stop_at = config.run.stop_at;
    if saved != config {
        return Err(corrupt(
            &state_path,
            format!(
                "the checkpoint was made with another configuration ({}; only run.steps and \
                 run.stop_at may change on resume)",
                config_differences(&saved, &config).join(", ")
            ),
        ));
    }
    // Paths may differ (a moved directory); the bytes may not.
    for (then, now) in state.inputs.iter().zip(trainer.inputs()) {
        if (then.bytes, &then.fnv1a) != (now.bytes, &now.fnv1a) {
            return Err(corrupt(
                &state_path,
                format!(
                    "{} is not the file the run read ({} bytes, FNV-1a {} then; {} bytes, {} \
                     now): resumed, it would go on with other data; put the run's file back, \
                     or start a new run",
                    now.path.display(),
                    then.bytes,
                    then.fnv1a,
                    now.bytes,
                    now.fnv1a
                ),
            ));
        }
    }
    if state.steps_done > config.run.steps {
        return Err(corrupt(
            &state_path,
            format!(
                "the checkpoint is at step {}, past run.steps = {}",
                state.steps_done, config.run.steps
            ),
        ));
    }
    if let Some(stop) = config.run.stop_at
        && state.steps_done > stop
    {
        return Err(corrupt(
            &state_path,
            format!(
                "the checkpoint is at step {}, past run.stop_at = {stop}: nothing would train",
                state.steps_done
            ),
        ));
    }
    match config.model.mode {
        TrainMode::Lora => load_adapter(trainer.model(), &dir)?,
        TrainMode::Full => {
            let path = dir.join(FULL_WEIGHTS_FILE);
            trainer
                .load_trainable_weights(&read_tensors(&path)?)
                .map_err(|e| corrupt(&path, e.to_string()))?;
        }
    }
    let path = dir.join(OPTIMIZER_FILE);
    trainer
        .load_optimizer_state(&read_tensors(&path)?, state.optimizer_steps)
        .map_err(|e| corrupt(&path, e.to_string()))?;
    trainer.set_steps_done(state.steps_done);
    Ok(Resumed {
        dir,
        steps_done: state.steps_done,
        saved_steps: state.config.run.steps,
    })
}

/// The steps in a checkpoint directory's name (`checkpoint-NNNNNN`).
fn steps_in_name(dir: &Path) -> Option<u64> {
    dir.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix(PREFIX))
        .and_then(|n| n.parse().ok())
}

/// Takes `now`'s spelling of each path of `saved` that names the same file
/// (through a link, or with `..`), or whose file is gone: a run whose
/// directory was moved or renamed resumes from where it is now.
fn same_files(saved: &mut TrainConfig, now: &TrainConfig) {
    let same = |saved: &mut PathBuf, now: &Path| {
        let resolved = crate::atomic::resolved(saved);
        if !saved.exists() || (resolved.is_some() && resolved == crate::atomic::resolved(now)) {
            *saved = now.to_owned();
        }
    };
    same(&mut saved.model.checkpoint, &now.model.checkpoint);
    if let (Some(saved), Some(now)) = (&mut saved.model.tokenizer, &now.model.tokenizer) {
        same(saved, now);
    }
    for (saved, now) in [
        (&mut saved.data.samples, &now.data.samples),
        (&mut saved.data.heldout, &now.data.heldout),
    ] {
        if saved.len() == now.len() {
            saved.iter_mut().zip(now).for_each(|(s, n)| same(s, n));
        }
    }
    same(&mut saved.run.output_dir, &now.run.output_dir);
}

/// Each key whose value differs, as `section.key is X in the checkpoint, Y
/// now`, in sorted order.
fn config_differences(saved: &TrainConfig, now: &TrainConfig) -> Vec<String> {
    match (serde_json::to_value(saved), serde_json::to_value(now)) {
        (Ok(a), Ok(b)) => agent_core::json_diff::differing_leaves("", &a, &b)
            .into_iter()
            .map(|(path, a, b)| format!("{path} is {a} in the checkpoint, {b} now"))
            .collect(),
        _ => vec!["it cannot be compared key by key".to_owned()],
    }
}

/// Copies the checkpoint's PEFT adapter into `model`'s adapters.
fn load_adapter(model: &crate::Qwen25Vl, dir: &Path) -> Result<()> {
    let adapter = PeftAdapter::read(&dir.join(ADAPTER_DIR))?;
    let lora = model
        .lora()
        .ok_or_else(|| Error::Input("the model was built without adapters".to_owned()))?;
    let weights: Vec<(String, Tensor, Tensor)> = adapter
        .modules
        .into_iter()
        .map(|m| (m.module, m.a, m.b))
        .collect();
    lora.load(&weights).map_err(|e| corrupt(dir, e.to_string()))
}

/// The configuration of the run that saved the checkpoint in `dir`.
pub fn trained_config(dir: &Path) -> Result<TrainConfig> {
    let state_path = dir.join(STATE_FILE);
    let text = std::fs::read_to_string(&state_path).map_err(io(&state_path))?;
    let state: State = serde_json::from_str(&text)
        .map_err(|e| corrupt(&state_path, format!("not a trainer state: {e}")))?;
    Ok(state.config)
}

/// The model the checkpoint in `dir` holds, saved by a run of `config`
/// ([`trained_config`]): its base checkpoint with the trained adapter or
/// weights loaded, float32 on the CPU.
pub fn load_trained(dir: &Path, config: &TrainConfig) -> Result<crate::Qwen25Vl> {
    let base = &config.model.checkpoint;
    let (device, kind) = (tch::Device::Cpu, tch::Kind::Float);
    let model = match config.model.mode {
        TrainMode::Lora => {
            let model = crate::Qwen25Vl::from_checkpoint_with_lora(
                base,
                device,
                kind,
                // The initial values are replaced by the checkpoint's.
                Some(crate::lora::LoraInit {
                    config: &config.lora,
                    seed: 0,
                }),
            )?;
            load_adapter(&model, dir)?;
            model
        }
        TrainMode::Full => {
            let model = crate::Qwen25Vl::from_checkpoint(base, device, kind)?;
            let path = dir.join(FULL_WEIGHTS_FILE);
            let saved = read_tensors(&path)?;
            let vars = model.vars().variables();
            tch::no_grad(|| -> Result<()> {
                for (name, value) in &saved {
                    let var = vars.get(name).ok_or_else(|| {
                        corrupt(&path, format!("weight {name} is not in the model"))
                    })?;
                    var.shallow_clone().f_copy_(value)?;
                }
                Ok(())
            })?;
            model
        }
    };
    Ok(model)
}
