//! `btl run`: one episode of the agent.
//!
//! Today it runs on the built-in virtual phone, in-process, with a
//! llama.cpp model (feature `llama`); without `--model` it uses the tiny
//! random test model bundled with the sources, which exercises the whole
//! pipeline but cannot solve tasks.

use super::{Failure, Outcome, json_line};
use crate::agent::{Agent, AgentConfig};
use crate::device::sim::SimDevice;
use crate::model::Policy;
use crate::protocol::Profile;
use crate::sim::phone::PhoneConfig;
use crate::sim::tasks;
use crate::sim::virtual_phone::VirtualPhone;
use anyhow::{Context, anyhow};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The instruction; with `--task`, the task's own goal is used instead.
    goal: Option<String>,
    /// A task of the virtual phone's suite (`btl sim tasks` lists them): it
    /// sets the phone up and checks success from the phone's state.
    #[arg(long)]
    task: Option<String>,
    /// Seed of the phone, the task parameters and sampling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Directory of the trajectory (must not exist yet).
    #[arg(long)]
    out: Option<PathBuf>,
    #[arg(long, default_value_t = 15)]
    max_steps: u32,
    /// Prompt profile: btl-ui or btl-extended.
    #[arg(long, default_value = "btl-ui")]
    profile: Profile,
    /// Text model GGUF (default: the bundled tiny test model).
    #[arg(long, requires = "mmproj")]
    model: Option<PathBuf>,
    /// Vision projector GGUF.
    #[arg(long, requires = "model")]
    mmproj: Option<PathBuf>,
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
}

const BUNDLED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/tiny-qwen25vl");

#[cfg(feature = "llama")]
fn policy(args: &Args) -> Result<Box<dyn Policy>, Failure> {
    use crate::model::llama::{LlamaConfig, LlamaPolicy};
    let (model, mmproj) = match (&args.model, &args.mmproj) {
        (Some(m), Some(p)) => (m.clone(), p.clone()),
        _ => {
            eprintln!(
                "btl: no --model given: using the bundled tiny random test model, which runs the whole pipeline but cannot solve tasks"
            );
            let dir = PathBuf::from(BUNDLED);
            (
                dir.join("tiny-qwen25vl-f16.gguf"),
                dir.join("mmproj-tiny-qwen25vl-f16.gguf"),
            )
        }
    };
    let mut config = LlamaConfig::new(model, mmproj);
    config.max_tokens = 256;
    let policy = LlamaPolicy::load(config).map_err(|e| Failure::BadInput(e.into()))?;
    Ok(Box::new(policy))
}

#[cfg(not(feature = "llama"))]
fn policy(_: &Args) -> Result<Box<dyn Policy>, Failure> {
    Err(Failure::BadInput(anyhow!(
        "this btl was built without the llama.cpp backend (model files {BUNDLED}/…); rebuild with `--features llama`"
    )))
}

pub fn run(args: &Args) -> Outcome {
    let phone = Arc::new(VirtualPhone::new(PhoneConfig {
        seed: args.seed,
        ..PhoneConfig::default()
    }));
    let task = match &args.task {
        Some(name) => Some(tasks::sample(name, args.seed).ok_or_else(|| {
            Failure::BadInput(anyhow!("no task named '{name}' (see `btl sim tasks`)"))
        })?),
        None => None,
    };
    let goal = match (&task, &args.goal) {
        (Some(t), _) => t.goal(),
        (None, Some(g)) => g.clone(),
        (None, None) => {
            return Err(Failure::BadInput(anyhow!(
                "give a goal, or a task with --task"
            )));
        }
    };
    if let Some(t) = &task {
        phone.with_phone(|p| t.setup(p));
    }
    eprintln!("btl: running on the built-in virtual phone (in-process); goal: {goal}");
    let policy = policy(args)?;
    let out = args.out.clone().unwrap_or_else(|| {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        PathBuf::from("runs").join(format!("episode-{stamp}"))
    });
    let config = AgentConfig {
        goal,
        profile: args.profile,
        max_steps: args.max_steps,
        seed: args.seed,
        ..AgentConfig::default()
    };
    let mut agent = Agent::new(
        &out,
        config,
        Box::new(SimDevice::new(phone.clone())),
        policy,
    )
    .with_context(|| format!("cannot start an episode in {}", out.display()))?;
    if let Some(t) = task {
        agent = agent
            .with_task(serde_json::json!({"name": t.name(), "params": t.params()}))
            .context("cannot record the task")?;
        let checker_phone = phone.clone();
        agent =
            agent.with_checker(move || checker_phone.with_phone(|p| t.is_successful(p.state())));
    }
    let outcome = agent.run().context("the episode failed")?;
    if args.json {
        json_line(
            &mut std::io::stdout().lock(),
            &serde_json::json!({"trajectory": out, "outcome": outcome}),
        )?;
    } else {
        writeln!(
            std::io::stdout().lock(),
            "stopped after {} steps: {:?}; trajectory in {}",
            outcome.steps,
            outcome.stop,
            out.display()
        )
        .map_err(anyhow::Error::from)?;
    }
    Ok(())
}
