//! The run's metrics: one JSON line per step in `metrics.jsonl`, and a PNG
//! of their curves (`curves.png`).
//!
//! Lines are appended and synced step by step, so a killed run loses at most
//! the step in flight; a resumed run first drops the lines after its
//! checkpoint, so every step appears once.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use super::config::TrainObjective;
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

/// Every step of a `metrics.jsonl`; a malformed line is named. A last
/// line without its line break is the write a crash cut short (anywhere:
/// after a `-`, or as the zeros a file system leaves), and is dropped
/// unless it reads whole.
pub fn read_metrics(path: &Path) -> Result<Vec<StepMetrics>> {
    let bytes = std::fs::read(path).map_err(io(path))?;
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let (lines, tail) = bytes.split_at(complete);
    let mut out = Vec::new();
    for (i, line) in lines.split(|&b| b == b'\n').enumerate() {
        if line.trim_ascii().is_empty() {
            continue;
        }
        let m = serde_json::from_slice(line).map_err(|e| Error::Config {
            path: path.to_owned(),
            message: format!("line {}: {e}", i + 1),
        })?;
        out.push(m);
    }
    if let Ok(m) = serde_json::from_slice(tail) {
        out.push(m);
    }
    Ok(out)
}

/// Steps in a row without a learning signal before [`SignalWatch`] warns.
pub const SILENT_STEPS: u64 = 10;

/// Watches a GRPO run for steps without a reward signal: every group flat
/// (skipped, or trained on its KL term alone). After [`SILENT_STEPS`] of
/// them in a row it says so, once, with the likely cause.
#[derive(Debug, Default)]
pub struct SignalWatch {
    silent: u64,
    warned: bool,
}

impl SignalWatch {
    /// The warning to print after step `m`, if it is due.
    pub fn observe(&mut self, m: &StepMetrics) -> Option<String> {
        if m.groups > 0 && m.flat_groups < m.groups {
            self.silent = 0;
            return None;
        }
        self.silent += 1;
        if self.silent < SILENT_STEPS || self.warned {
            return None;
        }
        self.warned = true;
        Some(format!(
            "btl-train: warning: {} steps in a row without a reward signal (every group's \
             rewards were equal): the policy likely never earns a reward — start from a \
             supervised model (btl-train sft)",
            self.silent
        ))
    }
}

/// One line of a panel: its legend, its value at a step (`None` where the
/// step has none, e.g. held-out numbers between checkpoints) and colour.
type Series = (&'static str, fn(&StepMetrics) -> Option<f64>, RGBColor);

/// The panels of a run's curves: GRPO shows its reward, KL and flat groups
/// (online GRPO its episodes' success too), SFT its loss, the induction
/// warm-up (and SFT mixed with it) its copy accuracy; all the gradient
/// norm, and GRPO and SFT the held-out numbers.
fn panels(objective: TrainObjective, online: bool) -> Vec<(&'static str, Vec<Series>)> {
    let loss: (&str, Vec<Series>) = (
        "loss",
        vec![
            ("train", |m| Some(m.loss), BLUE),
            ("held-out", |m| m.heldout_loss, RED),
        ],
    );
    let grad_norm: (&str, Vec<Series>) = (
        "gradient norm (before clipping)",
        vec![("", |m| Some(m.grad_norm), BLACK)],
    );
    let accuracy: (&str, Vec<Series>) = (
        "held-out action accuracy",
        vec![("", |m| m.heldout_accuracy, GREEN)],
    );
    let episodes: (&str, Vec<Series>) = (
        "share of episodes ending with the task done",
        vec![(
            "",
            |m| {
                let (n, done) = (m.episodes?, m.episodes_done?);
                Some(done as f64 / n.max(1) as f64)
            },
            GREEN,
        )],
    );
    let copies: (&str, Vec<Series>) = (
        "copy accuracy (new strings, before the update)",
        vec![("", |m| m.copy_accuracy, GREEN)],
    );
    match objective {
        TrainObjective::Sft => vec![loss, grad_norm, accuracy, copies],
        TrainObjective::Induction => vec![loss, copies, grad_norm],
        TrainObjective::Grpo if online => {
            let mut all = panels(objective, false);
            all.push(episodes);
            all
        }
        TrainObjective::Grpo => vec![
            (
                "reward: mean and by term",
                vec![
                    ("mean", |m| Some(m.reward_mean), BLUE),
                    ("format", |m| Some(m.format), MAGENTA),
                    ("blink", |m| Some(m.blink), CYAN),
                    ("link", |m| Some(m.link), RED),
                    ("outcome", |m| m.outcome, GREEN),
                ],
            ),
            ("KL to the reference", vec![("", |m| Some(m.kl), RED)]),
            loss,
            grad_norm,
            (
                "share of flat groups (skipped)",
                vec![(
                    "",
                    |m| Some(m.flat_groups as f64 / m.groups.max(1) as f64),
                    BLACK,
                )],
            ),
            accuracy,
        ],
    }
}

/// Registers the bundled font as plotters' `sans-serif` (again is harmless).
fn register_plot_font(out: &Path) -> Result<()> {
    plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).map_err(|_| Error::Plot {
        path: out.to_owned(),
        message: "the bundled font cannot be read".to_owned(),
    })
}

/// The drawing of a plot: what it puts on its whole area.
pub type Drawing<'a> = dyn FnOnce(
        &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    ) -> std::result::Result<(), Box<dyn std::error::Error>>
    + 'a;

/// Draws a `size` (width, height) PNG in memory and puts it at `out`
/// whole (as every output of the trainer is): a plot drawn again over a reader, or
/// killed mid-way, leaves the previous one.
pub fn write_png(out: &Path, size: (u32, u32), draw: Box<Drawing<'_>>) -> Result<()> {
    use image::ImageEncoder;
    register_plot_font(out)?;
    let plotting = |e: Box<dyn std::error::Error>| Error::Plot {
        path: out.to_owned(),
        message: e.to_string(),
    };
    let mut pixels = vec![0u8; size.0 as usize * size.1 as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| plotting(e.into()))?;
        draw(&root).map_err(plotting)?;
        root.present().map_err(|e| plotting(e.into()))?;
    }
    crate::atomic::write_file(out, |w| {
        image::codecs::png::PngEncoder::new(w)
            .write_image(&pixels, size.0, size.1, image::ExtendedColorType::Rgb8)
            .map_err(|e| plotting(e.into()))
    })
}

/// The run's curves as a PNG: one panel per quantity, each scaled to its
/// own values (see `panels`).
pub fn plot(metrics: &[StepMetrics], objective: TrainObjective, out: &Path) -> Result<()> {
    // A panel no step has a value for (held-out numbers of a run without
    // held-out samples, copies of an SFT run without warm-up strings) is
    // left out.
    let panels: Vec<_> = panels(objective, metrics.iter().any(|m| m.episodes.is_some()))
        .into_iter()
        .filter(|(_, series)| {
            series
                .iter()
                .any(|(_, value, _)| metrics.iter().any(|m| value(m).is_some()))
        })
        .collect();
    let rows = panels.len().div_ceil(2);
    let size = (1200, 330 * rows as u32);
    write_png(
        out,
        size,
        Box::new(|root| {
            let areas = root.split_evenly((rows, 2));
            let last = metrics.last().map_or(1, |m| m.step).max(1);
            for (area, (title, series)) in areas.iter().zip(panels) {
                let ys: Vec<f64> = series
                    .iter()
                    .flat_map(|(_, value, _)| metrics.iter().filter_map(value))
                    .filter(|y| y.is_finite())
                    .collect();
                let lo = ys.iter().copied().fold(f64::INFINITY, f64::min).min(0.0);
                let hi = ys.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                // A flat line at 0 gets a unit axis, not a 0–0.001 one that
                // makes rounding noise look like a trend.
                let hi = if hi.is_finite() && hi > lo {
                    hi
                } else {
                    lo + 1.0
                };
                let mut chart = ChartBuilder::on(area)
                    .caption(title, ("sans-serif", 20))
                    .margin(10)
                    .x_label_area_size(30)
                    .y_label_area_size(56)
                    .build_cartesian_2d(0u64..last, lo..hi + 0.05 * (hi - lo))?;
                chart.configure_mesh().x_desc("step").draw()?;
                let legend = series.len() > 1;
                for (label, value, color) in series {
                    let points: Vec<(u64, f64)> = metrics
                        .iter()
                        .filter_map(|m| value(m).filter(|y| y.is_finite()).map(|y| (m.step, y)))
                        .collect();
                    let drawn = if points.len() == 1 {
                        chart.draw_series(
                            points.iter().map(|&p| Circle::new(p, 3, color.filled())),
                        )?
                    } else {
                        chart.draw_series(LineSeries::new(points, &color))?
                    };
                    if legend {
                        drawn.label(label).legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 16, y)], color)
                        });
                    }
                }
                if legend {
                    chart
                        .configure_series_labels()
                        .background_style(WHITE.mix(0.8))
                        .border_style(BLACK)
                        .draw()?;
                }
            }
            Ok(())
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(step: u64, groups: usize, flat_groups: usize) -> StepMetrics {
        StepMetrics {
            step,
            lr: 1e-4,
            loss: 0.0,
            reward_mean: 0.0,
            reward_std: 0.0,
            format: 0.0,
            blink: 0.0,
            link: 0.0,
            kl: 0.0,
            clip_fraction: 0.0,
            grad_norm: 0.0,
            groups,
            flat_groups,
            completion_tokens_mean: 0.0,
            prompt_tokens: None,
            seconds: 0.0,
            heldout_loss: None,
            heldout_accuracy: None,
            episodes: None,
            episodes_done: None,
            outcome: None,
            copy_accuracy: None,
        }
    }

    /// A log cut by a crash reads back its complete lines, wherever the cut
    /// fell: inside a number after its `-` (which serde calls an invalid
    /// number, not an early end), or in the zeros a file system may leave;
    /// a complete line that does not parse is named.
    #[test]
    fn a_log_cut_short_reads_back_its_complete_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.jsonl");
        let lines: String = [step(1, 1, 0), step(2, 1, 0)]
            .iter()
            .map(|m| serde_json::to_string(m).unwrap() + "\n")
            .collect();
        let third = serde_json::to_string(&StepMetrics {
            loss: -0.25,
            ..step(3, 1, 0)
        })
        .unwrap();
        let cut = &third[..third.find("-0.25").unwrap() + 1];
        for tail in [cut.as_bytes(), &[0; 40][..], b"", third.as_bytes()] {
            std::fs::write(&path, [lines.as_bytes(), tail].concat()).unwrap();
            let steps: Vec<u64> = read_metrics(&path)
                .unwrap()
                .iter()
                .map(|m| m.step)
                .collect();
            let whole = tail == third.as_bytes();
            assert_eq!(
                steps,
                if whole { vec![1, 2, 3] } else { vec![1, 2] },
                "{tail:?}"
            );
        }
        std::fs::write(&path, format!("{lines}{cut}\n")).unwrap();
        let e = read_metrics(&path).unwrap_err().to_string();
        assert!(e.contains("line 3: "), "{e}");
    }

    /// The curves replace an earlier plot whole, with no file left beside
    /// it, and come out as a PNG of two panels a row.
    #[test]
    fn the_curves_replace_the_plot_whole() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("curves.png");
        std::fs::write(&out, b"an earlier plot").unwrap();
        let metrics: Vec<_> = (1..=3).map(|i| step(i, 4, 1)).collect();
        plot(&metrics, TrainObjective::Grpo, &out).unwrap();
        let img = image::open(&out).unwrap();
        assert_eq!(img.width(), 1200);
        assert!(
            img.height() >= 330 && img.height().is_multiple_of(330),
            "{}",
            img.height()
        );
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["curves.png"]);
    }

    #[test]
    fn the_watch_warns_once_after_ten_silent_steps_in_a_row() {
        let mut watch = SignalWatch::default();
        // Nine flat steps, then one that trains: the count starts again.
        for k in 1..=9 {
            assert_eq!(watch.observe(&step(k, 2, 2)), None);
        }
        assert_eq!(watch.observe(&step(10, 2, 1)), None);
        for k in 11..=19 {
            assert_eq!(watch.observe(&step(k, 2, 2)), None, "step {k}");
        }
        let warning = watch.observe(&step(20, 2, 2)).unwrap();
        assert!(
            warning.contains("10 steps in a row") && warning.contains("btl-train sft"),
            "{warning}"
        );
        assert_eq!(watch.observe(&step(21, 0, 0)), None, "said once");
    }
}
