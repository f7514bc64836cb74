//! Online GRPO's rollouts: episodes of the policy being trained, on
//! in-process virtual phones, with the task's oracle naming the right answer
//! at every screen the policy reaches.
//!
//! Each optimizer step rolls out `online.phones` whole episodes at once, one
//! phone per thread, through agent-core's agent loop (the same parser,
//! safety gate, coordinate mapping and stop rules as `btl run`). Episodes run
//! as on a phone: the checker never ends one; it ends when the policy says
//! Finish, at the step budget, or at another of the agent's stops. At every
//! step the episode's policy, a [`StateRequest`] sent to the trainer's
//! thread, asks for answers; the trainer samples a group there, scores it and
//! answers with the completion the episode continues with. So the model runs
//! on one thread (libtorch's own threads do the arithmetic) while the phones
//! render, settle and record in theirs.
//!
//! What a state's completions are scored against:
//! - the **process reward**: the BTL reward against the oracle's answer on
//!   that screen, as the sample `btl collect --relabel oracle` and
//!   `btl-train data` would make of it (`state_sample`);
//! - the **outcome reward**: `outcome_weight` for a completion that ends the
//!   episode (Finish) when the task checker says the task is done on that
//!   screen — the success a phone-style episode is judged by.
//!
//! Every choice is a function of the run's seed and the step: which task
//! instances a step plays ([`episodes`]) and, through the observation's
//! sampling seed, every draw of every state, so a step's rollouts are the
//! same whichever phone thread asks first.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};

use agent_core::agent::trajectory::Outcome;
use agent_core::agent::{Agent, StopReason};
use agent_core::device::sim::SimDevice;
use agent_core::model::{
    GenerationStats, Observation, OraclePolicy, Policy, PolicyError, PolicyOutput,
};
use agent_core::protocol::{Action, Link, ParseMode, Profile, parse};
use agent_core::reward::RewardBreakdown;
use agent_core::sample::Sample;
use agent_core::sample::state::observation_sample;
use agent_core::sim::phone::PhoneConfig;
use agent_core::sim::phone_style_config;
use agent_core::sim::tasks::{self, Split, Task};
use agent_core::sim::virtual_phone::VirtualPhone;
use image::RgbaImage;
use serde::{Deserialize, Serialize};

use super::trainer::Reward;
use crate::error::{Error, Result};

/// `[online]`: GRPO on the virtual phone instead of recorded samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OnlineSection {
    /// Suite templates the episodes play, in turn; `["all"]` for every one.
    pub tasks: Vec<String>,
    /// Instances of the training split, or the plain suite's.
    pub split: OnlineSplit,
    /// Episodes per optimizer step, each on its own phone and thread.
    pub phones: usize,
    /// Instance number of the first episode; later episodes take the next
    /// ones (so a run can start past the instances its SFT data used).
    pub first_instance: u64,
    /// Step budget of an episode [default: the task's].
    pub max_steps: Option<u32>,
    /// Prompt profile; it must have Finish, since episodes end as on a phone.
    pub profile: Profile,
    /// Which completion of a state's group the episode goes on with.
    pub continue_with: Continuation,
    /// The outcome reward: added to a completion that says Finish on a
    /// screen where the task is done.
    pub outcome_weight: f64,
    /// Keep every step's episodes (trajectories with the oracle's answer as
    /// each step's target, which `btl-train data from-trajectories` turns
    /// into samples) under `OUTPUT_DIR/rollouts/`; off, they are deleted
    /// after the step.
    pub keep_rollouts: bool,
}

impl Default for OnlineSection {
    fn default() -> Self {
        Self {
            tasks: vec!["all".to_owned()],
            split: OnlineSplit::Train,
            phones: 2,
            first_instance: 0,
            max_steps: None,
            profile: Profile::BtlExtended,
            continue_with: Continuation::Sampled,
            outcome_weight: 1.0,
            keep_rollouts: false,
        }
    }
}

/// Which instances online episodes play (never the held-out split: success
/// rates are measured there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnlineSplit {
    Train,
    /// Training instances with made-up names, titles and queries.
    #[serde(rename = "train-open")]
    TrainOpen,
    /// The plain suite's seeds (0, 1, …), as `btl bench --suite sim`.
    Suite,
}

/// The completion an episode continues with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Continuation {
    /// The group's first draw: the policy's own behaviour.
    Sampled,
    /// The completion with the highest reward (the first of equals).
    Best,
}

impl Continuation {
    /// The index of the completion to continue with.
    pub fn pick(self, rewards: &[f64]) -> usize {
        match self {
            Continuation::Sampled => 0,
            Continuation::Best => rewards
                .iter()
                .enumerate()
                .fold(0, |best, (i, &r)| if r > rewards[best] { i } else { best }),
        }
    }
}

impl OnlineSection {
    /// The template names the episodes play, checked.
    pub fn task_names(&self) -> Result<Vec<&'static str>> {
        let all: Vec<&'static str> = tasks::templates().iter().map(|t| t.name).collect();
        if self.tasks.iter().any(|t| t == "all") {
            return Ok(all);
        }
        self.tasks
            .iter()
            .map(|name| {
                all.iter().copied().find(|t| t == name).ok_or_else(|| {
                    Error::Input(format!(
                        "config: online.tasks: no suite task named '{name}' (`btl sim tasks` lists them)"
                    ))
                })
            })
            .collect()
    }

    pub fn validate(&self) -> Result<()> {
        let bad = |field: &str, message: String| {
            Err(Error::Input(format!("config: online.{field}: {message}")))
        };
        if self.tasks.is_empty() {
            return bad("tasks", "names no task".into());
        }
        self.task_names()?;
        if self.phones == 0 {
            return bad("phones", "must be at least 1".into());
        }
        if self.max_steps == Some(0) {
            return bad("max_steps", "must be at least 1".into());
        }
        if !self.profile.allows(&Action::Finish { answer: None }) {
            return bad(
                "profile",
                format!(
                    "{} has no Finish, and online episodes end as on a phone, when the policy says Finish: use btl-extended",
                    self.profile.name()
                ),
            );
        }
        if !(self.outcome_weight >= 0.0 && self.outcome_weight.is_finite()) {
            return bad(
                "outcome_weight",
                format!("must be ≥ 0, not {}", self.outcome_weight),
            );
        }
        Ok(())
    }
}

/// One episode of a step: the task instance and the slot it runs in.
pub struct EpisodePlan {
    pub slot: usize,
    pub task: Arc<dyn Task>,
    pub seed: u64,
}

/// The episodes of optimizer step `step` (0-based): episode `k = step ·
/// phones + slot` of the run plays template `k mod n` of `names`, instance
/// `first_instance + k div n`.
pub fn episodes(
    online: &OnlineSection,
    names: &[&'static str],
    step: u64,
) -> Result<Vec<EpisodePlan>> {
    let n = names.len() as u64;
    if n == 0 {
        return Err(Error::Input("config: online.tasks: names no task".into()));
    }
    (0..online.phones)
        .map(|slot| {
            let k = step * online.phones as u64 + slot as u64;
            let name = names[(k % n) as usize];
            let instance = online.first_instance + k / n;
            let seed = match online.split {
                OnlineSplit::Train => Split::Train.seed(instance),
                OnlineSplit::TrainOpen => Split::TrainOpen.seed(instance),
                OnlineSplit::Suite => instance,
            };
            let task = tasks::sample(name, seed).ok_or_else(|| {
                Error::Input(format!(
                    "config: online.tasks: no suite task named '{name}'"
                ))
            })?;
            Ok(EpisodePlan {
                slot,
                task: Arc::from(task),
                seed,
            })
        })
        .collect()
}

/// A screen an episode reached, and what the oracle answers there.
pub struct StateRequest {
    /// The episode's slot in the step.
    pub slot: usize,
    /// How many requests the episode made before this one.
    pub index: u32,
    /// The observation's sampling seed (the agent's, per step and attempt).
    pub seed: u64,
    pub screenshot: RgbaImage,
    /// `max_pixels` of the episode's model frame.
    pub max_pixels: u64,
    /// The oracle's answer on this screen as a sample: the prompt the
    /// policy was shown, and the solution, target box and ROIs the BTL
    /// reward reads.
    pub target: Sample,
    /// Whether the task checker says the task is done on this screen.
    pub done: bool,
}

/// How the episodes of a step run.
pub struct EpisodeSettings {
    pub profile: Profile,
    pub max_pixels: u64,
    pub max_steps: Option<u32>,
    /// Each episode is recorded in a subdirectory.
    pub dir: PathBuf,
}

/// How one episode ended.
#[derive(Debug, Clone)]
pub struct EpisodeResult {
    pub slot: usize,
    pub task: &'static str,
    pub seed: u64,
    pub outcome: Outcome,
}

/// The completion a state's episode goes on with, and what it earned
/// (recorded with the step).
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub completion: String,
    pub reward: f64,
}

type Reply = mpsc::Sender<std::result::Result<Answer, String>>;

/// Runs `plans` at once, one thread each, answering every state on this
/// thread with `answer` (the completion to execute and its reward). The
/// episodes' results in slot order. The first error, of `answer` or of an
/// episode, cancels the others (the agent's cancel flag: they stop before
/// their next step) and is returned.
pub fn run_episodes(
    plans: Vec<EpisodePlan>,
    settings: &EpisodeSettings,
    mut answer: impl FnMut(StateRequest) -> Result<Answer>,
) -> Result<Vec<EpisodeResult>> {
    let (tx, rx) = mpsc::channel::<(StateRequest, Reply)>();
    let cancel = Arc::new(AtomicBool::new(false));
    std::thread::scope(|scope| {
        let handles: Vec<_> = plans
            .into_iter()
            .map(|plan| {
                let (tx, cancel) = (tx.clone(), cancel.clone());
                let what = format!(
                    "{} (slot {}, seed {})",
                    plan.task.name(),
                    plan.slot,
                    plan.seed
                );
                (
                    what,
                    scope.spawn(move || run_episode(plan, settings, tx, cancel)),
                )
            })
            .collect();
        drop(tx);
        let mut failure = None;
        for (request, reply) in rx {
            let result = match failure {
                Some(_) => Err("the step was abandoned after an earlier error".to_owned()),
                None => answer(request).map_err(|e| {
                    cancel.store(true, Ordering::SeqCst);
                    let message = e.to_string();
                    failure = Some(e);
                    message
                }),
            };
            // An episode that stopped waiting has ended already.
            let _ = reply.send(result);
        }
        let mut results = Vec::with_capacity(handles.len());
        for (what, handle) in handles {
            let result = handle.join().map_err(|_| {
                Error::Input(format!("the thread of online episode {what} panicked"))
            })?;
            match result {
                Ok(result) => results.push(result),
                Err(e) if failure.is_none() => failure = Some(Error::Input(e)),
                Err(_) => {}
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(results),
        }
    })
}

/// One episode on a fresh virtual phone.
fn run_episode(
    plan: EpisodePlan,
    settings: &EpisodeSettings,
    tx: mpsc::Sender<(StateRequest, Reply)>,
    cancel: Arc<AtomicBool>,
) -> std::result::Result<EpisodeResult, String> {
    let result = play(plan, settings, tx, cancel.clone());
    if result.is_err() {
        cancel.store(true, Ordering::SeqCst);
    }
    result
}

fn play(
    plan: EpisodePlan,
    settings: &EpisodeSettings,
    tx: mpsc::Sender<(StateRequest, Reply)>,
    cancel: Arc<AtomicBool>,
) -> std::result::Result<EpisodeResult, String> {
    let EpisodePlan { slot, task, seed } = plan;
    let name = task.name();
    let context = |e: String| format!("online episode {name} (seed {seed}): {e}");
    let phone = Arc::new(VirtualPhone::new(PhoneConfig {
        seed,
        ..PhoneConfig::default()
    }));
    phone.with_phone(|p| task.setup(p));
    let checker = |phone: Arc<VirtualPhone>, task: Arc<dyn Task>| {
        move || phone.with_phone(|p| task.is_successful(p.state()))
    };
    let oracle = tasks::sample(name, seed).ok_or_else(|| context("no such task".into()))?;
    let policy = StatePolicy {
        slot,
        goal: task.goal(),
        max_pixels: settings.max_pixels,
        oracle: OraclePolicy::new(oracle),
        done: Box::new(checker(phone.clone(), task.clone())),
        tx,
        calls: 0,
    };
    let config = phone_style_config(
        task.goal(),
        settings.profile,
        settings.max_pixels,
        settings.max_steps.unwrap_or_else(|| task.max_steps()),
        seed,
    );
    let dir = settings.dir.join(format!("{slot:02}-{name}-s{seed}"));
    let agent = Agent::new(
        &dir,
        config,
        Box::new(SimDevice::new(phone.clone())),
        Box::new(policy),
    )
    .map_err(|e| context(e.to_string()))?
    .with_task(serde_json::json!({"name": name, "params": task.params()}))
    .map_err(|e| context(e.to_string()))?
    .with_checker(checker(phone, task.clone()))
    .with_cancel(cancel);
    let outcome = agent.run().map_err(|e| context(e.to_string()))?;
    if let StopReason::PolicyFailed { error } = &outcome.stop {
        return Err(context(error.clone()));
    }
    Ok(EpisodeResult {
        slot,
        task: name,
        seed,
        outcome,
    })
}

/// The policy an online episode runs: the oracle labels the screen, the
/// trainer answers.
struct StatePolicy {
    slot: usize,
    goal: String,
    max_pixels: u64,
    oracle: OraclePolicy,
    done: Box<dyn FnMut() -> bool + Send>,
    tx: mpsc::Sender<(StateRequest, Reply)>,
    calls: u32,
}

impl Policy for StatePolicy {
    fn name(&self) -> String {
        "the policy in training".to_owned()
    }

    fn act(&mut self, obs: &Observation) -> std::result::Result<PolicyOutput, PolicyError> {
        let target = self.oracle.act(obs)?.raw;
        let sample = observation_sample(
            obs,
            &target,
            &self.goal,
            self.max_pixels,
            format!("slot-{}/state-{}", self.slot, self.calls),
        )
        .map_err(PolicyError::Backend)?;
        let request = StateRequest {
            slot: self.slot,
            index: self.calls,
            seed: obs.seed,
            screenshot: obs
                .screenshot
                .ok_or_else(|| {
                    PolicyError::Backend("an online rollout's step has no screenshot".into())
                })?
                .clone(),
            max_pixels: self.max_pixels,
            target: sample,
            done: (self.done)(),
        };
        self.calls += 1;
        let (reply, answer) = mpsc::channel();
        let gone = || PolicyError::Backend("the trainer stopped answering".to_owned());
        self.tx.send((request, reply)).map_err(|_| gone())?;
        let answer = answer
            .recv()
            .map_err(|_| gone())?
            .map_err(PolicyError::Backend)?;
        Ok(PolicyOutput {
            raw: answer.completion,
            stats: GenerationStats::default(),
            target: Some(target),
            overruled: None,
            reward: Some(answer.reward),
        })
    }
}

/// What one completion of a state earned.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    /// The process reward (the BTL reward against the oracle's answer).
    pub process: RewardBreakdown,
    /// 1 when the completion says Finish on a screen where the task is done.
    pub outcome: f64,
    /// `process.total + outcome_weight · outcome`: what advantages compare.
    pub total: f64,
}

/// Scores `completion` at the state `request` describes.
pub fn score(
    reward: &dyn Reward,
    request: &StateRequest,
    completion: &str,
    outcome_weight: f64,
) -> Scored {
    let process = reward.score(&request.target, completion);
    let finishes = parse(completion, ParseMode::default()).is_ok_and(|p| {
        matches!(
            p.output.link,
            Link::Action {
                action: Action::Finish { .. },
                ..
            }
        )
    });
    let outcome = f64::from(u8::from(finishes && request.done));
    Scored {
        process,
        outcome,
        total: process.total + outcome_weight * outcome,
    }
}

/// A step's episodes that are not kept: a staging directory in the run's
/// output directory, removed when this is dropped and held locked until
/// then, so that a run killed midway leaves it for the next run's sweep
/// (`crate::atomic::sweep`) to remove, rather than a directory of
/// screenshots in the system's temporary directory that nobody removes.
pub struct PassingRollouts {
    _dir: tempfile::TempDir,
    _held: std::fs::File,
}

/// Where a step's episodes are recorded: kept under the run's output
/// directory, or in a staging directory there deleted with the returned
/// guard.
pub fn rollout_dir(
    output_dir: &Path,
    step: u64,
    keep: bool,
) -> Result<(PathBuf, Option<PassingRollouts>)> {
    if keep {
        let dir = output_dir
            .join("rollouts")
            .join(format!("step-{:06}", step + 1));
        // A step interrupted before its checkpoint is rolled out again.
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|source| Error::Io {
                path: dir.clone(),
                source,
            })?;
        }
        std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
            path: dir.clone(),
            source,
        })?;
        return Ok((dir, None));
    }
    let io_error = |source| Error::Io {
        path: output_dir.to_owned(),
        source,
    };
    let prefix = format!("{}rollouts-", agent_core::atomic::STAGING_PREFIX);
    let dir = agent_core::atomic::staging_dir(output_dir, &prefix).map_err(io_error)?;
    let held = crate::atomic::hold(dir.path())?;
    let path = dir.path().to_owned();
    Ok((
        path,
        Some(PassingRollouts {
            _dir: dir,
            _held: held,
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Episodes that are not kept are recorded in the output directory,
    /// held while the step lives and removed after it; what a killed run
    /// left there is the next run's sweep's to remove.
    #[test]
    fn passing_rollouts_stay_in_the_output_directory() {
        let out = tempfile::tempdir().unwrap();
        let aged = |path: &Path| {
            let then = std::time::SystemTime::now()
                - agent_core::atomic::ABANDONED_AFTER
                - std::time::Duration::from_secs(5);
            std::fs::File::open(path)
                .unwrap()
                .set_modified(then)
                .unwrap();
        };
        let (dir, guard) = rollout_dir(out.path(), 3, false).unwrap();
        assert_eq!(dir.parent(), Some(out.path()));
        std::fs::write(dir.join("episode.json"), "{}").unwrap();
        aged(&dir);
        crate::atomic::sweep(out.path());
        assert!(dir.join("episode.json").is_file(), "a live step's are kept");
        drop(guard);
        assert!(!dir.exists());

        let left = out.path().join(format!(
            "{}rollouts-killed",
            agent_core::atomic::STAGING_PREFIX
        ));
        std::fs::create_dir(&left).unwrap();
        aged(&left);
        crate::atomic::sweep(out.path());
        assert!(!left.exists());

        let (kept, guard) = rollout_dir(out.path(), 3, true).unwrap();
        assert!(guard.is_none());
        assert_eq!(kept, out.path().join("rollouts/step-000004"));
    }

    #[test]
    fn best_continuation_takes_the_first_of_the_highest() {
        assert_eq!(Continuation::Best.pick(&[0.1, 0.7, 0.7, 0.2]), 1);
        assert_eq!(Continuation::Best.pick(&[0.5]), 0);
        assert_eq!(Continuation::Sampled.pick(&[0.1, 0.9]), 0);
    }

    #[test]
    fn episodes_take_the_templates_in_turn_and_new_instances_after() {
        let online = OnlineSection {
            tasks: vec!["wifi_on".into(), "wifi_off".into(), "home_screen".into()],
            phones: 2,
            first_instance: 5,
            ..OnlineSection::default()
        };
        let names = online.task_names();
        // An unknown name is refused, by name.
        let e = names.unwrap_err().to_string();
        assert!(
            e.contains("home_screen") && e.contains("online.tasks"),
            "{e}"
        );
        let online = OnlineSection {
            tasks: vec![
                "wifi_on".into(),
                "wifi_off".into(),
                "airplane_mode_on".into(),
            ],
            ..online
        };
        let names = online.task_names().unwrap();
        // Steps 0 and 1: episodes k = 0, 1 | 2, 3 → templates 0, 1 | 2, 0
        // (instance 5 + ⌊3/3⌋ = 6 for the fourth).
        let plan = |step| -> Vec<(&str, u64)> {
            episodes(&online, &names, step)
                .unwrap()
                .iter()
                .map(|e| (e.task.name(), e.seed))
                .collect()
        };
        let train = |k| Split::Train.seed(k);
        assert_eq!(plan(0), [("wifi_on", train(5)), ("wifi_off", train(5))]);
        assert_eq!(
            plan(1),
            [("airplane_mode_on", train(5)), ("wifi_on", train(6))]
        );
    }

    /// The toy of the issue: a policy over two answers, the oracle's and a
    /// wrong Home, that prefers the wrong one (logits [0, 2]). One online
    /// step on wifi_on's first screen: the episode's state is scored
    /// against the oracle's answer there, and the group's GRPO objective
    /// (the trainer's [`objective`]) moves the logits toward the oracle's
    /// answer by the amount worked out by hand below.
    #[test]
    fn online_grpo_moves_a_wrong_toy_policy_toward_the_oracle() {
        use super::super::loss::{Objective, group_advantages, objective};
        use super::super::trainer::BtlReward;
        use agent_core::protocol::{BtlOutput, render};
        use agent_core::reward::{RewardMode, Weights};
        use tch::{Kind, Tensor};

        let online = OnlineSection {
            tasks: vec!["wifi_on".into()],
            split: OnlineSplit::Suite,
            phones: 1,
            max_steps: Some(1),
            ..OnlineSection::default()
        };
        let names = online.task_names().unwrap();
        let plans = episodes(&online, &names, 0).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let settings = EpisodeSettings {
            profile: online.profile,
            max_pixels: 200_704,
            max_steps: online.max_steps,
            dir: dir.path().to_owned(),
        };
        let reward = BtlReward {
            mode: RewardMode::default(),
            weights: Weights::default(),
        };
        let home = render(&BtlOutput {
            blink: vec![],
            think: "Go home.".into(),
            link: Link::Action {
                plan: "Go home.".into(),
                action: Action::Home,
            },
        })
        .unwrap();
        // Candidate 0 is the oracle's answer, 1 the wrong one; the group's
        // four draws are fixed: wrong, right, wrong, wrong.
        let draws = [1usize, 0, 1, 1];
        let mut groups = Vec::new();
        let ended = run_episodes(plans, &settings, |request| {
            let right = crate::sft::target_answer(&request.target, request.max_pixels, 5)?;
            assert!(right.contains("\"Tap\""), "{right}");
            let candidates = [right, home.clone()];
            let rewards: Vec<f64> = draws
                .iter()
                .map(|&d| score(&reward, &request, &candidates[d], 1.0).total)
                .collect();
            let answer = Answer {
                completion: candidates[draws[0]].clone(),
                reward: rewards[0],
            };
            groups.push(rewards);
            Ok(answer)
        })
        .unwrap();
        assert_eq!(ended.len(), 1);
        assert_eq!(groups.len(), 1, "one state in a one-step episode");
        let rewards = &groups[0];
        // The episode's step records what the executed draw earned.
        let episode = std::fs::read_dir(dir.path())
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let steps = agent_core::agent::trajectory::read_trajectory(&episode)
            .unwrap()
            .steps;
        assert_eq!(steps[0].reward, Some(rewards[0]));
        assert_eq!(steps[0].attempts[0].reward, Some(rewards[0]));
        let (r_right, r_wrong) = (rewards[1], rewards[0]);
        // The oracle's own answer earns the whole reward; Home on the home
        // screen gets the format term and no link.
        assert!((r_right - 1.0).abs() < 1e-12, "{rewards:?}");
        assert!(r_wrong < 0.5, "{rewards:?}");

        let theta = Tensor::from_slice(&[0.0f64, 2.0]).set_requires_grad(true);
        let p_right = |t: &Tensor| t.softmax(0, Kind::Double).double_value(&[0]);
        let before = p_right(&theta);
        let chosen = Tensor::from_slice(&draws.map(|d| d as i64));
        let logp = theta
            .log_softmax(0, Kind::Double)
            .gather(0, &chosen, false)
            .unsqueeze(-1);
        let advantages = group_advantages(rewards).unwrap();
        let terms = objective(
            &logp,
            &logp.detach(),
            None,
            &Tensor::from_slice(&advantages),
            &Tensor::ones([4, 1], (Kind::Double, tch::Device::Cpu)),
            Objective {
                beta: 0.0,
                epsilon: 0.2,
            },
        )
        .unwrap();
        terms
            .per_sequence
            .sum(Kind::Double)
            .divide_scalar(4.0)
            .backward();
        let lr = 1.0;
        let after = tch::no_grad(|| &theta - theta.grad() * lr);
        // By hand: Δ = r_right − r_wrong; three equal rewards and one other
        // have mean r_wrong + Δ/4 and unbiased std Δ/2, so A_right =
        // (3Δ/4) / (Δ/2 + 1e-4) and A_wrong = −A_right/3. At ratio 1 the
        // loss −(1/4) Σ Aᵢ log p(aᵢ) has gradient −(1/4) Σ Aᵢ (e_aᵢ − p),
        // and Σ Aᵢ = 0 leaves −(1/4) A_right on the right logit and
        // +(1/4) A_right on the wrong one.
        let delta = r_right - r_wrong;
        let a_right = 0.75 * delta / (0.5 * delta + 1e-4);
        let moved = [
            after.double_value(&[0]) - 0.0,
            after.double_value(&[1]) - 2.0,
        ];
        assert!((moved[0] - lr * a_right / 4.0).abs() < 1e-12, "{moved:?}");
        assert!((moved[1] + lr * a_right / 4.0).abs() < 1e-12, "{moved:?}");
        assert!(p_right(&after) > before, "{before} → {}", p_right(&after));
    }

    #[test]
    fn a_profile_without_finish_is_refused() {
        let online = OnlineSection {
            profile: Profile::BtlUi,
            ..OnlineSection::default()
        };
        let e = online.validate().unwrap_err().to_string();
        assert!(
            e.contains("online.profile") && e.contains("btl-extended"),
            "{e}"
        );
        assert!(OnlineSection::default().validate().is_ok());
    }
}
