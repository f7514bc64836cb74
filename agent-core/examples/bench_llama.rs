//! Times `LlamaPolicy` on one prompt and image and prints one JSON object per
//! run, for `scripts/bench/llama-vs-mtmd-cli`, which runs llama.cpp's own
//! `llama-mtmd-cli` on the same inputs and compares.
//!
//! Runs:
//! - `first`: the first generation after loading (llama.cpp allocates its
//!   buffers then), which every other run follows;
//! - `full`: the whole prompt evaluated from scratch (no prefix reuse), then
//!   greedy decoding;
//! - `step2-reuse` / `step2-no-reuse`: the second step of an episode — the
//!   same prompt with one more line of action history — after the first,
//!   with `LlamaPolicy`'s prefix cache on and off.
//!
//! The user text marks the image with `<image>`, as BTL prompts do.

use agent_core::model::llama::{LlamaConfig, LlamaPolicy};
use anyhow::{Context, bail};
use clap::Parser;
use std::path::PathBuf;

#[derive(Parser)]
struct Args {
    #[arg(long)]
    model: PathBuf,
    #[arg(long)]
    mmproj: PathBuf,
    /// The screenshot, already at the model frame (sides multiples of 28).
    #[arg(long)]
    image: PathBuf,
    /// The system prompt, a text file.
    #[arg(long)]
    system: PathBuf,
    /// The user prompt with `<image>` where the screenshot goes.
    #[arg(long)]
    user: PathBuf,
    #[arg(long, default_value_t = 2)]
    threads: i32,
    #[arg(long, default_value_t = 32)]
    max_tokens: u32,
    #[arg(long, default_value_t = 4096)]
    context: u32,
    #[arg(long, default_value_t = 3)]
    repeats: u32,
    /// Layers on the GPU (a Vulkan or CUDA build) [default: the build's].
    #[arg(long)]
    gpu_layers: Option<u32>,
}

/// The history line the second step adds, before the screenshot section.
const NEXT_STEP: &str = "Step 11: Tap the first search result to open it.\n";

fn policy(args: &Args, reuse_prefix: bool) -> anyhow::Result<LlamaPolicy> {
    let mut config = LlamaConfig::new(&args.model, &args.mmproj);
    config.threads = args.threads;
    config.max_tokens = args.max_tokens;
    config.context_tokens = args.context;
    config.grammar = false;
    config.reuse_prefix = reuse_prefix;
    if let Some(layers) = args.gpu_layers {
        config.gpu_layers = layers;
    }
    Ok(LlamaPolicy::load(config)?)
}

fn report(case: &str, run: u32, p: &LlamaPolicy, g: &agent_core::model::llama::Generation) {
    let s = &g.stats;
    println!(
        "{}",
        serde_json::json!({
            "case": case,
            "run": run,
            "prompt_tokens": s.prompt_tokens,
            "cached_prompt_tokens": s.cached_prompt_tokens,
            "generated_tokens": s.generated_tokens,
            "encode_ms": s.encode_ms,
            "prefill_ms": s.prefill_ms,
            "decode_ms": s.decode_ms,
            "text": p.detokenize(&g.tokens),
        })
    );
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let system = std::fs::read_to_string(&args.system)
        .with_context(|| format!("reading {}", args.system.display()))?;
    let user = std::fs::read_to_string(&args.user)
        .with_context(|| format!("reading {}", args.user.display()))?;
    let Some(screenshots) = user.rfind("\n\n## Screenshots") else {
        bail!(
            "{}: no '## Screenshots' section to put a history line before",
            args.user.display()
        );
    };
    let image = image::open(&args.image)
        .with_context(|| format!("reading {}", args.image.display()))?
        .to_rgb8();
    let step1 = LlamaPolicy::chat_text(&system, &user);
    let step2 = LlamaPolicy::chat_text(
        &system,
        &format!(
            "{}\n{}{}",
            &user[..screenshots],
            NEXT_STEP.trim_end(),
            &user[screenshots..]
        ),
    );
    let fail = |e: agent_core::model::llama::GenerateError| anyhow::anyhow!(e);

    let mut fresh = policy(&args, false)?;
    let first = fresh.generate(&step1, Some(&image), 0).map_err(fail)?;
    report("first", 0, &fresh, &first);
    for run in 0..args.repeats {
        let g = fresh.generate(&step1, Some(&image), 0).map_err(fail)?;
        report("full", run, &fresh, &g);
    }
    for (case, reuse) in [("step2-reuse", true), ("step2-no-reuse", false)] {
        let mut p = policy(&args, reuse)?;
        p.generate(&step1, Some(&image), 0).map_err(fail)?;
        for run in 0..args.repeats {
            p.generate(&step1, Some(&image), 0).map_err(fail)?;
            let g = p.generate(&step2, Some(&image), 0).map_err(fail)?;
            report(case, run, &p, &g);
        }
    }
    Ok(())
}
