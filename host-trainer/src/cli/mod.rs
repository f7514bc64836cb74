//! The `btl-train` command line: one subcommand family per file, this file
//! only dispatches.
//!
//! Exit codes follow `btl`: 0 success; 1 the command ran and failed; 2 bad
//! usage or bad input (a file that cannot be read or parsed, named with its
//! line and the reason). Errors are printed once, with their cause chain, on
//! stderr.

mod data;
mod export;
mod grpo;
mod init;
mod plot;

use agent_core::process::{exit_code, parse_args};
use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "btl-train",
    version,
    about = "Training data and training of BTL models"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// A new Qwen2.5-VL-architecture model of a chosen size with random
    /// weights: Hugging Face checkpoint and GGUF text model + projector.
    Init(init::InitArgs),
    /// Training samples: from trajectories, and exports for other trainers.
    #[command(subcommand)]
    Data(data::Command),
    /// GRPO training with the BTL reward (LoRA or full), resumable.
    Grpo(Box<grpo::GrpoArgs>),
    /// Supervised fine-tuning on the samples' canonical BTL answers (LoRA
    /// or full), resumable; the same configuration and flags as grpo.
    Sft(Box<grpo::GrpoArgs>),
    /// The copying warm-up of a fresh model: random token strings written
    /// again, learned only where copied, so that a model can later type
    /// what a goal names; the same configuration and flags as sft.
    Induction(Box<grpo::GrpoArgs>),
    /// A trained checkpoint for the phone: merged weights as a Hugging Face
    /// checkpoint and GGUF files (and a GGUF LoRA adapter).
    Export(export::ExportArgs),
    /// Per-template success of several `btl bench --json` reports side by
    /// side, as a PNG.
    PlotBench(plot::PlotBenchArgs),
}

/// Whether `args` is a `btl-train` command line (see
/// [`agent_core::process::check_args`]).
pub fn check_command_line(args: &[String]) -> Result<(), String> {
    agent_core::process::check_args::<Cli>("btl-train", args)
}

/// Runs the CLI on the process arguments and returns the exit code.
pub fn main() -> ExitCode {
    let cli: Cli = match parse_args() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let result = match cli.command {
        Command::Init(args) => init::run_init(&args),
        Command::Data(command) => data::run(&command),
        Command::Grpo(args) => grpo::run_grpo(&args),
        Command::Sft(args) => grpo::run_sft(&args),
        Command::Induction(args) => grpo::run_induction(&args),
        Command::Export(args) => export::run_export(&args),
        Command::PlotBench(args) => plot::run_plot_bench(&args),
    };
    exit_code("btl-train", result)
}

/// Refuses `--out` where writing it would destroy what the command reads:
/// the very file of an input, or a file inside an input directory (an
/// episode's steps.jsonl, a screenshot).
fn apart_from_inputs<'a>(
    out: &std::path::Path,
    inputs: impl IntoIterator<Item = &'a std::path::Path>,
) -> Result<(), agent_core::process::Failure> {
    match inputs
        .into_iter()
        .find(|input| crate::atomic::writes_over(out, input))
    {
        Some(input) => Err(agent_core::process::Failure::BadInput(anyhow::anyhow!(
            "--out {}: it would write over {}, which this command reads; write elsewhere",
            out.display(),
            input.display()
        ))),
        None => Ok(()),
    }
}
