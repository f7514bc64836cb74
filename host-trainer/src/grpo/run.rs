//! A whole run: steps until `run.steps`, a metrics line per step, a
//! checkpoint and a fresh plot every `save_every` steps and at the end.

use std::path::{Path, PathBuf};

use super::checkpoint;
use super::config::TrainConfig;
use super::log::{MetricsLog, plot, read_metrics};
use super::trainer::{Reward, StepMetrics, Trainer};
use crate::error::{Error, Result};

pub const METRICS_FILE: &str = "metrics.jsonl";
pub const PLOT_FILE: &str = "curves.png";

/// Where a finished run left its results.
#[derive(Debug)]
pub struct Outcome {
    pub steps_done: u64,
    /// Optimizer updates over the whole run, resumed part included (GRPO
    /// skips the update of a step whose groups were all flat).
    pub optimizer_steps: i64,
    /// The step the run started from (0, or the resumed checkpoint's).
    pub resumed_at: u64,
    pub last_checkpoint: Option<PathBuf>,
    pub metrics: PathBuf,
    pub plot: PathBuf,
}

/// Trains from scratch, or from the checkpoint `resume` names (a checkpoint
/// or an output directory), calling `on_step` after every step.
pub fn run(
    config: TrainConfig,
    reward: Box<dyn Reward>,
    resume: Option<&Path>,
    mut on_step: impl FnMut(&StepMetrics),
) -> Result<Outcome> {
    let mut trainer = Trainer::new(config.clone(), reward)?;
    if let Some(dir) = resume {
        checkpoint::resume(dir, config.clone(), &mut trainer)?;
    }
    let out = &config.run.output_dir;
    std::fs::create_dir_all(out).map_err(|source| Error::Io {
        path: out.clone(),
        source,
    })?;
    let resumed_at = trainer.steps_done();
    let mut log = MetricsLog::open(&out.join(METRICS_FILE), resumed_at)?;
    let plot_path = out.join(PLOT_FILE);
    let mut last_checkpoint = None;
    while trainer.steps_done() < config.run.steps {
        let mut metrics = trainer.step()?;
        let done = trainer.steps_done();
        let every = config.run.save_every;
        let save = done == config.run.steps || (every > 0 && done % every == 0);
        if save && let Some(heldout) = trainer.evaluate()? {
            metrics.heldout_loss = Some(heldout.loss);
            metrics.heldout_accuracy = Some(heldout.accuracy);
        }
        log.append(&metrics)?;
        on_step(&metrics);
        if save {
            last_checkpoint = Some(checkpoint::save(&trainer)?);
            plot(&read_metrics(log.path())?, config.run.objective, &plot_path)?;
        }
    }
    Ok(Outcome {
        steps_done: trainer.steps_done(),
        optimizer_steps: trainer.optimizer_steps(),
        resumed_at,
        last_checkpoint,
        metrics: log.path().to_owned(),
        plot: plot_path,
    })
}
