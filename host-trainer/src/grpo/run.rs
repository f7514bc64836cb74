//! A whole run: steps until `run.steps` (or `run.stop_at`), a metrics line
//! per step, a checkpoint and a fresh plot every `save_every` steps and at
//! the end.

use std::path::{Path, PathBuf};

use super::checkpoint;
use super::config::TrainConfig;
use super::log::{MetricsLog, plot, read_metrics};
use super::trainer::{Reward, StepMetrics, Trainer};
use crate::error::{Error, Result};
use crate::profile;

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
    /// The summary of the profiled steps (`run.profile_steps`), if they ran.
    pub profile: Option<PathBuf>,
    /// Where the log of an earlier run in the same directory, stopped
    /// before its first checkpoint, was moved.
    pub earlier_log: Option<PathBuf>,
}

/// What [`run`] tells its caller as it goes.
#[derive(Debug)]
pub enum Progress<'a> {
    /// Before the first step of a fresh start: the log of an earlier run
    /// in the same directory, stopped before its first checkpoint, was
    /// moved here. Said before training, which may take hours or fail.
    KeptEarlierLog(&'a Path),
    /// Before the first step of a resumed run: where it goes on from.
    Resumed(&'a checkpoint::Resumed),
    /// After every step.
    Step(&'a StepMetrics),
}

/// The lock file a run holds in its output directory while it trains.
pub const LOCK_FILE: &str = ".btl-train.lock";

/// Trains from scratch, or from the checkpoint `resume` names (a checkpoint
/// or an output directory), telling `progress` how it goes.
pub fn run(
    config: TrainConfig,
    reward: Box<dyn Reward>,
    resume: Option<&Path>,
    mut progress: impl FnMut(Progress<'_>),
) -> Result<Outcome> {
    let out = &config.run.output_dir;
    let start = |reward| -> Result<_> {
        let mut trainer = Trainer::new(config.clone(), reward)?;
        let resumed = match resume {
            Some(dir) => Some(checkpoint::resume(dir, config.clone(), &mut trainer)?),
            None => None,
        };
        Ok((trainer, resumed))
    };
    // A run refused for its input (a missing sample file, a checkpoint
    // whose files changed) makes no output directory that was not there:
    // where there is none yet, nothing in it can be lost by starting
    // first. An existing one is held first: a checkpoint a killed save
    // left aside is put back before the resume looks for the latest, no
    // other run writes the checkpoint it reads, and a fresh start over
    // checkpoints is refused before the model loads.
    let ((mut trainer, resumed), _lock) = if out.exists() {
        let lock = hold_output_dir(out, resume)?;
        (start(reward)?, lock)
    } else {
        let started = start(reward)?;
        (started, hold_output_dir(out, resume)?)
    };
    if let Some(resumed) = &resumed {
        progress(Progress::Resumed(resumed));
    }
    let resumed_at = trainer.steps_done();
    let earlier_log = match resume {
        None => keep_stopped_log(out)?,
        Some(_) => None,
    };
    if let Some(kept) = &earlier_log {
        progress(Progress::KeptEarlierLog(kept));
    }
    let mut log = MetricsLog::open(&out.join(METRICS_FILE), resumed_at)?;
    let plot_path = out.join(PLOT_FILE);
    let mut last_checkpoint = None;
    let mut profiled = Profiled::default();
    let last = config.last_step();
    while trainer.steps_done() < last {
        let profile_range = config.run.profile_steps;
        // A run resumed inside the window records the rest of it.
        if let Some([first, last]) = profile_range
            && profiled.recording.is_none()
            && (first..=last).contains(&(trainer.steps_done() + 1))
        {
            profiled.recording = Some(profile::start(trainer.device())?);
            profiled.first = trainer.steps_done() + 1;
        }
        let mut metrics = trainer.step()?;
        let done = trainer.steps_done();
        if !(metrics.loss.is_finite() && metrics.grad_norm.is_finite()) {
            return Err(Error::Diverged {
                step: done,
                loss: metrics.loss,
                grad_norm: metrics.grad_norm,
                last_good: last_checkpoint.as_ref().map_or_else(
                    || "the run's last checkpoint, if it saved one".to_string(),
                    |dir: &PathBuf| dir.display().to_string(),
                ),
            });
        }
        if profiled.recording.is_some() {
            profiled.steps += 1;
            profiled.seconds += metrics.seconds;
        }
        if let Some([_, last]) = profile_range
            && done == last
            && let Some(recording) = profiled.recording.take()
        {
            profiled.summary = Some(profiled.write(recording, out)?);
        }
        let every = config.run.save_every;
        let save = done == last || (every > 0 && done % every == 0);
        if save && let Some(heldout) = trainer.evaluate()? {
            metrics.heldout_loss = Some(heldout.loss);
            metrics.heldout_accuracy = Some(heldout.accuracy);
        }
        log.append(&metrics)?;
        progress(Progress::Step(&metrics));
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
        profile: profiled.summary,
        earlier_log,
    })
}

/// Makes `out` if need be and holds it ([`lock_output_dir`]), its
/// interrupted checkpoint saves mended, and refuses a run that is not
/// `resume`d over a run's checkpoints.
fn hold_output_dir(out: &Path, resume: Option<&Path>) -> Result<std::fs::File> {
    std::fs::create_dir_all(out).map_err(|source| Error::Io {
        path: out.to_owned(),
        source,
    })?;
    let lock = lock_output_dir(out)?;
    // A checkpoint a killed save left aside is put back before the latest
    // one is looked for.
    crate::atomic::sweep(out);
    // Starting afresh over a run's checkpoints would rewrite its metrics
    // log from step 0 and its checkpoints one by one: forgetting --resume
    // after a kill must not cost the run.
    if resume.is_none()
        && let Some(last) = checkpoint::latest(out)?
    {
        return Err(Error::Input(format!(
            "{} holds a run's checkpoints (the last: {}): continue it with --resume, \
             or give a new run.output_dir",
            out.display(),
            last.display()
        )));
    }
    Ok(lock)
}

/// Holds `out` for this run: a second run on the same directory would
/// replace the metrics log this one appends to (its lines after that lost)
/// and write over the same checkpoints. Where the file system cannot lock,
/// runs go on unlocked, as the conversions do.
fn lock_output_dir(out: &Path) -> Result<std::fs::File> {
    let path = out.join(LOCK_FILE);
    let file = std::fs::File::create(&path).map_err(|source| Error::Io {
        path: path.clone(),
        source,
    })?;
    if let Err(std::fs::TryLockError::WouldBlock) = agent_core::atomic::try_lock(&file) {
        return Err(Error::Input(format!(
            "{}: another btl-train run is training into it now (it holds {}); wait for it \
             to end, or give another run.output_dir",
            out.display(),
            path.display()
        )));
    }
    Ok(file)
}

/// Where a run stopped before its first checkpoint left only its log in
/// the output directory `out`, moves that log to the first free
/// `metrics.stopped-N.jsonl` beside it and returns where: a fresh start
/// would empty it. The log is not read, so a damaged one is kept too.
fn keep_stopped_log(out: &Path) -> Result<Option<PathBuf>> {
    let log = out.join(METRICS_FILE);
    let holds_steps = std::fs::metadata(&log).is_ok_and(|m| m.is_file() && m.len() > 0);
    if !holds_steps || checkpoint::latest(out)?.is_some() {
        return Ok(None);
    }
    let free = (1u64..)
        .map(|n| out.join(format!("metrics.stopped-{n}.jsonl")))
        .find(|p| !p.exists())
        .expect("an unbounded range has a free name");
    std::fs::rename(&log, &free).map_err(|source| Error::Io { path: log, source })?;
    Ok(Some(free))
}

/// The profiled stretch of a run ([`profile`]).
#[derive(Default)]
struct Profiled {
    recording: Option<profile::Recording>,
    /// The first step recorded: the window's, or the one a run resumed
    /// inside it started at.
    first: u64,
    steps: u64,
    seconds: f64,
    summary: Option<PathBuf>,
}

impl Profiled {
    /// Writes the recording and its summary; returns the summary's path.
    fn write(&self, recording: profile::Recording, out: &Path) -> Result<PathBuf> {
        let dir = profile::dir_of(out);
        let events = recording.stop(&dir)?;
        let path = dir.join(profile::SUMMARY_FILE);
        let last = self.first + self.steps.saturating_sub(1);
        let text = format!(
            "steps {}–{last} of the run\n{}",
            self.first,
            profile::summary(&events, self.steps, self.seconds, 15)
        );
        crate::atomic::write_file(&path, |w| {
            use std::io::Write;
            w.write_all(text.as_bytes()).map_err(|source| Error::Io {
                path: path.clone(),
                source,
            })
        })?;
        Ok(path)
    }
}
