//! `btl predict`: the policy's answer for every sample of an official-format
//! file, as the JSONL `btl metrics` and `btl score` read, so a model can be
//! evaluated offline.
//!
//! Each sample's own prompt (its system and user messages) and image are
//! used, decoding is constrained to the action space that prompt lists,
//! and its coordinates frame is `smart_resize` of the image at the
//! sample's `max_pixels`, exactly what the answers are scored in. Image
//! paths are relative to the samples file. A text-only sample (no image,
//! its prompt without the placeholder, as `btl-train data text-only` and
//! `augment-typed --text-only` write) is answered without one, in the
//! frame its `image_sizes` gives.

use super::episode::{ModelArgs, load_shared_model};
use super::{Failure, Outcome, in_file, json_line, read_input};
use crate::model::{Observation, Policy};
use crate::protocol::prompt::{IMAGE_PLACEHOLDER, listed_screen};
use crate::protocol::{FrameMap, Profile, Prompt, ScreenElement, Size};
use crate::sample::{Sample, SampleRef, check_image_size, parse_samples};
use anyhow::{Context, anyhow};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Official-format samples (a JSON list).
    #[arg(long)]
    samples: PathBuf,
    #[command(flatten)]
    model: ModelArgs,
    /// Sampling seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Write the predictions to FILE, which is replaced only once every
    /// sample is answered: a run that fails leaves an earlier FILE as it
    /// was, where a shell's `>` would have emptied it. Standard output
    /// without it.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

pub fn run(args: &Args) -> Outcome {
    let text = read_input(&args.samples)?;
    let samples = in_file(&args.samples, parse_samples(&text))?;
    let Some(path) = &args.out else {
        return answer_all(args, &samples, &mut std::io::stdout().lock());
    };
    // Refused before the model answers every sample, not after.
    let unusable = if path.is_dir() {
        Some("it is a directory; give a file")
    } else if !crate::atomic::parent_dir(path).is_dir() {
        Some("its directory does not exist")
    } else if crate::atomic::writes_over(path, &args.samples) {
        Some("it is the samples file this command reads; write elsewhere")
    } else {
        None
    };
    if let Some(why) = unusable {
        return Err(Failure::BadInput(anyhow!(
            "--out {}: {why}",
            path.display()
        )));
    }
    // The answering's own failure, kept while the staging file is dropped.
    let mut failed = None;
    let written = crate::atomic::write_with(path, |file, staged| {
        let mut out = std::io::BufWriter::new(file);
        let answered = answer_all(args, &samples, &mut out);
        let flushed = out.flush().map_err(|source| crate::atomic::WriteError {
            path: staged.to_owned(),
            source,
        });
        answered.map_err(|f| {
            failed = Some(f);
            crate::atomic::WriteError {
                path: path.clone(),
                source: std::io::Error::other("not every sample was answered"),
            }
        })?;
        flushed
    });
    if let Some(failure) = failed {
        return Err(failure);
    }
    written.map_err(|e| Failure::Failed(e.into()))
}

/// Answers every sample, one JSON line each to `out`.
fn answer_all(args: &Args, samples: &[Sample], out: &mut impl Write) -> Outcome {
    let base = args.samples.parent().unwrap_or(Path::new("."));
    let mut policy = load_shared_model(&args.model, 1)?;
    let bar = ProgressBar::new(samples.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("btl predict [{bar:24}] {pos}/{len} samples")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    for (index, sample) in samples.iter().enumerate() {
        let obs = observation(sample, base)
            .with_context(|| format!("{}: sample {index}", args.samples.display()))
            .map_err(Failure::BadInput)?;
        let raw = policy
            .act(&Observation {
                screenshot: obs.screenshot.as_ref(),
                profile: obs.profile,
                frame: obs.frame,
                prompt: &obs.prompt,
                ui_tree: None,
                screen: &obs.screen,
                seed: args.seed,
            })
            .with_context(|| format!("{}: sample {index}", args.samples.display()))?
            .raw;
        let reference = match &sample.id {
            Some(id) => SampleRef::Id(id.clone()),
            None => SampleRef::Index(index),
        };
        json_line(
            out,
            &serde_json::json!({"sample": reference, "completion": raw}),
        )?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(())
}

/// What the policy is shown for one sample.
struct SampleObservation {
    /// `None` for a text-only sample.
    screenshot: Option<image::RgbaImage>,
    frame: FrameMap,
    prompt: Prompt,
    /// The action space the sample's prompt lists, so constrained decoding
    /// admits exactly its actions (`Finish` in a `btl-extended` sample).
    profile: Profile,
    /// The elements a `btl-screen-text` prompt lists, which decoding is
    /// grounded in as on the phone.
    screen: Vec<ScreenElement>,
}

fn observation(sample: &Sample, base: &Path) -> anyhow::Result<SampleObservation> {
    let message = |role: &str| {
        sample
            .messages
            .iter()
            .find(|m| m.role == role)
            .map(|m| m.content.clone())
    };
    let prompt = Prompt {
        system: message("system").unwrap_or_default(),
        user: message("user").ok_or_else(|| anyhow!("no user message"))?,
    };
    let placeholders = prompt.user.matches(IMAGE_PLACEHOLDER).count();
    if placeholders != sample.images.len().min(1) || sample.images.len() > 1 {
        return Err(anyhow!(
            "the sample lists {} image(s) and its user prompt holds {placeholders} \
             {IMAGE_PLACEHOLDER}: a BTL sample has one screenshot and one placeholder, or neither \
             (text-only)",
            sample.images.len()
        ));
    }
    let (screenshot, size) = match sample.images.first() {
        Some(image) => {
            let image_path = base.join(image);
            let unreadable = || format!("cannot read image {}", image_path.display());
            // The header first: the sample's size is bounded, and a small
            // file may claim gigabytes of pixels.
            let (width, height) = image::image_dimensions(&image_path).with_context(unreadable)?;
            check_image_size(width, height, sample.image_sizes.first())
                .map_err(|e| anyhow!("image {}: {e}", image_path.display()))?;
            let screenshot = image::open(&image_path)
                .with_context(unreadable)?
                .to_rgba8();
            let size = Size::new(screenshot.width(), screenshot.height());
            (Some(screenshot), size)
        }
        None => {
            let &[w, h] = sample.image_sizes.first().ok_or_else(|| {
                anyhow!("no image, and no image_sizes to give a text-only sample its frame")
            })?;
            (None, Size::new(w, h))
        }
    };
    // The official samples' prompts are the btl-ui profile's; so are the
    // grounding prompts, which list no actions.
    let profile = Profile::of_user_prompt(&prompt.user).unwrap_or(Profile::BtlUi);
    let screen = listed_screen(&prompt.user)?;
    Ok(SampleObservation {
        screenshot,
        frame: FrameMap::new(size, sample.max_pixels)?,
        prompt,
        profile,
        screen,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::prompt::Task;
    use crate::sample::Message;

    fn wifi_line() -> ScreenElement {
        ScreenElement {
            label: "Wi-Fi".into(),
            point: crate::protocol::Point::new(251.0, 90.0),
            checked: Some(false),
        }
    }

    fn sample_with(profile: Profile, dir: &Path) -> Sample {
        let prompt = Prompt::new(
            &Task::Navigation {
                goal: "Turn on Wi-Fi.",
                step_instruction: None,
                history: &[],
                screen: &[wifi_line()],
            },
            profile,
            None,
        );
        image::RgbaImage::new(28, 56)
            .save(dir.join("s.png"))
            .unwrap();
        Sample {
            id: None,
            images: vec!["s.png".into()],
            image_sizes: vec![[28, 56]],
            max_pixels: 200_704,
            messages: vec![
                Message {
                    role: "system".into(),
                    content: prompt.system,
                },
                Message {
                    role: "user".into(),
                    content: prompt.user,
                },
            ],
            solution: r#"[{"Action": {"function": "Finish"}}]"#.into(),
            bbox: Vec::new(),
            rois: Vec::new(),
        }
    }

    /// A sample recorded in `btl-extended` is decoded in that action space:
    /// under the btl-ui grammar its `Finish` could never be answered.
    #[test]
    fn each_sample_is_decoded_in_the_action_space_its_prompt_lists() {
        let dir = tempfile::tempdir().unwrap();
        for profile in [Profile::BtlUi, Profile::BtlExtended, Profile::BtlScreenText] {
            let obs = observation(&sample_with(profile, dir.path()), dir.path()).unwrap();
            assert_eq!(obs.profile, profile);
        }
    }

    /// A text-only sample is shown no image, in the frame of the size it
    /// records; one that records no size is refused, naming what is missing.
    #[test]
    fn a_text_only_sample_has_its_recorded_frame_and_no_image() {
        let dir = tempfile::tempdir().unwrap();
        let mut sample = sample_with(Profile::BtlExtended, dir.path());
        sample.images.clear();
        sample.image_sizes = vec![[1080, 2400]];
        let user = &mut sample.messages[1].content;
        *user = user.replace(crate::protocol::prompt::IMAGE_PLACEHOLDER, "");
        let obs = observation(&sample, dir.path()).unwrap();
        assert!(obs.screenshot.is_none());
        assert_eq!(obs.frame.device, Size::new(1080, 2400));
        assert_eq!(obs.frame.model, Size::new(280, 644));
        assert_eq!(obs.profile, Profile::BtlExtended);
        let mut no_sizes = sample.clone();
        no_sizes.image_sizes.clear();
        let err = observation(&no_sizes, dir.path())
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("image_sizes"), "{err}");
        let mut placeholder_left = sample.clone();
        placeholder_left.messages[1].content.push_str("<image>");
        let err = observation(&placeholder_left, dir.path())
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("lists 0 image(s) and its user prompt holds 1 <image>"),
            "{err}"
        );
        sample.images = vec!["s.png".into()];
        let err = observation(&sample, dir.path()).err().unwrap().to_string();
        assert!(
            err.contains("lists 1 image(s) and its user prompt holds 0 <image>"),
            "{err}"
        );
    }

    /// A `btl-screen-text` sample is decoded grounded in the lines its
    /// prompt lists; a line the prompt writer could not have written is
    /// refused, naming the sample's line.
    #[test]
    fn a_screen_text_sample_is_grounded_in_its_listed_lines() {
        let dir = tempfile::tempdir().unwrap();
        let mut sample = sample_with(Profile::BtlScreenText, dir.path());
        let obs = observation(&sample, dir.path()).unwrap();
        assert_eq!(obs.screen, [wifi_line()]);
        let extended = observation(&sample_with(Profile::BtlExtended, dir.path()), dir.path());
        assert!(extended.unwrap().screen.is_empty());
        let user = &mut sample.messages[1].content;
        *user = user.replace("[251, 90] off", "[251, 90] dimmed");
        let err = observation(&sample, dir.path()).err().unwrap().to_string();
        assert!(err.contains("line 1") && err.contains("dimmed"), "{err}");
    }
}
