//! `btl score`: the BTL reward of each completion, and their mean.

use super::{Failure, Outcome, json_line, load_pairs};
use crate::protocol::TRAINING_MAX_PIXELS;
use crate::reward::{RewardBreakdown, RewardMode, Weights, score};
use crate::sample::SampleRef;
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Official-format samples (a JSON list).
    #[arg(long)]
    samples: PathBuf,
    /// JSONL, one `{"sample": <index or id>, "completion": "<raw model text>"}` per line.
    #[arg(long)]
    completions: PathBuf,
    /// Reward semantics: the official plugin's or the paper's.
    #[arg(long, default_value = "released")]
    mode: RewardMode,
    /// Weights of format, blink and link.
    #[arg(long, value_parser = parse_weights, default_value = "0.1,0.3,0.6")]
    weights: Weights,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
    /// Released mode: the frame click distances are normalised in, as the
    /// plugin takes it from its MAX_PIXELS environment variable; each
    /// sample's own max_pixels is ignored in this mode [default: $MAX_PIXELS,
    /// else 4014080, the BTL-UI recipe's value]
    #[arg(long, value_parser = clap::value_parser!(u64).range(crate::protocol::MIN_PIXELS..))]
    max_pixels: Option<u64>,
}

/// The environment variable the official reward plugin reads its frame from.
const MAX_PIXELS_ENV: &str = "MAX_PIXELS";

/// Released mode's frame and where it came from; `None` in paper mode,
/// which judges each sample in its own frame.
fn released_frame(args: &Args) -> Result<Option<(u64, &'static str)>, Failure> {
    if args.mode != RewardMode::Released {
        return Ok(None);
    }
    if let Some(pixels) = args.max_pixels {
        return Ok(Some((pixels, "--max-pixels")));
    }
    match std::env::var(MAX_PIXELS_ENV) {
        Ok(text) => match text.trim().parse::<u64>() {
            Ok(pixels) if pixels >= crate::protocol::MIN_PIXELS => {
                Ok(Some((pixels, MAX_PIXELS_ENV)))
            }
            Ok(pixels) => Err(Failure::BadInput(anyhow::anyhow!(
                "{MAX_PIXELS_ENV}={pixels} is under Qwen2.5-VL's minimum of {} pixels",
                crate::protocol::MIN_PIXELS
            ))),
            Err(e) => Err(Failure::BadInput(anyhow::anyhow!(
                "{MAX_PIXELS_ENV}='{text}' is not a pixel count: {e}"
            ))),
        },
        Err(_) => Ok(Some((TRAINING_MAX_PIXELS, "default"))),
    }
}

pub(super) fn parse_weights(s: &str) -> Result<Weights, String> {
    let parts: Vec<f64> = s
        .split(',')
        .map(|p| p.trim().parse::<f64>().map_err(|e| format!("'{p}': {e}")))
        .collect::<Result<_, _>>()?;
    match parts[..] {
        [format, blink, link] if parts.iter().all(|w| w.is_finite()) => Ok(Weights {
            format,
            blink,
            link,
        }),
        _ => Err("expected three finite numbers: format,blink,link".into()),
    }
}

#[derive(Serialize)]
struct Scored<'a> {
    line: usize,
    sample: &'a SampleRef,
    #[serde(flatten)]
    reward: RewardBreakdown,
}

#[derive(Serialize)]
struct Summary {
    completions: usize,
    mode: RewardMode,
    weights: Weights,
    /// Released mode's frame (`null` in paper mode).
    max_pixels: Option<u64>,
    mean: RewardBreakdown,
}

pub fn run(args: &Args) -> Outcome {
    let frame = released_frame(args)?;
    let (mut samples, completions) = load_pairs(&args.samples, &args.completions)?;
    // A mean over nothing would print as a score of 0.
    if completions.is_empty() {
        return Err(Failure::BadInput(anyhow::anyhow!(
            "{}: no completions to score",
            args.completions.display()
        )));
    }
    if let Some((pixels, _)) = frame {
        for sample in &mut samples {
            sample.max_pixels = pixels;
        }
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if !args.json {
        writeln!(
            out,
            "{:>6}  {:>8}  {:>6}  {:>6}  {:>6}  {:>6}",
            "line", "sample", "format", "blink", "link", "total"
        )
        .map_err(anyhow::Error::from)?;
    }
    let mut sum = [0.0; 4];
    for c in &completions {
        let reward = score(&samples[c.sample], &c.completion, args.mode, args.weights);
        for (acc, v) in sum
            .iter_mut()
            .zip([reward.format, reward.blink, reward.link, reward.total])
        {
            *acc += v;
        }
        if args.json {
            json_line(
                &mut out,
                &Scored {
                    line: c.line,
                    sample: &c.sample_ref,
                    reward,
                },
            )?;
        } else {
            writeln!(
                out,
                "{:>6}  {:>8}  {:>6.3}  {:>6.3}  {:>6.3}  {:>6.3}",
                c.line,
                crate::terminal::printable_line(&c.sample_ref.to_string()),
                reward.format,
                reward.blink,
                reward.link,
                reward.total
            )
            .map_err(anyhow::Error::from)?;
        }
    }
    let n = completions.len().max(1) as f64;
    let mean = RewardBreakdown {
        format: sum[0] / n,
        blink: sum[1] / n,
        link: sum[2] / n,
        total: sum[3] / n,
    };
    let summary = Summary {
        completions: completions.len(),
        mode: args.mode,
        weights: args.weights,
        max_pixels: frame.map(|(pixels, _)| pixels),
        mean,
    };
    if args.json {
        json_line(&mut out, &serde_json::json!({ "summary": summary }))?;
    } else {
        writeln!(
            out,
            "mean over {} completions ({} mode): format {:.3}  blink {:.3}  link {:.3}  total {:.3}",
            summary.completions, args.mode.name(), mean.format, mean.blink, mean.link, mean.total
        )
        .map_err(anyhow::Error::from)?;
        if let Some((pixels, source)) = frame {
            writeln!(
                out,
                "click distances normalised at max_pixels {pixels} ({source}), as the plugin's {MAX_PIXELS_ENV}"
            )
            .map_err(anyhow::Error::from)?;
        }
    }
    Ok(())
}
