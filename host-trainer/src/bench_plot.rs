//! Several `btl bench --json` results side by side: per-template success
//! as grouped horizontal bars, one colour per run, in one PNG. This is how
//! the stages of a recipe (random, SFT, relabelling, GRPO, the oracle) are
//! compared on the held-out split.

use std::path::Path;

use plotters::prelude::*;
use serde::Deserialize;

use crate::error::{Error, Result};

/// What the plot reads of a `btl bench --json` report.
#[derive(Debug, Clone, Deserialize)]
pub struct BenchResult {
    pub overall: Tally,
    pub tasks: Vec<TaskTally>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct Tally {
    pub successes: u64,
    pub episodes: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct TaskTally {
    pub task: String,
    pub successes: u64,
    pub episodes: u64,
}

impl BenchResult {
    /// Reads a `btl bench --json` report; an unreadable or foreign file is
    /// an error naming it.
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
        let result: Self = serde_json::from_str(&text).map_err(|e| {
            Error::Input(format!(
                "{}: not a `btl bench --json` report: {e}",
                path.display()
            ))
        })?;
        result
            .check()
            .map_err(|e| Error::Input(format!("{}: {e}", path.display())))?;
        Ok(result)
    }
}

impl BenchResult {
    /// What a report `btl bench` wrote always holds: each template once, no
    /// more successes than episodes, and the overall tally the sum of the
    /// templates'. A report that breaks one was edited or is another's.
    fn check(&self) -> std::result::Result<(), String> {
        let mut seen = std::collections::HashSet::new();
        let (mut successes, mut episodes) = (0u128, 0u128);
        for t in &self.tasks {
            if !seen.insert(t.task.as_str()) {
                return Err(format!("task {} is listed twice", t.task));
            }
            if t.successes > t.episodes {
                return Err(format!(
                    "task {} has {} successes in {} episodes",
                    t.task, t.successes, t.episodes
                ));
            }
            successes += u128::from(t.successes);
            episodes += u128::from(t.episodes);
        }
        let o = self.overall;
        if (u128::from(o.successes), u128::from(o.episodes)) != (successes, episodes) {
            return Err(format!(
                "overall is {} successes in {} episodes, but its tasks add up to {successes} \
                 in {episodes}",
                o.successes, o.episodes
            ));
        }
        Ok(())
    }
}

/// The share of episodes that succeeded, 0 when there were none.
fn rate(successes: u64, episodes: u64) -> f64 {
    if episodes == 0 {
        0.0
    } else {
        successes as f64 / episodes as f64
    }
}

/// Templates in the order they first appear across the runs.
fn templates(runs: &[(String, BenchResult)]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    runs.iter()
        .flat_map(|(_, run)| &run.tasks)
        .filter(|t| seen.insert(t.task.as_str()))
        .map(|t| t.task.clone())
        .collect()
}

/// Rows a plot draws at most: the suite has 25 templates, and each row
/// takes up to 64 pixels of height, so this keeps the image under 40 MB
/// in memory.
const MAX_TEMPLATES: usize = 200;

const COLORS: [RGBColor; 8] = [
    RGBColor(150, 150, 150),
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(23, 190, 207),
];

/// Pixel height of one run's bar.
const BAR: u32 = 7;

/// Draws `runs` (name, result) into `out` (PNG): a row per template, a bar
/// per run, the overall success in the legend. A run without a template
/// has no bar there.
pub fn plot(runs: &[(String, BenchResult)], out: &Path) -> Result<()> {
    if runs.is_empty() || runs.len() > COLORS.len() {
        return Err(Error::Input(format!(
            "plot between 1 and {} bench results (got {})",
            COLORS.len(),
            runs.len()
        )));
    }
    let names = templates(runs);
    if names.len() > MAX_TEMPLATES {
        return Err(Error::Input(format!(
            "plot at most {MAX_TEMPLATES} templates, a row each (got {})",
            names.len()
        )));
    }
    let rows = names.len() as u32;
    let row_px = BAR * runs.len() as u32 + 8;
    // The legend gets rows of its own below the bars.
    let legend_px = 22 * runs.len() as u32 + 16;
    let legend_rows = f64::from(legend_px) / f64::from(row_px);
    let height = 90 + rows * row_px + legend_px;
    crate::grpo::log::write_png(
        out,
        (1000, height),
        Box::new(|root| {
            // Template names take the x range below 0, so no label has to fit
            // plotters' choice of tick positions.
            let mut chart = ChartBuilder::on(root)
                .caption("success per template (held-out)", ("sans-serif", 22))
                .margin(12)
                .x_label_area_size(30)
                .build_cartesian_2d(-45.0f64..102.0, -legend_rows..rows as f64)?;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .disable_y_mesh()
                .y_labels(0)
                .x_labels(16)
                .x_label_formatter(&|x| {
                    if *x >= 0.0 && (x.round() as i64) % 20 == 0 {
                        format!("{x:.0}%")
                    } else {
                        String::new()
                    }
                })
                .draw()?;
            for x in (0..=100).step_by(20) {
                let x = f64::from(x);
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![(x, -legend_rows), (x, rows as f64)],
                    RGBColor(225, 225, 225),
                )))?;
            }
            let slot = 1.0 / (runs.len() as f64 + 1.0);
            for (row, name) in names.iter().enumerate() {
                // Row 0 at the top.
                let top = rows as f64 - row as f64;
                chart.draw_series(std::iter::once(Text::new(
                    name.clone(),
                    (-44.0, top - 0.5 + 0.01),
                    ("sans-serif", 13).into_font().color(&BLACK),
                )))?;
                for (k, (_, run)) in runs.iter().enumerate() {
                    let Some(t) = run.tasks.iter().find(|t| &t.task == name) else {
                        continue;
                    };
                    let value = 100.0 * rate(t.successes, t.episodes);
                    let y1 = top - slot * (k as f64 + 0.5);
                    let y0 = y1 - slot;
                    chart.draw_series(std::iter::once(Rectangle::new(
                        [(0.0, y0), (value.max(0.4), y1)],
                        COLORS[k].filled(),
                    )))?;
                }
            }
            for (k, (label, run)) in runs.iter().enumerate() {
                let o = run.overall;
                let text = format!(
                    "{label}: {}/{} = {:.0}% overall",
                    o.successes,
                    o.episodes,
                    100.0 * rate(o.successes, o.episodes)
                );
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(0.0, 0.0), (0.0, 0.0)],
                        COLORS[k].filled(),
                    )))?
                    .label(text)
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 5), (x + 14, y + 5)], COLORS[k].filled())
                    });
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerRight)
                .background_style(WHITE.mix(0.9))
                .border_style(BLACK)
                .draw()?;
            Ok(())
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(tasks: &[(&str, u64, u64)]) -> BenchResult {
        BenchResult {
            overall: Tally {
                successes: tasks.iter().map(|t| t.1).sum(),
                episodes: tasks.iter().map(|t| t.2).sum(),
            },
            tasks: tasks
                .iter()
                .map(|&(task, successes, episodes)| TaskTally {
                    task: task.to_owned(),
                    successes,
                    episodes,
                })
                .collect(),
        }
    }

    #[test]
    fn a_bench_report_is_read_and_a_foreign_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("bench.json");
        std::fs::write(
            &good,
            r#"{"episodes": 2, "overall": {"successes": 1, "episodes": 2, "interval95": [0.1, 0.9]},
               "tasks": [{"task": "wifi_on", "successes": 1, "episodes": 2, "errors": 0}]}"#,
        )
        .unwrap();
        let r = BenchResult::read(&good).unwrap();
        assert_eq!(
            (r.overall.successes, r.tasks[0].task.as_str()),
            (1, "wifi_on")
        );

        let foreign = dir.path().join("metrics.json");
        std::fs::write(&foreign, r#"{"step": 1}"#).unwrap();
        let e = BenchResult::read(&foreign).unwrap_err().to_string();
        assert!(e.contains("metrics.json") && e.contains("btl bench"), "{e}");

        let impossible = dir.path().join("bad.json");
        std::fs::write(
            &impossible,
            r#"{"overall": {"successes": 3, "episodes": 2}, "tasks": [{"task": "wifi_on", "successes": 3, "episodes": 2}]}"#,
        )
        .unwrap();
        let e = BenchResult::read(&impossible).unwrap_err().to_string();
        assert!(e.contains("wifi_on has 3 successes in 2 episodes"), "{e}");
    }

    #[test]
    fn a_report_whose_tallies_do_not_add_up_is_refused() {
        let task = |name: &str, successes, episodes| TaskTally {
            task: name.to_owned(),
            successes,
            episodes,
        };
        let report = |overall: (u64, u64), tasks| BenchResult {
            overall: Tally {
                successes: overall.0,
                episodes: overall.1,
            },
            tasks,
        };
        let fine = report(
            (4, 20),
            vec![task("wifi_on", 3, 10), task("alarm_set", 1, 10)],
        );
        assert_eq!(fine.check(), Ok(()));
        assert_eq!(report((0, 0), vec![]).check(), Ok(()));
        let cases = [
            (
                report(
                    (900, 20),
                    vec![task("wifi_on", 3, 10), task("alarm_set", 1, 10)],
                ),
                "overall is 900 successes in 20 episodes, but its tasks add up to 4 in 20",
            ),
            (
                report(
                    (4, 21),
                    vec![task("wifi_on", 3, 10), task("alarm_set", 1, 10)],
                ),
                "overall is 4 successes in 21 episodes, but its tasks add up to 4 in 20",
            ),
            (
                report(
                    (6, 20),
                    vec![task("wifi_on", 3, 10), task("wifi_on", 3, 10)],
                ),
                "task wifi_on is listed twice",
            ),
            (
                report(
                    (u64::MAX, u64::MAX),
                    vec![task("a", u64::MAX, u64::MAX), task("b", 0, 1)],
                ),
                "overall is 18446744073709551615 successes in 18446744073709551615 episodes, \
                 but its tasks add up to 18446744073709551615 in 18446744073709551616",
            ),
        ];
        for (bad, expected) in cases {
            assert_eq!(bad.check(), Err(expected.to_owned()), "{bad:?}");
        }
    }

    #[test]
    fn templates_keep_their_first_order_across_runs() {
        let runs = vec![
            (
                "a".to_owned(),
                result(&[("wifi_on", 1, 1), ("alarm_set", 0, 1)]),
            ),
            (
                "b".to_owned(),
                result(&[("alarm_set", 1, 1), ("web_search", 0, 1)]),
            ),
        ];
        assert_eq!(templates(&runs), ["wifi_on", "alarm_set", "web_search"]);
    }

    #[test]
    fn each_run_draws_its_bars_in_its_colour_to_the_measured_length() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("plot.png");
        // One template, run 1 at 100 %, run 2 at 50 %.
        let runs = vec![
            ("full".to_owned(), result(&[("wifi_on", 4, 4)])),
            ("half".to_owned(), result(&[("wifi_on", 2, 4)])),
        ];
        plot(&runs, &out).unwrap();
        let img = image::open(&out).unwrap().to_rgb8();
        // A bar is the longest run of its colour along one pixel row (the
        // legend's swatch is 15 pixels wide).
        let longest = |k: usize| {
            let c = COLORS[k];
            (0..img.height())
                .map(|y| {
                    let (mut best, mut run) = (0u32, 0u32);
                    for x in 0..img.width() {
                        run = if img.get_pixel(x, y).0 == [c.0, c.1, c.2] {
                            run + 1
                        } else {
                            0
                        };
                        best = best.max(run);
                    }
                    best
                })
                .max()
                .unwrap()
        };
        let (full, half) = (longest(0), longest(1));
        assert!(full > 300, "{full}");
        assert!(
            (full as f64 / half as f64 - 2.0).abs() < 0.02,
            "{full} {half}"
        );
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["plot.png"]);
    }

    #[test]
    fn more_templates_than_rows_are_refused_before_drawing() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("plot.png");
        let names: Vec<String> = (0..=MAX_TEMPLATES).map(|i| format!("t{i}")).collect();
        let tasks: Vec<(&str, u64, u64)> = names.iter().map(|n| (n.as_str(), 1, 1)).collect();
        let err = plot(&[("many".to_owned(), result(&tasks))], &out).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid input: plot at most 200 templates, a row each (got 201)"
        );
        assert!(!out.exists());
    }
}
