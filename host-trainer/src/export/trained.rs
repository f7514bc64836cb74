//! A trained checkpoint made ready for the phone: the adapter merged into
//! the base weights, written as a Hugging Face checkpoint and as GGUF text
//! model + projector (from the user's base GGUFs as templates), and,
//! optionally, the adapter alone as a GGUF LoRA adapter.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use tch::Tensor;

use super::gguf::Value;
use super::{
    AdapterOptions, AdapterPrecision, Precision, write_gguf_from_template,
    write_gguf_from_template_with, write_lora_gguf,
};
use crate::data::load_samples;
use crate::error::{Error, Result};
use crate::grpo::checkpoint::{adapter_weights, load_trained};
use crate::grpo::config::TrainConfig;
use crate::weights::Checkpoint;
use agent_core::model::settings::{MAX_PIXELS_KEY, PROFILE_KEY, PROMPT_VERSION_KEY};
use agent_core::protocol::Profile;

/// How the exported model is to be run, written into the text GGUF
/// (`btl.profile`, `btl.max_pixels`, `btl.prompt_version`); `None` takes
/// the training run's: the screenshot size it trained at (`data.max_pixels`,
/// else its first sample's) and the profile its first sample's prompt lists
/// (an online run's: its `online.profile`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunSettings {
    pub profile: Option<Profile>,
    pub max_pixels: Option<u64>,
}

/// What to write.
pub struct ExportOptions<'a> {
    /// The base model's text GGUF (f16/f32, or quantized with `F16`/`F32` precision).
    pub text_template: &'a Path,
    /// The base model's projector GGUF.
    pub mmproj_template: Option<&'a Path>,
    pub precision: Precision,
    /// Also write the adapter as a GGUF LoRA adapter (LoRA runs only).
    pub lora_gguf: bool,
    pub settings: RunSettings,
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

/// Whether `name`, a file of a checkpoint directory, describes the model
/// (config, tokenizer, processor) rather than holding its weights or the
/// state of the run that trained it (a Hugging Face Trainer's optimizer,
/// scheduler, random state and arguments, ms-swift's `args.json`).
fn describes_model(name: &str) -> bool {
    let weights = name.ends_with(".safetensors") || name.ends_with(".safetensors.index.json");
    let run_state = name.ends_with(".pt")
        || name.ends_with(".pth")
        || name.ends_with(".bin")
        || name == "trainer_state.json"
        || name == "args.json";
    !weights && !run_state
}

/// Exports the checkpoint in `checkpoint`: a `checkpoint-NNNNNN` directory
/// of `btl-train`, or a Hugging Face checkpoint trained elsewhere (ms-swift,
/// TRL; recognised by its `config.json`), whose weights are taken as they
/// are and whose run settings must be given.
pub fn export_trained(checkpoint: &Path, options: &ExportOptions) -> Result<Exported> {
    let (base, model, (profile, max_pixels)) = if checkpoint.join("config.json").is_file() {
        let given = options.settings;
        let (Some(profile), Some(max_pixels)) = (given.profile, given.max_pixels) else {
            return Err(Error::Input(format!(
                "{} is a Hugging Face checkpoint, which does not say how it was trained: \
                 give --profile and --max-pixels",
                checkpoint.display()
            )));
        };
        let model =
            crate::Qwen25Vl::from_checkpoint(checkpoint, tch::Device::Cpu, tch::Kind::Float)?;
        (checkpoint.to_owned(), model, (profile, max_pixels))
    } else {
        let (config, model) = load_trained(checkpoint)?;
        let settings = run_settings(&config, options.settings)?;
        (config.model.checkpoint.clone(), model, settings)
    };
    let merged: HashMap<String, Tensor> = model.merged_weights()?.into_iter().collect();
    let out = options.out;
    std::fs::create_dir_all(out).map_err(io(out))?;

    let hf = out.join("hf");
    let base = base.as_path();
    crate::atomic::write_dir(&hf, |staging| {
        // Everything but the weights (config, tokenizer, processor) comes
        // from the base checkpoint unchanged.
        for entry in std::fs::read_dir(base).map_err(io(base))? {
            let path = entry.map_err(io(base))?.path();
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if path.is_file() && describes_model(&name) {
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
    let metadata = [
        (PROFILE_KEY, Value::String(profile.name().to_owned())),
        (MAX_PIXELS_KEY, Value::U64(max_pixels)),
        (PROMPT_VERSION_KEY, Value::U32(profile.prompt_version())),
    ];
    write_gguf_from_template_with(
        options.text_template,
        &metadata,
        &merged,
        options.precision,
        &text,
    )?;
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

/// The profile and screenshot size the model is run with: `given`, else
/// the training run's (see [`RunSettings`]).
fn run_settings(config: &TrainConfig, given: RunSettings) -> Result<(Profile, u64)> {
    if let (Some(profile), Some(max_pixels)) = (given.profile, given.max_pixels) {
        return Ok((profile, max_pixels));
    }
    // An online run's episodes were played with its profile and size.
    if let Some(online) = &config.online {
        return Ok((
            given.profile.unwrap_or(online.profile),
            given
                .max_pixels
                .or(config.data.max_pixels)
                .unwrap_or(agent_core::protocol::TRAINING_MAX_PIXELS),
        ));
    }
    let first = config.data.samples.first().ok_or_else(|| {
        Error::Input(
            "the training run names no sample file; give --profile and --max-pixels".into(),
        )
    })?;
    let samples = load_samples(first).map_err(|e| Error::Input(e.to_string()))?;
    let sample = samples.first().ok_or_else(|| {
        Error::Input(format!(
            "{} holds no sample; give --profile and --max-pixels",
            first.display()
        ))
    })?;
    let listed = sample
        .messages
        .iter()
        .find(|m| m.role == "user")
        .and_then(|m| Profile::of_user_prompt(&m.content));
    let profile = given.profile.or(listed).ok_or_else(|| {
        Error::Input(format!(
            "the prompt of {}'s first sample lists no known action space; give --profile",
            first.display()
        ))
    })?;
    let max_pixels = given
        .max_pixels
        .or(config.data.max_pixels)
        .unwrap_or(sample.max_pixels);
    Ok((profile, max_pixels))
}
