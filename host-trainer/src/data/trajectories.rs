//! btl trajectories → official-format samples (spec §6), one sample per step
//! that executed an action.
//!
//! # Which steps
//! A step becomes a sample when its action was carried out: the device
//! performed it, or (profile `btl-extended`) the model said Finish. Steps
//! whose answers did not parse or were refused by the gate, blocked
//! sensitive actions, repeated actions that were stopped, blank screens
//! and policy or device failures have no action worth learning and are
//! counted, not converted. By default only successful episodes are used
//! (the task checker said so); episodes without a checker, failed and
//! interrupted ones need [`ConvertOptions::all_episodes`].
//!
//! # Relabelled episodes
//! An episode collected with a teacher (`btl collect --relabel oracle`)
//! records at every step the teacher's answer for that screen. Those
//! answers, not what the policy did, are the samples' solutions, and every
//! such episode is used whatever its outcome: a failed episode's screens,
//! with the teacher's way back from them, are the point of relabelling.
//! Every step with a target makes a sample, whether or not the policy's own
//! answer was usable.
//!
//! # What a sample holds
//! - `messages`: the system and user prompt the step actually sent (its
//!   profile, goal and history), `<image>` included;
//! - `images`: the step's screenshot, decoded to check it and copied byte
//!   for byte next to the sample file, under `STEM-images/EPISODE/`,
//!   referenced relative to the sample file;
//! - `image_sizes`: the screenshot's size; `max_pixels`: the episode's;
//! - `solution`: the executed link item in model-frame coordinates, as the
//!   model writes it: `[{"Plan": "...", "Action": {...}}]` (the official
//!   examples omit the Plan; the rewards read only the `Action`, and keeping
//!   the Plan makes the solution the whole canonical link);
//! - `bbox`: for Tap and LongPress, the bounds (original pixels, clipped to
//!   the screen) of the element the device point reached in the step's UI
//!   tree (see agent-core's `sample::rois`); `[]` for actions without a point, or when
//!   the device offered no UI tree;
//! - `rois`: the ranked regions of [`agent_core::sample::rois::rank_rois`], target first;
//! - `id`: `EPISODE/step-NNNN`, so completions can name their sample.
//!
//! Every value comes from the recorded step; nothing is recomputed that
//! could disagree with what the model saw. The recorded model frame is
//! checked against `smart_resize` of the screenshot and `max_pixels`,
//! because the rewards recompute the frame from those two.

use super::samples::{samples_json, write_samples};
use super::{DEFAULT_LAMBDA, Error, Result, create_dir};
use agent_core::agent::trajectory::{
    EPISODE_FILE, Executed, STEPS_FILE, StepOutcome, StepRecord, Trajectory, read_trajectory,
};
use agent_core::device::ui::{UiNode, parse_uiautomator_xml};
use agent_core::protocol::Size;
use agent_core::sample::Sample;
use agent_core::sample::state::{StepContext, state_sample, teacher_action};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// How trajectories are converted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvertOptions {
    /// Most ROIs per sample (λ), target included.
    pub lambda: usize,
    /// Use every episode, not only the successful ones.
    pub all_episodes: bool,
}

impl Default for ConvertOptions {
    fn default() -> Self {
        Self {
            lambda: DEFAULT_LAMBDA,
            all_episodes: false,
        }
    }
}

/// What a conversion did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConvertReport {
    /// Episode directories read.
    pub episodes: usize,
    /// Of those, the ones left out as unsuccessful.
    pub episodes_skipped: usize,
    /// Samples whose solution is a teacher's recorded target.
    pub relabelled: usize,
    /// Steps of the episodes used.
    pub steps: usize,
    pub samples: usize,
    /// Steps that made no sample, by their outcome.
    pub skipped_steps: BTreeMap<&'static str, usize>,
    /// Where the screenshots went.
    pub images_dir: PathBuf,
    /// Things worth knowing that did not stop the conversion.
    pub warnings: Vec<String>,
}

/// The `kind` of a step outcome, as `steps.jsonl` writes it.
fn outcome_kind(outcome: &StepOutcome) -> &'static str {
    match outcome {
        StepOutcome::Performed => "performed",
        StepOutcome::Finished => "finished",
        StepOutcome::BlankScreen => "blank_screen",
        StepOutcome::NoValidOutput => "no_valid_output",
        StepOutcome::Blocked => "blocked",
        StepOutcome::Repeated => "repeated",
        StepOutcome::PolicyFailed { .. } => "policy_failed",
        StepOutcome::DeviceFailed { .. } => "device_failed",
    }
}

/// The teacher's answer of a relabelled step as the action to learn (see
/// [`teacher_action`]). `Ok(None)` when the step has no target.
pub fn target_action(step: &StepRecord) -> Result<Option<Executed>, String> {
    step.target
        .as_deref()
        .map(|raw| teacher_action(raw, &step.frame))
        .transpose()
}

/// The action a step carried out, or the outcome kind that disqualifies it.
pub fn executed_action(step: &StepRecord) -> Result<&Executed, &'static str> {
    match (&step.outcome, &step.executed) {
        (StepOutcome::Performed | StepOutcome::Finished, Some(executed)) => Ok(executed),
        (outcome, _) => Err(outcome_kind(outcome)),
    }
}

/// The sample of one executed step (pure). `Err` says why the record
/// cannot give a faithful sample.
pub fn step_sample(
    step: &StepRecord,
    executed: &Executed,
    ui: Option<&UiNode>,
    cx: &StepContext,
) -> Result<Sample, String> {
    state_sample(&step.frame, &step.prompt, executed, ui, cx)
}

/// The episode directories `dirs` name: each is an episode (it holds
/// `episode.json`) or a directory of episodes (as `btl collect` writes),
/// whose episode subdirectories are taken in name order.
pub fn episode_dirs(dirs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for dir in dirs {
        if dir.join(EPISODE_FILE).is_file() {
            out.push(dir.clone());
            continue;
        }
        let entries = std::fs::read_dir(dir).map_err(|source| Error::Read {
            path: dir.clone(),
            source,
        })?;
        let mut inside: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join(EPISODE_FILE).is_file())
            .collect();
        if inside.is_empty() {
            return Err(Error::NotEpisodes(dir.clone()));
        }
        inside.sort();
        out.extend(inside);
    }
    Ok(out)
}

/// Converts the episodes in `dirs` (see [`episode_dirs`]) into the sample
/// file `out`, its screenshots beside it (staged, put in place with it).
pub fn from_trajectories(
    dirs: &[PathBuf],
    out: &Path,
    options: &ConvertOptions,
) -> Result<ConvertReport> {
    if options.lambda == 0 {
        return Err(Error::Usage("lambda must be at least 1".into()));
    }
    let episodes = episode_dirs(dirs)?;
    let mut stage = ImageStage::new(out)?;
    let images = stage.images.clone();
    let mut report = ConvertReport {
        episodes: episodes.len(),
        images_dir: stage.dir(),
        ..ConvertReport::default()
    };
    let mut names = EpisodeNames::default();
    let mut samples = Vec::new();
    for dir in &episodes {
        let trajectory = read_trajectory(dir)?;
        let successful = trajectory
            .episode
            .outcome
            .as_ref()
            .and_then(|o| o.success)
            .unwrap_or(false);
        let relabelled = trajectory.steps.iter().any(|s| s.target.is_some());
        if !successful && !options.all_episodes && !relabelled {
            report.episodes_skipped += 1;
            continue;
        }
        if let Some(tail) = &trajectory.truncated_tail {
            report.warnings.push(format!("{}: {tail}", dir.display()));
        }
        let input = EpisodeInput::new(dir, &trajectory, &mut names)?;
        report.steps += trajectory.steps.len();
        let mut without_tree = 0;
        for (k, step) in trajectory.steps.iter().enumerate() {
            let at_step = input.step_error(k);
            let target = target_action(step).map_err(&at_step)?;
            let executed = match (&target, relabelled) {
                (Some(target), _) => target,
                (None, true) => {
                    *report.skipped_steps.entry("no_target").or_default() += 1;
                    continue;
                }
                (None, false) => match executed_action(step) {
                    Ok(executed) => executed,
                    Err(kind) => {
                        *report.skipped_steps.entry(kind).or_default() += 1;
                        continue;
                    }
                },
            };
            let (cx, png) = input
                .screen(step, &images, options.lambda)
                .map_err(&at_step)?;
            let ui = match &step.ui_tree {
                Some(file) => Some(read_ui_tree(&dir.join(file)).map_err(&at_step)?),
                None => {
                    without_tree += 1;
                    None
                }
            };
            let sample = step_sample(step, executed, ui.as_ref(), &cx).map_err(at_step)?;
            stage.write(&cx.image, &png)?;
            samples.push(sample);
            report.relabelled += usize::from(target.is_some());
        }
        if without_tree > 0 {
            report.warnings.push(format!(
                "{}: {without_tree} steps have no UI tree, so their samples have no target box or ROIs",
                dir.display()
            ));
        }
    }
    report.samples = samples.len();
    if samples.is_empty() {
        let mut why = Vec::new();
        if report.episodes_skipped > 0 && !options.all_episodes {
            why.push(format!(
                "{} of {} episodes were unsuccessful and left out, which --all-episodes would use",
                report.episodes_skipped, report.episodes
            ));
        }
        why.extend(
            report
                .skipped_steps
                .iter()
                .map(|(kind, n)| format!("{n} {kind} steps make none")),
        );
        return Err(Error::NoSamples {
            out: out.to_owned(),
            why: if why.is_empty() {
                String::new()
            } else {
                format!(" ({})", why.join("; "))
            },
        });
    }
    stage.finish(&samples, "")?;
    Ok(report)
}

/// One episode on its way to samples: where its steps' lines are (for
/// errors) and the name its screenshots go under.
pub(crate) struct EpisodeInput<'a> {
    dir: &'a Path,
    trajectory: &'a Trajectory,
    name: String,
    steps_path: PathBuf,
    lines: Vec<usize>,
}

impl<'a> EpisodeInput<'a> {
    /// `trajectory` read from `dir`; its name is made unique among `names`.
    pub(crate) fn new(
        dir: &'a Path,
        trajectory: &'a Trajectory,
        names: &mut EpisodeNames,
    ) -> Result<Self> {
        let steps_path = dir.join(STEPS_FILE);
        Ok(Self {
            dir,
            trajectory,
            name: names.unique(dir),
            lines: step_lines(&steps_path)?,
            steps_path,
        })
    }

    /// The error of step `k`, naming its file, line and index.
    pub(crate) fn step_error(&self, k: usize) -> impl Fn(String) -> Error + '_ {
        move |reason| Error::Step {
            path: self.steps_path.clone(),
            line: self.lines.get(k).copied().unwrap_or(k + 1),
            step: self.trajectory.steps[k].index,
            reason,
        }
    }

    /// `step`'s screenshot (checked, to be written with [`ImageStage`])
    /// and the context its samples are made in, their images under
    /// `images`. `Err` names the file.
    pub(crate) fn screen(
        &self,
        step: &StepRecord,
        images: &str,
        lambda: usize,
    ) -> Result<(StepContext<'a>, Vec<u8>), String> {
        let (image_size, png, file_name) = step_screenshot(self.dir, step)?;
        let cx = StepContext {
            goal: &self.trajectory.episode.goal,
            max_pixels: self.trajectory.episode.settings.max_pixels,
            image: format!("{images}/{}/{file_name}", self.name),
            image_size,
            id: format!("{}/{}", self.name, file_name.trim_end_matches(".png")),
            lambda,
        };
        Ok((cx, png))
    }
}

/// Where a conversion's screenshots go: a staging directory beside the
/// sample file, put in the place of `STEM-images` only once every sample is
/// made, together with the sample file. A run that fails midway (a broken
/// episode) leaves the previous run's samples and images as they were; it
/// had written over the images of its episodes of the same names, so the
/// old samples showed other screens.
///
/// The swap of two entries cannot be one rename, so it is journalled: the
/// new samples are written whole to a pending file first, and whoever finds
/// a pending file (this run, or the next one after a crash) carries the
/// swap through: staging images in place of the old ones, pending file in
/// place of the samples. A crash at any point thus leaves, for the next
/// run on the same `--out`, the old pair or the new one. Runs on one
/// `--out` take turns through a lock file beside it (`.STEM-images.lock`,
/// left there): a second is refused rather than let it remove the first
/// one's staged images.
pub(crate) struct ImageStage<'a> {
    out: &'a Path,
    base: &'a Path,
    /// The images' directory name, `STEM-images`.
    pub(crate) images: String,
    staging: PathBuf,
    /// The directories the images went into, to sync before the staging
    /// directory is put in place.
    dirs: BTreeSet<PathBuf>,
    written: bool,
    /// Held while the stage lives.
    _lock: File,
}

impl<'a> ImageStage<'a> {
    pub(crate) fn new(out: &'a Path) -> Result<Self> {
        if out.file_name().is_none() {
            return Err(Error::Usage(format!(
                "--out {}: names a directory, not a sample file",
                out.display()
            )));
        }
        let (base, images) = images_beside(out);
        if !base.as_os_str().is_empty() {
            create_dir(base)?;
        }
        let lock_path = base.join(format!(".{images}.lock"));
        let lock = File::create(&lock_path).map_err(|source| Error::Write {
            path: lock_path.clone(),
            source,
        })?;
        // Where the file system cannot lock, runs go on unlocked, as
        // staging files do (`agent_core::atomic::hold`).
        if let Err(std::fs::TryLockError::WouldBlock) = agent_core::atomic::try_lock(&lock) {
            return Err(Error::Usage(format!(
                "--out {}: another conversion is writing it now (it holds {}); wait for it to \
                 end, or give another --out",
                out.display(),
                lock_path.display()
            )));
        }
        let stage = Self {
            out,
            base,
            staging: base.join(format!(".{images}.partial")),
            images,
            dirs: BTreeSet::new(),
            written: false,
            _lock: lock,
        };
        stage.carry_through()?;
        remove_dir(&stage.staging)?;
        Ok(stage)
    }

    /// Where the images end up.
    pub(crate) fn dir(&self) -> PathBuf {
        self.base.join(&self.images)
    }

    /// The previous images while a swap is under way.
    fn old(&self) -> PathBuf {
        self.base.join(format!(".{}.old", self.images))
    }

    /// The start of a pending file's name; the rest is the name of the
    /// sample file it replaces (`s.json` and `s.jsonl` share `s-images`).
    fn pending_prefix(&self) -> String {
        format!(".{}.pending-", self.images)
    }

    /// The new samples for `out`, whole, while a swap is under way.
    fn pending(&self) -> PathBuf {
        let mut pending = std::ffi::OsString::from(self.pending_prefix());
        pending.push(self.out.file_name().unwrap_or_default());
        self.base.join(pending)
    }

    /// The pending file of a swap under way, if there is one, and the
    /// sample file it replaces: `out`'s own first, then another of the
    /// stem's (by a name in UTF-8).
    fn under_way(&self) -> Result<Option<(PathBuf, PathBuf)>> {
        let own = self.pending();
        if own.exists() {
            return Ok(Some((own, self.out.to_owned())));
        }
        let listed = agent_core::atomic::parent_dir(self.out);
        let entries = std::fs::read_dir(listed).map_err(|source| Error::Write {
            path: listed.to_owned(),
            source,
        })?;
        let prefix = self.pending_prefix();
        Ok(entries.flatten().find_map(|entry| {
            let name = entry.file_name();
            let out = name.to_str()?.strip_prefix(&prefix)?;
            Some((self.base.join(&name), self.base.join(out)))
        }))
    }

    /// Writes a sample's screenshot `png`, `image` being its path as the
    /// sample names it (relative to the sample file's directory).
    pub(crate) fn write(&mut self, image: &str, png: &[u8]) -> Result<()> {
        let inside = image
            .strip_prefix(&self.images)
            .map_or(image, |rest| rest.trim_start_matches('/'));
        let dest = self.staging.join(inside);
        if let Some(parent) = dest.parent() {
            create_dir(parent)?;
            let made = parent.ancestors().take_while(|dir| *dir != self.staging);
            self.dirs.extend(made.map(Path::to_path_buf));
        }
        self.written = true;
        // The staging directory is this run's own and takes the images'
        // place only whole (`finish`), so a write cut short is never seen:
        // an image needs no staging file of its own, only to be on disk
        // before the directories that name it are.
        let write = |mut file: File| file.write_all(png).and_then(|()| file.sync_all());
        File::create(&dest)
            .and_then(write)
            .map_err(|source| Error::Write { path: dest, source })
    }

    /// Puts the images in place of the previous run's and the samples in
    /// place of its sample file. Where that fails before the samples are
    /// replaced, the previous pair is put back (where even that fails, the
    /// next run carries the swap through). No samples is an error (`why`
    /// says what made none), and leaves an earlier file at `out` as it was:
    /// an empty list in its place would lose it for nothing.
    pub(crate) fn finish(self, samples: &[Sample], why: &str) -> Result<()> {
        if samples.is_empty() {
            return Err(Error::NoSamples {
                out: self.out.to_owned(),
                why: why.to_owned(),
            });
        }
        if !self.written {
            return write_samples(self.out, samples);
        }
        let staging = std::iter::once(&self.staging);
        for dir in self.dirs.iter().chain(staging) {
            sync_dir(dir)?;
        }
        // Written whole or not at all: it is what says the swap is on.
        let pending = self.pending();
        agent_core::atomic::write(&pending, samples_json(samples).as_bytes())?;
        let carried = self.carry_through();
        if carried.is_err() && pending.exists() {
            // Each rename back leaves a state the next run carries forward
            // from, so a failure or a crash midway loses nothing; the
            // pending file goes once the old images are back.
            let (dir, old) = (self.dir(), self.old());
            let parent = agent_core::atomic::parent_dir(self.out);
            let undone = (self.staging.exists() || rename(&dir, &self.staging).is_ok())
                && (!old.exists() || rename(&old, &dir).is_ok())
                && sync_dir(parent).is_ok();
            if undone {
                let _ = std::fs::remove_file(&pending);
            }
        }
        carried
    }

    /// Carries a journalled swap through, if one is under way: the staging
    /// images (if not yet moved) take the place of the images, the pending
    /// samples that of their sample file, and the old images go. Without a
    /// pending file a swap never started, or its last step (removing the
    /// old images) is what is left.
    fn carry_through(&self) -> Result<()> {
        let (dir, old) = (self.dir(), self.old());
        if let Some((pending, out)) = self.under_way()? {
            if self.staging.exists() {
                if dir.exists() && !old.exists() {
                    rename(&dir, &old)?;
                }
                rename(&self.staging, &dir)?;
                // The images are in place on disk before the samples that
                // name them are.
                sync_dir(agent_core::atomic::parent_dir(&dir))?;
            }
            rename(&pending, &out)?;
            sync_dir(agent_core::atomic::parent_dir(&out))?;
        }
        remove_dir(&old)
    }
}

impl Drop for ImageStage<'_> {
    /// A run that failed leaves no staging directory behind (best effort:
    /// the next run removes what is left).
    fn drop(&mut self) {
        if matches!(self.under_way(), Ok(None)) {
            let _ = std::fs::remove_dir_all(&self.staging);
        }
    }
}

fn sync_dir(dir: &Path) -> Result<()> {
    agent_core::atomic::sync_dir(dir).map_err(|source| Error::Write {
        path: dir.to_path_buf(),
        source,
    })
}

fn rename(from: &Path, to: &Path) -> Result<()> {
    std::fs::rename(from, to).map_err(|source| Error::Write {
        path: to.to_path_buf(),
        source,
    })
}

/// Removes a directory left by an earlier run, if there is one.
fn remove_dir(path: &Path) -> Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(source) if source.kind() != std::io::ErrorKind::NotFound => Err(Error::Write {
            path: path.to_path_buf(),
            source,
        }),
        _ => Ok(()),
    }
}

/// The names given to episodes so far, each unique among them.
#[derive(Debug, Default)]
pub(crate) struct EpisodeNames {
    taken: HashSet<String>,
    /// Per directory name, the suffix to try next: thousands of episodes
    /// of one name would otherwise try every suffix taken before.
    next: HashMap<String, usize>,
}

impl EpisodeNames {
    /// The episode's directory name, made unique among those taken: `ep`,
    /// then `ep-2`, `ep-3`, ….
    fn unique(&mut self, dir: &Path) -> String {
        let base = dir
            .file_name()
            .map_or_else(|| "episode".into(), |n| n.to_string_lossy().into_owned());
        let mut i = self.next.get(&base).copied().unwrap_or(1);
        loop {
            let name = match i {
                1 => base.clone(),
                _ => format!("{base}-{i}"),
            };
            i += 1;
            if self.taken.insert(name.clone()) {
                self.next.insert(base, i);
                return name;
            }
        }
    }
}

/// 1-based line numbers of the complete, non-empty lines of `steps.jsonl`:
/// the k-th step record was read from the k-th of them.
fn step_lines(path: &Path) -> Result<Vec<usize>> {
    let bytes =
        agent_core::agent::trajectory::read_step_log_file(path).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?;
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    Ok(bytes[..complete]
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, line)| !line.is_empty())
        .map(|(i, _)| i + 1)
        .collect())
}

/// The directory the sample file `out` goes to, and the name of the
/// directory beside it that its screenshots go to (`STEM-images`).
pub(crate) fn images_beside(out: &Path) -> (&Path, String) {
    let base = out.parent().unwrap_or(Path::new(""));
    let stem = out
        .file_stem()
        .map_or_else(|| "samples".into(), |s| s.to_string_lossy().into_owned());
    (base, format!("{stem}-images"))
}

/// A step's screenshot in episode `dir`: its size, its bytes (see
/// [`screenshot_png`]) and the file name its samples give it. `Err` names
/// the file.
fn step_screenshot(dir: &Path, step: &StepRecord) -> Result<(Size, Vec<u8>, String), String> {
    let path = dir.join(&step.screenshot);
    let (size, png) = agent_core::agent::trajectory::read_screenshot_file(&path)
        .map_err(|e| e.to_string())
        .and_then(screenshot_png)
        .map_err(|e| format!("screenshot {}: {e}", path.display()))?;
    let name = Path::new(&step.screenshot).file_name().map_or_else(
        || format!("step-{:04}.png", step.index),
        |f| f.to_string_lossy().into_owned(),
    );
    Ok((size, png, name))
}

/// A recorded UI tree. `Err` names the file.
pub(crate) fn read_ui_tree(path: &Path) -> Result<UiNode, String> {
    agent_core::agent::trajectory::read_ui_tree_file(path)
        .map_err(|e| e.to_string())
        .and_then(|xml| parse_uiautomator_xml(&xml).map_err(|e| e.to_string()))
        .map_err(|e| format!("UI tree {}: {e}", path.display()))
}

/// The screenshot's size, and its bytes to write beside the samples. It is
/// decoded, so a broken or non-PNG file is refused here rather than in
/// training, and then kept byte for byte: encoding a phone-sized image again
/// was most of a conversion's time. The size its header claims is checked
/// before it is decoded: a few kilobytes of PNG can claim gigabytes.
fn screenshot_png(bytes: Vec<u8>) -> Result<(Size, Vec<u8>), String> {
    let image = agent_core::device::decode_screenshot(&bytes, Some(image::ImageFormat::Png))?;
    Ok((Size::new(image.width(), image.height()), bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_core::agent::trajectory::StepTimings;
    use agent_core::device::DeviceAction;
    use agent_core::protocol::{
        Action, DevicePoint, FrameMap, Point, Profile, Prompt, TRAINING_MAX_PIXELS, Task,
    };
    use agent_core::sample::parse_samples;

    const SCREEN: Size = Size {
        width: 720,
        height: 1280,
    };

    fn step(executed: Option<Executed>, outcome: StepOutcome) -> StepRecord {
        StepRecord {
            index: 3,
            screenshot: "step-0003.png".into(),
            ui_tree: Some("step-0003.xml".into()),
            frame: FrameMap::new(SCREEN, TRAINING_MAX_PIXELS).unwrap(),
            prompt: Prompt::new(
                &Task::Navigation {
                    goal: "Turn on Wi-Fi",
                    step_instruction: None,
                    history: &["Open Settings.".to_string()],
                    screen: &[],
                },
                Profile::BtlUi,
                None,
            ),
            attempts: Vec::new(),
            executed,
            outcome,
            timings: StepTimings::default(),
            vote: None,
            target: None,
            task_done: None,
            reward: None,
        }
    }

    fn tap(model: (f64, f64), device: (u32, u32)) -> Executed {
        Executed {
            plan: "Tap the Wi-Fi switch.".into(),
            model: Action::Tap {
                point_2d: Point::new(model.0, model.1),
            },
            device: Some(DeviceAction::Tap {
                at: DevicePoint {
                    x: device.0,
                    y: device.1,
                },
            }),
        }
    }

    fn tree() -> UiNode {
        let switch = UiNode {
            resource_id: "com.btl.settings:id/wifi_switch".into(),
            clickable: true,
            bounds: [600, 200, 700, 260],
            ..UiNode::default()
        };
        let title = UiNode {
            text: "Wi-Fi".into(),
            bounds: [20, 200, 300, 260],
            ..UiNode::default()
        };
        UiNode {
            bounds: [0, 0, 720, 1280],
            children: vec![title, switch],
            ..UiNode::default()
        }
    }

    fn cx() -> StepContext<'static> {
        StepContext {
            goal: "Turn on Wi-Fi",
            max_pixels: TRAINING_MAX_PIXELS,
            image: "s-images/ep/step-0003.png".into(),
            image_size: SCREEN,
            id: "ep/step-0003".into(),
            lambda: 5,
        }
    }

    /// A PNG whose header claims a screen no phone has is refused before
    /// it is decoded, and a recorded UI tree linked to an endless file is
    /// refused at its cap.
    #[test]
    fn recorded_files_past_their_bounds_are_refused() {
        let mut png = Vec::new();
        image::RgbaImage::new(1, 1)
            .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
            .unwrap();
        // IHDR's width and height follow the 8-byte signature, the chunk's
        // length and its type; its CRC covers type and data (13 bytes).
        png[16..20].copy_from_slice(&100_000u32.to_be_bytes());
        png[20..24].copy_from_slice(&100_000u32.to_be_bytes());
        let crc = crc32fast::hash(&png[12..29]);
        png[29..33].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(
            screenshot_png(png).unwrap_err(),
            "a screen of 100000x100000 is past the 16384 pixels a side and 33554432 pixels in \
             all any phone has"
        );

        let dir = tempfile::tempdir().unwrap();
        let endless = dir.path().join("step-0001.xml");
        std::os::unix::fs::symlink("/dev/zero", &endless).unwrap();
        let e = read_ui_tree(&endless).unwrap_err();
        assert!(e.ends_with("not a regular file, so not a UI tree"), "{e}");
        // A regular file past the bound (sparse: nothing is written).
        let large = dir.path().join("step-0002.xml");
        std::fs::File::create(&large)
            .unwrap()
            .set_len(33_554_433)
            .unwrap();
        let e = read_ui_tree(&large).unwrap_err();
        assert!(
            e.ends_with("more than 33554432 bytes, too large for a UI tree"),
            "{e}"
        );
    }

    #[test]
    fn a_tap_gives_its_element_box_the_prompt_and_the_model_frame_action() {
        let s = step(
            Some(tap((657.0, 232.0), (650, 230))),
            StepOutcome::Performed,
        );
        let executed = executed_action(&s).unwrap();
        let sample = step_sample(&s, executed, Some(&tree()), &cx()).unwrap();
        assert_eq!(sample.bbox, [600.0, 200.0, 700.0, 260.0]);
        assert_eq!(
            sample.solution,
            r#"[{"Plan": "Tap the Wi-Fi switch.", "Action": {"function": "Tap", "point_2d": [657, 232]}}]"#
        );
        assert_eq!(sample.image_sizes, [[720, 1280]]);
        assert_eq!(sample.messages[0].content, s.prompt.system);
        assert_eq!(sample.messages[1].content, s.prompt.user);
        assert!(
            sample.messages[1]
                .content
                .contains("Step 1: Open Settings.")
        );
        let labels: Vec<(&str, u32)> = sample
            .rois
            .iter()
            .map(|r| (r.label.as_str(), r.priority))
            .collect();
        assert_eq!(labels, [("wifi switch", 1), ("Wi-Fi", 2)]);
        // The official reader takes it back unchanged.
        let text = super::super::samples::samples_json(std::slice::from_ref(&sample));
        assert_eq!(parse_samples(&text).unwrap(), [sample]);
    }

    /// Points no phone took (an edited step log's) give no sample: a
    /// model-frame point off the frame, a device point off the screen.
    #[test]
    fn points_off_the_frame_or_the_screen_are_refused() {
        let off_frame = step(
            Some(tap((-5.0, 99999.0), (0, 1279))),
            StepOutcome::Performed,
        );
        let e = step_sample(
            &off_frame,
            executed_action(&off_frame).unwrap(),
            Some(&tree()),
            &cx(),
        )
        .unwrap_err();
        assert_eq!(
            e,
            "the executed Tap's point [-5, 99999] lies outside the 728x1288 model frame"
        );
        let off_screen = step(
            Some(tap((657.0, 232.0), (720, 230))),
            StepOutcome::Performed,
        );
        let e = step_sample(
            &off_screen,
            executed_action(&off_screen).unwrap(),
            Some(&tree()),
            &cx(),
        )
        .unwrap_err();
        assert_eq!(
            e,
            "the executed device point (720, 230) lies off the 720x1280 screen"
        );
    }

    #[test]
    fn actions_without_a_point_have_no_box_but_keep_their_rois() {
        let typed = Executed {
            plan: "Type the name.".into(),
            model: Action::Type {
                text: "Ana \"Ő\"".into(),
            },
            device: Some(DeviceAction::Type {
                text: "Ana \"Ő\"".into(),
            }),
        };
        let s = step(Some(typed), StepOutcome::Performed);
        let sample = step_sample(&s, executed_action(&s).unwrap(), Some(&tree()), &cx()).unwrap();
        assert!(sample.bbox.is_empty());
        assert_eq!(
            sample.solution,
            r#"[{"Plan": "Type the name.", "Action": {"function": "Type", "text": "Ana \"Ő\""}}]"#
        );
        assert_eq!(sample.rois[0].label, "Wi-Fi");
        let finish = Executed {
            plan: "Done.".into(),
            model: Action::Finish { answer: None },
            device: None,
        };
        let s = step(Some(finish), StepOutcome::Finished);
        let sample = step_sample(&s, executed_action(&s).unwrap(), None, &cx()).unwrap();
        assert!(sample.bbox.is_empty() && sample.rois.is_empty());
    }

    #[test]
    fn only_performed_and_finished_steps_count() {
        let refused = step(None, StepOutcome::NoValidOutput);
        assert_eq!(executed_action(&refused).unwrap_err(), "no_valid_output");
        let repeated = step(Some(tap((1.0, 1.0), (1, 1))), StepOutcome::Repeated);
        assert_eq!(executed_action(&repeated).unwrap_err(), "repeated");
        let failed = step(
            Some(tap((1.0, 1.0), (1, 1))),
            StepOutcome::DeviceFailed {
                error: "gone".into(),
            },
        );
        assert_eq!(executed_action(&failed).unwrap_err(), "device_failed");
    }

    #[test]
    fn records_that_disagree_with_the_screenshot_are_refused() {
        let s = step(Some(tap((1.0, 1.0), (1, 1))), StepOutcome::Performed);
        let e = executed_action(&s).unwrap();
        let wrong_size = StepContext {
            image_size: Size::new(1080, 2400),
            ..cx()
        };
        let err = step_sample(&s, e, None, &wrong_size).unwrap_err();
        assert!(
            err.contains("is 1080x2400, but the step's frame says the screen was 720x1280"),
            "{err}"
        );
        let other_pixels = StepContext {
            max_pixels: 100_000,
            ..cx()
        };
        let err = step_sample(&s, e, None, &other_pixels).unwrap_err();
        assert!(
            err.contains("but the step's model frame was 728x1288"),
            "{err}"
        );
    }

    #[test]
    fn step_lines_skip_blank_lines_and_the_unfinished_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STEPS_FILE);
        std::fs::write(&path, "{}\n\n{}\n{\"partial").unwrap();
        assert_eq!(step_lines(&path).unwrap(), [1, 3]);
    }

    #[test]
    fn names_of_episodes_stay_unique() {
        let mut names = EpisodeNames::default();
        let mut unique = |dir: &str| names.unique(Path::new(dir));
        assert_eq!(unique("a/ep"), "ep");
        assert_eq!(unique("b/ep"), "ep-2");
        // A directory named as a suffixed name was: that name is taken.
        assert_eq!(unique("x/ep-3"), "ep-3");
        assert_eq!(unique("c/ep"), "ep-4");
        assert_eq!(unique("y/ep-3"), "ep-3-2");
    }

    /// `dir` holds exactly these files, with these contents.
    fn holds(dir: &Path, files: &[(&str, &str)]) {
        let mut found: Vec<(String, String)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let text = std::fs::read_to_string(e.path()).unwrap();
                (e.file_name().to_string_lossy().into_owned(), text)
            })
            .collect();
        found.sort();
        let expected: Vec<(String, String)> = files
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect();
        assert_eq!(found, expected, "{}", dir.display());
    }

    fn put(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn a_swap_cut_short_is_carried_through_by_the_next_run() {
        let tmp = tempfile::tempdir().unwrap();
        let (base, out) = (tmp.path(), tmp.path().join("s.json"));
        let (images, old) = (base.join("s-images"), base.join(".s-images.old"));
        let staging = base.join(".s-images.partial");
        let pending = base.join(".s-images.pending-s.json");
        // Killed after the old images were moved aside: the new pair was
        // whole (staged images, pending samples), so it takes the place.
        put(&out, "old samples");
        put(&old.join("a.png"), "old a");
        put(&staging.join("a.png"), "new a");
        put(&pending, "new samples");
        drop(ImageStage::new(&out).unwrap());
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "new samples");
        holds(&images, &[("a.png", "new a")]);
        for gone in [&old, &staging, &pending] {
            assert!(!gone.exists(), "{}", gone.display());
        }
        // Killed after the new images were in place, before the samples.
        std::fs::rename(&images, &old).unwrap();
        put(&images.join("b.png"), "newer b");
        put(&pending, "newer samples");
        drop(ImageStage::new(&out).unwrap());
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "newer samples");
        holds(&images, &[("b.png", "newer b")]);
        assert!(!old.exists() && !pending.exists());
        // Killed before the old images were moved: the same.
        put(&staging.join("c.png"), "c");
        put(&pending, "c samples");
        drop(ImageStage::new(&out).unwrap());
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "c samples");
        holds(&images, &[("c.png", "c")]);
        // Killed after the samples were in place: only the old images go.
        put(&old.join("b.png"), "newer b");
        drop(ImageStage::new(&out).unwrap());
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "c samples");
        holds(&images, &[("c.png", "c")]);
        assert!(!old.exists());
        // Killed while staging: the staged images are not the samples'.
        put(&staging.join("d.png"), "half");
        drop(ImageStage::new(&out).unwrap());
        holds(&images, &[("c.png", "c")]);
        assert!(!staging.exists());
        // A swap into another sample file of the stem (`s.jsonl` shares
        // `s-images`) goes to that file.
        put(&staging.join("e.png"), "e");
        put(&base.join(".s-images.pending-s.jsonl"), "e samples");
        drop(ImageStage::new(&out).unwrap());
        let other = std::fs::read_to_string(base.join("s.jsonl")).unwrap();
        assert_eq!(other, "e samples");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "c samples");
        holds(&images, &[("e.png", "e")]);
    }

    /// Where the samples cannot take their place (here a directory holds
    /// the name), the old images are put back and nothing of the run stays.
    #[test]
    fn a_swap_that_fails_puts_the_old_images_back() {
        let tmp = tempfile::tempdir().unwrap();
        let (base, out) = (tmp.path(), tmp.path().join("s.json"));
        put(&out.join("keep"), "not a sample file");
        put(&base.join("s-images/a.png"), "old a");
        let mut stage = ImageStage::new(&out).unwrap();
        stage.write("s-images/a.png", b"new a").unwrap();
        let samples = parse_samples(crate::data::tests::NAVIGATION).unwrap();
        let Err(Error::Write { path, .. }) = stage.finish(&samples, "") else {
            panic!("the samples took the place of a directory");
        };
        assert_eq!(path, out);
        holds(&base.join("s-images"), &[("a.png", "old a")]);
        holds(&out, &[("keep", "not a sample file")]);
        let mut left: Vec<String> = std::fs::read_dir(base)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, [".s-images.lock", "s-images", "s.json"]);
    }

    #[test]
    fn a_second_run_on_one_out_is_refused_while_the_first_stages() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("s.json");
        let mut first = ImageStage::new(&out).unwrap();
        first.write("s-images/ep/0.png", b"png").unwrap();
        let Err(Error::Usage(refusal)) = ImageStage::new(&out) else {
            panic!("a second stage on one --out was not refused");
        };
        let lock = tmp.path().join(".s-images.lock");
        assert_eq!(
            refusal,
            format!(
                "--out {}: another conversion is writing it now (it holds {}); wait for it to \
                 end, or give another --out",
                out.display(),
                lock.display()
            )
        );
        holds(
            &tmp.path().join(".s-images.partial/ep"),
            &[("0.png", "png")],
        );
        drop(first);
        drop(ImageStage::new(&out).unwrap());
        let Err(Error::Usage(refusal)) = ImageStage::new(&tmp.path().join("sub/..")) else {
            panic!("an --out that names no file was taken");
        };
        assert!(
            refusal.ends_with("names a directory, not a sample file"),
            "{refusal}"
        );
    }
}
