//! `btl-train export`: a training checkpoint → merged Hugging Face
//! checkpoint, GGUF text model + projector for the phone, and optionally a
//! GGUF LoRA adapter.

use std::path::PathBuf;

use agent_core::process::{Failure, Outcome};

use crate::error::Error;
use crate::export::Precision;
use crate::export::trained::{ExportOptions, RunSettings, export_trained};
use agent_core::protocol::Profile;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PrecisionArg {
    /// Matrices f16, norms and biases f32 (llama.cpp's `--outtype f16`).
    F16,
    /// Everything f32.
    F32,
    /// Each tensor as in the template.
    Template,
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// A checkpoint directory of `btl-train grpo`/`sft` (`…/checkpoint-NNNNNN`),
    /// or a Hugging Face checkpoint trained elsewhere (ms-swift, TRL: a
    /// directory with `config.json`; give --profile and --max-pixels).
    checkpoint: PathBuf,
    /// The base model's text GGUF: its metadata and tokenizer are copied.
    #[arg(long)]
    gguf_template: PathBuf,
    /// The base model's projector GGUF (mmproj).
    #[arg(long)]
    mmproj_template: Option<PathBuf>,
    /// Tensor types of the GGUFs (quantize afterwards with `btl model quantize`).
    #[arg(long, value_enum, default_value_t = PrecisionArg::F16)]
    precision: PrecisionArg,
    /// Also write the adapter alone as a GGUF LoRA adapter (`btl run --lora`).
    #[arg(long)]
    lora_gguf: bool,
    /// Output directory: hf/, model-*.gguf, mmproj-*.gguf, adapter-lora-f32.gguf.
    #[arg(long)]
    out: PathBuf,
    /// The prompt profile the model is to be run with, written into the
    /// text GGUF (`btl.profile`) [default: the one the training samples'
    /// prompts list].
    #[arg(long)]
    profile: Option<Profile>,
    /// The screenshot size it is to be run with (`btl.max_pixels`)
    /// [default: the training run's data.max_pixels, else its first sample's].
    #[arg(long, value_parser = clap::value_parser!(u64).range(agent_core::protocol::MIN_PIXELS..))]
    max_pixels: Option<u64>,
}

pub fn run_export(args: &ExportArgs) -> Outcome {
    let precision = match args.precision {
        PrecisionArg::F16 => Precision::F16,
        PrecisionArg::F32 => Precision::F32,
        PrecisionArg::Template => Precision::Template,
    };
    let exported = export_trained(
        &args.checkpoint,
        &ExportOptions {
            text_template: &args.gguf_template,
            mmproj_template: args.mmproj_template.as_deref(),
            precision,
            lora_gguf: args.lora_gguf,
            settings: RunSettings {
                profile: args.profile,
                max_pixels: args.max_pixels,
            },
            out: &args.out,
        },
    )
    .map_err(|e| match e {
        Error::Torch(_) => Failure::Failed(e.into()),
        Error::Io { ref source, .. } if source.kind() != std::io::ErrorKind::NotFound => {
            Failure::Failed(e.into())
        }
        other => Failure::BadInput(other.into()),
    })?;
    for warning in &exported.warnings {
        eprintln!("btl-train: warning: {warning}");
    }
    println!("merged checkpoint: {}", exported.hf.display());
    println!("text model: {}", exported.text.display());
    if let Some(m) = &exported.mmproj {
        println!("projector: {}", m.display());
    }
    if let Some(l) = &exported.lora {
        println!("LoRA adapter: {}", l.display());
    }
    Ok(())
}
