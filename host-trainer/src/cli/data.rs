//! `btl-train data`: trajectories → official-format samples, and samples →
//! datasets for other trainers.

use crate::data::ms_swift::{ExportOptions, export_ms_swift};
use crate::data::{ConvertOptions, DEFAULT_LAMBDA, Error, from_trajectories};
use agent_core::cli::{Failure, Outcome};
use clap::builder::TypedValueParser;
use std::path::PathBuf;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Samples (official JSON format with ranked ROIs) from btl trajectories:
    /// one per executed step of the successful episodes.
    FromTrajectories(FromTrajectoriesArgs),
    /// A dataset for another trainer, from a samples file.
    Export(ExportArgs),
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
}

pub fn run(command: &Command) -> Outcome {
    match command {
        Command::FromTrajectories(args) => from_trajectories_cmd(args),
        Command::Export(args) => export(args),
    }
}

fn failure(e: Error) -> Failure {
    if e.is_input() {
        Failure::BadInput(e.into())
    } else {
        Failure::Failed(e.into())
    }
}

fn from_trajectories_cmd(args: &FromTrajectoriesArgs) -> Outcome {
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
    if report.samples == 0 {
        eprintln!(
            "btl-train: warning: no samples were made{}",
            if report.episodes_skipped > 0 && !args.all_episodes {
                " (--all-episodes uses unsuccessful episodes too)"
            } else {
                ""
            }
        );
    }
    Ok(())
}

fn export(args: &ExportArgs) -> Outcome {
    match args.format {
        Format::MsSwift => {
            let options = ExportOptions {
                dataset_root: args.dataset_root.clone(),
            };
            let report = export_ms_swift(&args.samples, &args.out, &options).map_err(failure)?;
            println!(
                "{} rows in {} (images in {}) for swift rlhf --rlhf_type grpo",
                report.rows,
                report.dataset.display(),
                report.images_dir.display()
            );
            Ok(())
        }
    }
}
