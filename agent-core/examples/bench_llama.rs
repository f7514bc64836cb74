//! Times `LlamaPolicy` on one prompt and image and prints one JSON object per
//! run, for `scripts/bench/llama-vs-mtmd-cli`, which runs llama.cpp's own
//! `llama-mtmd-cli` on the same inputs and compares, and for
//! `scripts/bench/screenshot-budget`, which runs it once per max_pixels.
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
//!
//! With `--episode`, only what an episode does: `first`, with the prefix
//! cache on, then `step2` on the same policy (the prefix cached from the
//! first step).
//!
//! `first` also reports the process's peak resident memory so far: loading
//! and one step, what a phone must hold.
//!
//! The user text marks the image with `<image>`, as BTL prompts do.

use agent_core::model::llama::{LlamaConfig, LlamaPolicy};
use anyhow::{Context, bail};
use clap::Parser;
use std::path::PathBuf;

#[path = "support/screenshot.rs"]
mod screenshot;

#[derive(Parser)]
struct Args {
    #[arg(long)]
    model: PathBuf,
    #[arg(long)]
    mmproj: PathBuf,
    /// The screenshot, at the model frame (sides multiples of 28) unless
    /// --max-pixels is given.
    #[arg(long)]
    image: PathBuf,
    /// Resize the screenshot to the model frame of this max_pixels first,
    /// as the agent does.
    #[arg(long)]
    max_pixels: Option<u64>,
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
    /// Run `first` and the episode's second step only.
    #[arg(long)]
    episode: bool,
    /// Map the model file instead of reading it (LlamaConfig::mmap).
    #[arg(long)]
    mmap: bool,
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
    config.mmap = args.mmap;
    if let Some(layers) = args.gpu_layers {
        config.gpu_layers = layers;
    }
    Ok(LlamaPolicy::load(config)?)
}

fn report(
    case: &str,
    run: u32,
    image: &image::RgbImage,
    p: &LlamaPolicy,
    g: &agent_core::model::llama::Generation,
) {
    let s = &g.stats;
    let peak_rss = (case == "first").then(peak_rss_bytes).flatten();
    println!(
        "{}",
        serde_json::json!({
            "case": case,
            "image": [image.width(), image.height()],
            "peak_rss_bytes": peak_rss,
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

/// The process's peak resident set (`VmHWM`), where Linux reports it.
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
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
    let image = screenshot::load(&args.image, args.max_pixels)?;
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

    let mut fresh = policy(&args, args.episode)?;
    let first = fresh.generate(&step1, Some(&image), 0).map_err(fail)?;
    report("first", 0, &image, &fresh, &first);
    if args.episode {
        let g = fresh.generate(&step2, Some(&image), 0).map_err(fail)?;
        report("step2", 0, &image, &fresh, &g);
        return Ok(());
    }
    for run in 0..args.repeats {
        let g = fresh.generate(&step1, Some(&image), 0).map_err(fail)?;
        report("full", run, &image, &fresh, &g);
    }
    // One model in memory at a time, as on a phone.
    drop(fresh);
    for (case, reuse) in [("step2-reuse", true), ("step2-no-reuse", false)] {
        let mut p = policy(&args, reuse)?;
        p.generate(&step1, Some(&image), 0).map_err(fail)?;
        for run in 0..args.repeats {
            p.generate(&step1, Some(&image), 0).map_err(fail)?;
            let g = p.generate(&step2, Some(&image), 0).map_err(fail)?;
            report(case, run, &image, &p, &g);
        }
    }
    Ok(())
}
