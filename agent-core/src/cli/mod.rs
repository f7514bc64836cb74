//! The `btl` command line.
//!
//! Exit codes as [`crate::process`] gives them: 0 success; 1 the command ran
//! and failed; 2 bad usage or bad input (a file that cannot be read or
//! parsed, named with its line and the reason).

mod bench;
mod collect;
mod devices;
mod episode;
mod metrics;
mod model;
mod predict;
mod report;
mod run;
mod score;
mod sim;

use crate::process::{Failure, Outcome};
use crate::process::{exit_code, parse_args};
use anyhow::Context;
use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(name = "btl", version, about = "Blink-Think-Link GUI agent toolkit")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Score model completions against official-format samples with the BTL reward.
    Score(score::Args),
    /// Offline Type / GR / SR metrics of predictions against official-format samples.
    Metrics(metrics::Args),
    /// Run the agent for one episode (default: on the built-in virtual phone).
    Run(run::Args),
    /// Success rate of a policy on a task suite, with spread over repeats.
    Bench(bench::Args),
    /// Episodes of suite tasks on several devices at once (training data).
    Collect(collect::Args),
    /// The model's answer for every sample of an official-format file (JSONL for `btl metrics`).
    Predict(predict::Args),
    /// Write a trajectory's self-contained HTML report.
    Report(report::Args),
    /// Model files: quantization.
    #[command(subcommand)]
    Model(model::Command),
    /// Print the default sensitive-action config (edit it, pass it with --safety-config).
    SafetyConfig,
    /// The built-in virtual phone.
    #[command(subcommand)]
    Sim(sim::Command),
    /// List the devices of an adb server.
    Devices(devices::Args),
}

/// Runs the CLI on the process arguments and returns the exit code.
pub fn main() -> ExitCode {
    let cli: Cli = match parse_args() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let result = match cli.command {
        Command::Score(args) => score::run(&args),
        Command::Metrics(args) => metrics::run(&args),
        Command::Run(args) => run::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Collect(args) => collect::run(&args),
        Command::Predict(args) => predict::run(&args),
        Command::Report(args) => report::run(&args),
        Command::Model(command) => model::run(&command),
        Command::SafetyConfig => {
            let text = crate::agent::safety::SafetyConfig::default().to_json();
            writeln!(std::io::stdout().lock(), "{text}").map_err(|e| Failure::Failed(e.into()))
        }
        Command::Sim(command) => sim::run(&command),
        Command::Devices(args) => devices::run(&args),
    };
    exit_code("btl", result)
}

/// Whether `args` is a `btl` command line (see [`crate::process::check_args`]).
pub fn check_command_line(args: &[String]) -> Result<(), String> {
    crate::process::check_args::<Cli>("btl", args)
}

/// Reads a whole text file; failures are bad input naming the file.
fn read_input(path: &Path) -> Result<String, Failure> {
    std::fs::read_to_string(path)
        .with_context(|| format!("cannot read {}", path.display()))
        .map_err(Failure::BadInput)
}

/// Turns a located parse error into bad input naming the file.
fn in_file<T>(path: &Path, result: Result<T, crate::sample::InputError>) -> Result<T, Failure> {
    result.map_err(|e| {
        Failure::BadInput(anyhow::anyhow!(
            "{}:{}: {}",
            path.display(),
            e.line,
            e.reason
        ))
    })
}

/// Loads samples and the completions that refer to them.
fn load_pairs(
    samples: &Path,
    completions: &Path,
) -> Result<(Vec<crate::sample::Sample>, Vec<crate::sample::Completion>), Failure> {
    let samples_text = read_input(samples)?;
    let samples_list = in_file(samples, crate::sample::parse_samples(&samples_text))?;
    let completions_text = read_input(completions)?;
    let completions_list = in_file(
        completions,
        crate::sample::parse_completions(&completions_text, &samples_list),
    )?;
    Ok((samples_list, completions_list))
}

/// Writes one JSON value as a line, DEL and the C1 controls escaped
/// ([`TerminalSafe`]).
fn json_line(out: &mut impl Write, value: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut json = serde_json::Serializer::with_formatter(&mut *out, TerminalSafe);
    serde::Serialize::serialize(value, &mut json)?;
    out.write_all(b"\n")?;
    Ok(())
}

/// serde_json's compact output with DEL and the C1 controls (U+007F to
/// U+009F) escaped as well: serde_json escapes only those below U+0020, and
/// what a device or a model wrote reaches the terminal, where U+009B opens
/// an escape sequence. The JSON reads back to the same strings.
struct TerminalSafe;

impl serde_json::ser::Formatter for TerminalSafe {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut plain = 0;
        for (at, c) in fragment.char_indices() {
            if ('\u{7f}'..='\u{9f}').contains(&c) {
                writer.write_all(&fragment.as_bytes()[plain..at])?;
                write!(writer, "\\u{:04x}", u32::from(c))?;
                plain = at + c.len_utf8();
            }
        }
        writer.write_all(&fragment.as_bytes()[plain..])
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn json_lines_escape_every_control_character() {
        let text = "a\u{1b}[2J\u{7f}\u{80}\u{9b}31m\u{a0}é\u{9f}";
        let mut out = Vec::new();
        super::json_line(&mut out, &serde_json::json!({ text: text })).unwrap();
        let line = String::from_utf8(out).unwrap();
        // U+00A0 (no-break space) is no control: it stays as it is.
        let escaped = "\"a\\u001b[2J\\u007f\\u0080\\u009b31m\u{a0}é\\u009f\"";
        assert_eq!(line, format!("{{{escaped}:{escaped}}}\n"));
        let back: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(back[text], text);
    }
}
