//! A trained checkpoint made ready for the phone: the adapter merged into
//! the base weights, written as a Hugging Face checkpoint and as GGUF text
//! model + projector (from the user's base GGUFs as templates), and,
//! optionally, the adapter alone as a GGUF LoRA adapter.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use tch::Tensor;

use super::gguf::{GgufFile, Value};
use super::mapping::Family;
use super::{
    AdapterOptions, AdapterPrecision, Precision, family_of, write_gguf_from_template,
    write_gguf_from_template_with, write_lora_gguf,
};
use crate::data::load_samples;
use crate::error::{Error, Result};
use crate::grpo::checkpoint::{adapter_weights, load_trained, trained_config};
use crate::grpo::config::TrainConfig;
use crate::weights::Checkpoint;
use agent_core::model::settings::{MAX_PIXELS_KEY, PROFILE_KEY, PROMPT_VERSION_KEY};
use agent_core::protocol::Profile;
use agent_core::sample::Sample;

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
    /// What the caller should be told (samples in mixed prompt versions).
    pub warnings: Vec<String>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_owned(),
        source,
    }
}

/// The adapter's file in an export directory (`--lora-gguf`).
const ADAPTER_FILE: &str = "adapter-lora-f32.gguf";

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
    if options.out.exists() && !options.out.is_dir() {
        return Err(Error::Input(format!(
            "--out {}: not a directory; an export is one (hf/, model-*.gguf, mmproj-*.gguf)",
            options.out.display()
        )));
    }
    // What the checkpoint is made of and where the export goes are checked
    // before the model is loaded, which takes most of an export's time.
    let hf_checkpoint = checkpoint.join("config.json").is_file();
    let (base, settings, config) = if hf_checkpoint {
        let given = options.settings;
        let (Some(profile), Some(max_pixels)) = (given.profile, given.max_pixels) else {
            return Err(Error::Input(format!(
                "{} is a Hugging Face checkpoint, which does not say how it was trained: \
                 give --profile and --max-pixels",
                checkpoint.display()
            )));
        };
        let settings = Written {
            profile,
            max_pixels,
            prompt_version: profile.prompt_version(),
            warning: None,
        };
        (checkpoint.to_owned(), settings, None)
    } else {
        let config = trained_config(checkpoint)?;
        let settings = run_settings(&config, options.settings)?;
        (config.model.checkpoint.clone(), settings, Some(config))
    };
    // A full run, and a checkpoint trained elsewhere, have no adapter.
    let lora_run = config
        .as_ref()
        .is_some_and(|c| c.model.mode == crate::grpo::config::TrainMode::Lora);
    if options.lora_gguf && !lora_run {
        return Err(Error::Input(format!(
            "--lora-gguf: {} has no adapter to write (it is not a btl-train LoRA run's checkpoint)",
            checkpoint.display()
        )));
    }
    check_template(options.text_template, Family::Text, "--gguf-template")?;
    if let Some(template) = options.mmproj_template {
        check_template(template, Family::Projector, "--mmproj-template")?;
    }
    let tag = suffix(options.precision);
    let out = options.out;
    let (hf, text) = (out.join("hf"), out.join(format!("model-{tag}.gguf")));
    let mmproj = options
        .mmproj_template
        .map(|_| out.join(format!("mmproj-{tag}.gguf")));
    let lora_path = out.join(ADAPTER_FILE);
    let lora = options.lora_gguf.then_some(&lora_path);
    let base = base.as_path();
    // An --out laid out as the run's own base (`init` writes hf/ and
    // model-f16.gguf too) would put merged weights where the run reads its
    // base: exporting or resuming again would merge the adapter twice.
    let outputs = [Some(&hf), Some(&text), mmproj.as_ref(), lora];
    let inputs = [Some(checkpoint), Some(base), Some(options.text_template)];
    for output in outputs.into_iter().flatten() {
        let read = inputs
            .into_iter()
            .chain([options.mmproj_template])
            .flatten()
            .find(|input| crate::atomic::writes_over(output, input));
        if let Some(input) = read {
            return Err(Error::Input(format!(
                "--out {}: its {} would write over {}, which this export reads; write elsewhere",
                out.display(),
                output.display(),
                input.display()
            )));
        }
    }
    let model = match &config {
        None => crate::Qwen25Vl::from_checkpoint(checkpoint, tch::Device::Cpu, tch::Kind::Float)?,
        Some(config) => load_trained(checkpoint, config)?,
    };
    let merged: HashMap<String, Tensor> = model.merged_weights()?.into_iter().collect();
    let adapter = options
        .lora_gguf
        .then(|| adapter_weights(&model))
        .transpose()?;
    // Every file is made before any replaces its namesake: weights that do
    // not fit a template leave the previous export's files as they were,
    // not a new hf/ beside an old GGUF.
    crate::atomic::write_entries(out, |staging| {
        let in_staging = |path: &Path| staging.join(path.file_name().unwrap_or_default());
        write_hf(base, &merged, &in_staging(&hf))?;
        let metadata = [
            (
                PROFILE_KEY,
                Value::String(settings.profile.name().to_owned()),
            ),
            (MAX_PIXELS_KEY, Value::U64(settings.max_pixels)),
            (PROMPT_VERSION_KEY, Value::U32(settings.prompt_version)),
        ];
        write_gguf_from_template_with(
            options.text_template,
            &metadata,
            &merged,
            options.precision,
            &in_staging(&text),
        )?;
        if let (Some(template), Some(path)) = (options.mmproj_template, &mmproj) {
            write_gguf_from_template(template, &merged, options.precision, &in_staging(path))?;
        }
        if let (Some((weights, alpha)), Some(path)) = (&adapter, &lora) {
            write_lora_gguf(
                options.text_template,
                weights,
                &AdapterOptions {
                    alpha: *alpha as f32,
                    name: "btl-lora",
                    precision: AdapterPrecision::F32,
                },
                &in_staging(path),
            )?;
        }
        Ok(())
    })?;
    // What an earlier export into `out` wrote and this one does not (an
    // adapter, another precision's files) would pass for this export's
    // beside its model: an export directory holds one export. A file this
    // export read (a template kept there) is the user's, and stays.
    let written = [Some(&text), mmproj.as_ref(), lora];
    let read = [Some(checkpoint), Some(base), Some(options.text_template)]
        .into_iter()
        .chain([options.mmproj_template])
        .flatten();
    let names = ["template", "f32", "f16"]
        .iter()
        .flat_map(|tag| [format!("model-{tag}.gguf"), format!("mmproj-{tag}.gguf")])
        .chain([ADAPTER_FILE.to_owned()]);
    for stale in names.map(|name| out.join(name)) {
        let kept = written.contains(&Some(&stale))
            || read
                .clone()
                .any(|input| crate::atomic::writes_over(&stale, input));
        if stale.is_file() && !kept {
            std::fs::remove_file(&stale).map_err(io(&stale))?;
        }
    }
    Ok(Exported {
        hf,
        text,
        mmproj,
        lora: lora.cloned(),
        warnings: settings.warning.into_iter().collect(),
    })
}

/// Writes the Hugging Face directory `dir`: everything but the weights
/// (config, tokenizer, processor) from the base checkpoint unchanged, and
/// the merged weights.
fn write_hf(base: &Path, merged: &HashMap<String, Tensor>, dir: &Path) -> Result<()> {
    std::fs::create_dir(dir).map_err(io(dir))?;
    for entry in std::fs::read_dir(base).map_err(io(base))? {
        let path = entry.map_err(io(base))?.path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if path.is_file() && describes_model(&name) {
            std::fs::copy(&path, dir.join(&name)).map_err(io(&path))?;
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
    let path = dir.join("model.safetensors");
    Tensor::write_safetensors(&tensors, &path).map_err(|e| Error::Checkpoint {
        path: path.clone(),
        message: e.to_string(),
    })
}

/// Refuses a template of the other file's family by the flag that gave it
/// (a projector given as the text model's template made a "model" GGUF
/// llama.cpp cannot run), before anything is written.
fn check_template(template: &Path, family: Family, flag: &str) -> Result<()> {
    let file = GgufFile::open(template)?;
    match family_of(file.header()) {
        Ok(found) if found == family => Ok(()),
        Ok(Family::Projector) => Err(Error::Input(format!(
            "{flag} {}: this is a projector (mmproj) file; the text model's template is the qwen2vl GGUF",
            template.display()
        ))),
        Ok(Family::Text) => Err(Error::Input(format!(
            "{flag} {}: this is a text model; the projector's template is the mmproj (clip) GGUF",
            template.display()
        ))),
        Err(message) => Err(Error::Export {
            template: template.to_owned(),
            message,
        }),
    }
}

/// How the exported model is to be run, as written into its text GGUF.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Written {
    profile: Profile,
    max_pixels: u64,
    prompt_version: u32,
    /// Said when the version is in doubt: the run's samples were written
    /// in more than one version of the profile's prompt (the model learnt
    /// both texts, and the file can name one), or could not be read.
    warning: Option<String>,
}

/// The profile and screenshot size the model is run with: `given`, else
/// the training run's (see [`RunSettings`]); and the version of the
/// profile's prompt text it was trained on: the one most of its samples in
/// that profile were written in (samples recorded before a prompt changed
/// keep their old text), else this btl's (an online run's episodes are
/// played in it).
fn run_settings(config: &TrainConfig, given: RunSettings) -> Result<Written> {
    let written = |profile: Profile, max_pixels: u64, counts: BTreeMap<u32, usize>| {
        let most = counts
            .iter()
            .max_by_key(|&(&v, &n)| (n, v))
            .map(|(&v, _)| v);
        let mixed_versions = (counts.len() > 1).then(|| {
            let held = counts
                .iter()
                .map(|(v, n)| format!("{n} in version {v}"))
                .collect::<Vec<_>>()
                .join(", ");
            format!(
                "the run's {} samples were written in more than one version of its prompt \
                 ({held}); the model file says version {}, which most of them hold (the newer \
                 on a tie)",
                profile.name(),
                most.unwrap_or_default()
            )
        });
        Written {
            profile,
            max_pixels,
            prompt_version: most.unwrap_or(profile.prompt_version()),
            warning: mixed_versions,
        }
    };
    if let Some(online) = &config.online {
        let profile = given.profile.unwrap_or(online.profile);
        let max_pixels = given
            .max_pixels
            .or(config.data.max_pixels)
            .unwrap_or(agent_core::protocol::TRAINING_MAX_PIXELS);
        return Ok(written(profile, max_pixels, BTreeMap::new()));
    }
    if let (Some(profile), Some(max_pixels)) = (given.profile, given.max_pixels) {
        // Both given, the run may be exported without its samples (moved
        // or deleted since), which are only asked for their version.
        return Ok(match versions_of(config, profile, None) {
            Ok(counts) => written(profile, max_pixels, counts),
            Err(e) => Written {
                warning: Some(format!(
                    "the run's samples cannot be read for the version of their prompt ({e}); \
                     the model file says this btl's version of {}, {}",
                    profile.name(),
                    profile.prompt_version()
                )),
                ..written(profile, max_pixels, BTreeMap::new())
            },
        });
    }
    let first = first_file(config)?;
    let sample = &first[0];
    let profile = given
        .profile
        .or(listed_profile(sample).map(|(p, _)| p))
        .ok_or_else(|| {
            Error::Input(format!(
                "the prompt of {}'s first sample lists no known action space; give --profile",
                config.data.samples[0].display()
            ))
        })?;
    let max_pixels = given
        .max_pixels
        .or(config.data.max_pixels)
        .unwrap_or(sample.max_pixels);
    Ok(written(
        profile,
        max_pixels,
        versions_of(config, profile, Some(first))?,
    ))
}

/// How many of the run's samples in `profile` were written in each
/// version of its prompt; none are read for a profile whose text has had
/// one version only. `first`, when given, is the first file's samples,
/// already read.
fn versions_of(
    config: &TrainConfig,
    profile: Profile,
    mut first: Option<Vec<Sample>>,
) -> Result<BTreeMap<u32, usize>> {
    let mut counts = BTreeMap::new();
    if profile.prompt_version() == 1 {
        return Ok(counts);
    }
    for file in &config.data.samples {
        let samples = match first.take() {
            Some(samples) => samples,
            None => load_samples(file).map_err(|e| Error::Input(e.to_string()))?,
        };
        for sample in samples {
            if let Some((listed, version)) = listed_profile(&sample)
                && listed == profile
            {
                *counts.entry(version).or_default() += 1;
            }
        }
    }
    Ok(counts)
}

/// The samples of the run's first sample file, at least one.
fn first_file(config: &TrainConfig) -> Result<Vec<Sample>> {
    let first = config.data.samples.first().ok_or_else(|| {
        Error::Input(
            "the training run names no sample file; give --profile and --max-pixels".into(),
        )
    })?;
    let samples = load_samples(first).map_err(|e| Error::Input(from_the_run(e)))?;
    if samples.is_empty() {
        return Err(Error::Input(format!(
            "{} holds no sample; give --profile and --max-pixels",
            first.display()
        )));
    }
    Ok(samples)
}

/// A sample file of the run that cannot be read, said as what it is: a
/// path the run's configuration gave, relative to where the run started
/// if it was relative.
fn from_the_run(e: impl std::fmt::Display) -> String {
    format!(
        "{e} (a sample file of the run's data.samples, as its checkpoint records it; export from the \
         directory the run started in, or give --profile and --max-pixels)"
    )
}

/// The profile a sample's user prompt lists and the version of its text.
fn listed_profile(sample: &Sample) -> Option<(Profile, u32)> {
    sample
        .messages
        .iter()
        .find(|m| m.role == "user")
        .and_then(|m| Profile::with_version_of_user_prompt(&m.content))
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_core::protocol::prompt::{Prompt, Task};

    /// A run trained on one sample file, a sample per user prompt of `users`.
    fn run_on(dir: &Path, users: &[&str]) -> TrainConfig {
        let samples = dir.join("samples.json");
        let sample: Vec<_> = users
            .iter()
            .map(|user| {
                serde_json::json!({
                    "bbox": [],
                    "images": [],
                    "image_sizes": [[1080, 2400]],
                    "max_pixels": 200_704,
                    "messages": [{"role": "user", "content": user}],
                    "solution": "[{\"Plan\": \"Go back.\", \"Action\": {\"function\": \"Back\"}}]",
                })
            })
            .collect();
        std::fs::write(&samples, serde_json::Value::from(sample).to_string()).unwrap();
        TrainConfig::from_toml(&format!(
            "[model]\ncheckpoint = \"c\"\n[data]\nsamples = [{:?}]\n[run]\nsteps = 1\noutput_dir = \"o\"\n",
            samples.display().to_string()
        ))
        .unwrap()
    }

    /// "Go back." as `btl-screen-text` prompts of versions 1 and 2 write it,
    /// and as `btl-extended` does.
    fn go_back_prompts() -> (String, String, String) {
        let task = Task::Navigation {
            goal: "Go back.",
            step_instruction: None,
            history: &[],
            screen: &[],
        };
        let v2 = Prompt::new(&task, Profile::BtlScreenText, None).user;
        let v1 = v2
            .strip_suffix("\n\n## User Instruction\nGo back.")
            .unwrap()
            .to_owned();
        let extended = Prompt::new(&task, Profile::BtlExtended, None).user;
        (v1, v2, extended)
    }

    /// The prompt version written is the one the samples were written in:
    /// screen-text samples recorded before the goal was repeated are
    /// version 1, new ones 2; a profile given over the samples' own gets
    /// this btl's version of it.
    #[test]
    fn the_version_written_is_the_samples() {
        let dir = tempfile::tempdir().unwrap();
        let (v1, v2, extended) = go_back_prompts();
        let none = RunSettings::default();
        let given = |profile| RunSettings {
            profile: Some(profile),
            max_pixels: Some(50_176),
        };
        for (user, settings, want) in [
            (&v2, none, (Profile::BtlScreenText, 200_704, 2)),
            (&v1, none, (Profile::BtlScreenText, 200_704, 1)),
            (&extended, none, (Profile::BtlExtended, 200_704, 1)),
            (
                &v1,
                given(Profile::BtlScreenText),
                (Profile::BtlScreenText, 50_176, 1),
            ),
            (
                &v1,
                given(Profile::BtlExtended),
                (Profile::BtlExtended, 50_176, 1),
            ),
            (
                &extended,
                given(Profile::BtlScreenText),
                (Profile::BtlScreenText, 50_176, 2),
            ),
        ] {
            let config = run_on(dir.path(), &[user]);
            let written = run_settings(&config, settings).unwrap();
            let got = (written.profile, written.max_pixels, written.prompt_version);
            assert_eq!(got, want, "{settings:?}");
            assert_eq!(written.warning, None);
        }
    }

    /// Samples of one profile in two versions of its prompt (lessons
    /// rebuilt in the new text beside episodes recorded in the old): the
    /// file says the version most of them hold, and the export says so.
    #[test]
    fn mixed_versions_are_said_and_the_most_held_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let (v1, v2, extended) = go_back_prompts();
        let v1 = v1.as_str();
        let config = run_on(dir.path(), &[v1, &v2, &extended, &v2]);
        let written = run_settings(&config, RunSettings::default()).unwrap();
        assert_eq!(written.profile, Profile::BtlScreenText);
        assert_eq!(written.prompt_version, 2);
        let said = written.warning.unwrap();
        assert!(said.contains("1 in version 1, 2 in version 2"), "{said}");
        let config = run_on(dir.path(), &[v1, v1, &v2]);
        assert_eq!(
            run_settings(&config, RunSettings::default())
                .unwrap()
                .prompt_version,
            1
        );
        // Settings given, samples gone: this btl's version, and a word why.
        std::fs::remove_file(dir.path().join("samples.json")).unwrap();
        let given = RunSettings {
            profile: Some(Profile::BtlScreenText),
            max_pixels: Some(50_176),
        };
        let written = run_settings(&config, given).unwrap();
        assert_eq!(written.prompt_version, 2);
        let said = written.warning.unwrap();
        assert!(
            said.contains("cannot be read") && said.contains("samples.json"),
            "{said}"
        );
        // Nothing given, samples gone: the error says the path is the
        // run's, and what to do.
        let e = run_settings(&config, RunSettings::default())
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("samples.json")
                && e.contains("the run's data.samples, as its checkpoint records it")
                && e.contains("give --profile and --max-pixels"),
            "{e}"
        );
    }
}
