//! The agent loop: observe, prompt, ask the policy, parse, gate, act, wait
//! for the screen to settle, record; until the model says Finish, the task
//! checker says done, the step budget runs out or something stops it. Every
//! stop has a [`StopReason`] recorded in `episode.json`.
//!
//! Nothing runs that the gate has not passed: an answer that does not
//! parse, points off the model frame or asks for an action outside the
//! profile is never executed; the policy is asked again with another seed,
//! up to [`AgentConfig::max_attempts`] times per step. A sensitive action
//! that is denied or declined ends the episode instead, because asking
//! again would only be hunting for a way around the person who said no.
//!
//! # Layout
//! - [`safety`]: the gate, a pure function of the answer and the screen.
//! - [`stability`]: waiting for the screen to settle, and the [`Clock`].
//! - [`trajectory`]: the episode directory: writer, reader, records.
//! - [`vote`]: test-time voting among several sampled answers.

pub mod safety;
pub mod stability;
pub mod trajectory;
pub mod vote;

use crate::device::elements::screen_elements;
use crate::device::ui::UiNode;
use crate::device::{Device, DeviceAction, DeviceError};
use crate::model::{Observation, Policy, PolicyOutput};
use crate::protocol::{
    Action, FrameMap, Link, ParseMode, Profile, Prompt, ScreenElement, Size, TRAINING_MAX_PIXELS,
    Task, parse,
};
use image::RgbaImage;
use safety::{ConfirmRequest, Confirmer, DenyAll, Rejection, SafetyConfig, Verdict};
use serde::{Deserialize, Serialize};
use stability::{Clock, StabilityConfig, SystemClock, millis, wait_until_stable};
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};
use thiserror::Error;
use trajectory::{
    AttemptRecord, EpisodeRecord, Executed, FORMAT_VERSION, Outcome, ParseRecord, StepOutcome,
    StepRecord, StepTimings, TrajectoryError, TrajectoryWriter, step_stem,
};

/// Everything that shapes an episode, recorded in `episode.json` so a
/// resume continues with the same settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentConfig {
    pub goal: String,
    pub profile: Profile,
    pub parse_mode: ParseMode,
    /// `max_pixels` of the model frame.
    pub max_pixels: u64,
    /// Replaces the prompt's literal `$N$` when set.
    pub roi_count: Option<usize>,
    /// Steps recorded, whatever their outcome.
    pub max_steps: u32,
    /// Answers asked for per step before giving up on unusable ones.
    pub max_attempts: u32,
    /// The same action on an unchanged screen this many times stops the
    /// episode; the last repetition is not performed. Below 2, never.
    pub repeat_limit: u32,
    /// Base of the per-attempt sampling seeds.
    pub seed: u64,
    /// Answers sampled per round for test-time voting; 1 or less, no vote.
    pub vote: u32,
    pub stability: StabilityConfig,
    pub safety: SafetyConfig,
    /// The success checker ends the episode once the task is done. Off, it
    /// only records its verdict after each step (`task_done`), and the
    /// episode ends as it would on a phone: when the model says Finish, at
    /// the step budget, or at another stop; the outcome's success is the
    /// checker's verdict then.
    pub stop_on_success: bool,
}

/// The most answers sampled per round of voting (`btl run --vote`, the
/// phone app's `vote`): each is a model call on the step's screen.
pub const MAX_VOTE: u32 = 32;

/// The most rounds of answers asked for per step before it is given up.
pub const MAX_ATTEMPTS: u32 = 32;

impl AgentConfig {
    /// Refuses, in words, settings beyond the bounds an episode runs
    /// within. The CLI bounds its flags, but settings also come from an
    /// `episode.json` a resume reads and from the phone app's session file.
    pub fn check(&self) -> Result<(), String> {
        if self.max_pixels < crate::protocol::MIN_PIXELS {
            return Err(format!(
                "max_pixels = {} is below {}, the fewest pixels of a model frame",
                self.max_pixels,
                crate::protocol::MIN_PIXELS
            ));
        }
        if self.vote > MAX_VOTE {
            return Err(format!("vote = {} is above {MAX_VOTE}", self.vote));
        }
        if self.max_attempts > MAX_ATTEMPTS {
            return Err(format!(
                "max_attempts = {} is above {MAX_ATTEMPTS}",
                self.max_attempts
            ));
        }
        Ok(())
    }
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            goal: String::new(),
            profile: Profile::default(),
            parse_mode: ParseMode::default(),
            max_pixels: TRAINING_MAX_PIXELS,
            roi_count: None,
            max_steps: 30,
            max_attempts: 3,
            repeat_limit: 3,
            seed: 0,
            vote: 1,
            stability: StabilityConfig::default(),
            safety: SafetyConfig::default(),
            stop_on_success: true,
        }
    }
}

/// Why an episode ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum StopReason {
    /// The policy answered Finish (profile `btl-extended`): a model, or the
    /// oracle that demonstrates it.
    Finished {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answer: Option<String>,
    },
    /// The success checker reported the task done.
    Succeeded,
    /// `max_steps` steps were recorded.
    StepBudget { max_steps: u32 },
    /// The model repeated one action on an unchanged screen.
    RepeatedAction { action: Action, times: u32 },
    /// No usable answer in `attempts` tries at one step.
    NoValidOutput { attempts: u32, last_error: String },
    /// A sensitive action was denied by policy or declined by the user.
    SensitiveAction { rejection: Rejection },
    /// The screenshot was a single colour: a secure screen (payment,
    /// password) or a display that is off; the model is not shown it.
    BlankScreen,
    /// The policy produced no answer.
    PolicyFailed { error: String },
    /// The device failed, or its screen has a size the model cannot take.
    DeviceFailed { error: String },
    /// Someone stopped the episode (the app's Stop button).
    Cancelled,
}

impl StopReason {
    /// Whether an episode that stopped this way can be continued: the
    /// device was lost (a cable pulled, an emulator restarted), not the
    /// episode. [`Agent::resume`] takes it up where it stopped, its steps
    /// intact.
    pub fn resumable(&self) -> bool {
        matches!(self, Self::DeviceFailed { .. })
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Finished { answer: None } => f.write_str("the policy said Finish"),
            Self::Finished { answer: Some(a) } => write!(f, "the policy said Finish: {a}"),
            Self::Succeeded => f.write_str("the task checker reports success"),
            Self::StepBudget { max_steps } => write!(f, "step budget of {max_steps} used up"),
            Self::RepeatedAction { action, times } => write!(
                f,
                "{} repeated {times} times on an unchanged screen",
                action.function()
            ),
            Self::NoValidOutput {
                attempts,
                last_error,
            } => write!(f, "no usable answer in {attempts} attempts: {last_error}"),
            Self::SensitiveAction { rejection } => rejection.fmt(f),
            Self::BlankScreen => {
                f.write_str("the screen is blank or secure; it was not sent to the model")
            }
            Self::PolicyFailed { error } => write!(f, "the policy failed: {error}"),
            Self::DeviceFailed { error } => write!(f, "the device failed: {error}"),
            Self::Cancelled => f.write_str("stopped by the user"),
        }
    }
}

/// Tells whether the task is done; the virtual phone's task checker plugs
/// in here. Called after every performed action and at Finish.
pub trait SuccessCheck: Send {
    fn is_successful(&mut self) -> bool;
}

impl<F: FnMut() -> bool + Send> SuccessCheck for F {
    fn is_successful(&mut self) -> bool {
        self()
    }
}

/// Why the agent could not run or record an episode. Device and policy
/// failures are not errors: they end the episode with a [`StopReason`].
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum AgentError {
    #[error(transparent)]
    Trajectory(#[from] TrajectoryError),
    /// The episode to resume already has an outcome.
    #[error("the episode in {dir} already ended ({stop}); nothing to resume")]
    AlreadyEnded { dir: String, stop: StopReason },
    /// The episode to resume was recorded by another policy, or by other
    /// weights of the same name: continuing it would mix two policies'
    /// steps in one trajectory.
    #[error("{dir} holds {reason}; resume it with the policy that recorded it")]
    OtherPolicy { dir: String, reason: String },
    #[error("cannot read the device before starting: {0}")]
    Device(#[from] DeviceError),
    /// Settings [`AgentConfig::check`] refuses.
    #[error("invalid agent settings{at}: {reason}")]
    Settings { at: String, reason: String },
    /// The policy's decoding budget (`--max-tokens`) holds no constrained
    /// answer on the episode's frame.
    #[error("--max-tokens {max_tokens}: {reason}")]
    Budget { max_tokens: u32, reason: String },
}

/// One episode: a device, a policy and the directory it is recorded in.
pub struct Agent {
    device: Box<dyn Device>,
    policy: Box<dyn Policy>,
    checker: Option<Box<dyn SuccessCheck>>,
    confirmer: Box<dyn Confirmer>,
    clock: Box<dyn Clock>,
    writer: TrajectoryWriter,
    episode: EpisodeRecord,
    history: Vec<String>,
    steps: u32,
    /// Screen hash and device action of the performed steps, newest last;
    /// on resume, read back from the recorded screenshots ([`recent_keys`]).
    recent: Vec<(u64, DeviceAction)>,
    /// The settled screenshot after the last action: the next observation.
    next_screenshot: Option<RgbaImage>,
    on_step: Option<StepObserver>,
    cancel: Option<Arc<AtomicBool>>,
}

/// What the parser and the gate made of one answer, before anyone is
/// asked to confirm it.
enum Judged {
    /// A well-formed action of the profile on the frame; the verdict says
    /// whether it may run, must be confirmed or is denied.
    Valid {
        plan: String,
        action: Action,
        verdict: Verdict,
    },
    Unusable(String),
}

/// Called with every step once it is recorded.
pub type StepObserver = Box<dyn FnMut(&StepRecord) + Send>;

impl Agent {
    /// Starts a new episode recorded in `dir`, which must not hold one.
    pub fn new(
        dir: &Path,
        config: AgentConfig,
        mut device: Box<dyn Device>,
        policy: Box<dyn Policy>,
    ) -> Result<Self, AgentError> {
        config.check().map_err(|reason| AgentError::Settings {
            at: String::new(),
            reason,
        })?;
        let episode = EpisodeRecord {
            format: FORMAT_VERSION,
            goal: config.goal.clone(),
            task: None,
            device: device.name(),
            screen: device.screen_size()?,
            policy: policy.name(),
            policy_fingerprint: policy.fingerprint(),
            policy_decoding: policy.decoding(),
            settings: config,
            started_unix_ms: unix_ms(),
            resumed_at_steps: Vec::new(),
            outcome: None,
        };
        answers_fit(&episode, policy.as_ref())?;
        let writer = TrajectoryWriter::create(dir, &episode)?;
        Ok(Self::assemble(
            device,
            policy,
            writer,
            episode,
            Vec::new(),
            0,
        ))
    }

    /// Continues an interrupted episode, or one its device failed (see
    /// [`StopReason::resumable`], whose recorded outcome is cleared): its
    /// settings, Plan history and step count come from `dir`; a partial
    /// last line is cut off.
    pub fn resume(
        dir: &Path,
        device: Box<dyn Device>,
        policy: Box<dyn Policy>,
    ) -> Result<Self, AgentError> {
        let (writer, mut trajectory) = TrajectoryWriter::reopen(dir)?;
        trajectory
            .episode
            .settings
            .check()
            .map_err(|reason| AgentError::Settings {
                at: format!(" in {}", dir.join(trajectory::EPISODE_FILE).display()),
                reason,
            })?;
        if let Some(outcome) = trajectory.episode.ended() {
            return Err(AgentError::AlreadyEnded {
                dir: dir.display().to_string(),
                stop: outcome.stop.clone(),
            });
        }
        if let Some(reason) = trajectory.episode.other_policy(policy.as_ref()) {
            return Err(AgentError::OtherPolicy {
                dir: dir.display().to_string(),
                reason,
            });
        }
        answers_fit(&trajectory.episode, policy.as_ref())?;
        trajectory.episode.outcome = None;
        writer.cut_partial_line(trajectory.valid_len)?;
        let history = trajectory.history();
        let keep = (trajectory.episode.settings.repeat_limit as usize).saturating_sub(1);
        let recent = recent_keys(dir, &trajectory.steps, keep);
        let steps = u32::try_from(trajectory.steps.len()).unwrap_or(u32::MAX);
        let mut episode = trajectory.episode;
        episode.resumed_at_steps.push(steps);
        writer.write_episode(&episode)?;
        let mut agent = Self::assemble(device, policy, writer, episode, history, steps);
        agent.recent = recent;
        Ok(agent)
    }

    fn assemble(
        device: Box<dyn Device>,
        policy: Box<dyn Policy>,
        writer: TrajectoryWriter,
        episode: EpisodeRecord,
        history: Vec<String>,
        steps: u32,
    ) -> Self {
        Self {
            device,
            policy,
            checker: None,
            confirmer: Box::new(DenyAll),
            clock: Box::new(SystemClock::default()),
            writer,
            episode,
            history,
            steps,
            recent: Vec::new(),
            next_screenshot: None,
            on_step: None,
            cancel: None,
        }
    }

    pub fn with_checker(self, checker: impl SuccessCheck + 'static) -> Self {
        self.with_boxed_checker(Box::new(checker))
    }

    pub fn with_boxed_checker(mut self, checker: Box<dyn SuccessCheck>) -> Self {
        self.checker = Some(checker);
        self
    }

    pub fn with_boxed_confirmer(mut self, confirmer: Box<dyn Confirmer>) -> Self {
        self.confirmer = confirmer;
        self
    }

    /// Who decides on sensitive actions under `ask`; without one, they
    /// are declined.
    pub fn with_confirmer(mut self, confirmer: impl Confirmer + 'static) -> Self {
        self.confirmer = Box::new(confirmer);
        self
    }

    /// Progress reporting: `observer` sees each step after it is recorded.
    pub fn with_step_observer(
        mut self,
        observer: impl FnMut(&StepRecord) + Send + 'static,
    ) -> Self {
        self.on_step = Some(Box::new(observer));
        self
    }

    /// Stops the episode once `flag` is set: before the next step, and
    /// instead of the failure a device or policy reports when it was
    /// interrupted by the same stop.
    pub fn with_cancel(mut self, flag: Arc<AtomicBool>) -> Self {
        self.cancel = Some(flag);
        self
    }

    fn cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|f| f.load(Ordering::SeqCst))
    }

    /// The steps recorded so far (more than zero after a resume).
    pub fn steps(&self) -> u32 {
        self.steps
    }

    pub fn with_clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Box::new(clock);
        self
    }

    /// Records what the caller knows of the task in `episode.json`.
    pub fn with_task(mut self, task: serde_json::Value) -> Result<Self, AgentError> {
        self.episode.task = Some(task);
        self.writer.write_episode(&self.episode)?;
        Ok(self)
    }

    pub fn dir(&self) -> &Path {
        self.writer.dir()
    }

    /// The Plans of the steps performed so far.
    pub fn history(&self) -> &[String] {
        &self.history
    }

    /// Runs the episode to its end and records the outcome.
    pub fn run(mut self) -> Result<Outcome, AgentError> {
        let stop = loop {
            if self.cancelled() {
                break StopReason::Cancelled;
            }
            if self.steps >= self.config().max_steps {
                break StopReason::StepBudget {
                    max_steps: self.config().max_steps,
                };
            }
            if let Some(stop) = self.step()? {
                break match stop {
                    StopReason::PolicyFailed { .. } | StopReason::DeviceFailed { .. }
                        if self.cancelled() =>
                    {
                        StopReason::Cancelled
                    }
                    stop => stop,
                };
            }
        };
        let success = match stop {
            StopReason::Succeeded => Some(true),
            _ => self.checker.as_mut().map(|c| c.is_successful()),
        };
        let outcome = Outcome {
            stop,
            steps: self.steps,
            success,
        };
        self.episode.outcome = Some(outcome.clone());
        self.writer.write_episode(&self.episode)?;
        Ok(outcome)
    }

    pub fn config(&self) -> &AgentConfig {
        &self.episode.settings
    }

    /// One observation and what came of it; `Some` when the episode ends.
    fn step(&mut self) -> Result<Option<StopReason>, AgentError> {
        let index = self.steps + 1;
        let started = self.clock.now();
        let observed = self.observe();
        let (screenshot, ui_tree) = match observed {
            Ok(observed) => observed,
            Err(error) => {
                return Ok(Some(StopReason::DeviceFailed {
                    error: error.to_string(),
                }));
            }
        };
        let size = Size::new(screenshot.width(), screenshot.height());
        // The frame comes from the screenshot, not `screen_size`: it is the
        // image the model sees, in whatever rotation the device is in.
        let frame = match FrameMap::new(size, self.config().max_pixels) {
            Ok(frame) => frame,
            Err(error) => {
                return Ok(Some(StopReason::DeviceFailed {
                    error: error.to_string(),
                }));
            }
        };
        let screen = match (&ui_tree, self.config().profile.lists_screen()) {
            (Some(tree), true) => {
                screen_elements(tree, &frame, &self.config().safety.keyboard_packages)
            }
            _ => Vec::new(),
        };
        let prompt = Prompt::new(
            &Task::Navigation {
                goal: &self.episode.goal,
                step_instruction: None,
                history: &self.history,
                screen: &screen,
            },
            self.config().profile,
            self.config().roi_count,
        );
        let stem = step_stem(index);
        let mut record = StepRecord {
            index,
            screenshot: format!("{stem}.png"),
            ui_tree: ui_tree.as_ref().map(|_| format!("{stem}.xml")),
            frame,
            prompt,
            attempts: Vec::new(),
            executed: None,
            outcome: StepOutcome::BlankScreen,
            timings: StepTimings {
                observe_ms: millis(self.clock.now().saturating_sub(started)),
                ..StepTimings::default()
            },
            vote: None,
            target: None,
            task_done: None,
            reward: None,
        };
        let stop = self.decide_and_act(&mut record, &screenshot, ui_tree.as_ref(), &screen);
        if !self.config().stop_on_success
            && let Some(checker) = self.checker.as_mut()
        {
            record.task_done = Some(checker.is_successful());
        }
        self.writer
            .write_step(&record, &screenshot, ui_tree.as_ref())?;
        self.steps = index;
        if let Some(observer) = self.on_step.as_mut() {
            observer(&record);
        }
        if stop.is_none()
            && self.config().stop_on_success
            && let Some(checker) = self.checker.as_mut()
            && checker.is_successful()
        {
            return Ok(Some(StopReason::Succeeded));
        }
        Ok(stop)
    }

    fn observe(&mut self) -> Result<(RgbaImage, Option<UiNode>), DeviceError> {
        let screenshot = match self.next_screenshot.take() {
            Some(shot) => shot,
            None => self.device.screenshot()?,
        };
        Ok((screenshot, self.device.ui_tree()?))
    }

    /// Everything between observing and recording; fills in `record`.
    fn decide_and_act(
        &mut self,
        record: &mut StepRecord,
        screenshot: &RgbaImage,
        ui_tree: Option<&UiNode>,
        screen: &[ScreenElement],
    ) -> Option<StopReason> {
        if is_uniform(screenshot) {
            record.outcome = StepOutcome::BlankScreen;
            return Some(StopReason::BlankScreen);
        }
        let policy_started = self.clock.now();
        let chosen = self.ask(record, screenshot, ui_tree, screen);
        record.timings.policy_ms = millis(self.clock.now().saturating_sub(policy_started));
        let (plan, action) = match chosen {
            Ok(chosen) => chosen,
            Err((outcome, stop)) => {
                record.outcome = outcome;
                return Some(stop);
            }
        };
        let device_action = DeviceAction::from_model(&action, &record.frame);
        record.executed = Some(Executed {
            plan: plan.clone(),
            model: action.clone(),
            device: device_action.clone(),
        });
        let Some(device_action) = device_action else {
            record.outcome = StepOutcome::Finished;
            let Action::Finish { answer } = action else {
                // `from_model` maps every action but Finish.
                return Some(StopReason::Finished { answer: None });
            };
            return Some(StopReason::Finished { answer });
        };
        let key = (hash_image(screenshot), device_action.clone());
        if let Some(times) = self.would_repeat(&key) {
            record.outcome = StepOutcome::Repeated;
            return Some(StopReason::RepeatedAction { action, times });
        }
        let perform_started = self.clock.now();
        let performed = self.device.perform(&device_action);
        record.timings.perform_ms = millis(self.clock.now().saturating_sub(perform_started));
        if let Err(error) = performed {
            return Some(self.device_failed(record, error));
        }
        self.remember(plan, key);
        self.settle(record)
    }

    /// The repeat limit, when performing the action keyed `key` on this
    /// screen would make it the limit's worth of identical steps in a row.
    fn would_repeat(&self, key: &(u64, DeviceAction)) -> Option<u32> {
        let limit = self.config().repeat_limit;
        (limit >= 2
            && self.recent.len() + 1 >= limit as usize
            && self.recent.iter().all(|k| k == key))
        .then_some(limit)
    }

    /// A performed step: its Plan joins the history, its key the recent
    /// steps the repeat limit looks at.
    fn remember(&mut self, plan: String, key: (u64, DeviceAction)) {
        self.history.push(plan);
        self.recent.push(key);
        // Only the last `limit - 1` matter: with the next one they make
        // `limit` repetitions.
        let keep = (self.config().repeat_limit as usize).saturating_sub(1);
        if self.recent.len() > keep {
            self.recent.drain(..self.recent.len() - keep);
        }
    }

    /// Waits for the screen to settle after an action; its last screenshot
    /// is the next step's.
    fn settle(&mut self, record: &mut StepRecord) -> Option<StopReason> {
        let stability = self.config().stability;
        match wait_until_stable(self.device.as_mut(), self.clock.as_mut(), &stability) {
            Ok((shot, settle)) => {
                record.timings.settle = Some(settle);
                self.next_screenshot = Some(shot);
                record.outcome = StepOutcome::Performed;
                None
            }
            Err(error) => Some(self.device_failed(record, error)),
        }
    }

    fn device_failed(&self, record: &mut StepRecord, error: DeviceError) -> StopReason {
        let error = error.to_string();
        record.outcome = StepOutcome::DeviceFailed {
            error: error.clone(),
        };
        StopReason::DeviceFailed { error }
    }

    /// Asks the policy until an answer passes the gate (and the confirmer,
    /// when it asks), or the attempts run out. With voting, each attempt
    /// is a round of `vote` answers and the consensus of the valid ones is
    /// taken.
    fn ask(
        &mut self,
        record: &mut StepRecord,
        screenshot: &RgbaImage,
        ui_tree: Option<&UiNode>,
        screen: &[ScreenElement],
    ) -> Result<(String, Action), (StepOutcome, StopReason)> {
        let attempts = self.config().max_attempts.max(1);
        let per_round = self.config().vote.max(1);
        let mut last_error = String::new();
        for round in 0..attempts {
            let seeds: Vec<u64> = (0..per_round)
                .map(|c| attempt_seed(self.config().seed, record.index, round * per_round + c))
                .collect();
            let obs = Observation {
                screenshot: Some(screenshot),
                profile: self.config().profile,
                frame: record.frame,
                prompt: &record.prompt,
                ui_tree,
                screen,
                seed: seeds[0],
            };
            let answers = self.policy.act_many(&obs, &seeds).map_err(|e| {
                let error = e.to_string();
                (
                    StepOutcome::PolicyFailed {
                        error: error.clone(),
                    },
                    StopReason::PolicyFailed { error },
                )
            })?;
            if record.target.is_none() {
                record.target = answers.iter().find_map(|a| a.target.clone());
            }
            let mut valid = Vec::new();
            for (seed, answer) in seeds.iter().zip(answers) {
                let (attempt, judged) = self.judge(*seed, answer, &record.frame, ui_tree);
                record.attempts.push(attempt);
                match judged {
                    Judged::Valid {
                        plan,
                        action,
                        verdict,
                    } => valid.push((record.attempts.len() - 1, plan, action, verdict)),
                    Judged::Unusable(error) => last_error = error,
                }
            }
            let chosen = if per_round > 1 {
                let candidates: Vec<(usize, &Action)> =
                    valid.iter().map(|(i, _, a, _)| (*i, a)).collect();
                let Some(outcome) = vote::vote(&candidates, &record.frame, ui_tree) else {
                    continue;
                };
                let chosen = outcome.chosen;
                record.vote = Some(outcome);
                valid.into_iter().find(|(i, ..)| *i == chosen)
            } else {
                valid.into_iter().next()
            };
            let Some((index, plan, action, verdict)) = chosen else {
                continue;
            };
            record.reward = record.attempts.get(index).and_then(|a| a.reward);
            return self.settle_verdict(record, index, plan, action, verdict);
        }
        Err((
            StepOutcome::NoValidOutput,
            StopReason::NoValidOutput {
                attempts,
                last_error,
            },
        ))
    }

    /// Runs the chosen answer's verdict to its end, asking the confirmer
    /// when the gate says so and recording what it answered.
    fn settle_verdict(
        &mut self,
        record: &mut StepRecord,
        index: usize,
        plan: String,
        action: Action,
        verdict: Verdict,
    ) -> Result<(String, Action), (StepOutcome, StopReason)> {
        let blocked = |rejection| {
            (
                StepOutcome::Blocked,
                StopReason::SensitiveAction { rejection },
            )
        };
        match verdict {
            Verdict::Allow { .. } => Ok((plan, action)),
            Verdict::Reject { rejection } => Err(blocked(rejection)),
            Verdict::Confirm { sensitive } => {
                let request = ConfirmRequest {
                    goal: &self.episode.goal,
                    plan: &plan,
                    action: &action,
                    sensitive: &sensitive,
                };
                let confirmed = self.confirmer.confirm(&request);
                let (verdict, result) = if confirmed {
                    (
                        Verdict::Allow {
                            sensitive: Some(sensitive),
                        },
                        Ok((plan, action)),
                    )
                } else {
                    let rejection = Rejection::Declined { sensitive };
                    (
                        Verdict::Reject {
                            rejection: rejection.clone(),
                        },
                        Err(blocked(rejection)),
                    )
                };
                if let Some(attempt) = record.attempts.get_mut(index) {
                    attempt.verdict = Some(verdict);
                }
                result
            }
        }
    }

    /// Parses and gates one answer.
    fn judge(
        &self,
        seed: u64,
        answer: PolicyOutput,
        frame: &FrameMap,
        ui_tree: Option<&UiNode>,
    ) -> (AttemptRecord, Judged) {
        let PolicyOutput {
            raw,
            stats,
            overruled,
            reward,
            ..
        } = answer;
        let parsed = match parse(&raw, self.config().parse_mode) {
            Ok(parsed) => parsed,
            Err(error) => {
                let message = error.to_string();
                let record = AttemptRecord {
                    seed,
                    raw,
                    stats,
                    parse: ParseRecord::Failed {
                        part: error.part,
                        offset: error.offset,
                        error: error.kind.to_string(),
                    },
                    verdict: None,
                    overruled,
                    reward,
                };
                return (record, Judged::Unusable(message));
            }
        };
        let (plan, action) = match &parsed.output.link {
            Link::Action { plan, action } => (Some(plan.clone()), Some(action.clone())),
            Link::Point(_) => (None, None),
        };
        let config = self.config();
        let verdict = safety::assess(
            &parsed.output,
            frame,
            ui_tree,
            config.profile,
            &config.safety,
        );
        let judged = match (&verdict, &parsed.output.link) {
            (Verdict::Reject { rejection }, _) if rejection.is_invalid_output() => {
                Judged::Unusable(rejection.to_string())
            }
            (_, Link::Action { plan, action }) => Judged::Valid {
                plan: plan.clone(),
                action: action.clone(),
                verdict: verdict.clone(),
            },
            // The gate rejects a bare point before anything else.
            (_, Link::Point(_)) => Judged::Unusable(Rejection::NotAnAction.to_string()),
        };
        let record = AttemptRecord {
            seed,
            raw,
            stats,
            parse: ParseRecord::Parsed {
                plan,
                action,
                tolerances: parsed.tolerances,
            },
            verdict: Some(verdict),
            overruled,
            reward,
        };
        (record, judged)
    }
}

/// A different seed for every attempt of every step, spread by SplitMix64
/// so nearby (step, attempt) pairs do not give nearby seeds.
fn attempt_seed(base: u64, step: u32, attempt: u32) -> u64 {
    crate::hash::splitmix64(
        base.wrapping_add(u64::from(step) << 32 | u64::from(attempt))
            .wrapping_add(crate::hash::SPLITMIX64_GAMMA),
    )
}

/// Whether every pixel has the same colour (alpha ignored): what
/// `screencap` returns for a FLAG_SECURE window or a screen that is off.
pub fn is_uniform(image: &RgbaImage) -> bool {
    let mut pixels = image.pixels();
    let Some(first) = pixels.next() else {
        return true;
    };
    pixels.all(|p| p.0[..3] == first.0[..3])
}

/// Refuses, before anything is recorded, a decoding budget too small for
/// any constrained answer on the episode's frame: every step would fail
/// the same way, and the episode would pass for the model's failure.
fn answers_fit(episode: &EpisodeRecord, policy: &dyn Policy) -> Result<(), AgentError> {
    let Some(decoding) = policy.decoding().filter(|d| d.grammar) else {
        return Ok(());
    };
    let settings = &episode.settings;
    let Ok(frame) = crate::protocol::smart_resize(episode.screen, settings.max_pixels) else {
        // A screen no frame fits is refused at the first step, in its words.
        return Ok(());
    };
    crate::model::grammar::GrammarLimits::default()
        .fit(decoding.max_tokens as usize, frame, settings.profile)
        .map(|_| ())
        .map_err(|e| AgentError::Budget {
            max_tokens: decoding.max_tokens,
            reason: e.to_string(),
        })
}

/// The repeat check's keys of the last `keep` performed steps, read back
/// from their screenshots (lossless PNGs), so that a resumed episode stops
/// on a repeated action where the uninterrupted one would. A screenshot
/// that cannot be read ends the look-back there, as the keys must be the
/// latest ones in a row; the check then starts afresh, as it did before
/// keys were read back.
fn recent_keys(dir: &Path, steps: &[StepRecord], keep: usize) -> Vec<(u64, DeviceAction)> {
    let mut keys: Vec<_> = steps
        .iter()
        .rev()
        .filter(|s| s.outcome == StepOutcome::Performed)
        .take(keep)
        .map_while(|s| {
            let action = s.executed.as_ref()?.device.clone()?;
            let screenshot = recorded_screenshot(&dir.join(&s.screenshot))?;
            Some((hash_image(&screenshot), action))
        })
        .collect();
    keys.reverse();
    keys
}

/// A step's recorded screenshot, or `None` when it is missing, not a PNG,
/// or claims more pixels than a screen (checked before decoding).
fn recorded_screenshot(path: &Path) -> Option<RgbaImage> {
    let image = trajectory::read_screenshot(path, Some(image::ImageFormat::Png)).ok()?;
    Some(image.to_rgba8())
}

fn hash_image(image: &RgbaImage) -> u64 {
    let mut hasher = DefaultHasher::new();
    image.dimensions().hash(&mut hasher);
    image.as_raw().hash(&mut hasher);
    hasher.finish()
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, millis)
}

// The loop's tests drive the virtual phone, which only host builds have.
#[cfg(all(test, feature = "host"))]
mod tests;
