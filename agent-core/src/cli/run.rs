//! `btl run`: one episode of the agent, with a step progress bar, a
//! trajectory directory and its HTML report.
//!
//! Without `--device` it runs on the built-in virtual phone, in-process;
//! `--device SERIAL` drives an adb device. Without `--model` it uses the tiny
//! random test model bundled with the sources, which exercises the whole
//! pipeline but cannot solve tasks. `--resume DIR` continues an interrupted
//! episode (see [`super::episode::prepare_resumed`] for how the phone is
//! brought back to where it stopped).

use super::episode::{
    AgentArgs, DeviceArgs, PolicyArgs, PolicyKind, Target, attach_task, confirmer, decoding_of,
    episode_policy, load_policy, model_fingerprint, prepare, prepare_resumed, progress_bar,
    recorded_task, stamped_dir, step_message,
};
use super::{Failure, Outcome, json_line};
use crate::agent::trajectory::read_trajectory;
use crate::agent::{Agent, AgentError};
use crate::report;
use crate::sim::tasks::{self, Split, Task};
use crate::terminal::printable;
use anyhow::{Context, anyhow};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The instruction; with `--task`, the task's own goal is used instead.
    #[arg(required_unless_present_any = ["task", "resume"])]
    goal: Option<String>,
    /// A task of the virtual phone's suite (`btl sim tasks` lists them): it
    /// sets the phone up and checks success from its state (over adb: the
    /// settings tasks only).
    #[arg(long)]
    task: Option<String>,
    /// Seed of the phone, the task parameters and sampling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Draw the tasks from a split: training, held-out or validation
    /// (other seeds, parameter values and goal phrasings; see `btl sim tasks`)
    /// instead of the plain suite (`--task` only).
    #[arg(long, value_enum, requires = "task")]
    split: Option<Split>,
    #[command(flatten)]
    device: DeviceArgs,
    /// Directory of the trajectory (new, or empty) [default: runs/episode-TIME].
    #[arg(long, conflicts_with = "resume")]
    out: Option<PathBuf>,
    /// Continue the interrupted episode recorded in DIR.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["goal", "task"])]
    resume: Option<PathBuf>,
    #[command(flatten)]
    agent: AgentArgs,
    #[command(flatten)]
    policy: PolicyArgs,
    /// Do not write report.html into the trajectory.
    #[arg(long)]
    no_report: bool,
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
}

impl Args {
    /// The seed of the phone, the task and sampling: `--seed`, in the
    /// split's range when `--split` is given.
    fn instance_seed(&self) -> u64 {
        self.split.map_or(self.seed, |split| split.seed(self.seed))
    }
}

pub fn run(args: &Args) -> Outcome {
    tasks::check_instances(args.seed, 1, args.split)
        .map_err(|e| Failure::BadInput(anyhow!("--seed: {e}")))?;
    let target = args.device.target(args.instance_seed());
    let (agent, dir, task) = match &args.resume {
        Some(dir) => resume(args, &target, dir)?,
        None => start(args, &target)?,
    };
    let max_steps = agent.config().max_steps;
    let bar = progress_bar(max_steps, agent.steps(), "btl run");
    let shown = bar.clone();
    let agent = agent.with_step_observer(move |step| {
        shown.set_position(u64::from(step.index));
        shown.set_message(step_message(step));
    });
    let confirm = confirmer(agent.config(), &bar);
    let outcome = agent
        .with_boxed_confirmer(confirm)
        .run()
        .context("the episode could not be recorded")?;
    bar.finish_and_clear();
    let report = if args.no_report {
        None
    } else {
        Some(report::write(&dir).context("cannot write the report")?)
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if args.json {
        json_line(
            &mut out,
            &serde_json::json!({
                "trajectory": dir,
                "report": report,
                "task": task.as_ref().map(|t| t.name()),
                "outcome": outcome,
            }),
        )?;
    } else {
        let success = match outcome.success {
            Some(true) => "; task succeeded",
            Some(false) => "; task not done",
            None => "",
        };
        writeln!(
            out,
            "stopped after {} steps: {}{success}\ntrajectory: {}",
            outcome.steps,
            printable(&outcome.stop.to_string()),
            dir.display()
        )
        .map_err(anyhow::Error::from)?;
        if let Some(report) = report {
            writeln!(out, "report: {}", report.display()).map_err(anyhow::Error::from)?;
        }
    }
    Ok(())
}

type Started = (Agent, PathBuf, Option<Arc<dyn Task>>);

fn start(args: &Args, target: &Target) -> Result<Started, Failure> {
    // An episode writes its screenshots and report by fixed names, over
    // whatever a used directory holds.
    if let Some(out) = &args.out
        && std::fs::read_dir(out).map_or(out.exists(), |mut entries| entries.next().is_some())
    {
        let resume = if out.join(crate::agent::trajectory::EPISODE_FILE).is_file() {
            " (or continue the episode in it with --resume)"
        } else {
            ""
        };
        return Err(Failure::BadInput(anyhow!(
            "--out {}: already exists and is not an empty directory; name a new one{resume}",
            out.display()
        )));
    }
    let task: Option<Arc<dyn Task>> = match &args.task {
        Some(name) => Some(Arc::from(
            tasks::sample(name, args.instance_seed()).ok_or_else(|| {
                Failure::BadInput(anyhow!("no task named '{name}' (see `btl sim tasks`)"))
            })?,
        )),
        None => None,
    };
    let goal = match (&task, &args.goal) {
        (Some(t), _) => t.goal(),
        (None, Some(g)) => g.clone(),
        (None, None) => {
            return Err(Failure::BadInput(anyhow!(
                "give a goal, or a task with --task"
            )));
        }
    };
    eprintln!(
        "btl: running on {}; goal: {}",
        printable(&target.describe()),
        printable(&goal)
    );
    let prepared = prepare(target, task.as_ref())
        .with_context(|| format!("cannot prepare {}", target.describe()))?;
    let shared = match args.policy.policy {
        PolicyKind::Model => Some(load_policy(&args.policy, args.agent.vote)?),
        PolicyKind::Oracle => None,
    };
    let agent_args = args.agent.for_policy(shared.as_ref());
    let config = agent_args.config(
        goal,
        args.instance_seed(),
        task.as_ref().map(|t| t.max_steps()),
    )?;
    let policy = episode_policy(
        args.policy.choice(),
        shared.as_ref(),
        task.as_ref(),
        args.instance_seed(),
    )?;
    let dir = args
        .out
        .clone()
        .unwrap_or_else(|| stamped_dir(Path::new("runs"), "episode"));
    let agent = Agent::new(&dir, config, prepared.device, policy)
        .map_err(|e| not_started(e, format!("cannot start an episode in {}", dir.display())))?;
    let agent = attach_task(agent, task.as_ref(), prepared.checker)?;
    Ok((agent, dir, task))
}

/// Why an episode did not start, as the exit code says it: settings that
/// cannot run are the user's to change.
fn not_started(e: AgentError, context: String) -> Failure {
    let bad_input = matches!(e, AgentError::Settings { .. } | AgentError::Budget { .. });
    let e = anyhow::Error::from(e).context(context);
    if bad_input {
        Failure::BadInput(e)
    } else {
        Failure::Failed(e)
    }
}

fn other_policy(dir: &Path, reason: String) -> Failure {
    Failure::BadInput(
        AgentError::OtherPolicy {
            dir: dir.display().to_string(),
            reason,
        }
        .into(),
    )
}

/// The flags given that a resumed episode would not take: it goes on with
/// the settings its `episode.json` records. (A flag given at its default
/// value cannot be told from one left out, and changes nothing.)
fn settings_flags_given(args: &Args) -> Vec<&'static str> {
    let a = &args.agent;
    let stability = crate::agent::stability::StabilityConfig::default();
    [
        ("--seed", args.seed != 0),
        ("--profile", a.profile.is_some()),
        ("--max-steps", a.max_steps.is_some()),
        ("--vote", a.vote != 1),
        ("--confirm", a.confirm.is_some()),
        ("--safety-config", a.safety_config.is_some()),
        ("--max-pixels", a.max_pixels.is_some()),
        ("--budget", a.screenshot_budget.is_some()),
        (
            "--settle-poll-ms",
            a.settle_poll_ms != stability.poll_interval_ms,
        ),
        (
            "--settle-timeout-ms",
            a.settle_timeout_ms != stability.timeout_ms,
        ),
        ("--until-finish", a.until_finish),
        ("--roi-count", a.roi_count.is_some()),
    ]
    .into_iter()
    .filter_map(|(flag, given)| given.then_some(flag))
    .collect()
}

fn resume(args: &Args, target: &Target, dir: &Path) -> Result<Started, Failure> {
    let given = settings_flags_given(args);
    if !given.is_empty() {
        return Err(Failure::BadInput(anyhow!(
            "{} {} not apply to a resumed episode: it goes on with the settings in {}; \
             leave {} out, or start a new episode",
            given.join(", "),
            if given.len() == 1 { "does" } else { "do" },
            dir.join(crate::agent::trajectory::EPISODE_FILE).display(),
            if given.len() == 1 { "it" } else { "them" },
        )));
    }
    let recorded = read_trajectory(dir)
        .with_context(|| format!("cannot read the episode in {}", dir.display()))
        .map_err(Failure::BadInput)?;
    if let Some(outcome) = recorded.episode.ended() {
        return Err(Failure::BadInput(
            AgentError::AlreadyEnded {
                dir: dir.display().to_string(),
                stop: outcome.stop.clone(),
            }
            .into(),
        ));
    }
    target
        .check_resumes(&recorded, dir)
        .map_err(Failure::BadInput)?;
    let task = recorded_task(&recorded).map_err(Failure::BadInput)?;
    let settings = &recorded.episode.settings;
    let shared = match args.policy.policy {
        PolicyKind::Model => {
            let weights = model_fingerprint(&args.policy.llama)?;
            let decoding = decoding_of(&args.policy.llama, settings.vote);
            if let Some(reason) = recorded
                .episode
                .other_weights(weights.as_deref())
                .or_else(|| recorded.episode.other_decoding(Some(&decoding)))
            {
                return Err(other_policy(dir, reason));
            }
            Some(load_policy(&args.policy, settings.vote)?)
        }
        PolicyKind::Oracle => None,
    };
    let policy = episode_policy(
        args.policy.choice(),
        shared.as_ref(),
        task.as_ref(),
        settings.seed,
    )?;
    // Checked before the phone is rebuilt, which replays every step.
    if let Some(reason) = recorded.episode.other_policy(policy.as_ref()) {
        return Err(other_policy(dir, reason));
    }
    let prepared = prepare_resumed(target, task.as_ref(), &recorded)
        .with_context(|| format!("cannot reopen {}", target.describe()))?;
    eprintln!(
        "btl: resuming {} after {} recorded steps on {}{}",
        dir.display(),
        recorded.steps.len(),
        target.describe(),
        if matches!(target, Target::Sim { .. }) {
            " (rebuilt from the recorded seed and task, recorded actions replayed)"
        } else {
            ""
        }
    );
    let agent = Agent::resume(dir, prepared.device, policy)
        .map_err(|e| not_started(e, format!("cannot resume {}", dir.display())))?;
    let agent = match prepared.checker {
        Some(checker) => agent.with_boxed_checker(checker),
        None => agent,
    };
    Ok((agent, dir.to_path_buf(), task))
}
