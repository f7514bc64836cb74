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

use agent_core::cli::{Failure, Outcome};
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
    /// Training samples: from trajectories, and exports for other trainers.
    #[command(subcommand)]
    Data(data::Command),
    /// GRPO training with the BTL reward (LoRA or full), resumable.
    Grpo(Box<grpo::GrpoArgs>),
    /// A trained checkpoint for the phone: merged weights as a Hugging Face
    /// checkpoint and GGUF files (and a GGUF LoRA adapter).
    Export(export::ExportArgs),
}

/// Runs the CLI on the process arguments and returns the exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap prints help and version itself and knows their exit code (0).
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    let result: Outcome = match cli.command {
        Command::Data(command) => data::run(&command),
        Command::Grpo(args) => grpo::run_grpo(&args),
        Command::Export(args) => export::run_export(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::BadInput(e)) => report(&e, 2),
        Err(Failure::Failed(e)) => report(&e, 1),
    }
}

fn report(e: &anyhow::Error, code: u8) -> ExitCode {
    eprintln!("btl-train: error: {e:#}");
    ExitCode::from(code)
}
