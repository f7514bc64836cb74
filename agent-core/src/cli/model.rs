//! `btl model`: model-file utilities.

use super::{Failure, Outcome};
use std::path::PathBuf;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Quantize a text model or vision projector GGUF with llama.cpp's quantizer (e.g. f16 → q4_k_m for a phone).
    Quantize(QuantizeArgs),
}

#[derive(Debug, clap::Args)]
pub struct QuantizeArgs {
    /// The text model or projector (mmproj) GGUF to read (f16, bf16 or f32).
    input: PathBuf,
    /// Where to write the quantized GGUF (must not exist).
    output: PathBuf,
    #[cfg(feature = "llama")]
    #[arg(long = "type", value_enum)]
    ty: crate::model::quantize::QuantType,
    /// Threads (0: all cores).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(i32).range(0..=super::episode::MAX_THREADS))]
    threads: i32,
}

pub fn run(command: &Command) -> Outcome {
    match command {
        Command::Quantize(args) => quantize(args),
    }
}

#[cfg(feature = "llama")]
fn quantize(args: &QuantizeArgs) -> Outcome {
    use crate::model::quantize::{QuantizeError, quantize};
    quantize(&args.input, &args.output, args.ty, args.threads).map_err(|e| match e {
        e @ QuantizeError::Failed { .. } => Failure::Failed(e.into()),
        e => Failure::BadInput(e.into()),
    })?;
    use std::io::Write;
    writeln!(std::io::stdout().lock(), "{}", args.output.display())
        .map_err(|e| Failure::Failed(e.into()))
}

#[cfg(not(feature = "llama"))]
fn quantize(_: &QuantizeArgs) -> Outcome {
    Err(Failure::BadInput(anyhow::anyhow!(
        "this btl was built without the llama.cpp backend; rebuild with `--features llama`"
    )))
}
