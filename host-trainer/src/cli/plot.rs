//! `btl-train plot-bench`: several held-out benches side by side.

use std::path::PathBuf;

use agent_core::process::{Failure, Outcome};
use anyhow::anyhow;

use crate::bench_plot::{BenchResult, plot};

#[derive(Debug, clap::Args)]
pub struct PlotBenchArgs {
    /// Runs to compare, in legend order, each `NAME=BENCH.json` (a `btl bench
    /// --json` report); at most 8.
    #[arg(required = true, value_name = "NAME=BENCH.json")]
    runs: Vec<String>,
    /// The PNG to write.
    #[arg(long)]
    out: PathBuf,
}

pub fn run_plot_bench(args: &PlotBenchArgs) -> Outcome {
    let reports = args.runs.iter().filter_map(|run| run.split_once('='));
    super::apart_from_inputs(&args.out, reports.map(|(_, path)| path.as_ref()))?;
    let mut runs = Vec::new();
    for run in &args.runs {
        let Some((name, path)) = run.split_once('=') else {
            return Err(Failure::BadInput(anyhow!(
                "'{run}': give each run as NAME=BENCH.json"
            )));
        };
        let result = BenchResult::read(path.as_ref()).map_err(|e| Failure::BadInput(e.into()))?;
        runs.push((name.to_owned(), result));
    }
    plot(&runs, &args.out).map_err(|e| match e {
        // Too many runs or templates for one image.
        crate::error::Error::Input(_) => Failure::BadInput(e.into()),
        _ => Failure::Failed(e.into()),
    })?;
    println!("plot: {}", args.out.display());
    Ok(())
}
