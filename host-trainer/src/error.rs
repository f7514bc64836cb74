//! The error type of host-trainer.
//!
//! Every variant names what was wrong and where (file, tensor, input), so a
//! user with the wrong checkpoint or a malformed batch can act on the message
//! alone. libtorch's own errors are wrapped, never turned into panics: model
//! code calls tch's fallible `f_*` methods.

use std::path::PathBuf;

/// host-trainer's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// `config.json` is malformed or describes a model host-trainer cannot build.
    #[error("{}: {message}", path.display())]
    Config { path: PathBuf, message: String },
    /// A checkpoint file or its index is malformed.
    #[error("{}: {message}", path.display())]
    Checkpoint { path: PathBuf, message: String },
    /// Tensors the model needs are not in the checkpoint.
    #[error("checkpoint {} lacks {} tensor(s) the model needs: {}", dir.display(), names.len(), list(names))]
    MissingTensors { dir: PathBuf, names: Vec<String> },
    /// The checkpoint has tensors this model does not use (another architecture or size).
    #[error("checkpoint {} has {} tensor(s) this model does not use: {}", dir.display(), names.len(), list(names))]
    UnexpectedTensors { dir: PathBuf, names: Vec<String> },
    /// A tensor's shape does not match the config.
    #[error("{}: tensor {name} has shape {found:?}, but the config needs {expected:?}", path.display())]
    ShapeMismatch {
        path: PathBuf,
        name: String,
        expected: Vec<i64>,
        found: Vec<i64>,
    },
    /// A tensor is stored in a dtype that is not a float format host-trainer reads.
    #[error("{}: tensor {name} is stored as {dtype}; expected F32, BF16 or F16", path.display())]
    UnsupportedDtype {
        path: PathBuf,
        name: String,
        dtype: String,
    },
    /// A batch, image grid or token sequence that does not fit the model.
    #[error("invalid input: {0}")]
    Input(String),
    /// A plot could not be drawn or encoded.
    #[error("{}: plotting failed: {message}", path.display())]
    Plot { path: PathBuf, message: String },
    /// A GGUF file is malformed, or a header cannot be written as one.
    #[error("{}: {message}", path.display())]
    Gguf { path: PathBuf, message: String },
    /// Trained weights do not fit the GGUF template they are exported with
    /// (a missing or misshapen weight, a quantized or unknown template).
    #[error("exporting with template {}: {message}", template.display())]
    Export { template: PathBuf, message: String },
    /// A PEFT LoRA adapter directory is malformed or uses features host-trainer does not.
    #[error("{}: {message}", path.display())]
    Adapter { path: PathBuf, message: String },
    /// A step's loss or gradient is no longer a number: the weights are
    /// lost, so the step is neither logged nor saved.
    #[error(
        "step {step} diverged (loss {loss}, gradient norm {grad_norm}) and was not kept; \
         the weights before it are in {last_good}; train again with a lower optim.lr \
         (a resumed run keeps its learning rate)"
    )]
    Diverged {
        step: u64,
        loss: f64,
        grad_norm: f64,
        /// The last checkpoint, in words.
        last_good: String,
    },
    /// libtorch reported an error.
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
}

/// At most 10 names, then how many more.
fn list(names: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut text = names
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        text.push_str(&format!(", and {} more", names.len() - SHOWN));
    }
    text
}

impl From<agent_core::atomic::WriteError> for Error {
    fn from(e: agent_core::atomic::WriteError) -> Self {
        Self::Io {
            path: e.path,
            source: e.source,
        }
    }
}
