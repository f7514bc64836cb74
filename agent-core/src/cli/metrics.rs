//! `btl metrics`: offline Type / GR / SR of predictions, by preset.

use super::{Outcome, json_line, load_pairs};
use crate::metrics::{Preset, Report, evaluate};
use crate::process::Failure;
use anyhow::anyhow;
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Official-format samples (a JSON list).
    #[arg(long)]
    samples: PathBuf,
    /// JSONL, one `{"sample": <index or id>, "completion": "<raw model text>"}` per line.
    #[arg(long)]
    predictions: PathBuf,
    /// Which published counting rules to apply: btl, os-atlas or gui-r1.
    #[arg(long, default_value = "btl")]
    preset: Preset,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn run(args: &Args) -> Outcome {
    let (samples, predictions) = load_pairs(&args.samples, &args.predictions)?;
    let mut report = Report::new(args.preset);
    for p in &predictions {
        let outcome = evaluate(&samples[p.sample], &p.completion, args.preset).map_err(|e| {
            Failure::BadInput(anyhow!(
                "{}: sample {} (scored by line {} of {}): its solution is not a readable action: {e}",
                args.samples.display(),
                p.sample_ref,
                p.line,
                args.predictions.display(),
            ))
        })?;
        report.add(&outcome);
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if args.json {
        json_line(&mut out, &report)?;
        return Ok(());
    }
    let table = format!(
        "preset {preset}: {steps} steps, {unparsed} unparsed\n\
         Type        {t}\n\
         GR          {g}\n\
         SR          {s}\n\
         ScreenSpot  {ss}\n",
        preset = args.preset.name(),
        steps = report.steps,
        unparsed = report.unparsed,
        t = report.type_match,
        g = report.grounding,
        s = report.success,
        ss = report.screenspot,
    );
    out.write_all(table.as_bytes())
        .map_err(anyhow::Error::from)?;
    Ok(())
}
