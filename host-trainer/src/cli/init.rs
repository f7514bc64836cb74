//! `btl-train init`: a new model of the size `MODEL.toml` gives, with random
//! weights or the weights of GGUF files of that size, ready for
//! `btl-train sft`/`grpo` and for llama.cpp.

use std::path::PathBuf;

use agent_core::process::{Failure, Outcome};
use anyhow::anyhow;

use crate::error::Error;
use crate::export::Precision;
use crate::init::{ModelSpec, Weights, init};

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
    /// Take the weights from this text-model GGUF (F32, F16, BF16 or Q8_0
    /// tensors, e.g. agent-core/models/btl-mini-q8_0.gguf) instead of
    /// drawing them: training goes on from a shipped or exported model.
    /// Its size and vocabulary must be `--config`'s.
    #[arg(long, value_name = "TEXT.gguf", requires = "from_mmproj")]
    from_gguf: Option<PathBuf>,
    /// The projector GGUF that goes with `--from-gguf`.
    #[arg(long, value_name = "MMPROJ.gguf", requires = "from_gguf")]
    from_mmproj: Option<PathBuf>,
    /// `--from-gguf` is a shallower model of `--config`'s width: grow it to
    /// `--config`'s depth (a whole multiple of its own), each layer followed
    /// by copies whose outputs are zero, so the new model starts out
    /// computing exactly what the small one does.
    #[arg(long, requires = "from_gguf")]
    grow: bool,
}

pub fn run_init(args: &InitArgs) -> Outcome {
    if args.out.exists() && !args.out.is_dir() {
        return Err(Failure::BadInput(anyhow!(
            "--out {}: not a directory; a model is one (hf/, model-*.gguf, mmproj-*.gguf), and --force replaces only one",
            args.out.display()
        )));
    }
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
    // --force replaces the directory whole: it must not hold what init reads.
    let inputs = [
        Some(&args.config),
        Some(&spec.tokenizer),
        args.from_gguf.as_ref(),
        args.from_mmproj.as_ref(),
    ];
    super::apart_from_inputs(
        &args.out,
        inputs.into_iter().flatten().map(PathBuf::as_path),
    )?;
    let weights = match (&args.from_gguf, &args.from_mmproj) {
        (Some(text), Some(projector)) if args.grow => Weights::Grown { text, projector },
        (Some(text), Some(projector)) => Weights::Gguf { text, projector },
        _ => Weights::Random,
    };
    let made = init(&spec, &args.config, weights, precision, &args.out).map_err(|e| match e {
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
    if let Some(imported) = &made.imported {
        let types: Vec<String> = imported
            .types
            .iter()
            .map(|(ty, n)| format!("{n} {ty}"))
            .collect();
        println!(
            "weights: {} GGUF tensors ({}){}",
            imported.tensors,
            types.join(", "),
            if imported.output_ignored {
                "; output.weight left out, the model ties it to the embedding"
            } else {
                ""
            }
        );
    }
    println!("checkpoint: {}", made.hf.display());
    println!("text model: {}", made.text.display());
    println!("projector: {}", made.mmproj.display());
    Ok(())
}
