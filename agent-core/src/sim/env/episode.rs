//! One environment's thread: the episodes it plays, and the policy through
//! which the agent loop asks the client for each answer.
//!
//! The thread runs the agent loop itself. The loop's policy
//! ([`ClientPolicy`]) answers the request that is waiting (the `reset`, or
//! the previous `step`) with the screen the agent now shows, then blocks on
//! the environment's commands until the client's next `step` gives the
//! answer to execute. When the episode ends, the request still waiting gets
//! the final response (`done`). A `reset` or `close` that arrives
//! mid-episode cancels the episode and is then carried out.

use super::Responder;
use super::request::{EnvId, ImageMode, Reset};
use crate::agent::trajectory::{Outcome, encode_png};
use crate::agent::{Agent, AgentConfig};
use crate::device::sim::SimDevice;
use crate::model::{GenerationStats, Observation, OraclePolicy, Policy, PolicyError, PolicyOutput};
use crate::protocol::{Size, smart_resize};
use crate::reward::{self, RewardBreakdown, RewardMode, Weights};
use crate::sample::state::observation_sample;
use crate::sim::phone::PhoneConfig;
use crate::sim::tasks::{self, Task};
use crate::sim::virtual_phone::VirtualPhone;
use base64::Engine;
use serde_json::{Value, json};
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, mpsc};

/// What the reader hands an environment's thread.
pub(super) enum Command {
    Reset {
        id: Value,
        episode: Box<EpisodeSpec>,
    },
    Step {
        id: Value,
        answer: String,
    },
    Close {
        id: Value,
    },
}

impl Command {
    pub(super) fn id(&self) -> &Value {
        match self {
            Self::Reset { id, .. } | Self::Step { id, .. } | Self::Close { id } => id,
        }
    }
}

/// What every environment of a server shares.
pub(super) struct Shared {
    pub out: Responder,
    pub root: PathBuf,
    /// Keep every episode; otherwise only each environment's current one.
    pub record: bool,
    pub reward_mode: RewardMode,
    pub weights: Weights,
    pub phone: PhoneConfig,
}

type Commands = Arc<Mutex<mpsc::Receiver<Command>>>;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves its data whole, so a lock poisoned by a
    // panic elsewhere still guards good data.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// The environment's thread: carries out its commands until it is closed
/// or the server's input ends.
pub(super) fn run(env: &EnvId, commands: mpsc::Receiver<Command>, shared: &Arc<Shared>) {
    // The agent loop's policy waits on the same commands mid-episode.
    let commands: Commands = Arc::new(Mutex::new(commands));
    let mut episodes = 0u32;
    let mut next = None;
    loop {
        let command = match next.take() {
            Some(command) => command,
            None => match lock(&commands).recv() {
                Ok(command) => command,
                Err(_) => break,
            },
        };
        match command {
            Command::Close { id } => {
                shared.out.ok(
                    &id,
                    json!({"env": env.0, "closed": true, "episodes": episodes}),
                );
                break;
            }
            Command::Step { id, .. } => shared.out.error(
                &id,
                format!(
                    "environment {env} has no episode in play (it ended or never began): reset it"
                ),
            ),
            Command::Reset { id, episode } => {
                // The episode's turns once it has started: until then the
                // reset is the request waiting.
                let turns = RefCell::new(None::<Arc<Mutex<Turns>>>);
                let waiting = || match turns.borrow().as_ref() {
                    Some(turns) => lock(turns).pending.take().map(Pending::into_id),
                    None => Some(id.clone()),
                };
                let played = guarded(&shared.out, env, waiting, || {
                    let started =
                        start(env, id.clone(), *episode, shared, &commands, &mut episodes)?;
                    *turns.borrow_mut() = Some(started.turns.clone());
                    started.play(&shared.out, env)
                });
                next = match played {
                    Some(command) => command,
                    // The failed episode is gone; a reset or close that was
                    // cancelling it is still owed its answer.
                    None => turns
                        .borrow()
                        .as_ref()
                        .and_then(|turns| lock(turns).interrupt.take()),
                };
            }
        }
    }
    if !shared.record {
        let _ = std::fs::remove_dir_all(shared.root.join(&env.0));
    }
}

/// Runs `play`, the handling of one command. If it panics, the request
/// `waiting` names (the one the client is waiting on, if any) is answered
/// with an error naming the panic, and `None` is returned: the episode is
/// dropped, for its state cannot be trusted, and the environment goes on
/// as after any episode's end.
pub(super) fn guarded<T>(
    out: &Responder,
    env: &EnvId,
    waiting: impl FnOnce() -> Option<Value>,
    play: impl FnOnce() -> T,
) -> Option<T> {
    let panic = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(play)) {
        Ok(value) => return Some(value),
        Err(panic) => panic,
    };
    let why = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned());
    if let Some(id) = waiting() {
        out.error(
            &id,
            format!("environment {env} failed (a bug in btl: {why}); its episode is dropped: reset it to play again"),
        );
    }
    None
}

/// The request waiting for the next screen.
enum Pending {
    Reset {
        id: Value,
        head: Value,
    },
    Step {
        id: Value,
        reward: RewardBreakdown,
        target: String,
    },
}

impl Pending {
    fn into_id(self) -> Value {
        match self {
            Self::Reset { id, .. } | Self::Step { id, .. } => id,
        }
    }
}

/// What the policy and the episode's thread share.
#[derive(Default)]
struct Turns {
    pending: Option<Pending>,
    /// A reset or close that cancelled the episode, to carry out next.
    interrupt: Option<Command>,
    /// Steps the agent has recorded.
    steps: u32,
}

/// An episode ready to play.
struct Started {
    agent: Agent,
    turns: Arc<Mutex<Turns>>,
}

/// A reset that was checked: what its episode plays.
pub(super) struct EpisodeSpec {
    reset: Reset,
    seed: u64,
    task: Arc<dyn Task>,
    /// A second copy of the task, which the oracle owns.
    oracle: Box<dyn Task>,
    max_pixels: u64,
}

impl EpisodeSpec {
    /// Checks `reset` against the suite and the phone's screen, so that a
    /// refused reset opens no environment.
    pub(super) fn new(reset: Reset, phone: &PhoneConfig) -> Result<Self, String> {
        // Past a split's last instance its seeds would wrap around to its
        // first ones, as `btl run` refuses too.
        tasks::check_instances(reset.seed, 1, reset.split)?;
        let seed = reset
            .split
            .map_or(reset.seed, |split| split.seed(reset.seed));
        let (Some(task), Some(oracle)) = (
            tasks::sample(&reset.task, seed),
            tasks::sample(&reset.task, seed),
        ) else {
            return Err(format!(
                "no task named '{}' (`btl sim tasks` lists them)",
                reset.task
            ));
        };
        let max_pixels = reset
            .max_pixels
            .unwrap_or_else(|| AgentConfig::default().max_pixels);
        smart_resize(Size::new(phone.width, phone.height), max_pixels)
            .map_err(|e| format!("max_pixels {max_pixels}: {e}"))?;
        Ok(Self {
            reset,
            seed,
            task: Arc::from(task),
            oracle,
            max_pixels,
        })
    }
}

/// Sets up episode `episodes + 1` of `env`; `None` when it cannot start
/// (the reset was answered with the reason).
fn start(
    env: &EnvId,
    id: Value,
    spec: EpisodeSpec,
    shared: &Arc<Shared>,
    commands: &Commands,
    episodes: &mut u32,
) -> Option<Started> {
    let EpisodeSpec {
        reset,
        seed,
        task,
        oracle,
        max_pixels,
    } = spec;
    let config = PhoneConfig {
        seed,
        ..shared.phone
    };
    let (dir, number) = match episode_dir(shared, env, *episodes + 1) {
        Ok(found) => found,
        Err(e) => {
            shared
                .out
                .error(&id, format!("cannot make the episode's directory: {e}"));
            return None;
        }
    };
    *episodes = number;
    let phone = Arc::new(VirtualPhone::new(config));
    phone.with_phone(|p| task.setup(p));
    let max_steps = reset.max_steps.unwrap_or_else(|| task.max_steps());
    let head = json!({
        "env": env.0,
        "episode": *episodes,
        "task": task.name(),
        "seed": seed,
        "goal": task.goal(),
        "max_steps": max_steps,
        "dir": dir,
    });
    let turns = Arc::new(Mutex::new(Turns {
        pending: Some(Pending::Reset {
            id: id.clone(),
            head,
        }),
        ..Turns::default()
    }));
    let cancel = Arc::new(AtomicBool::new(false));
    let policy = ClientPolicy {
        env: env.clone(),
        shared: shared.clone(),
        commands: commands.clone(),
        turns: turns.clone(),
        oracle: OraclePolicy::new(oracle),
        goal: task.goal(),
        max_pixels,
        image: reset.image,
        teacher: reset.teacher,
        dir: dir.clone(),
        calls: 0,
        cancel: cancel.clone(),
    };
    let config =
        crate::sim::phone_style_config(task.goal(), reset.profile, max_pixels, max_steps, seed);
    let checker = {
        let (phone, task) = (phone.clone(), task.clone());
        move || phone.with_phone(|p| task.is_successful(p.state()))
    };
    let observed = turns.clone();
    let agent = Agent::new(
        &dir,
        config,
        Box::new(SimDevice::new(phone)),
        Box::new(policy),
    )
    .and_then(|agent| agent.with_task(json!({"name": task.name(), "params": task.params()})));
    match agent {
        Ok(agent) => Some(Started {
            agent: agent
                .with_checker(checker)
                .with_cancel(cancel)
                .with_step_observer(move |record| lock(&observed).steps = record.index),
            turns,
        }),
        Err(e) => {
            shared
                .out
                .error(&id, format!("cannot start the episode: {e}"));
            None
        }
    }
}

/// The directory of the environment's next episode and its number, from
/// `number` on: under `DIR/ENV/episode-NNNN` when recording (the first
/// free one, so a new server never writes over an old run), otherwise the
/// environment's only one.
fn episode_dir(shared: &Shared, env: &EnvId, number: u32) -> std::io::Result<(PathBuf, u32)> {
    let base = shared.root.join(&env.0);
    if !shared.record {
        if base.exists() {
            std::fs::remove_dir_all(&base)?;
        }
        let dir = base.join("episode");
        std::fs::create_dir_all(&dir)?;
        return Ok((dir, number));
    }
    std::fs::create_dir_all(&base)?;
    let (dir, number) = (number..=u32::MAX)
        .map(|n| (base.join(format!("episode-{n:04}")), n))
        .find(|(dir, _)| !dir.exists())
        .ok_or_else(|| std::io::Error::other("no free episode number"))?;
    std::fs::create_dir(&dir)?;
    Ok((dir, number))
}

impl Started {
    /// Plays the episode to its end; the command that cut it short, if one
    /// did.
    fn play(self, out: &Responder, env: &EnvId) -> Option<Command> {
        let result = self.agent.run();
        let mut turns = lock(&self.turns);
        if let Some(command) = turns.interrupt.take() {
            return Some(command);
        }
        let steps = turns.steps;
        match (turns.pending.take(), result) {
            (Some(pending), Ok(outcome)) => finish(out, env, pending, &outcome, steps),
            (Some(Pending::Reset { id, .. } | Pending::Step { id, .. }), Err(e)) => {
                out.error(&id, format!("environment {env}: the episode failed: {e}"));
            }
            // Every request was answered: the client went away mid-episode.
            (None, _) => {}
        }
        None
    }
}

/// Answers the request still waiting when an episode ends.
fn finish(out: &Responder, env: &EnvId, pending: Pending, outcome: &Outcome, steps: u32) {
    let ending = json!({
        "done": true,
        "why": outcome.stop,
        "success": outcome.success,
        "steps": steps,
        "observation": null,
    });
    let outcome_reward = f64::from(u8::from(outcome.success == Some(true)));
    let (id, mut body) = match pending {
        Pending::Reset { id, head } => (id, head),
        Pending::Step { id, reward, target } => (
            id,
            json!({"env": env.0, "reward": reward_json(reward, outcome_reward, &target)}),
        ),
    };
    merge(&mut body, ending);
    out.ok(&id, body);
}

fn reward_json(process: RewardBreakdown, outcome: f64, target: &str) -> Value {
    json!({"process": process, "outcome": outcome, "target": target})
}

fn merge(into: &mut Value, from: Value) {
    if let (Value::Object(into), Value::Object(from)) = (into, from) {
        into.extend(from);
    }
}

/// The agent loop's policy in an environment: the oracle labels the
/// screen, the client answers.
struct ClientPolicy {
    env: EnvId,
    shared: Arc<Shared>,
    commands: Commands,
    turns: Arc<Mutex<Turns>>,
    oracle: OraclePolicy,
    goal: String,
    max_pixels: u64,
    image: ImageMode,
    teacher: bool,
    dir: PathBuf,
    calls: u32,
    cancel: Arc<AtomicBool>,
}

impl ClientPolicy {
    /// The observation of `obs` as the client reads it.
    fn observation(
        &self,
        obs: &Observation,
        turn: u32,
        target: &str,
    ) -> Result<Value, PolicyError> {
        let screenshot = obs.screenshot.ok_or_else(|| {
            PolicyError::Backend("a client is shown the screen, and this step has none".into())
        })?;
        let png = encode_png(screenshot)
            .map_err(|e| PolicyError::Backend(format!("cannot encode the screenshot: {e}")))?;
        let mut observation = json!({
            "turn": turn,
            "step": lock(&self.turns).steps + 1,
            "seed": obs.seed,
            "image_size": [screenshot.width(), screenshot.height()],
            "max_pixels": self.max_pixels,
            "prompt": {"system": obs.prompt.system, "user": obs.prompt.user},
        });
        let screenshot = match self.image {
            ImageMode::Path => {
                let path = self.dir.join(format!("obs-{turn:04}.png"));
                write_png(&path, &png)?;
                json!({"screenshot": path})
            }
            ImageMode::Base64 => json!({
                "screenshot_base64": base64::engine::general_purpose::STANDARD.encode(&png)
            }),
        };
        merge(&mut observation, screenshot);
        if self.teacher {
            merge(&mut observation, json!({"teacher": target}));
        }
        Ok(observation)
    }
}

/// Writes an observation's screenshot whole or not at all, as the
/// episode's own files are: a client may read it after a crash. The
/// episode's directory is new ([`episode_dir`]), with nothing to sweep.
fn write_png(path: &Path, png: &[u8]) -> Result<(), PolicyError> {
    crate::atomic::write_unswept(path, png).map_err(|e| PolicyError::Backend(e.to_string()))
}

impl Policy for ClientPolicy {
    fn name(&self) -> String {
        "btl sim env client".to_owned()
    }

    fn act(&mut self, obs: &Observation) -> Result<PolicyOutput, PolicyError> {
        let target = self.oracle.act(obs)?.raw;
        let turn = self.calls;
        self.calls += 1;
        let sample = observation_sample(
            obs,
            &target,
            &self.goal,
            self.max_pixels,
            format!("turn-{turn}"),
        )
        .map_err(PolicyError::Backend)?;
        let observation = self.observation(obs, turn, &target)?;
        let pending = lock(&self.turns).pending.take();
        match pending {
            Some(Pending::Reset { id, mut head }) => {
                merge(
                    &mut head,
                    json!({"done": false, "observation": observation}),
                );
                self.shared.out.ok(&id, head);
            }
            Some(Pending::Step {
                id,
                reward,
                target: previous,
            }) => self.shared.out.ok(
                &id,
                json!({
                    "env": self.env.0,
                    "reward": reward_json(reward, 0.0, &previous),
                    "done": false,
                    "observation": observation,
                }),
            ),
            None => {}
        }
        let gone = || PolicyError::Backend("the client is gone".to_owned());
        let command = lock(&self.commands).recv().map_err(|_| gone())?;
        match command {
            Command::Step { id, answer } => {
                let reward = reward::score(
                    &sample,
                    &answer,
                    self.shared.reward_mode,
                    self.shared.weights,
                );
                lock(&self.turns).pending = Some(Pending::Step {
                    id,
                    reward,
                    target: target.clone(),
                });
                Ok(PolicyOutput {
                    raw: answer,
                    stats: GenerationStats::default(),
                    target: Some(target),
                    overruled: None,
                    reward: Some(reward.total),
                })
            }
            other => {
                lock(&self.turns).interrupt = Some(other);
                self.cancel.store(true, Ordering::SeqCst);
                Err(PolicyError::Backend(
                    "the client reset or closed the environment".to_owned(),
                ))
            }
        }
    }
}
