//! Training data: official-format samples (spec §6), made from btl
//! trajectories and exported for other trainers.
//!
//! # Layout
//! - [`samples`]: reading and writing official-format sample files
//!   (agent-core's reader; errors name the file and line; atomic writes).
//! - [`trajectories`]: episode directories → samples, one per executed step,
//!   with the target box and ranked ROIs taken from the step's UI tree
//!   (agent-core's `sample::state` and `sample::rois`).
//! - [`ms_swift`]: a dataset for ms-swift's `swift rlhf --rlhf_type grpo`.
//! - [`augment`]: copies of the typing samples with the typed value
//!   replaced by random text, so a model learns to copy it from the goal.
//! - [`tap_text`]: recorded screens with goals that name a text on them and
//!   answers that tap it, so a model learns to find what a goal names.
//!
//! The conversions themselves are pure (records and trees in, samples out);
//! the functions that read directories and write files around them are
//! kept apart so the rules can be tested without a disk.

pub mod augment;
pub mod ms_swift;
pub mod samples;
pub mod tap_text;
pub mod trajectories;

use std::path::{Path, PathBuf};

use agent_core::agent::trajectory::TrajectoryError;

pub use agent_core::sample::rois::DEFAULT_LAMBDA;
pub use samples::{load_samples, rebase_images, write_samples};
pub use trajectories::{ConvertOptions, ConvertReport, from_trajectories};

/// What went wrong with the data; each variant names the file (and line)
/// at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An input file or directory could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// An output could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A sample file that is not a valid official-format list.
    #[error("{}:{line}: {reason}", path.display())]
    Samples {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    /// A sample that parsed but cannot be exported (a missing image, an
    /// image count that does not match its `<image>` marks).
    #[error("{} sample {index}: {reason}", path.display())]
    Sample {
        path: PathBuf,
        index: usize,
        reason: String,
    },
    /// `episode.json` or `steps.jsonl` could not be read or parsed (the
    /// message names the file, and the line for `steps.jsonl`).
    #[error(transparent)]
    Trajectory(#[from] TrajectoryError),
    /// A step whose files or records do not make a sample.
    #[error("{} line {line} (step {step}): {reason}", path.display())]
    Step {
        /// The episode's `steps.jsonl`.
        path: PathBuf,
        line: usize,
        step: u32,
        reason: String,
    },
    /// A directory that holds neither an episode nor episodes.
    #[error(
        "{}: not an episode directory (no episode.json) and no episode directories inside",
        .0.display()
    )]
    NotEpisodes(PathBuf),
    /// An argument out of range.
    #[error("{0}")]
    Usage(String),
    /// The inputs made no sample: nothing is written, and an earlier file
    /// at `out` is left as it was.
    #[error("no samples were made{why}; nothing was written to {}", out.display())]
    NoSamples { out: PathBuf, why: String },
}

impl Error {
    /// Whether the user's input is at fault (rather than the output side).
    pub fn is_input(&self) -> bool {
        !matches!(self, Self::Write { .. })
    }
}

/// The data module's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Writes a whole file atomically (temporary file, sync, rename), so a
/// reader never sees half of it.
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    Ok(agent_core::atomic::write(path, bytes)?)
}

impl From<agent_core::atomic::WriteError> for Error {
    fn from(e: agent_core::atomic::WriteError) -> Self {
        Self::Write {
            path: e.path,
            source: e.source,
        }
    }
}

/// Creates a directory and its parents.
pub(crate) fn create_dir(path: &Path) -> Result<()> {
    std::fs::create_dir_all(path).map_err(|source| Error::Write {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    /// The official navigation example (spec §6), shared by the unit tests.
    pub(crate) const NAVIGATION: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/btl-ui-examples/navigation_meta_format.json"
    ));
}
