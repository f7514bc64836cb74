//! `btl-train data`: trajectories → official-format samples, and samples →
//! datasets for other trainers.

use crate::data::augment::{augment_typed, text_only_copies, without_screenshot};
use crate::data::ms_swift::{ExportOptions, Purpose, export_ms_swift};
use crate::data::tap_text::{TapTextOptions, tap_text};
use crate::data::trajectories::images_beside;
use crate::data::{
    ConvertOptions, DEFAULT_LAMBDA, Error, from_trajectories, load_samples, rebase_images,
    write_samples,
};
use agent_core::model::grammar::GrammarLimits;
use agent_core::process::{Failure, Outcome};
use anyhow::anyhow;
use clap::builder::TypedValueParser;
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Samples (official JSON format with ranked ROIs) from btl trajectories:
    /// one per executed step of the successful episodes.
    FromTrajectories(FromTrajectoriesArgs),
    /// A dataset for another trainer, from a samples file.
    Export(ExportArgs),
    /// Copies of the samples that type text, the text replaced by random
    /// text of the same shape in the goal, the history and the answer, so a
    /// model must copy typed values from the goal rather than recall them.
    AugmentTyped(AugmentTypedArgs),
    /// Samples whose goal names a text on a recorded screen (`Tap "…".`)
    /// and whose answer taps it: every screen of the episodes, whatever
    /// their outcome, so a model learns to find on the screen what a goal
    /// names.
    TapText(TapTextArgs),
    /// Every sample again without its screenshot (text-only prompts, a
    /// fraction of a screenshot sample's cost): for profile btl-screen-text,
    /// whose prompts list the screen's elements, so SFT can show the model
    /// many screens as text beside the samples with their image.
    TextOnly(TextOnlyArgs),
}

#[derive(Debug, clap::Args)]
pub struct TextOnlyArgs {
    /// Official-format samples (a JSON list).
    samples: PathBuf,
    /// The samples file to write: the copies only (train on both files).
    #[arg(long)]
    out: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct TapTextArgs {
    /// Episode directories, or directories of them (as `btl collect` writes).
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    /// The samples file to write; screenshots go to STEM-images/ beside it.
    #[arg(long)]
    out: PathBuf,
    /// Most samples per screen.
    #[arg(long, default_value_t = 2)]
    per_screen: usize,
    /// Seed of the choice among a screen's texts.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Most ROIs per sample (λ), the target element included.
    #[arg(long, default_value_t = DEFAULT_LAMBDA, value_parser = clap::value_parser!(u16).range(1..=100).map(usize::from))]
    lambda: usize,
    /// Lookup lessons: every listed point drawn anew at random, so only
    /// finding the quoted line in the list answers the goal; text-only, no
    /// regions (profile btl-screen-text only).
    #[arg(long)]
    move_points: bool,
    /// Goals put as a task would put them ("Please open Dmitri King."),
    /// with the answer's Plan quoting the text (`Tap "Dmitri King".`).
    #[arg(long)]
    phrased: bool,
    /// Every listed label replaced by a random string of its shape, drawn
    /// anew for each sample, so the quote is copied from the goal rather
    /// than recalled (with --move-points only).
    #[arg(long, requires = "move_points")]
    made_up: bool,
}

#[derive(Debug, clap::Args)]
pub struct AugmentTypedArgs {
    /// Official-format samples (a JSON list).
    samples: PathBuf,
    /// The samples file to write: the copies only (train on both files).
    #[arg(long)]
    out: PathBuf,
    /// Copies per typing sample.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=1000).map(usize::from))]
    copies: usize,
    /// Seed of the random text (each sample draws from it and its id).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Copies without their screenshot (text-only prompts, a fraction of a
    /// screenshot sample's cost), to mix many into SFT beside the others.
    #[arg(long)]
    text_only: bool,
}

#[derive(Debug, clap::Args)]
pub struct FromTrajectoriesArgs {
    /// Episode directories, or directories of them (as `btl collect` writes).
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    /// The samples file to write; screenshots go to STEM-images/ beside it.
    #[arg(long)]
    out: PathBuf,
    /// Most ROIs per sample (λ), the target element included.
    #[arg(long, default_value_t = DEFAULT_LAMBDA, value_parser = clap::value_parser!(u16).range(1..=100).map(usize::from))]
    lambda: usize,
    /// Use every episode, not only those the task checker called successful.
    #[arg(long)]
    all_episodes: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// JSONL for ms-swift's `swift rlhf --rlhf_type grpo` (see docs/training.md).
    MsSwift,
    /// JSONL for supervised fine-tuning in ms-swift (`swift sft`) or TRL's
    /// `SFTTrainer`: each sample's messages and, as the assistant turn, the
    /// canonical BTL answer `btl-train sft` trains on.
    MsSwiftSft,
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    #[arg(long, value_enum)]
    format: Format,
    /// Official-format samples (a JSON list).
    #[arg(long)]
    samples: PathBuf,
    /// Output directory (created): the dataset file and a copy of the images.
    #[arg(long)]
    out: PathBuf,
    /// Where OUT will be on the training machines, for the image paths
    /// [default: OUT's absolute path here].
    #[arg(long)]
    dataset_root: Option<String>,
    /// ms-swift-sft: most blink regions in an answer (as `sft.max_regions`).
    #[arg(long, default_value_t = GrammarLimits::default().max_regions)]
    max_regions: usize,
    /// Replace an `images/` or `train.jsonl` in OUT that no export made.
    #[arg(long)]
    force: bool,
}

pub fn run(command: &Command) -> Outcome {
    match command {
        Command::FromTrajectories(args) => from_trajectories_cmd(args),
        Command::Export(args) => export(args),
        Command::AugmentTyped(args) => augment_typed_cmd(args),
        Command::TapText(args) => tap_text_cmd(args),
        Command::TextOnly(args) => text_only_cmd(args),
    }
}

fn text_only_cmd(args: &TextOnlyArgs) -> Outcome {
    super::apart_from_inputs(&args.out, [args.samples.as_path()])?;
    let samples = load_samples(&args.samples).map_err(failure)?;
    let copies = text_only_copies(&samples);
    if copies.is_empty() {
        return Err(failure(Error::NoSamples {
            out: args.out.clone(),
            why: format!(" ({} holds no sample)", args.samples.display()),
        }));
    }
    write_samples(&args.out, &copies).map_err(failure)?;
    println!(
        "{} text-only copies in {}",
        copies.len(),
        args.out.display()
    );
    Ok(())
}

fn tap_text_cmd(args: &TapTextArgs) -> Outcome {
    apart_with_images(&args.out, &args.dirs)?;
    let options = TapTextOptions {
        per_screen: args.per_screen,
        seed: args.seed,
        lambda: args.lambda,
        move_points: args.move_points,
        phrased: args.phrased,
        made_up: args.made_up,
    };
    let report = tap_text(&args.dirs, &args.out, &options).map_err(failure)?;
    if report.without_tree > 0 {
        eprintln!(
            "btl-train: warning: {} steps have no UI tree and gave no samples",
            report.without_tree
        );
    }
    let images = if args.move_points {
        "text-only".to_owned()
    } else {
        format!("images in {}", report.images_dir.display())
    };
    println!(
        "{} samples from {} screens of {} episodes in {} ({images})",
        report.samples,
        report.screens,
        report.episodes,
        args.out.display(),
    );
    Ok(())
}

fn augment_typed_cmd(args: &AugmentTypedArgs) -> Outcome {
    super::apart_from_inputs(&args.out, [args.samples.as_path()])?;
    let samples = load_samples(&args.samples).map_err(failure)?;
    let (mut copies, report) =
        augment_typed(&samples, args.copies, args.seed, &args.samples).map_err(failure)?;
    if copies.is_empty() {
        let why = match report.unnamed {
            0 => format!(" ({} holds no typing sample)", args.samples.display()),
            n => format!(
                " (no goal of the {n} typing samples of {} names the text it types)",
                args.samples.display()
            ),
        };
        return Err(failure(Error::NoSamples {
            out: args.out.clone(),
            why,
        }));
    }
    if args.text_only {
        copies.iter_mut().for_each(without_screenshot);
    }
    rebase_images(&mut copies, &args.samples, &args.out);
    write_samples(&args.out, &copies).map_err(failure)?;
    println!(
        "{} copies of {} typing samples in {}{}",
        report.copies,
        report.typed,
        args.out.display(),
        if report.unnamed > 0 {
            format!(
                " ({} typing samples left out: their goal does not name the typed text)",
                report.unnamed
            )
        } else {
            String::new()
        }
    );
    Ok(())
}

fn failure(e: Error) -> Failure {
    if e.is_input() {
        Failure::BadInput(e.into())
    } else {
        Failure::Failed(e.into())
    }
}

/// Refuses `--out` of a command that writes `STEM-images` beside it where
/// that, or `--out` itself, would replace what the command reads: the
/// images directory an earlier `--out` left is moved aside and removed.
fn apart_with_images(out: &Path, dirs: &[PathBuf]) -> Outcome {
    super::apart_from_inputs(out, dirs.iter().map(PathBuf::as_path))?;
    let (base, images) = images_beside(out);
    let images = base.join(images);
    match dirs
        .iter()
        .find(|dir| crate::atomic::writes_over(&images, dir))
    {
        Some(dir) if *dir == images => Err(Failure::BadInput(anyhow!(
            "--out {}: its images would replace {}, which this command reads; write elsewhere",
            out.display(),
            dir.display()
        ))),
        Some(dir) => Err(Failure::BadInput(anyhow!(
            "--out {}: its images go to {}, which would replace {}, which this command reads; \
             write elsewhere",
            out.display(),
            images.display(),
            dir.display()
        ))),
        None => Ok(()),
    }
}

fn from_trajectories_cmd(args: &FromTrajectoriesArgs) -> Outcome {
    apart_with_images(&args.out, &args.dirs)?;
    let options = ConvertOptions {
        lambda: args.lambda,
        all_episodes: args.all_episodes,
    };
    let report = from_trajectories(&args.dirs, &args.out, &options).map_err(failure)?;
    for warning in &report.warnings {
        eprintln!("btl-train: warning: {warning}");
    }
    let skipped: Vec<String> = report
        .skipped_steps
        .iter()
        .map(|(kind, n)| format!("{n} {kind}"))
        .collect();
    println!(
        "{} samples{} from {} steps of {} episodes ({} unsuccessful episodes left out{}) in {} (images in {})",
        report.samples,
        if report.relabelled > 0 {
            format!(
                " ({} with the teacher's recorded target)",
                report.relabelled
            )
        } else {
            String::new()
        },
        report.steps,
        report.episodes - report.episodes_skipped,
        report.episodes_skipped,
        if skipped.is_empty() {
            String::new()
        } else {
            format!("; steps without a sample: {}", skipped.join(", "))
        },
        args.out.display(),
        report.images_dir.display(),
    );
    Ok(())
}

fn export(args: &ExportArgs) -> Outcome {
    let (purpose, use_with) = match args.format {
        Format::MsSwift => (Purpose::Grpo, "swift rlhf --rlhf_type grpo"),
        Format::MsSwiftSft => (
            Purpose::Sft {
                max_regions: args.max_regions,
            },
            "swift sft or TRL's SFTTrainer",
        ),
    };
    let options = ExportOptions {
        dataset_root: args.dataset_root.clone(),
        purpose,
        replace_foreign: args.force,
    };
    let report = export_ms_swift(&args.samples, &args.out, &options).map_err(failure)?;
    println!(
        "{} rows in {} (images in {}) for {use_with}",
        report.rows,
        report.dataset.display(),
        report.images_dir.display()
    );
    Ok(())
}
