//! `btl sim env`: the virtual phone as a reinforcement-learning environment,
//! served over JSON lines (one request per line in, one response per line
//! out), for RL engines that run the policy themselves (ms-swift's
//! multi-turn GRPO, or any gym-style loop).
//!
//! # Episodes
//! An environment plays one episode at a time, through agent-core's agent
//! loop exactly as `btl run` would on a phone: the same prompts, parser,
//! safety gate, coordinate mapping, retries and stops. The client is the
//! policy: each observation is a screen the agent asks an answer for, and
//! each `step` gives that answer. The task checker never ends an episode:
//! it ends when the answer is Finish (profile `btl-extended`), at the step
//! budget, or at another of the agent's stops, and its success is the
//! checker's verdict then.
//!
//! # Rewards
//! Every `step` response carries the answer's **process reward**: the BTL
//! reward (spec §4) against the oracle's answer on that screen, as the
//! sample `btl collect --relabel oracle` and `btl-train data` make of it
//! ([`crate::sample::state::state_sample`]); and the **outcome reward**: 1
//! on the response that ends an episode the checker calls done, else 0.
//! How to weigh them is the client's choice; online GRPO in `btl-train`
//! adds `outcome_weight · outcome` to the process reward.
//!
//! # Determinism
//! An episode is a function of its task, seed, settings and the answers it
//! is given: the phone, its contents and the agent's seeds all derive from
//! the seed, so the same answers reach the same screens, byte for byte.
//!
//! # Concurrency
//! Each environment runs on its own thread, so a client may keep many in
//! flight: requests to one environment are answered in order; responses of
//! different environments may interleave, and each echoes its request's
//! `id`. Bad requests get an error line (`"ok": false`) and change nothing.
//!
//! The wire format is documented, with examples, in docs/virtual-phone.md.

mod episode;
pub mod request;

use crate::reward::{RewardMode, Weights};
use crate::sim::phone::PhoneConfig;
use episode::Command;
use request::{EnvId, Envelope, MAX_LINE, Request, parse_line};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

/// How the server runs its environments.
#[derive(Debug, Clone)]
pub struct EnvOptions {
    /// Where episodes are recorded (trajectories, as `btl run` writes
    /// them, and the observations' screenshots), under `DIR/ENV/episode-NNNN`.
    /// Without it, a temporary directory removed at exit, where each
    /// environment keeps only its current episode.
    pub dir: Option<PathBuf>,
    pub reward_mode: RewardMode,
    pub weights: Weights,
    /// Environments open at once.
    pub max_envs: usize,
    /// The phone's screen; its seed is each episode's.
    pub phone: PhoneConfig,
}

impl Default for EnvOptions {
    fn default() -> Self {
        Self {
            dir: None,
            reward_mode: RewardMode::default(),
            weights: Weights::default(),
            max_envs: 64,
            phone: PhoneConfig::default(),
        }
    }
}

/// Where responses go: one line each, written whole.
#[derive(Clone)]
pub(crate) struct Responder(Arc<Mutex<Box<dyn Write + Send>>>);

impl Responder {
    fn new(out: impl Write + Send + 'static) -> Self {
        Self(Arc::new(Mutex::new(Box::new(out))))
    }

    /// Writes `{"id": id, "ok": true, ...body}`.
    pub(crate) fn ok(&self, id: &Value, body: Value) {
        let mut line = json!({"id": id, "ok": true});
        if let (Value::Object(line), Value::Object(body)) = (&mut line, body) {
            line.extend(body);
        }
        self.write(&line);
    }

    pub(crate) fn error(&self, id: &Value, message: impl std::fmt::Display) {
        self.write(&json!({"id": id, "ok": false, "error": message.to_string()}));
    }

    fn write(&self, line: &Value) {
        let mut text = line.to_string();
        text.push('\n');
        // A poisoned lock only means another thread panicked mid-write;
        // a client that stopped reading loses nothing it could still use.
        let mut out = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    }
}

/// Requests that may wait for one environment: a client answers each
/// observation before it sends the next step, so more are a client that
/// does not wait, whose backlog must not grow without bound.
const QUEUE: usize = 8;

/// An open environment: its thread and the way to its commands.
struct Handle {
    commands: mpsc::SyncSender<Command>,
    thread: std::thread::JoinHandle<()>,
}

/// Serves requests from `input` until it ends, answering on `output`; then
/// ends every environment. `Err` only when `input` cannot be read or the
/// record directory cannot be made.
pub fn serve(
    mut input: impl BufRead,
    output: impl Write + Send + 'static,
    options: EnvOptions,
) -> std::io::Result<()> {
    let (root, temp) = match &options.dir {
        Some(dir) => (dir.clone(), None),
        None => {
            let temp = tempfile::Builder::new().prefix("btl-env-").tempdir()?;
            (temp.path().to_owned(), Some(temp))
        }
    };
    std::fs::create_dir_all(&root)?;
    // Observations name files by absolute path, whatever the client's
    // working directory.
    let root = std::fs::canonicalize(&root)?;
    let shared = Arc::new(episode::Shared {
        out: Responder::new(output),
        root,
        record: options.dir.is_some(),
        reward_mode: options.reward_mode,
        weights: options.weights,
        phone: options.phone,
    });
    let mut envs: BTreeMap<EnvId, Handle> = BTreeMap::new();
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        let read = input
            .by_ref()
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)?;
        if read == 0 {
            break;
        }
        number += 1;
        if line.len() > MAX_LINE && line.last() != Some(&b'\n') {
            skip_line(&mut input)?;
            shared.out.error(
                &Value::Null,
                format!("line {number}: longer than {MAX_LINE} bytes"),
            );
            continue;
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match parse_line(text) {
            Ok(envelope) => route(envelope, &mut envs, &shared, options.max_envs),
            Err((id, message)) => shared.out.error(&id, format!("line {number}: {message}")),
        }
    }
    // Closing the command channels ends every environment's thread.
    for (_, handle) in std::mem::take(&mut envs) {
        drop(handle.commands);
        let _ = handle.thread.join();
    }
    drop(temp);
    Ok(())
}

/// Discards the rest of an overlong line.
fn skip_line(input: &mut impl BufRead) -> std::io::Result<()> {
    loop {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            return Ok(());
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(at) => {
                input.consume(at + 1);
                return Ok(());
            }
            None => {
                let n = buf.len();
                input.consume(n);
            }
        }
    }
}

/// Hands a request to its environment's thread, opening or closing
/// environments as it asks.
fn route(
    Envelope { id, request }: Envelope,
    envs: &mut BTreeMap<EnvId, Handle>,
    shared: &Arc<episode::Shared>,
    max_envs: usize,
) {
    let (env, command) = match request {
        Request::Reset(reset) => {
            let env = match &reset.env {
                Some(env) => env.clone(),
                // The lowest free number, so a client that never names its
                // environments still gets short, stable names.
                None => (0..)
                    .map(|n: u64| EnvId(n.to_string()))
                    .find(|e| !envs.contains_key(e))
                    .expect("fewer than u64::MAX environments are open"),
            };
            if !envs.contains_key(&env) && envs.len() >= max_envs {
                shared.out.error(
                    &id,
                    format!(
                        "{max_envs} environments are open, the most this server takes: close one first"
                    ),
                );
                return;
            }
            match episode::EpisodeSpec::new(reset, &shared.phone) {
                Ok(spec) => (
                    env,
                    Command::Reset {
                        id,
                        episode: Box::new(spec),
                    },
                ),
                Err(message) => {
                    shared.out.error(&id, message);
                    return;
                }
            }
        }
        Request::Step { env, answer } => (env, Command::Step { id, answer }),
        Request::Close { env } => (env, Command::Close { id }),
    };
    let closing = matches!(command, Command::Close { .. });
    if !envs.contains_key(&env) {
        if !matches!(command, Command::Reset { .. }) {
            shared.out.error(
                command.id(),
                format!("no environment {env}: open it with a reset"),
            );
            return;
        }
        let (tx, rx) = mpsc::sync_channel(QUEUE);
        let thread = {
            let (env, shared) = (env.clone(), shared.clone());
            std::thread::Builder::new()
                .name(format!("btl-env-{env}"))
                .spawn(move || episode::run(&env, rx, &shared))
        };
        match thread {
            Ok(thread) => {
                envs.insert(
                    env.clone(),
                    Handle {
                        commands: tx,
                        thread,
                    },
                );
            }
            Err(e) => {
                shared
                    .out
                    .error(command.id(), format!("cannot start environment {env}: {e}"));
                return;
            }
        }
    }
    let handle = &envs[&env];
    match handle.commands.try_send(command) {
        Ok(()) => {}
        Err(mpsc::TrySendError::Full(command)) => {
            shared.out.error(
                command.id(),
                format!(
                    "environment {env} has {QUEUE} requests waiting: wait for their answers first"
                ),
            );
            return;
        }
        Err(mpsc::TrySendError::Disconnected(command)) => {
            // An environment's thread ends only when closed, or when a
            // failure escapes its guard.
            shared
                .out
                .error(command.id(), format!("environment {env} has stopped"));
            if let Some(handle) = envs.remove(&env) {
                let _ = handle.thread.join();
            }
            return;
        }
    }
    if closing && let Some(handle) = envs.remove(&env) {
        drop(handle.commands);
        let _ = handle.thread.join();
    }
}

#[cfg(test)]
mod tests;
