//! The run's metrics: one JSON line per step in `metrics.jsonl`, and a PNG
//! of the reward and KL curves.
//!
//! Lines are appended and synced step by step, so a killed run loses at most
//! the step in flight; a resumed run first drops the lines after its
//! checkpoint, so every step appears once.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use super::trainer::StepMetrics;
use crate::error::{Error, Result};

const FONT: &[u8] = include_bytes!("../../../agent-core/assets/fonts/DejaVuSans.ttf");

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_owned(),
        source,
    }
}

/// `metrics.jsonl` of a run.
pub struct MetricsLog {
    path: PathBuf,
    file: File,
}

impl MetricsLog {
    /// Opens the log for a run that has done `steps_done` steps: lines of
    /// later steps (from an interrupted run) are dropped first.
    pub fn open(path: &Path, steps_done: u64) -> Result<Self> {
        let kept = if path.exists() {
            read_metrics(path)?
                .into_iter()
                .filter(|m| m.step <= steps_done)
                .collect()
        } else {
            Vec::new()
        };
        let mut text = String::new();
        for m in &kept {
            text.push_str(&serde_json::to_string(m).map_err(|e| Error::Input(e.to_string()))?);
            text.push('\n');
        }
        crate::atomic::write_file(path, |w| w.write_all(text.as_bytes()).map_err(io(path)))?;
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(io(path))?;
        Ok(Self {
            path: path.to_owned(),
            file,
        })
    }

    pub fn append(&mut self, metrics: &StepMetrics) -> Result<()> {
        let mut line = serde_json::to_string(metrics).map_err(|e| Error::Input(e.to_string()))?;
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .map_err(io(&self.path))?;
        self.file.sync_data().map_err(io(&self.path))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Every step of a `metrics.jsonl`; a malformed line is named.
pub fn read_metrics(path: &Path) -> Result<Vec<StepMetrics>> {
    let file = File::open(path).map_err(io(path))?;
    let mut out = Vec::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(io(path))?;
        if line.trim().is_empty() {
            continue;
        }
        // A line cut by a crash mid-write is the last one; it is dropped.
        match serde_json::from_str(&line) {
            Ok(m) => out.push(m),
            Err(e) if e.is_eof() => break,
            Err(e) => {
                return Err(Error::Config {
                    path: path.to_owned(),
                    message: format!("line {}: {e}", i + 1),
                });
            }
        }
    }
    Ok(out)
}

/// A panel: its title, the plotted value and the line colour.
type Curve = (&'static str, fn(&StepMetrics) -> f64, RGBColor);

/// Reward (mean per step) and KL curves, one panel each, as a PNG.
pub fn plot(metrics: &[StepMetrics], out: &Path) -> Result<()> {
    // Registering the same font again is harmless.
    plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
        .map_err(|_| Error::Input("the bundled font cannot be read".to_owned()))?;
    // Drawn beside the target, then renamed over it (the backend picks the
    // format from the extension, so the temporary name ends in .png too).
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let partial = out.with_file_name(format!(".{name}.partial.png"));
    let draw = || -> std::result::Result<(), Box<dyn std::error::Error>> {
        let root = BitMapBackend::new(&partial, (900, 700)).into_drawing_area();
        root.fill(&WHITE)?;
        let panels = root.split_evenly((2, 1));
        let last = metrics.last().map_or(1, |m| m.step).max(1);
        let curves: [Curve; 2] = [
            ("reward (mean)", |m| m.reward_mean, BLUE),
            ("KL to the reference", |m| m.kl, RED),
        ];
        for (panel, (title, value, color)) in panels.iter().zip(curves) {
            let ys: Vec<f64> = metrics.iter().map(value).collect();
            let lo = ys.iter().copied().fold(f64::INFINITY, f64::min).min(0.0);
            let hi = ys
                .iter()
                .copied()
                .fold(f64::NEG_INFINITY, f64::max)
                .max(lo + 1e-3);
            let mut chart = ChartBuilder::on(panel)
                .caption(title, ("sans-serif", 22))
                .margin(12)
                .x_label_area_size(32)
                .y_label_area_size(56)
                .build_cartesian_2d(0u64..last, lo..hi * 1.05)?;
            chart.configure_mesh().x_desc("step").draw()?;
            chart.draw_series(LineSeries::new(
                metrics.iter().map(|m| (m.step, value(m))),
                &color,
            ))?;
        }
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| Error::Input(format!("{}: plotting failed: {e}", out.display())))?;
    std::fs::rename(&partial, out).map_err(io(out))
}
