//! A trained checkpoint made ready for the phone: the adapter merged into
//! the base weights, written as a Hugging Face checkpoint and as GGUF text
//! model + projector (from the user's base GGUFs as templates), and,
//! optionally, the adapter alone as a GGUF LoRA adapter.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use tch::Tensor;

use super::{
    AdapterOptions, AdapterPrecision, Precision, write_gguf_from_template, write_lora_gguf,
};
use crate::error::{Error, Result};
use crate::grpo::checkpoint::{adapter_weights, load_trained};
use crate::weights::Checkpoint;

/// What to write.
pub struct ExportOptions<'a> {
    /// The base model's text GGUF (f16/f32, or quantized with `F16`/`F32` precision).
    pub text_template: &'a Path,
    /// The base model's projector GGUF.
    pub mmproj_template: Option<&'a Path>,
    pub precision: Precision,
    /// Also write the adapter as a GGUF LoRA adapter (LoRA runs only).
    pub lora_gguf: bool,
    pub out: &'a Path,
}

/// The files written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    /// The merged Hugging Face checkpoint, in the base checkpoint's dtype.
    pub hf: PathBuf,
    pub text: PathBuf,
    pub mmproj: Option<PathBuf>,
    pub lora: Option<PathBuf>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_owned(),
        source,
    }
}

fn suffix(precision: Precision) -> &'static str {
    match precision {
        Precision::Template => "template",
        Precision::F32 => "f32",
        Precision::F16 => "f16",
    }
}

/// Exports the checkpoint in `checkpoint` (a `checkpoint-NNNNNN` directory).
pub fn export_trained(checkpoint: &Path, options: &ExportOptions) -> Result<Exported> {
    let (config, model) = load_trained(checkpoint)?;
    let merged: HashMap<String, Tensor> = model.merged_weights()?.into_iter().collect();
    let out = options.out;
    std::fs::create_dir_all(out).map_err(io(out))?;

    let hf = out.join("hf");
    let base = &config.model.checkpoint;
    crate::atomic::write_dir(&hf, |staging| {
        // Everything but the weights (config, tokenizer, processor) comes
        // from the base checkpoint unchanged.
        for entry in std::fs::read_dir(base).map_err(io(base))? {
            let path = entry.map_err(io(base))?.path();
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let weights_file =
                name.ends_with(".safetensors") || name.ends_with(".safetensors.index.json");
            if path.is_file() && !weights_file {
                std::fs::copy(&path, staging.join(&name)).map_err(io(&path))?;
            }
        }
        // Merged in float32, stored as the base is (bfloat16 for most
        // checkpoints), as PEFT's merge_and_unload + save_pretrained do.
        let kind = Checkpoint::open(base)?.stored_kind()?;
        let mut tensors = merged
            .iter()
            .map(|(n, v)| Ok((n.clone(), v.f_to_kind(kind)?)))
            .collect::<Result<Vec<(String, Tensor)>>>()?;
        tensors.sort_by(|a, b| a.0.cmp(&b.0));
        let path = staging.join("model.safetensors");
        Tensor::write_safetensors(&tensors, &path).map_err(|e| Error::Checkpoint {
            path: path.clone(),
            message: e.to_string(),
        })
    })?;

    let tag = suffix(options.precision);
    let text = out.join(format!("model-{tag}.gguf"));
    write_gguf_from_template(options.text_template, &merged, options.precision, &text)?;
    let mmproj = match options.mmproj_template {
        Some(template) => {
            let path = out.join(format!("mmproj-{tag}.gguf"));
            write_gguf_from_template(template, &merged, options.precision, &path)?;
            Some(path)
        }
        None => None,
    };
    let lora = if options.lora_gguf {
        let (weights, alpha) = adapter_weights(&model)?;
        let path = out.join("adapter-lora-f32.gguf");
        write_lora_gguf(
            options.text_template,
            &weights,
            &AdapterOptions {
                alpha: alpha as f32,
                name: "btl-lora",
                precision: AdapterPrecision::F32,
            },
            &path,
        )?;
        Some(path)
    } else {
        None
    };
    Ok(Exported {
        hf,
        text,
        mmproj,
        lora,
    })
}
