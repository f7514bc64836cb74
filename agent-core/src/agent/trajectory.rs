//! Trajectories on disk (spec §6): one directory per episode.
//!
//! - `episode.json`: task, device, policy, settings and, once the episode
//!   ends, its outcome and stop reason. No outcome means the episode was
//!   interrupted and can be resumed.
//! - `steps.jsonl`: one [`StepRecord`] per line.
//! - `step-0001.png` / `step-0001.xml`: the screenshot and UI tree the step
//!   observed.
//!
//! Crash safety: whole files are written to a temporary file in the same
//! directory, synced and renamed over the target, so a reader sees the old
//! or the new file, never half of one. A step's PNG and XML are written
//! before its line, and each line is appended in one write and synced, so a
//! `kill -9` loses at most the step in flight; at worst it leaves a partial
//! last line, which [`read_trajectory`] ignores (and reports) and a resume
//! cuts off before appending.

use super::safety::Verdict;
use super::stability::Settle;
use super::{AgentConfig, StopReason};
use crate::atomic;
use crate::device::DeviceAction;
use crate::device::ui::{UiNode, to_uiautomator_xml};
use crate::model::GenerationStats;
use crate::protocol::{Action, FrameMap, Part, Prompt, Size, Tolerance};
use image::RgbaImage;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use thiserror::Error;

pub const EPISODE_FILE: &str = "episode.json";
pub const STEPS_FILE: &str = "steps.jsonl";
/// Bumped when a change to the records would mislead an older reader.
pub const FORMAT_VERSION: u32 = 1;

/// `episode.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeRecord {
    pub format: u32,
    pub goal: String,
    /// What the caller knows of the task (template name, parameters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<serde_json::Value>,
    pub device: String,
    pub screen: Size,
    pub policy: String,
    /// [`crate::model::Policy::fingerprint`]: which weights `policy` names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_fingerprint: Option<String>,
    /// [`crate::model::Policy::decoding`]: how `policy`'s answers were
    /// decoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_decoding: Option<crate::model::Decoding>,
    pub settings: AgentConfig,
    pub started_unix_ms: u64,
    /// The step count at each resume, in order.
    #[serde(default)]
    pub resumed_at_steps: Vec<u32>,
    /// `None` while the episode runs, and forever if it was killed.
    pub outcome: Option<Outcome>,
}

impl EpisodeRecord {
    /// The outcome that ends the episode for good: `None` while it can
    /// still run on (killed mid-way, or stopped by its device, see
    /// [`StopReason::resumable`]).
    pub fn ended(&self) -> Option<&Outcome> {
        self.outcome.as_ref().filter(|o| !o.stop.resumable())
    }

    /// Why `policy` is not the policy that recorded this episode, if it
    /// is not: another name, the same name with other weights, or the same
    /// weights decoded otherwise. Episodes recorded before fingerprints (or
    /// decoding settings) were are taken by name.
    pub fn other_policy(&self, policy: &dyn crate::model::Policy) -> Option<String> {
        let (theirs, ours) = (&self.policy, policy.name());
        if *theirs != ours {
            return Some(format!(
                "an episode of {theirs}, and this run's policy is {ours}"
            ));
        }
        self.other_weights(policy.fingerprint().as_deref())
            .or_else(|| self.other_decoding(policy.decoding().as_ref()))
    }

    /// Why a policy that decodes as `ours` does not continue this episode,
    /// if it does not. Either side unknown (an episode recorded before
    /// decoding was, a policy that samples no model) says nothing.
    pub fn other_decoding(&self, ours: Option<&crate::model::Decoding>) -> Option<String> {
        let (Some(recorded), Some(ours)) = (&self.policy_decoding, ours) else {
            return None;
        };
        let value = |d| serde_json::to_value(d).unwrap_or(serde_json::Value::Null);
        let differing = crate::json_diff::there_and_here("", &value(recorded), &value(ours));
        (!differing.is_empty()).then(|| {
            format!(
                "an episode of {} decoded otherwise ({})",
                self.policy,
                differing.join("; ")
            )
        })
    }

    /// Why a policy of this episode's name whose weights have the
    /// fingerprint `ours` is not the one that recorded it, if it is not.
    /// Either fingerprint missing (an episode recorded before they were, a
    /// policy without weights) says nothing.
    pub fn other_weights(&self, ours: Option<&str>) -> Option<String> {
        match (&self.policy_fingerprint, ours) {
            (Some(recorded), Some(ours)) if recorded != ours => Some(format!(
                "an episode of {} with other weights (fingerprint {recorded}; this \
                 run's files are {ours})",
                self.policy
            )),
            _ => None,
        }
    }
}

/// How an episode ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub stop: StopReason,
    /// Steps recorded in `steps.jsonl`.
    pub steps: u32,
    /// The success checker's last word; `None` without a checker.
    pub success: Option<bool>,
}

/// One line of `steps.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// From 1, as in the file names.
    pub index: u32,
    /// The screenshot's file name in the episode's directory.
    #[serde(deserialize_with = "file_name")]
    pub screenshot: String,
    /// The UI tree's file name there; `None` when the device offered none.
    #[serde(default, deserialize_with = "optional_file_name")]
    pub ui_tree: Option<String>,
    pub frame: FrameMap,
    pub prompt: Prompt,
    /// Every answer asked for at this step; retries follow unusable ones.
    pub attempts: Vec<AttemptRecord>,
    /// The action taken, when one was.
    pub executed: Option<Executed>,
    pub outcome: StepOutcome,
    pub timings: StepTimings,
    /// How the vote went, when the step voted among several answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vote: Option<super::vote::VoteRecord>,
    /// The teacher's answer at this state, when the policy was relabelled
    /// (`btl collect --relabel oracle`): what training teaches here,
    /// whatever the policy did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The success checker's verdict after this step, when it does not end
    /// the episode (`AgentConfig::stop_on_success` off): how long after the
    /// task was done the model said Finish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_done: Option<bool>,
    /// The chosen answer's reward (the one executed, or the one the safety
    /// gate stopped), where the policy's environment scored it: `btl sim
    /// env`'s process reward against the teacher's answer, or
    /// what online GRPO's advantages compared (that plus its outcome term);
    /// `None` elsewhere.
    #[serde(default)]
    pub reward: Option<f64>,
}

/// A name of a file in the episode's directory, as the writer gives them:
/// a path elsewhere (`/etc/shadow`, `../x`, `/dev/zero`) in an edited step
/// log would have readers embed or train on another file.
fn file_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let name = String::deserialize(d)?;
    let plain = !matches!(name.as_str(), "" | "." | "..") && !name.contains(['/', '\\', '\0']);
    if !plain {
        return Err(serde::de::Error::custom(format!(
            "{name:?} is not the name of a file in the episode's directory"
        )));
    }
    Ok(name)
}

fn optional_file_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    struct Name(#[serde(deserialize_with = "file_name")] String);
    Ok(Option::<Name>::deserialize(d)?.map(|Name(name)| name))
}

/// The most bytes a screenshot file is read to: a phone's PNG is a few
/// megabytes, and a file that claims more (an edited episode's link to
/// `/dev/zero`) would be read until memory ran out.
pub const MAX_SCREENSHOT_BYTES: u64 = 64 << 20;

/// The most bytes a recorded UI tree is read to, for the same reason: a
/// screen's dump is tens of kilobytes, a long web page's a few megabytes.
pub const MAX_UI_TREE_BYTES: u64 = 32 << 20;

/// The screenshot file at `path`, refused past [`MAX_SCREENSHOT_BYTES`].
pub fn read_screenshot_file(path: &Path) -> std::io::Result<Vec<u8>> {
    read_within(path, MAX_SCREENSHOT_BYTES, "a screenshot")
}

/// The screenshot file at `path` decoded, as [`read_screenshot_file`]
/// reads and [`crate::device::decode_screenshot`] decodes it (`format`, or
/// the one its first bytes show). The error says why, in words for the
/// caller to put after the file's name.
pub fn read_screenshot(
    path: &Path,
    format: Option<image::ImageFormat>,
) -> Result<image::DynamicImage, String> {
    let bytes = read_screenshot_file(path).map_err(|e| e.to_string())?;
    crate::device::decode_screenshot(&bytes, format)
}

/// The UI tree file at `path`, refused past [`MAX_UI_TREE_BYTES`] or when
/// it is not UTF-8.
pub fn read_ui_tree_file(path: &Path) -> std::io::Result<String> {
    String::from_utf8(read_within(path, MAX_UI_TREE_BYTES, "a UI tree")?)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// The most bytes `episode.json` is read to: its settings and goal take a
/// few kilobytes.
pub const MAX_EPISODE_BYTES: u64 = 16 << 20;

/// The most bytes `steps.jsonl` is read to: a step takes kilobytes (with
/// 32 votes of 32 attempts, a few megabytes), so this bound is tens of
/// thousands of steps; past it the log is refused, not read until memory
/// runs out.
pub const MAX_STEP_LOG_BYTES: u64 = 1 << 30;

/// The step log at `path`, refused past [`MAX_STEP_LOG_BYTES`].
pub fn read_step_log_file(path: &Path) -> std::io::Result<Vec<u8>> {
    read_within(path, MAX_STEP_LOG_BYTES, "a step log")
}

/// Reads the regular file at `path` (a link to one counts) to at most
/// `max` bytes. Anything else is refused before it is opened: a device
/// such as `/dev/zero` never ends, and a pipe's open blocks until a writer
/// comes.
fn read_within(path: &Path, max: u64, what: &str) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    if !std::fs::metadata(path)?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("not a regular file, so not {what}"),
        ));
    }
    let mut bytes = Vec::new();
    File::open(path)?.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("more than {max} bytes, too large for {what}"),
        ));
    }
    Ok(bytes)
}

/// One answer of the policy and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptRecord {
    pub seed: u64,
    pub raw: String,
    pub stats: GenerationStats,
    pub parse: ParseRecord,
    /// `None` when the answer did not parse (the gate never saw it).
    pub verdict: Option<Verdict>,
    /// The policy's own answer when a relabelling teacher overruled it and
    /// `raw` is the teacher's (an early Finish taken over), so a trajectory
    /// says which steps the student did not take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overruled: Option<String>,
    /// What the policy's environment scored this answer, where one does
    /// (`btl sim env`, online GRPO).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reward: Option<f64>,
}

/// The parser's word on an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ParseRecord {
    /// Parsed, with the deviations from canonical text it forgave.
    Parsed {
        plan: Option<String>,
        action: Option<Action>,
        tolerances: Vec<Tolerance>,
    },
    Failed {
        part: Part,
        offset: usize,
        error: String,
    },
}

/// The action of a step in both frames.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Executed {
    pub plan: String,
    pub model: Action,
    /// `None` for Finish, which touches no device.
    pub device: Option<DeviceAction>,
}

/// What a step came to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StepOutcome {
    /// The action ran on the device.
    Performed,
    /// The policy said Finish.
    Finished,
    /// The screenshot was one colour (a secure or blank screen); the model
    /// was not asked.
    BlankScreen,
    /// No attempt gave an answer the gate accepts.
    NoValidOutput,
    /// A sensitive action was denied or declined.
    Blocked,
    /// The same action on an unchanged screen came once too often; it was
    /// not performed again.
    Repeated,
    /// The policy produced no answer.
    PolicyFailed { error: String },
    /// The device failed to perform the action or to settle.
    DeviceFailed { error: String },
}

/// Where a step's time went, in milliseconds of the agent's clock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StepTimings {
    pub observe_ms: u64,
    /// All attempts together.
    pub policy_ms: u64,
    pub perform_ms: u64,
    /// `None` when nothing was performed.
    pub settle: Option<Settle>,
}

/// Why a trajectory could not be written or read.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TrajectoryError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// `episode.json` already exists: starting would overwrite an episode.
    #[error("{0} already holds an episode")]
    Exists(PathBuf),
    /// Another writer holds the episode: two would interleave their steps.
    #[error("another process is writing the episode in {0}")]
    Busy(PathBuf),
    /// A complete line or file is not a valid record.
    #[error("{path}{}: {source}", line.map(|l| format!(" line {l}")).unwrap_or_default())]
    Json {
        path: PathBuf,
        line: Option<usize>,
        source: serde_json::Error,
    },
    /// A step whose number is not its place in the log: a resume numbers
    /// the next step after the count of steps, and would write over the
    /// files of a step that already holds that number.
    #[error(
        "{path} line {line}: step {index} where step {expected} belongs (the steps of a log are numbered 1, 2, 3, … in order)"
    )]
    Order {
        path: PathBuf,
        line: usize,
        index: u32,
        expected: usize,
    },
    #[error("cannot encode the screenshot of step {index}: {source}")]
    Png {
        index: u32,
        source: image::ImageError,
    },
}

impl From<atomic::WriteError> for TrajectoryError {
    fn from(e: atomic::WriteError) -> Self {
        Self::Io {
            path: e.path,
            source: e.source,
        }
    }
}

/// Holds `steps` (an episode's steps.jsonl) for this writer alone until it
/// is closed, before anything is cut from it: a second `run --resume`, or
/// a `collect` on the same directory, is refused rather than interleaved.
/// Where it cannot be locked for any reason but another holder (a file
/// system without `flock`, a device that refuses it), the episode is
/// written unlocked rather than not at all: one writer per directory is
/// then the user's to keep.
fn lock(steps: &File, dir: &Path) -> Result<(), TrajectoryError> {
    match atomic::try_lock(steps) {
        Err(std::fs::TryLockError::WouldBlock) => Err(TrajectoryError::Busy(dir.to_path_buf())),
        Ok(()) | Err(std::fs::TryLockError::Error(_)) => Ok(()),
    }
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> TrajectoryError + '_ {
    move |source| TrajectoryError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// `step-0001`: the file stem of step `index`.
pub fn step_stem(index: u32) -> String {
    format!("step-{index:04}")
}

/// Appends records to an episode directory.
#[derive(Debug)]
pub struct TrajectoryWriter {
    dir: PathBuf,
    steps: File,
}

impl TrajectoryWriter {
    /// Starts a new episode in `dir` (created if missing). What killed
    /// writes left in `dir` is swept here, once: the writer's own files
    /// are written unswept.
    pub fn create(dir: &Path, episode: &EpisodeRecord) -> Result<Self, TrajectoryError> {
        std::fs::create_dir_all(dir).map_err(io_error(dir))?;
        let episode_path = dir.join(EPISODE_FILE);
        if episode_path.exists() {
            return Err(TrajectoryError::Exists(dir.to_path_buf()));
        }
        let steps_path = dir.join(STEPS_FILE);
        let steps = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&steps_path)
            .map_err(io_error(&steps_path))?;
        lock(&steps, dir)?;
        atomic::remove_abandoned(dir, atomic::STAGING_PREFIX);
        steps.set_len(0).map_err(io_error(&steps_path))?;
        let writer = Self {
            dir: dir.to_path_buf(),
            steps,
        };
        writer.write_episode(episode)?;
        Ok(writer)
    }

    /// Opens the interrupted episode in `dir` to continue it: locks its
    /// `steps.jsonl` first and only then reads it, so the lines a writer
    /// appended just before letting go are read, not cut off as if they
    /// were not there. Nothing is changed until [`Self::cut_partial_line`]
    /// but what killed writes left, swept as [`Self::create`] sweeps.
    pub fn reopen(dir: &Path) -> Result<(Self, Trajectory), TrajectoryError> {
        let steps_path = dir.join(STEPS_FILE);
        let steps = OpenOptions::new()
            .append(true)
            .open(&steps_path)
            .map_err(io_error(&steps_path))?;
        lock(&steps, dir)?;
        atomic::remove_abandoned(dir, atomic::STAGING_PREFIX);
        let trajectory = read_trajectory(dir)?;
        let writer = Self {
            dir: dir.to_path_buf(),
            steps,
        };
        Ok((writer, trajectory))
    }

    /// Cuts a partial last line (a kill's) off the step log, which is
    /// valid up to byte `valid_len` ([`Trajectory::valid_len`]), before
    /// steps are appended.
    pub fn cut_partial_line(&self, valid_len: u64) -> Result<(), TrajectoryError> {
        let path = self.dir.join(STEPS_FILE);
        self.steps.set_len(valid_len).map_err(io_error(&path))?;
        self.steps.sync_all().map_err(io_error(&path))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn write_episode(&self, episode: &EpisodeRecord) -> Result<(), TrajectoryError> {
        let path = self.dir.join(EPISODE_FILE);
        let json = serde_json::to_vec_pretty(episode).map_err(|source| TrajectoryError::Json {
            path: path.clone(),
            line: None,
            source,
        })?;
        Ok(atomic::write_unswept(&path, &json)?)
    }

    /// Writes the step's screenshot and UI tree, then appends its line.
    pub fn write_step(
        &mut self,
        record: &StepRecord,
        screenshot: &RgbaImage,
        ui_tree: Option<&UiNode>,
    ) -> Result<(), TrajectoryError> {
        let png = encode_png(screenshot).map_err(|source| TrajectoryError::Png {
            index: record.index,
            source,
        })?;
        atomic::write_unswept(&self.dir.join(&record.screenshot), &png)?;
        if let (Some(name), Some(ui)) = (&record.ui_tree, ui_tree) {
            atomic::write_unswept(&self.dir.join(name), to_uiautomator_xml(ui).as_bytes())?;
        }
        let path = self.dir.join(STEPS_FILE);
        let mut line = serde_json::to_vec(record).map_err(|source| TrajectoryError::Json {
            path: path.clone(),
            line: Some(record.index as usize),
            source,
        })?;
        line.push(b'\n');
        // One write of the whole line: a kill can only leave a prefix of
        // it, which the reader recognises by its missing line break.
        self.steps.write_all(&line).map_err(io_error(&path))?;
        self.steps.sync_data().map_err(io_error(&path))
    }
}

/// Screenshots are written fast rather than small: they are re-encoded
/// anyway when turned into training samples.
pub(crate) fn encode_png(image: &RgbaImage) -> Result<Vec<u8>, image::ImageError> {
    use image::ImageEncoder;
    use image::codecs::png::{CompressionType, FilterType, PngEncoder};
    let mut out = Vec::new();
    PngEncoder::new_with_quality(&mut out, CompressionType::Fast, FilterType::Adaptive)
        .write_image(
            image.as_raw(),
            image.width(),
            image.height(),
            image::ExtendedColorType::Rgba8,
        )?;
    Ok(out)
}

/// A trajectory as read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Trajectory {
    pub dir: PathBuf,
    pub episode: EpisodeRecord,
    pub steps: Vec<StepRecord>,
    /// A partial last line of `steps.jsonl` that was ignored.
    pub truncated_tail: Option<TruncatedTail>,
    /// Length in bytes of the complete lines of `steps.jsonl`.
    pub valid_len: u64,
}

/// The unfinished line a kill left at the end of `steps.jsonl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TruncatedTail {
    /// 1-based line number.
    pub line: usize,
    pub bytes: usize,
}

impl std::fmt::Display for TruncatedTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ignored an unfinished line {} of {STEPS_FILE} ({} bytes): the episode was interrupted while writing it",
            self.line, self.bytes
        )
    }
}

impl Trajectory {
    /// The Plans of the performed steps, in order: the prompt's history.
    pub fn history(&self) -> Vec<String> {
        self.steps
            .iter()
            .filter(|s| s.outcome == StepOutcome::Performed)
            .filter_map(|s| s.executed.as_ref().map(|e| e.plan.clone()))
            .collect()
    }
}

/// Reads an episode directory. Every complete line of `steps.jsonl` must be
/// a valid record; a last line without its line break is the write a kill
/// interrupted, and is ignored and reported in
/// [`Trajectory::truncated_tail`].
pub fn read_trajectory(dir: &Path) -> Result<Trajectory, TrajectoryError> {
    let episode_path = dir.join(EPISODE_FILE);
    let episode = read_within(&episode_path, MAX_EPISODE_BYTES, "an episode record")
        .and_then(|bytes| {
            String::from_utf8(bytes)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
        })
        .map_err(io_error(&episode_path))?;
    let steps_path = dir.join(STEPS_FILE);
    let steps = read_step_log_file(&steps_path).map_err(io_error(&steps_path))?;
    parse_trajectory(dir, &episode, &steps)
}

/// The episode record `episode` and the step log `text` of the trajectory
/// in `dir` (errors name the files there), as [`read_trajectory`] reads them.
pub fn parse_trajectory(
    dir: &Path,
    episode: &str,
    text: &[u8],
) -> Result<Trajectory, TrajectoryError> {
    let episode_path = dir.join(EPISODE_FILE);
    let episode = serde_json::from_str(episode).map_err(|source| TrajectoryError::Json {
        path: episode_path,
        line: None,
        source,
    })?;
    let steps_path = dir.join(STEPS_FILE);
    let valid_len = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let (complete, tail) = text.split_at(valid_len);
    let mut steps = Vec::new();
    for (i, line) in complete.split(|&b| b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let step: StepRecord =
            serde_json::from_slice(line).map_err(|source| TrajectoryError::Json {
                path: steps_path.clone(),
                line: Some(i + 1),
                source,
            })?;
        if step.index as usize != steps.len() + 1 {
            return Err(TrajectoryError::Order {
                path: steps_path,
                line: i + 1,
                index: step.index,
                expected: steps.len() + 1,
            });
        }
        steps.push(step);
    }
    let truncated_tail = (!tail.is_empty()).then(|| TruncatedTail {
        line: complete.iter().filter(|&&b| b == b'\n').count() + 1,
        bytes: tail.len(),
    });
    Ok(Trajectory {
        dir: dir.to_path_buf(),
        episode,
        steps,
        truncated_tail,
        valid_len: valid_len as u64,
    })
}

/// A real oracle trajectory written before `overruled` existed (a fuzzing
/// seed: episode record, a 0 byte, the step log), for tests that need one.
#[cfg(test)]
pub(crate) fn old_oracle_trajectory() -> (&'static str, &'static [u8]) {
    let seed: &'static [u8] = include_bytes!("../../fuzz/seeds/trajectory/alarm_set-train-s0");
    let at = seed
        .iter()
        .position(|&b| b == 0)
        .expect("the seed's separator");
    let episode = std::str::from_utf8(&seed[..at]).expect("a UTF-8 episode record");
    (episode, &seed[at + 1..])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `written` holds everything of `original`: the same values,
    /// plus at most fields added to the format since.
    fn keeps(original: &serde_json::Value, written: &serde_json::Value) -> bool {
        use serde_json::Value;
        match (original, written) {
            (Value::Object(o), Value::Object(w)) => {
                o.iter().all(|(k, v)| w.get(k).is_some_and(|x| keeps(v, x)))
            }
            (Value::Array(o), Value::Array(w)) => {
                o.len() == w.len() && o.iter().zip(w).all(|(a, b)| keeps(a, b))
            }
            (o, w) => o == w,
        }
    }

    /// A step log naming a file outside the episode's directory, or a
    /// directory, is refused at its line; the names the writer gives read.
    #[test]
    fn steps_name_files_of_their_own_directory_only() {
        let (episode, log) = old_oracle_trajectory();
        let log = std::str::from_utf8(log).unwrap();
        let first = log.lines().next().unwrap();
        let second_line = |value: &str| {
            let mut step: serde_json::Value = serde_json::from_str(first).unwrap();
            step["index"] = 2.into();
            step["screenshot"] = value.into();
            format!("{first}\n{step}\n")
        };
        for name in ["/etc/shadow", "../x.png", "a/s.png", "..", "", "a\\b"] {
            let e = parse_trajectory(Path::new("ep"), episode, second_line(name).as_bytes())
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("ep/steps.jsonl line 2: ")
                    && e.contains(&format!(
                        "{name:?} is not the name of a file in the episode's directory"
                    )),
                "{name}: {e}"
            );
        }
        let mut step: serde_json::Value = serde_json::from_str(first).unwrap();
        step["ui_tree"] = "/etc/passwd".into();
        let e = parse_trajectory(Path::new("ep"), episode, format!("{step}\n").as_bytes())
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"/etc/passwd\" is not the name"), "{e}");
        step["ui_tree"] = serde_json::Value::Null;
        step["screenshot"] = "step-0001.png".into();
        parse_trajectory(Path::new("ep"), episode, format!("{step}\n").as_bytes()).unwrap();
    }

    /// A step log whose steps skip or repeat a number is refused at the
    /// first step out of place, before a resume could number its next
    /// step as one already recorded and write over that step's files.
    #[test]
    fn steps_out_of_order_are_refused_at_their_line() {
        let (episode, log) = old_oracle_trajectory();
        let lines: Vec<&str> = std::str::from_utf8(log).unwrap().lines().collect();
        assert!(lines.len() >= 3, "the seed has {} steps", lines.len());
        let refused = |kept: &[&str]| {
            let text = kept.iter().map(|l| format!("{l}\n")).collect::<String>();
            parse_trajectory(Path::new("ep"), episode, text.as_bytes())
                .unwrap_err()
                .to_string()
        };
        let gap = refused(&[lines[0], lines[2]]);
        assert!(
            gap.starts_with("ep/steps.jsonl line 2: step 3 where step 2 belongs"),
            "{gap}"
        );
        let again = refused(&[lines[0], lines[1], lines[1]]);
        assert!(
            again.starts_with("ep/steps.jsonl line 3: step 2 where step 3 belongs"),
            "{again}"
        );
        let late = refused(&[lines[1]]);
        assert!(
            late.starts_with("ep/steps.jsonl line 1: step 2 where step 1 belongs"),
            "{late}"
        );
        parse_trajectory(Path::new("ep"), episode, log).unwrap();
    }

    /// A writer sweeps what killed writes left in its directory when it
    /// takes it, new or reopened, and writes its own files unswept.
    #[test]
    fn a_writer_sweeps_its_directory_when_it_takes_it() {
        let dir = tempfile::tempdir().unwrap();
        let abandoned = || {
            let path = dir.path().join(format!("{}killed", atomic::STAGING_PREFIX));
            let file = File::create(&path).unwrap();
            let then = std::time::SystemTime::now()
                - atomic::ABANDONED_AFTER
                - std::time::Duration::from_secs(5);
            file.set_modified(then).unwrap();
            path
        };
        let episode: EpisodeRecord = serde_json::from_str(old_oracle_trajectory().0).unwrap();
        let left = abandoned();
        let writer = TrajectoryWriter::create(dir.path(), &episode).unwrap();
        assert!(!left.exists());
        let left = abandoned();
        writer.write_episode(&episode).unwrap();
        assert!(left.exists());
        drop(writer);
        TrajectoryWriter::reopen(dir.path()).unwrap();
        assert!(!left.exists());
    }

    /// A file larger than any screenshot is refused after reading just past
    /// the bound, not read whole.
    #[test]
    fn a_screenshot_file_is_read_to_a_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.png");
        let file = File::create(&path).unwrap();
        file.set_len(MAX_SCREENSHOT_BYTES + 1).unwrap();
        let e = read_screenshot_file(&path).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        file.set_len(3).unwrap();
        assert_eq!(read_screenshot_file(&path).unwrap(), [0, 0, 0]);
    }

    /// What is not a regular file is refused before it is opened: a link
    /// to `/dev/zero` as the step log would be read until memory ran out,
    /// a pipe as a screenshot would block its reader for good.
    #[test]
    fn only_regular_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let episode: EpisodeRecord = serde_json::from_str(old_oracle_trajectory().0).unwrap();
        drop(TrajectoryWriter::create(dir.path(), &episode).unwrap());
        let steps = dir.path().join(STEPS_FILE);
        std::fs::remove_file(&steps).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &steps).unwrap();
        let e = read_trajectory(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("steps.jsonl") && e.contains("not a regular file, so not a step log"),
            "{e}"
        );
        let pipe = dir.path().join("step-0001.png");
        let made = std::process::Command::new("mkfifo")
            .arg(&pipe)
            .status()
            .unwrap();
        assert!(made.success());
        let e = read_screenshot_file(&pipe).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        let e = read_ui_tree_file(dir.path()).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    }

    /// A trajectory the oracle wrote before steps recorded an overruled
    /// answer (kept as a fuzzing seed): its lines still read, nothing in
    /// them is lost when written again, and no `overruled` key appears.
    #[test]
    fn a_step_log_from_before_overruled_answers_reads_and_writes_as_it_was() {
        let (episode, log) = old_oracle_trajectory();
        let trajectory = parse_trajectory(Path::new("old"), episode, log).unwrap();
        let lines: Vec<&[u8]> = log
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(trajectory.steps.len(), lines.len());
        assert!(trajectory.truncated_tail.is_none());
        for (step, line) in trajectory.steps.iter().zip(lines) {
            assert!(step.attempts.iter().all(|a| a.overruled.is_none()));
            let original: serde_json::Value = serde_json::from_slice(line).unwrap();
            let written = serde_json::to_value(step).unwrap();
            assert!(keeps(&original, &written), "step {}", step.index);
            for attempt in written["attempts"].as_array().unwrap() {
                assert!(attempt.get("overruled").is_none(), "step {}", step.index);
            }
        }
        // The check itself sees a lost or changed value.
        let original = serde_json::json!({"a": [1, {"b": "x"}]});
        assert!(keeps(
            &original,
            &serde_json::json!({"a": [1, {"b": "x", "c": 0}]})
        ));
        assert!(!keeps(
            &original,
            &serde_json::json!({"a": [1, {"b": "y"}]})
        ));
        assert!(!keeps(&original, &serde_json::json!({"a": [1]})));
    }
}
