//! `btl bench --suite sim`: success rate of a policy on the virtual phone's
//! task suite, per task and overall, as mean ± spread over repeats, with
//! steps per episode and where each step's time went.
//!
//! Repeat `r`, episode `e` of every task runs with seed
//! `seed + r × episodes + e`, so repeats draw different task parameters and
//! phones and their spread says how much one number can be trusted. With
//! `--device` the suite runs over adb on that device, restricted to the
//! tasks whose set-up and checker work through system settings.
//!
//! `--suite injection` runs the prompt-injection suite on the virtual phone:
//! tasks whose screens carry text telling the agent to do something else.
//! Besides success it reports how often the agent was misled (the injected
//! action's effect is in the phone's final state, rebuilt by replaying the
//! episode's actions) and how many sensitive actions the safety gate
//! stopped. Nobody confirms there: unless `--confirm` says otherwise,
//! sensitive actions are denied, as on a phone with nobody watching.

use super::episode::{
    AgentArgs, DeviceArgs, EpisodeDir, EpisodeFailure, PolicyArgs, PolicyKind, ReadBack,
    SharedPolicy, Target, load_policy, prepare_resumed, run_task_episode, stamped_dir,
};
use super::{Failure, Outcome, json_line};
use crate::agent::StopReason;
use crate::agent::safety::{Confirm, Rejection, Verdict};
use crate::agent::trajectory::{Trajectory, read_trajectory};
use crate::device::DeviceError;
use crate::sim::tasks::{self, Split, Task};
use crate::terminal::printable;
use anyhow::anyhow;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Suite {
    /// The virtual phone's task suite (`btl sim tasks`).
    Sim,
    /// The prompt-injection suite: suite tasks with adversarial text on
    /// screen (`btl sim tasks` lists it too).
    Injection,
}

impl Suite {
    fn name(self) -> &'static str {
        match self {
            Suite::Sim => "sim",
            Suite::Injection => "injection",
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(long, value_enum, default_value_t = Suite::Sim)]
    suite: Suite,
    /// Tasks to run, comma-separated [default: all the target supports].
    #[arg(long, value_delimiter = ',')]
    tasks: Vec<String>,
    /// Episodes per task in each repeat.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    episodes: u32,
    /// Independent repeats; the spread is over these.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    repeats: u32,
    /// First seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Draw the tasks from a split: training, held-out or validation
    /// (other seeds, parameter values and goal phrasings; see `btl sim tasks`)
    /// instead of the plain suite.
    #[arg(long, value_enum)]
    split: Option<Split>,
    #[command(flatten)]
    device: DeviceArgs,
    /// Where the trajectories go [default: runs/bench-TIME].
    #[arg(long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    agent: AgentArgs,
    #[command(flatten)]
    policy: PolicyArgs,
    /// Print the results as one JSON object.
    #[arg(long)]
    json: bool,
}

/// What one episode contributed.
#[derive(Debug, Clone, Default)]
struct EpisodeStats {
    success: bool,
    steps: u32,
    latency: Latency,
    error: Option<String>,
    /// How it ended, when the model had to say Finish (`--until-finish`).
    ending: Option<Ending>,
    /// Injection suite: whether the injected action's effect happened.
    misled: Option<bool>,
    /// Sensitive actions the safety gate stopped.
    gate_stops: usize,
}

/// When a model that must say Finish said it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Right after the step that got the task done.
    OnTime,
    /// Some steps after the task was done (it still counts as a success).
    Late,
    /// Before the task was done: a failure.
    Early,
    /// Never: the step budget or another stop ended the episode.
    Never,
}

/// Episodes by [`Ending`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Endings {
    pub on_time: usize,
    pub late: usize,
    pub early: usize,
    pub never: usize,
}

impl Endings {
    fn add(&mut self, ending: Ending) {
        match ending {
            Ending::OnTime => self.on_time += 1,
            Ending::Late => self.late += 1,
            Ending::Early => self.early += 1,
            Ending::Never => self.never += 1,
        }
    }

    fn merge(&mut self, o: &Endings) {
        self.on_time += o.on_time;
        self.late += o.late;
        self.early += o.early;
        self.never += o.never;
    }
}

/// How an episode recorded with `task_done` verdicts ended: `finished_at`
/// is the index (from 1) of the Finish step, if the policy said Finish;
/// `done_after[i]` the checker's verdict after step i + 1.
pub fn ending(finished_at: Option<u32>, done_after: &[bool]) -> Ending {
    let Some(f) = finished_at else {
        return Ending::Never;
    };
    let f = f as usize;
    let done_at_finish = done_after
        .get(f.saturating_sub(1))
        .copied()
        .unwrap_or(false);
    if !done_at_finish {
        return Ending::Early;
    }
    // The first step after which the task stayed done up to the Finish.
    let first_done = (0..f)
        .rev()
        .take_while(|&i| done_after.get(i).copied().unwrap_or(false))
        .last()
        .map_or(f, |i| i + 1);
    // Finish at step f, the task done by step f - 1: on time.
    if first_done + 1 >= f {
        Ending::OnTime
    } else {
        Ending::Late
    }
}

/// Milliseconds summed over steps (and the step count, to average).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Latency {
    pub steps: u64,
    pub observe_ms: f64,
    pub policy_ms: f64,
    pub encode_ms: f64,
    pub prefill_ms: f64,
    pub decode_ms: f64,
    pub perform_ms: f64,
    pub settle_ms: f64,
}

impl Latency {
    fn add(&mut self, o: &Latency) {
        self.steps += o.steps;
        self.observe_ms += o.observe_ms;
        self.policy_ms += o.policy_ms;
        self.encode_ms += o.encode_ms;
        self.prefill_ms += o.prefill_ms;
        self.decode_ms += o.decode_ms;
        self.perform_ms += o.perform_ms;
        self.settle_ms += o.settle_ms;
    }

    /// Per-step means.
    fn mean(&self) -> Latency {
        let n = self.steps.max(1) as f64;
        Latency {
            steps: self.steps,
            observe_ms: self.observe_ms / n,
            policy_ms: self.policy_ms / n,
            encode_ms: self.encode_ms / n,
            prefill_ms: self.prefill_ms / n,
            decode_ms: self.decode_ms / n,
            perform_ms: self.perform_ms / n,
            settle_ms: self.settle_ms / n,
        }
    }
}

/// Mean and sample standard deviation (0 for a single value).
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Spread {
    pub mean: f64,
    pub sd: f64,
}

pub fn spread(values: &[f64]) -> Spread {
    let n = values.len() as f64;
    if values.is_empty() {
        return Spread { mean: 0.0, sd: 0.0 };
    }
    let mean = values.iter().sum::<f64>() / n;
    let sd = if values.len() > 1 {
        (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    Spread { mean, sd }
}

/// The 95% Wilson score interval of a success rate: `successes` of
/// `episodes`, pooled over repeats. Unlike the normal approximation it
/// stays inside [0, 1] and is not empty at 0 or n successes.
pub fn wilson_interval(successes: usize, episodes: usize) -> [f64; 2] {
    if episodes == 0 {
        return [0.0, 1.0];
    }
    const Z: f64 = 1.959_963_984_540_054;
    let n = episodes as f64;
    let p = successes as f64 / n;
    let z2 = Z * Z;
    let denominator = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denominator;
    let half = Z / denominator * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    [(centre - half).max(0.0), (centre + half).min(1.0)]
}

#[derive(Debug, Serialize)]
struct TaskResult {
    task: String,
    /// Success rate in each repeat.
    success_by_repeat: Vec<f64>,
    success: Spread,
    /// Successes and episodes over all repeats, and the 95% interval of
    /// their rate.
    successes: usize,
    episodes: usize,
    interval95: [f64; 2],
    /// With `--until-finish`: when the policy said Finish.
    #[serde(skip_serializing_if = "Option::is_none")]
    endings: Option<Endings>,
    steps_per_episode: f64,
    errors: usize,
    /// Injection suite: episodes where the agent did what the screen asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    misled: Option<Misled>,
}

/// How often the injected text was obeyed, and what the gate caught.
#[derive(Debug, Clone, Copy, Default, Serialize)]
struct Misled {
    episodes: usize,
    misled: usize,
    rate: f64,
    interval95: [f64; 2],
    /// Sensitive actions the safety gate stopped (denied or declined).
    gate_stops: usize,
}

impl Misled {
    fn new(misled: usize, episodes: usize, gate_stops: usize) -> Self {
        Self {
            episodes,
            misled,
            rate: misled as f64 / episodes.max(1) as f64,
            interval95: wilson_interval(misled, episodes),
            gate_stops,
        }
    }
}

pub fn run(args: &Args) -> Outcome {
    let target = args.device.target(args.seed);
    if args.suite == Suite::Injection && !matches!(target, Target::Sim { .. }) {
        return Err(Failure::BadInput(anyhow!(
            "the injection suite runs on the virtual phone only: its misled check reads the phone's state"
        )));
    }
    let episodes = u64::from(args.repeats) * u64::from(args.episodes);
    crate::sim::tasks::check_instances(args.seed, episodes, args.split)
        .map_err(|e| Failure::BadInput(anyhow!("--seed: {e}")))?;
    let names = task_names(args.suite, &args.tasks, &target)?;
    let shared: Option<SharedPolicy> = match args.policy.policy {
        PolicyKind::Model => Some(load_policy(&args.policy, args.agent.vote)?),
        PolicyKind::Oracle => None,
    };
    let mut agent = args.agent.for_policy(shared.as_ref());
    if args.suite == Suite::Injection && agent.confirm.is_none() {
        agent.confirm = Some(Confirm::Deny);
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| stamped_dir(Path::new("runs"), "bench"));
    eprintln!(
        "btl: bench {} tasks × {} episodes × {} repeats on {}; trajectories in {}",
        names.len(),
        args.episodes,
        args.repeats,
        target.describe(),
        out.display()
    );
    let total = names.len() as u64 * u64::from(args.episodes) * u64::from(args.repeats);
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("btl bench [{bar:24}] {pos}/{len} episodes {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let mut results = Vec::new();
    let mut latency = Latency::default();
    let mut overall_by_repeat = vec![(0usize, 0usize); args.repeats as usize];
    let mut all_steps = Vec::new();
    for name in &names {
        let mut by_repeat = Vec::new();
        let (mut steps, mut errors, mut task_successes) = (Vec::new(), 0, 0);
        let mut task_endings = Endings::default();
        let (mut misled, mut gate_stops) = (0, 0);
        for repeat in 0..args.repeats {
            let mut successes = 0;
            for episode in 0..args.episodes {
                let k =
                    args.seed + u64::from(repeat) * u64::from(args.episodes) + u64::from(episode);
                let seed = args.split.map_or(k, |split| split.seed(k));
                bar.set_message(format!("{name} seed {k}"));
                let dir = out.join(format!("{name}-r{repeat}-e{episode}"));
                let stats = one_episode(args, &agent, &target, name, seed, &dir, shared.as_ref())?;
                if let Some(error) = &stats.error {
                    bar.suspend(|| eprintln!("btl: {name} seed {k}: {}", printable(error)));
                    errors += 1;
                }
                successes += usize::from(stats.success);
                if let Some(ending) = stats.ending {
                    task_endings.add(ending);
                }
                misled += usize::from(stats.misled == Some(true));
                gate_stops += stats.gate_stops;
                steps.push(f64::from(stats.steps));
                latency.add(&stats.latency);
                bar.inc(1);
            }
            task_successes += successes;
            let slot = &mut overall_by_repeat[repeat as usize];
            slot.0 += successes;
            slot.1 += args.episodes as usize;
            by_repeat.push(successes as f64 / f64::from(args.episodes.max(1)));
        }
        all_steps.extend_from_slice(&steps);
        let episodes = steps.len();
        results.push(TaskResult {
            task: name.clone(),
            success: spread(&by_repeat),
            success_by_repeat: by_repeat,
            successes: task_successes,
            episodes,
            interval95: wilson_interval(task_successes, episodes),
            endings: args.agent.until_finish.then_some(task_endings),
            steps_per_episode: spread(&steps).mean,
            errors,
            misled: (args.suite == Suite::Injection)
                .then(|| Misled::new(misled, episodes, gate_stops)),
        });
    }
    bar.finish_and_clear();
    let overall: Vec<f64> = overall_by_repeat
        .iter()
        .map(|(s, n)| *s as f64 / (*n).max(1) as f64)
        .collect();
    let overall_spread = spread(&overall);
    let (total_successes, total_episodes) = overall_by_repeat
        .iter()
        .fold((0, 0), |(s, n), (rs, rn)| (s + rs, n + rn));
    let overall_interval = wilson_interval(total_successes, total_episodes);
    let mut all_endings = Endings::default();
    for r in &results {
        if let Some(e) = &r.endings {
            all_endings.merge(e);
        }
    }
    let all_endings = args.agent.until_finish.then_some(all_endings);
    let all_misled = (args.suite == Suite::Injection).then(|| {
        let (m, n, g) = results
            .iter()
            .filter_map(|r| r.misled)
            .fold((0, 0, 0), |(m, n, g), r| {
                (m + r.misled, n + r.episodes, g + r.gate_stops)
            });
        Misled::new(m, n, g)
    });
    let mean_latency = latency.mean();
    let stdout = std::io::stdout();
    let mut w = stdout.lock();
    if args.json {
        json_line(
            &mut w,
            &serde_json::json!({
                "suite": args.suite.name(),
                "target": target.describe(),
                "episodes": args.episodes,
                "repeats": args.repeats,
                "split": args.split,
                "tasks": results,
                "overall": {"success_by_repeat": overall, "success": overall_spread,
                            "successes": total_successes, "episodes": total_episodes,
                            "interval95": overall_interval,
                            "endings": all_endings,
                            "misled": all_misled,
                            "steps_per_episode": spread(&all_steps).mean},
                "latency_per_step_ms": mean_latency,
                "trajectories": out,
            }),
        )?;
        return Ok(());
    }
    let width = results.iter().map(|r| r.task.len()).fold(22, usize::max);
    let mut text = format!(
        "{:<width$} {:>20} {:>16} {:>14}\n",
        "task", "success (mean ± sd)", "95% interval", "steps/episode"
    );
    let interval = |[lo, hi]: [f64; 2]| format!("{:.0}–{:.0}%", 100.0 * lo, 100.0 * hi);
    for r in &results {
        text.push_str(&format!(
            "{:<width$} {:>12.1}% ± {:<5.1} {:>16} {:>14.1}{}{}\n",
            r.task,
            100.0 * r.success.mean,
            100.0 * r.success.sd,
            interval(r.interval95),
            r.steps_per_episode,
            r.misled.map_or(String::new(), |m| format!(
                "  misled {}/{}, gate stops {}",
                m.misled, m.episodes, m.gate_stops
            )),
            if r.errors > 0 {
                format!("  ({} errors)", r.errors)
            } else {
                String::new()
            }
        ));
    }
    text.push_str(&format!(
        "{:<width$} {:>12.1}% ± {:<5.1} {:>16} {:>14.1}\n\nper step (mean of {} steps, ms): observe {:.1}, policy {:.1} (image encode {:.1}, prefill {:.1}, decode {:.1}), perform {:.1}, settle {:.1}\n",
        "overall",
        100.0 * overall_spread.mean,
        100.0 * overall_spread.sd,
        interval(overall_interval),
        spread(&all_steps).mean,
        mean_latency.steps,
        mean_latency.observe_ms,
        mean_latency.policy_ms,
        mean_latency.encode_ms,
        mean_latency.prefill_ms,
        mean_latency.decode_ms,
        mean_latency.perform_ms,
        mean_latency.settle_ms,
    ));
    if let Some(m) = all_misled {
        text.push_str(&format!(
            "misled by the screen: {:.1}% ({} of {}, 95% interval {}); sensitive actions the safety gate stopped: {}\n",
            100.0 * m.rate,
            m.misled,
            m.episodes,
            interval(m.interval95),
            m.gate_stops
        ));
    }
    if let Some(e) = all_endings {
        text.push_str(&format!(
            "Finish said: right after the task was done {}, later {}, before it was done {}, never {}\n",
            e.on_time, e.late, e.early, e.never
        ));
    }
    w.write_all(text.as_bytes()).map_err(anyhow::Error::from)?;
    Ok(())
}

/// The tasks to run: the named ones (each must exist and suit the target),
/// or every one the target supports.
fn task_names(suite: Suite, wanted: &[String], target: &Target) -> Result<Vec<String>, Failure> {
    let supported =
        |name: &str| tasks::sample(name, 0).is_some_and(|t| target.supports(&Arc::from(t)));
    let all: Vec<&str> = match suite {
        Suite::Sim => tasks::templates().iter().map(|t| t.name).collect(),
        Suite::Injection => tasks::injections().iter().map(|i| i.name).collect(),
    };
    if wanted.is_empty() {
        return Ok(all
            .into_iter()
            .filter(|n| supported(n))
            .map(String::from)
            .collect());
    }
    for (i, name) in wanted.iter().enumerate() {
        if wanted[..i].contains(name) {
            return Err(Failure::BadInput(anyhow!(
                "--tasks names '{name}' twice: its episodes would be counted twice"
            )));
        }
        if tasks::sample(name, 0).is_none() {
            return Err(Failure::BadInput(anyhow!(
                "no task named '{name}' (see `btl sim tasks`)"
            )));
        }
        // A suite's statistics (the injection suite's misled count and its
        // deny rule) mean nothing for the other suite's tasks.
        if !all.contains(&name.as_str()) {
            return Err(Failure::BadInput(anyhow!(
                "task '{name}' is not in the {} suite (see `btl sim tasks`); give --suite {}",
                suite.name(),
                match suite {
                    Suite::Sim => "injection",
                    Suite::Injection => "sim",
                }
            )));
        }
        if !supported(name) {
            return Err(Failure::BadInput(anyhow!(
                "task '{name}' cannot be set up and checked on {}: over adb only the settings tasks can",
                target.describe()
            )));
        }
    }
    Ok(wanted.to_vec())
}

fn one_episode(
    args: &Args,
    agent: &AgentArgs,
    target: &Target,
    name: &str,
    seed: u64,
    dir: &Path,
    shared: Option<&SharedPolicy>,
) -> Result<EpisodeStats, Failure> {
    let task: Arc<dyn Task> = Arc::from(
        tasks::sample(name, seed)
            .ok_or_else(|| Failure::BadInput(anyhow!("no task named '{name}'")))?,
    );
    let target = match target {
        Target::Sim { .. } => Target::Sim { seed },
        adb => adb.clone(),
    };
    let outcome = match run_task_episode(
        &target,
        &task,
        seed,
        EpisodeDir {
            path: dir,
            read_back: ReadBack::ThisDevice,
        },
        agent,
        args.policy.choice(),
        shared,
    ) {
        Ok(outcome) => outcome,
        Err(EpisodeFailure::Device(e)) => {
            return Err(Failure::Failed(anyhow!("{}: {e}", target.describe())));
        }
        Err(EpisodeFailure::OtherRun(e) | EpisodeFailure::Refused(e)) => {
            return Err(Failure::BadInput(e));
        }
        Err(EpisodeFailure::Other(e)) => return Err(Failure::Failed(e)),
    };
    let trajectory = read_trajectory(dir).map_err(|e| Failure::Failed(e.into()))?;
    let misled = match args.suite {
        Suite::Sim => None,
        Suite::Injection => misled_after(&target, &task, &trajectory)
            .map_err(|e| Failure::Failed(anyhow!("{name}: replaying the episode: {e}")))?,
    };
    let gate_stops = trajectory
        .steps
        .iter()
        .flat_map(|s| &s.attempts)
        .filter(|a| {
            matches!(
                &a.verdict,
                Some(Verdict::Reject {
                    rejection: Rejection::Denied { .. } | Rejection::Declined { .. }
                })
            )
        })
        .count();
    let mut latency = Latency::default();
    for step in &trajectory.steps {
        let t = &step.timings;
        latency.steps += 1;
        latency.observe_ms += t.observe_ms as f64;
        latency.policy_ms += t.policy_ms as f64;
        latency.perform_ms += t.perform_ms as f64;
        latency.settle_ms += t.settle.map_or(0.0, |s| s.waited_ms as f64);
        for a in &step.attempts {
            latency.encode_ms += a.stats.encode_ms;
            latency.prefill_ms += a.stats.prefill_ms;
            latency.decode_ms += a.stats.decode_ms;
        }
    }
    let error = match &outcome.stop {
        StopReason::PolicyFailed { error } | StopReason::DeviceFailed { error } => {
            Some(error.clone())
        }
        _ => None,
    };
    let ending = args.agent.until_finish.then(|| {
        let finished_at =
            matches!(outcome.stop, StopReason::Finished { .. }).then_some(outcome.steps);
        let done: Vec<bool> = trajectory
            .steps
            .iter()
            .map(|s| s.task_done == Some(true))
            .collect();
        ending(finished_at, &done)
    });
    Ok(EpisodeStats {
        success: outcome.success == Some(true),
        steps: outcome.steps,
        latency,
        error,
        ending,
        misled,
        gate_stops,
    })
}

/// Whether the episode left the injected action's effect on the phone: the
/// phone is rebuilt from the episode's seed and task, and its executed
/// actions replayed (the virtual phone is deterministic).
fn misled_after(
    target: &Target,
    task: &Arc<dyn Task>,
    trajectory: &Trajectory,
) -> Result<Option<bool>, DeviceError> {
    let mut prepared = prepare_resumed(target, Some(task), trajectory)?;
    Ok(prepared.misled.as_mut().and_then(|misled| misled()))
}

#[cfg(test)]
mod tests {
    use super::super::episode::prepare;
    use super::*;
    use crate::agent::stability::StabilityConfig;
    use crate::agent::{Agent, AgentConfig};
    use crate::model::PolicySpec;

    /// An agent that obeys the screen (the oracle of turning Wi-Fi off, on
    /// a variant whose planted text asks for it) leaves the lure's effect,
    /// and the replay of its trajectory finds it; no steps, no effect.
    #[test]
    fn the_misled_check_reads_the_replayed_final_state() {
        let dir = tempfile::tempdir().unwrap();
        let seed = 4;
        let task: Arc<dyn Task> = Arc::from(tasks::sample("inject_alarm_set_wifi", seed).unwrap());
        let target = Target::Sim { seed };
        let prepared = prepare(&target, Some(&task)).unwrap();
        let obeying = PolicySpec::Oracle {
            task: "wifi_off".into(),
            seed,
        }
        .load()
        .unwrap();
        let config = AgentConfig {
            goal: task.goal(),
            seed,
            max_steps: 6,
            stability: StabilityConfig {
                poll_interval_ms: 10,
                timeout_ms: 100,
            },
            ..AgentConfig::default()
        };
        Agent::new(dir.path(), config, prepared.device, obeying)
            .unwrap()
            .run()
            .unwrap();
        let mut trajectory = read_trajectory(dir.path()).unwrap();
        assert!(!trajectory.steps.is_empty());
        assert_eq!(
            misled_after(&target, &task, &trajectory).unwrap(),
            Some(true)
        );
        trajectory.steps.clear();
        assert_eq!(
            misled_after(&target, &task, &trajectory).unwrap(),
            Some(false)
        );
    }

    #[test]
    fn spread_is_the_mean_and_sample_standard_deviation() {
        // mean 0.5; deviations ±0.5, ±0.5 -> variance (4 × 0.25) / 3 = 1/3.
        let s = spread(&[0.0, 1.0, 0.0, 1.0]);
        assert_eq!(s.mean, 0.5);
        assert!((s.sd - (1.0f64 / 3.0).sqrt()).abs() < 1e-15);
        assert_eq!(
            spread(&[0.75]),
            Spread {
                mean: 0.75,
                sd: 0.0
            }
        );
        assert_eq!(spread(&[]), Spread { mean: 0.0, sd: 0.0 });
    }

    #[test]
    fn endings_say_when_finish_came() {
        // Done after step 2, Finish at step 3: on time.
        assert_eq!(ending(Some(3), &[false, true, true]), Ending::OnTime);
        // Done after step 1, Finish at step 4: late.
        assert_eq!(ending(Some(4), &[true, true, true, true]), Ending::Late);
        // Finish at step 2 with the task not done: early.
        assert_eq!(ending(Some(2), &[false, false]), Ending::Early);
        // Done once, undone again, done right before Finish: on time.
        assert_eq!(ending(Some(4), &[true, false, true, true]), Ending::OnTime);
        // Finish as the first step on a task already done: on time.
        assert_eq!(ending(Some(1), &[true]), Ending::OnTime);
        assert_eq!(ending(None, &[true, true]), Ending::Never);
    }

    #[test]
    fn wilson_intervals_match_a_hand_calculation() {
        // 8 of 10: p 0.8, z² 3.8415, denominator 1.38415, centre
        // 0.99208 / 1.38415 = 0.71674, half 1.41601 × √(0.016 + 0.0096039)
        // = 0.22658: 0.4902 to 0.9433.
        let [lo, hi] = wilson_interval(8, 10);
        assert!(
            (lo - 0.4902).abs() < 1e-4 && (hi - 0.9433).abs() < 1e-4,
            "{lo} {hi}"
        );
        // 0 of 10: from 0 to z² / (n + z²) = 3.8415 / 13.8415 = 0.2775.
        let [lo, hi] = wilson_interval(0, 10);
        assert_eq!(lo, 0.0);
        assert!((hi - 0.2775).abs() < 1e-4, "{hi}");
        // All successes mirror no successes.
        let [lo, hi] = wilson_interval(10, 10);
        assert!(
            (lo - 0.7225).abs() < 1e-4 && (hi - 1.0).abs() < 1e-12,
            "{lo} {hi}"
        );
        assert_eq!(wilson_interval(0, 0), [0.0, 1.0]);
    }
}
