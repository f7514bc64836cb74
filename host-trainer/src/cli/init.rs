//! `btl-train init`: a new model of the size `MODEL.toml` gives, with random
//! weights, ready for `btl-train sft`/`grpo` and for llama.cpp.

use std::path::PathBuf;

use agent_core::process::{Failure, Outcome};
use anyhow::anyhow;

use crate::error::Error;
use crate::export::Precision;
use crate::init::{ModelSpec, init};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InitPrecision {
    /// GGUF matrices f16, norms and biases f32 (llama.cpp's `--outtype f16`).
    F16,
    /// GGUF tensors all f32.
    F32,
}

#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// The model's size, tokenizer and seed (see host-trainer/models/*.toml).
    #[arg(long)]
    config: PathBuf,
    /// Output directory: hf/ (config.json, model.safetensors, tokenizer.json),
    /// model-<precision>.gguf, mmproj-<precision>.gguf.
    #[arg(long)]
    out: PathBuf,
    /// Tensor types of the GGUFs (the HF checkpoint is always float32).
    #[arg(long, value_enum, default_value_t = InitPrecision::F16)]
    precision: InitPrecision,
    /// Replace `--out` if it exists.
    #[arg(long)]
    force: bool,
}

pub fn run_init(args: &InitArgs) -> Outcome {
    if args.out.exists() && !args.force {
        return Err(Failure::BadInput(anyhow!(
            "{} exists; give --force to replace it",
            args.out.display()
        )));
    }
    let precision = match args.precision {
        InitPrecision::F16 => Precision::F16,
        InitPrecision::F32 => Precision::F32,
    };
    let spec = ModelSpec::from_file(&args.config).map_err(|e| Failure::BadInput(e.into()))?;
    let made = init(&spec, &args.config, precision, &args.out).map_err(|e| match e {
        Error::Torch(_) => Failure::Failed(e.into()),
        Error::Io { ref source, .. } if source.kind() != std::io::ErrorKind::NotFound => {
            Failure::Failed(e.into())
        }
        other => Failure::BadInput(other.into()),
    })?;
    println!(
        "{}: {:.2}M parameters ({:.2}M text, {:.2}M vision)",
        spec.name,
        (made.text_parameters + made.vision_parameters) as f64 / 1e6,
        made.text_parameters as f64 / 1e6,
        made.vision_parameters as f64 / 1e6
    );
    println!("checkpoint: {}", made.hf.display());
    println!("text model: {}", made.text.display());
    println!("projector: {}", made.mmproj.display());
    Ok(())
}
