//! `btl collect`: episodes of suite tasks on several devices at once, for
//! training data.
//!
//! Every (task, seed) pair is a job in one shared queue; each device (adb
//! serials and `--sim N` in-process virtual phones) runs one episode at a
//! time on a blocking thread of a tokio runtime and takes the next job it
//! can run (adb devices: the settings tasks only). A device that cannot be
//! opened (an adb device is tried once before any job, so it is reported
//! even when the others leave it nothing to run) or fails mid-episode is
//! reported and retired; its job goes back to the queue for the others, so
//! one bad phone never stops the collection. A device lost in the middle
//! of an episode is retired too, and its episode kept as it stopped, steps
//! intact: it is resumed on that device (an adb serial) or on any virtual
//! phone (which replays the recorded actions) when the collection runs
//! again, never on another phone whose screen it has not seen. Jobs land
//! in `OUT/TASK-sSEED/`; `OUT/collect.jsonl` gets one line per finished
//! episode. Run again with the same arguments to finish an interrupted
//! collection: finished episodes are kept (and listed in the index if a
//! kill cost them their line), interrupted ones resumed.

use super::episode::{
    AgentArgs, EpisodeDir, EpisodeFailure, PolicyArgs, PolicyChoice, PolicyKind, ReadBack,
    SharedPolicy, Target, episode_policy, foreign_episode, load_policy, prepare, run_task_episode,
};
use super::{Failure, Outcome};
use crate::agent::StopReason;
use crate::agent::trajectory::{Outcome as EpisodeOutcome, Trajectory};
use crate::sim::tasks::{self, Split, Task};
use crate::terminal::printable;
use anyhow::{Context, anyhow};
use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// adb device serials, comma-separated.
    #[arg(long, value_delimiter = ',')]
    devices: Vec<String>,
    /// In-process virtual phones to add, each driven by a worker thread.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1024))]
    sim: u32,
    /// Port of the adb server on 127.0.0.1 [default: 5037].
    #[arg(long)]
    adb_port: Option<u16>,
    /// Tasks, comma-separated, or `all`.
    #[arg(long, value_delimiter = ',', required = true)]
    tasks: Vec<String>,
    /// Episodes per task (seeds `seed`, `seed + 1`, …).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    episodes: u32,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Draw the tasks from a split: training, held-out or validation
    /// (other seeds, parameter values and goal phrasings; see `btl sim tasks`)
    /// instead of the plain suite.
    #[arg(long, value_enum)]
    split: Option<Split>,
    /// Output directory (created; reused to finish an interrupted run).
    #[arg(long)]
    out: PathBuf,
    #[command(flatten)]
    agent: AgentArgs,
    #[command(flatten)]
    policy: PolicyArgs,
}

pub const INDEX_FILE: &str = "collect.jsonl";

/// Refuses the finished episode `recorded` unless it is the one `job`
/// would record ([`foreign_episode`]).
fn check_finished(
    recorded: &Trajectory,
    job: &Job,
    agent_args: &AgentArgs,
    args: &Args,
    shared: Option<&SharedPolicy>,
) -> Outcome {
    let task = &job.task;
    let policy = episode_policy(args.policy.choice(), shared, Some(task), job.seed)?;
    let expected = agent_args.config(task.goal(), job.seed, Some(task.max_steps()))?;
    match foreign_episode(recorded, policy.as_ref(), task.as_ref(), &expected) {
        Some(e) => Err(Failure::BadInput(e)),
        None => Ok(()),
    }
}

#[derive(Clone)]
struct Job {
    task: Arc<dyn Task>,
    seed: u64,
    /// The device an interrupted episode of this job was running on, which
    /// alone may resume it ([`Target::resumes_on`]).
    resume_on: Option<String>,
}

/// What a device worker reports.
enum Report {
    Done {
        device: String,
        /// The device as the episode's trajectory names it (`None` when
        /// the trajectory could not be read back).
        recorded_device: Option<String>,
        job: Job,
        outcome: EpisodeOutcome,
        /// Steps where a relabelling teacher ran its answer in place of the
        /// policy's (`--take-over-early-finish`).
        taken_over: usize,
    },
    /// The job could not run for a reason of its own (not the device's).
    JobFailed {
        device: String,
        job: Job,
        error: String,
    },
    /// The device was lost in the middle of the job's episode; the episode
    /// waits, steps intact, for the collection to run again.
    Interrupted {
        device: String,
        job: Job,
        steps: u32,
    },
    DeviceRetired {
        device: String,
        error: String,
    },
}

pub fn run(args: &Args) -> Outcome {
    let targets = targets(args)?;
    let all = jobs(args)?;
    let total = all.len();
    // Held from before the directory is read: a second collection must not
    // take the episodes the first finishes meanwhile for its own.
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let index = args.out.join(INDEX_FILE);
    let _writer = lock_index(&index)?;
    let shared: Option<SharedPolicy> = match args.policy.policy {
        PolicyKind::Model => Some(load_policy(&args.policy, args.agent.vote)?),
        PolicyKind::Oracle => None,
    };
    let agent_args = args.agent.for_policy(shared.as_ref());
    // Finished episodes of an earlier run stay as they are, and in the
    // index, if they are this collection's: another policy's, or another
    // instance's, in a reused --out would be counted as its own.
    let mut jobs = Vec::new();
    let mut finished = Vec::new();
    for job in all {
        let dir = episode_dir(&args.out, &job);
        match recorded(&dir) {
            Recorded::Finished(recorded, outcome) => {
                check_finished(&recorded, &job, &agent_args, args, shared.as_ref())?;
                let line = index_line(
                    &job,
                    Some(&recorded.episode.device),
                    None,
                    &outcome,
                    taken_over(&recorded),
                );
                finished.push(line);
            }
            Recorded::Interrupted { device } => jobs.push(Job {
                resume_on: Some(device),
                ..job
            }),
            Recorded::Nothing => jobs.push(job),
        }
    }
    if jobs.len() < total {
        eprintln!(
            "btl: {} of {total} episodes already finished in {}",
            total - jobs.len(),
            args.out.display()
        );
    }
    index_finished(&index, &finished)?;
    eprintln!(
        "btl: collecting {} episodes on {} devices into {}",
        jobs.len(),
        targets.len(),
        args.out.display()
    );
    let queue = Arc::new(Mutex::new(jobs.into_iter().collect::<VecDeque<_>>()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .max_blocking_threads(targets.len().max(1))
        .build()
        .context("cannot start the tokio runtime")?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for (number, target) in targets.into_iter().enumerate() {
        let name = match &target {
            Target::Sim { .. } => format!("virtual phone {}", number + 1),
            adb => adb.describe(),
        };
        let (queue, tx, shared, out) =
            (queue.clone(), tx.clone(), shared.clone(), args.out.clone());
        let agent = agent_args.clone();
        let choice = args.policy.choice();
        runtime.spawn_blocking(move || {
            worker(
                &name,
                &target,
                &queue,
                &tx,
                &agent,
                choice,
                shared.as_ref(),
                &out,
            )
        });
    }
    drop(tx);
    let (mut done, mut succeeded, mut failed_jobs, mut retired, mut interrupted) = (0, 0, 0, 0, 0);
    let mut all_taken_over = 0;
    let received = runtime.block_on(async {
        while let Some(report) = rx.recv().await {
            match report {
                Report::Done {
                    device,
                    recorded_device,
                    job,
                    outcome,
                    taken_over,
                } => {
                    done += 1;
                    succeeded += usize::from(outcome.success == Some(true));
                    all_taken_over += taken_over;
                    let teacher = match taken_over {
                        0 => String::new(),
                        n => format!(" ({n} of them the teacher's)"),
                    };
                    eprintln!(
                        "btl: {} {} on {}: {} after {} steps{teacher}",
                        job.task.name(),
                        seed_label(job.seed),
                        printable(&device),
                        printable(&outcome.stop.to_string()),
                        outcome.steps
                    );
                    let line = index_line(
                        &job,
                        recorded_device.as_deref(),
                        Some(&device),
                        &outcome,
                        taken_over,
                    );
                    append_line(&index, &line)?;
                }
                Report::JobFailed { device, job, error } => {
                    failed_jobs += 1;
                    eprintln!(
                        "btl: {} {} on {} failed: {}",
                        job.task.name(),
                        seed_label(job.seed),
                        printable(&device),
                        printable(&error)
                    );
                }
                Report::Interrupted { device, job, steps } => {
                    interrupted += 1;
                    eprintln!(
                        "btl: {} {} on {}: interrupted after {steps} steps, kept in {} to resume",
                        job.task.name(),
                        seed_label(job.seed),
                        printable(&device),
                        episode_dir(&args.out, &job).display()
                    );
                }
                Report::DeviceRetired { device, error } => {
                    retired += 1;
                    eprintln!(
                        "btl: device {} failed and is skipped: {}",
                        printable(&device),
                        printable(&error)
                    );
                }
            }
        }
        anyhow::Ok(())
    });
    if let Err(e) = received {
        // The workers take no further episode: each ends the one it runs
        // (kept, and listed by the next run), and the runtime's drop waits
        // for them, where it would otherwise wait for the whole queue.
        let left = queue.lock().map_or(0, |mut q| q.drain(..).count());
        return Err(Failure::Failed(e.context(format!(
            "collection stopped, {left} episodes not started"
        ))));
    }
    let left = queue.lock().map_or(0, |q| q.len());
    let teacher = if args.policy.take_over_early_finish {
        format!("; {all_taken_over} steps taken over by the teacher")
    } else {
        String::new()
    };
    println!(
        "collected {done} episodes ({succeeded} successful) in {}; {failed_jobs} failed, {interrupted} interrupted, {retired} devices skipped, {left} not run{teacher}",
        args.out.display()
    );
    if left > 0 || failed_jobs > 0 || interrupted > 0 {
        return Err(Failure::Failed(anyhow!(
            "{left} episodes could not run on any device, {interrupted} were interrupted and {failed_jobs} failed; run the same command again to retry them"
        )));
    }
    Ok(())
}

fn targets(args: &Args) -> Result<Vec<Target>, Failure> {
    let serials: Vec<&String> = args.devices.iter().filter(|s| !s.is_empty()).collect();
    // Two workers on one phone would each record the other's taps.
    if let Some(twice) = serials
        .iter()
        .enumerate()
        .find_map(|(i, s)| serials[..i].contains(s).then_some(s))
    {
        return Err(Failure::BadInput(anyhow!(
            "--devices names {twice} twice: one worker drives each phone"
        )));
    }
    let mut targets: Vec<Target> = serials
        .into_iter()
        .map(|serial| Target::adb(serial, args.adb_port))
        .collect();
    // The seed is set per episode; this one only marks the kind.
    targets.extend((0..args.sim).map(|_| Target::Sim { seed: 0 }));
    if targets.is_empty() {
        return Err(Failure::BadInput(anyhow!(
            "no devices: give --devices SERIAL,… and/or --sim N"
        )));
    }
    Ok(targets)
}

fn jobs(args: &Args) -> Result<Vec<Job>, Failure> {
    tasks::check_instances(args.seed, u64::from(args.episodes), args.split)
        .map_err(|e| Failure::BadInput(anyhow!("--seed: {e}")))?;
    let names: Vec<String> = if args.tasks.iter().any(|t| t == "all") {
        tasks::templates()
            .iter()
            .map(|t| t.name.to_string())
            .collect()
    } else {
        args.tasks.clone()
    };
    let mut jobs = Vec::new();
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            return Err(Failure::BadInput(anyhow!(
                "--tasks names '{name}' twice: one directory would hold both its episodes"
            )));
        }
        for e in 0..args.episodes {
            let k = args.seed + u64::from(e);
            let seed = args.split.map_or(k, |split| split.seed(k));
            let task = tasks::sample(name, seed).ok_or_else(|| {
                Failure::BadInput(anyhow!("no task named '{name}' (see `btl sim tasks`)"))
            })?;
            jobs.push(Job {
                task: Arc::from(task),
                seed,
                resume_on: None,
            });
        }
    }
    Ok(jobs)
}

/// What an earlier run left in an episode's directory.
enum Recorded {
    Nothing,
    Finished(Box<Trajectory>, EpisodeOutcome),
    /// Stopped mid-way (the process, or its device, was lost) on `device`.
    Interrupted {
        device: String,
    },
}

fn recorded(dir: &Path) -> Recorded {
    match crate::agent::trajectory::read_trajectory(dir) {
        Err(_) => Recorded::Nothing,
        Ok(t) => match t.episode.ended().cloned() {
            Some(outcome) => Recorded::Finished(Box::new(t), outcome),
            None => Recorded::Interrupted {
                device: t.episode.device,
            },
        },
    }
}

/// The seed as a user gave it: `seed 3`, or `heldout seed 3` for instance 3
/// of a split.
fn seed_label(seed: u64) -> String {
    match Split::of(seed) {
        Some((split, k)) => format!("{} seed {k}", split.label()),
        None => format!("seed {seed}"),
    }
}

fn episode_dir(out: &Path, job: &Job) -> PathBuf {
    let name = job.task.name();
    out.join(match Split::of(job.seed) {
        Some((split, k)) => format!("{name}-{}-s{k}", split.label()),
        None => format!("{name}-s{}", job.seed),
    })
}

/// One device's loop: take the next job it can run until none is left or
/// the device fails.
#[allow(clippy::too_many_arguments)]
fn worker(
    device: &str,
    target: &Target,
    queue: &Mutex<VecDeque<Job>>,
    tx: &tokio::sync::mpsc::UnboundedSender<Report>,
    agent: &AgentArgs,
    choice: PolicyChoice,
    shared: Option<&SharedPolicy>,
    out: &Path,
) {
    // A dead phone that the others leave no job it can run would otherwise
    // never be reported.
    if let Target::Adb { .. } = target
        && let Err(error) = prepare(target, None)
    {
        let _ = tx.send(Report::DeviceRetired {
            device: device.to_string(),
            error: error.to_string(),
        });
        return;
    }
    loop {
        let job = {
            let Ok(mut q) = queue.lock() else { return };
            let runnable = |j: &Job| {
                target.supports(&j.task)
                    && j.resume_on.as_deref().is_none_or(|d| target.resumes_on(d))
            };
            match q.iter().position(runnable) {
                Some(i) => q.remove(i),
                None => None,
            }
        };
        let Some(job) = job else { return };
        let target = match target {
            Target::Sim { .. } => Target::Sim { seed: job.seed },
            adb => adb.clone(),
        };
        let dir = episode_dir(out, &job);
        let result = run_task_episode(
            &target,
            &job.task,
            job.seed,
            EpisodeDir {
                path: &dir,
                read_back: ReadBack::AnyDevice,
            },
            agent,
            choice,
            shared,
        );
        let device = device.to_string();
        match result {
            Ok(outcome) => match outcome.stop {
                StopReason::DeviceFailed { error } => {
                    let _ = tx.send(Report::Interrupted {
                        device: device.clone(),
                        job,
                        steps: outcome.steps,
                    });
                    let _ = tx.send(Report::DeviceRetired { device, error });
                    return;
                }
                _ => {
                    let recorded = crate::agent::trajectory::read_trajectory(&dir).ok();
                    let _ = tx.send(Report::Done {
                        recorded_device: recorded.as_ref().map(|t| t.episode.device.clone()),
                        device,
                        job,
                        outcome,
                        taken_over: recorded.as_ref().map_or(0, taken_over),
                    });
                }
            },
            Err(EpisodeFailure::Device(error)) => {
                if let Ok(mut q) = queue.lock() {
                    q.push_front(job);
                }
                let _ = tx.send(Report::DeviceRetired {
                    device,
                    error: error.to_string(),
                });
                return;
            }
            Err(
                EpisodeFailure::OtherRun(error)
                | EpisodeFailure::Refused(error)
                | EpisodeFailure::Other(error),
            ) => {
                let _ = tx.send(Report::JobFailed {
                    device,
                    job,
                    error: format!("{error:#}"),
                });
            }
        }
    }
}

/// How many recorded steps ran a relabelling teacher's answer in place of
/// the policy's.
fn taken_over(t: &Trajectory) -> usize {
    t.steps
        .iter()
        .filter(|s| s.attempts.iter().any(|a| a.overruled.is_some()))
        .count()
}

/// The index's line for a finished episode of `job`: its `device` as its
/// trajectory names it, so lines of one phone group together whether this
/// run or a later one listed them (null if the trajectory could not be read
/// back), and the `worker` that ran it (`virtual phone 2`) where this run
/// knows it.
fn index_line(
    job: &Job,
    device: Option<&str>,
    worker: Option<&str>,
    outcome: &EpisodeOutcome,
    taken_over: usize,
) -> serde_json::Value {
    let mut line = serde_json::json!({
        "task": job.task.name(),
        "seed": job.seed,
        "dir": episode_dir(Path::new(""), job),
        "device": device,
        "outcome": outcome,
    });
    if let Some(worker) = worker {
        line["worker"] = worker.into();
    }
    if taken_over > 0 {
        line["taken_over"] = taken_over.into();
    }
    line
}

/// Holds the index for this collection's run: a second collection into
/// the same directory would list episodes the first is about to list.
/// Where files cannot be locked, the run goes on unlocked.
fn lock_index(index: &Path) -> Result<Option<File>, Failure> {
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(index)
        .with_context(|| format!("cannot open {}", index.display()))?;
    match crate::atomic::try_lock(&file) {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Err(Failure::BadInput(anyhow!(
            "another collection is writing into {}; wait for it to end, or give another --out",
            index.parent().unwrap_or(Path::new(".")).display()
        ))),
        Err(std::fs::TryLockError::Error(_)) => Ok(None),
    }
}

/// Adds to the index the lines of finished episodes of an earlier run
/// (`finished`, from [`index_line`]) it lacks: an episode killed between
/// its end and its line, or whose line a crash cut short. Such a line
/// names the device as the episode's trajectory does.
fn index_finished(index: &Path, finished: &[serde_json::Value]) -> anyhow::Result<()> {
    let bytes = std::fs::read(index).unwrap_or_default();
    let mut listed = std::collections::HashSet::new();
    // The trajectories are the record and the index is made from them, so
    // a line that is no record (edited, damaged) is said and passed over:
    // its episode, being unlisted, gets a line again below.
    let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    for (i, line) in lines.iter().enumerate() {
        match serde_json::from_slice::<serde_json::Value>(line) {
            Ok(record) => listed.extend(record["dir"].as_str().map(str::to_owned)),
            // What follows the last newline, if no whole record, is an
            // append a crash cut short, which the next append cuts and
            // says so.
            Err(_) if i + 1 == lines.len() || line.iter().all(u8::is_ascii_whitespace) => {}
            Err(e) => eprintln!(
                "btl: warning: line {} of {} is not a record ({e}); passed over",
                i + 1,
                index.display()
            ),
        }
    }
    let missing: Vec<_> = finished
        .iter()
        .filter(|line| !line["dir"].as_str().is_some_and(|dir| listed.contains(dir)))
        .collect();
    for line in &missing {
        append_line(index, line)?;
    }
    match missing.len() {
        0 => {}
        1 => eprintln!(
            "btl: 1 finished episode was missing from {}; added",
            index.display()
        ),
        n => eprintln!(
            "btl: {n} finished episodes were missing from {}; added",
            index.display()
        ),
    }
    Ok(())
}

/// Appends one JSON line and syncs it, so an interrupted collection keeps
/// its index up to the last finished episode. A line an earlier append
/// left unfinished (a full disk, a crash) is cut first, so the new line
/// does not merge into it ([`end_last_line`]).
fn append_line(path: &Path, value: &serde_json::Value) -> anyhow::Result<()> {
    let mut file = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    match end_last_line(&mut file).with_context(|| format!("cannot read {}", path.display()))? {
        LastLine::Ended => {}
        LastLine::Closed => eprintln!(
            "btl: {}'s last record lacked its newline; it was added",
            path.display()
        ),
        LastLine::Cut(bytes) => eprintln!(
            "btl: {} ended in {bytes} bytes of an unfinished record, cut",
            path.display()
        ),
    }
    let mut line = serde_json::to_vec(value)?;
    line.push(b'\n');
    file.write_all(&line)
        .and_then(|()| file.sync_data())
        .with_context(|| format!("cannot append to {}", path.display()))
}

/// What [`end_last_line`] found after the last newline.
enum LastLine {
    /// Nothing: the file is empty or ends in a newline.
    Ended,
    /// A whole JSON record (written by hand), now ended with a newline.
    Closed,
    /// This many bytes of a record an append left unfinished, now cut.
    Cut(u64),
}

/// Makes `file` end in a newline, so the next record starts a line of its
/// own: a whole record after the last newline is ended, a fragment cut.
fn end_last_line(file: &mut File) -> std::io::Result<LastLine> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(LastLine::Ended);
    }
    let mut last = [0u8];
    file.seek(SeekFrom::Start(len - 1))?;
    file.read_exact(&mut last)?;
    if last[0] == b'\n' {
        return Ok(LastLine::Ended);
    }
    // One line per episode: the whole index is small.
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(0))?;
    file.read_to_end(&mut bytes)?;
    let keep = bytes
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |at| at + 1);
    if serde_json::from_slice::<serde_json::Value>(&bytes[keep..]).is_ok() {
        file.write_all(b"\n")?;
        return Ok(LastLine::Closed);
    }
    file.set_len(keep as u64)?;
    Ok(LastLine::Cut(len - keep as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::trajectory::{
        EPISODE_FILE, STEPS_FILE, old_oracle_trajectory, parse_trajectory,
    };

    /// A line cut off by a full disk or a crash is dropped before the next
    /// one is appended, rather than merged with it; whole lines stay.
    #[test]
    fn an_unfinished_index_line_is_cut_before_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(INDEX_FILE);
        std::fs::write(&path, "{\"task\":\"a\"}\n{\"task\":\"b\",\"se").unwrap();
        append_line(&path, &serde_json::json!({"task": "c"})).unwrap();
        append_line(&path, &serde_json::json!({"task": "d"})).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"task\":\"a\"}\n{\"task\":\"c\"}\n{\"task\":\"d\"}\n"
        );
        // A whole record without its newline (an edit by hand) is kept.
        let edited = dir.path().join("edited.jsonl");
        std::fs::write(&edited, "{\"task\":\"a\"}").unwrap();
        append_line(&edited, &serde_json::json!({"task": "b"})).unwrap();
        assert_eq!(
            std::fs::read_to_string(&edited).unwrap(),
            "{\"task\":\"a\"}\n{\"task\":\"b\"}\n"
        );
        let fresh = dir.path().join("fresh.jsonl");
        std::fs::write(&fresh, "{\"ta").unwrap();
        append_line(&fresh, &serde_json::json!({"task": "e"})).unwrap();
        assert_eq!(
            std::fs::read_to_string(&fresh).unwrap(),
            "{\"task\":\"e\"}\n"
        );
    }

    #[test]
    fn taken_over_steps_are_those_with_an_overruled_answer() {
        // A real oracle trajectory (a fuzzing seed), its second step marked
        // as the teacher's the way `Relabelled` marks it.
        let (episode, log) = old_oracle_trajectory();
        let mut trajectory = parse_trajectory(Path::new("seed"), episode, log).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let write = |steps: &[crate::agent::trajectory::StepRecord]| {
            let mut log = Vec::new();
            for step in steps {
                serde_json::to_writer(&mut log, step).unwrap();
                log.push(b'\n');
            }
            std::fs::write(dir.path().join(EPISODE_FILE), episode).unwrap();
            std::fs::write(dir.path().join(STEPS_FILE), log).unwrap();
        };
        let taken_over_steps = |dir: &Path| {
            crate::agent::trajectory::read_trajectory(dir).map_or(0, |t| taken_over(&t))
        };
        write(&trajectory.steps);
        assert_eq!(taken_over_steps(dir.path()), 0);
        trajectory.steps[1].attempts[0].overruled = Some("<link>Finish</link>".to_owned());
        write(&trajectory.steps);
        assert_eq!(taken_over_steps(dir.path()), 1);
        assert_eq!(taken_over_steps(&dir.path().join("missing")), 0);
    }
}
