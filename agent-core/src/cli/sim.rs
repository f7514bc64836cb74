//! `btl sim`: the virtual phone on its own, for adb and other tools.

use super::score::parse_weights;
use super::{Outcome, json_line};
use crate::reward::{RewardMode, Weights};
use crate::sim::adbd::Adbd;
use crate::sim::env::{self, EnvOptions};
use crate::sim::phone::{PhoneConfig, SIDES};
use crate::sim::tasks::{self, Split};
use crate::sim::virtual_phone::VirtualPhone;
use anyhow::Context;
use clap::builder::TypedValueParser;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Serve a virtual phone over the ADB protocol until interrupted.
    Serve(ServeArgs),
    /// List the task templates: name, step budget and the goal of one
    /// instance (seed 0 of the plain suite, or of a split).
    Tasks(TasksArgs),
    /// Serve virtual phones as RL environments: JSON-line requests on stdin
    /// (reset, step, close), one JSON response per line on stdout, with
    /// process and outcome rewards (protocol: docs/virtual-phone.md).
    Env(EnvArgs),
}

#[derive(Debug, clap::Args)]
pub struct EnvArgs {
    /// Record every episode (trajectory and observed screenshots) under
    /// DIR/ENV/episode-N [default: a temporary directory, removed at exit,
    /// keeping each environment's current episode only].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Reward semantics of the process reward.
    #[arg(long, default_value = "released")]
    reward_mode: RewardMode,
    /// Weights of format, blink and link in the process reward.
    #[arg(long, value_parser = parse_weights, default_value = "0.1,0.3,0.6")]
    weights: Weights,
    /// Environments open at once.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..).map(usize::from))]
    max_envs: usize,
    /// Screen size in pixels.
    #[arg(long, value_parser = parse_size, default_value = "1080x2400")]
    size: (u32, u32),
    /// Screen density in dpi.
    #[arg(long, default_value_t = 420)]
    density: u32,
}

#[derive(Debug, clap::Args)]
pub struct TasksArgs {
    /// One JSON object per template, with the instance's parameters.
    #[arg(long)]
    json: bool,
    /// Show the instance `--seed` of a split (training, held-out,
    /// training with made-up values, or validation).
    #[arg(long, value_enum)]
    split: Option<Split>,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// List the prompt-injection suite instead (`btl bench --suite
    /// injection`): each variant's goal; its params name the base template
    /// and the text planted on screen.
    #[arg(long)]
    injection: bool,
}

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// TCP port on 127.0.0.1 (default: a free port outside 5555-5585, which
    /// the adb server probes for emulators).
    #[arg(long)]
    port: Option<u16>,
    /// Screen size in pixels.
    #[arg(long, value_parser = parse_size, default_value = "1080x2400")]
    size: (u32, u32),
    /// Screen density in dpi.
    #[arg(long, default_value_t = 420)]
    density: u32,
    /// Seed of everything random on the phone (contents, names, results).
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

fn parse_size(s: &str) -> Result<(u32, u32), String> {
    let parsed = s
        .split_once('x')
        .and_then(|(w, h)| Some((w.parse::<u32>().ok()?, h.parse::<u32>().ok()?)));
    match parsed {
        Some((w, h)) if SIDES.contains(&w) && SIDES.contains(&h) => Ok((w, h)),
        _ => Err(format!(
            "'{s}' is not WIDTHxHEIGHT with sides from {} to {}, a virtual phone's",
            SIDES.start(),
            SIDES.end()
        )),
    }
}

pub fn run(command: &Command) -> Outcome {
    match command {
        Command::Serve(args) => serve(args),
        Command::Tasks(args) => list_tasks(args),
        Command::Env(args) => env(args),
    }
}

fn env(args: &EnvArgs) -> Outcome {
    let options = EnvOptions {
        dir: args.dir.clone(),
        reward_mode: args.reward_mode,
        weights: args.weights,
        max_envs: args.max_envs,
        phone: PhoneConfig {
            width: args.size.0,
            height: args.size.1,
            density: args.density,
            seed: 0,
        },
    };
    env::serve(std::io::stdin().lock(), std::io::stdout(), options)
        .context("btl sim env stopped")?;
    Ok(())
}

fn list_tasks(args: &TasksArgs) -> Outcome {
    tasks::check_instances(args.seed, 1, args.split)
        .map_err(|e| crate::process::Failure::BadInput(anyhow::anyhow!("--seed: {e}")))?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let names: Vec<&str> = if args.injection {
        tasks::injections().iter().map(|i| i.name).collect()
    } else {
        tasks::templates().iter().map(|t| t.name).collect()
    };
    for name in names {
        // Every registered name samples; a miss would only drop a line.
        let seed = args.split.map_or(args.seed, |split| split.seed(args.seed));
        let Some(task) = tasks::sample(name, seed) else {
            continue;
        };
        if args.json {
            let line = serde_json::json!({
                "name": name,
                "goal": task.goal(),
                "max_steps": task.max_steps(),
                "params": task.params(),
            });
            json_line(&mut out, &line)?;
        } else {
            writeln!(out, "{:<30}{:>4}  {}", name, task.max_steps(), task.goal())
                .map_err(anyhow::Error::from)?;
        }
    }
    Ok(())
}

fn serve(args: &ServeArgs) -> Outcome {
    let config = PhoneConfig {
        width: args.size.0,
        height: args.size.1,
        density: args.density,
        seed: args.seed,
    };
    let phone = Arc::new(VirtualPhone::new(config));
    let adbd =
        Adbd::start(phone, args.port).context("cannot start the virtual phone's ADB server")?;
    // A reader that stops listening (a closed pipe) must not stop the phone.
    let _ = writeln!(
        std::io::stdout().lock(),
        "virtual phone listening on {serial}\nconnect with: adb connect {serial}",
        serial = adbd.serial()
    );
    // Serve until the process is interrupted; the default SIGINT handling ends it.
    loop {
        std::thread::park();
    }
}
