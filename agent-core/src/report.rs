//! `report.html`: a replay of one trajectory, for people.
//!
//! One page, no scripts, its screenshots embedded as PNG data URIs: up to
//! [`MAX_EMBEDDED_BYTES`] of them in all, and a screenshot that would pass
//! that (or is larger than any screenshot the trajectory reader takes) is
//! linked by its file name, beside the page. Over each, an SVG overlay in
//! device pixels draws the executed
//! answer's blink regions, the tap point or the swipe arrow. Beside it:
//! the think text, the Plan, the action in both frames, why the step ended
//! as it did, timings, tokens, the vote and the reward when known.
//!
//! [`render`] is pure (trajectory records and image bytes in, HTML out);
//! [`write`](fn@write) reads the directory and writes `report.html` atomically.

use crate::agent::trajectory::{StepRecord, Trajectory, TrajectoryError, read_trajectory};
use crate::device::DeviceAction;
use crate::protocol::{BtlOutput, FrameMap, ParseMode, parse};
use base64::Engine;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use thiserror::Error;

pub const REPORT_FILE: &str = "report.html";

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ReportError {
    #[error(transparent)]
    Trajectory(#[from] TrajectoryError),
    #[error("cannot read screenshot {path}: {source}")]
    Screenshot {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The most screenshot bytes one page embeds, all steps together: a long
/// episode of full-resolution PNGs fits, while a page (held in memory
/// while it is written, a third larger as base64) stays a few hundred
/// megabytes whatever a trajectory's files hold.
pub const MAX_EMBEDDED_BYTES: u64 = 128 << 20;

/// A step's screenshot as the page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shot {
    /// The PNG's bytes, embedded.
    Embedded(Vec<u8>),
    /// Past the page's budget: shown from its file, beside the page.
    Linked,
    /// The file is gone.
    Missing,
}

/// Writes `DIR/report.html` for the trajectory in `dir`; returns its path.
pub fn write(dir: &Path) -> Result<PathBuf, ReportError> {
    write_within(dir, MAX_EMBEDDED_BYTES)
}

/// [`write`](fn@write), embedding at most `budget` screenshot bytes.
fn write_within(dir: &Path, budget: u64) -> Result<PathBuf, ReportError> {
    let trajectory = read_trajectory(dir)?;
    let mut shots = Vec::with_capacity(trajectory.steps.len());
    let mut embedded = 0u64;
    for step in &trajectory.steps {
        let path = dir.join(&step.screenshot);
        let size = match std::fs::metadata(&path) {
            Ok(m) => m.len(),
            // A step whose PNG is missing is still worth showing.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                shots.push(Shot::Missing);
                continue;
            }
            Err(source) => return Err(ReportError::Screenshot { path, source }),
        };
        if embedded + size > budget || size > crate::agent::trajectory::MAX_SCREENSHOT_BYTES {
            shots.push(Shot::Linked);
            continue;
        }
        match crate::agent::trajectory::read_screenshot_file(&path) {
            Ok(bytes) => {
                embedded += bytes.len() as u64;
                shots.push(Shot::Embedded(bytes));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => shots.push(Shot::Missing),
            Err(source) => return Err(ReportError::Screenshot { path, source }),
        }
    }
    let html = render(&trajectory, &shots);
    let path = dir.join(REPORT_FILE);
    crate::atomic::write(&path, html.as_bytes()).map_err(TrajectoryError::from)?;
    Ok(path)
}

/// The page for `trajectory`; `screenshots[i]` is step `i`'s screenshot
/// (missing where not given).
pub fn render(trajectory: &Trajectory, screenshots: &[Shot]) -> String {
    let e = &trajectory.episode;
    let mut html = String::new();
    let outcome = match &e.outcome {
        Some(o) => {
            let success = match o.success {
                Some(true) => " — task succeeded",
                Some(false) => " — task not done",
                None => "",
            };
            format!("{}{success}", o.stop)
        }
        None => "interrupted (no outcome recorded; `btl run --resume` continues it)".into(),
    };
    let task = e
        .task
        .as_ref()
        .map(|t| format!("<dt>Task</dt><dd>{}</dd>", escape(&t.to_string())))
        .unwrap_or_default();
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>btl episode: {goal}</title><style>{STYLE}</style></head><body>\
         <header><h1>{goal}</h1><dl>{task}<dt>Device</dt><dd>{device} ({w}×{h})</dd>\
         <dt>Policy</dt><dd>{policy}</dd><dt>Profile</dt><dd>{profile}</dd>\
         <dt>Steps</dt><dd id=\"step-count\">{steps}</dd><dt>Outcome</dt><dd id=\"outcome\">{outcome}</dd></dl></header>\n",
        goal = escape(&e.goal),
        device = escape(&e.device),
        w = e.screen.width,
        h = e.screen.height,
        policy = escape(&e.policy),
        profile = e.settings.profile.name(),
        steps = trajectory.steps.len(),
        outcome = escape(&outcome),
    );
    for (i, step) in trajectory.steps.iter().enumerate() {
        render_step(
            &mut html,
            step,
            screenshots.get(i).unwrap_or(&Shot::Missing),
        );
    }
    html.push_str("</body></html>\n");
    html
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}\
h1{font-size:1.3em}dl{display:grid;grid-template-columns:max-content 1fr;gap:.2em 1em}\
dt{font-weight:600}dd{margin:0}section.step{display:flex;gap:1.5em;border-top:1px solid #ccc;padding:1em 0}\
.shot{position:relative;width:360px;flex:none}.shot img{width:100%;display:block}\
.shot svg{position:absolute;left:0;top:0;width:100%;height:100%}\
.think{white-space:pre-wrap;background:#f6f6f6;padding:.5em}\
pre{white-space:pre-wrap;word-break:break-all;background:#f6f6f6;padding:.5em;max-height:12em;overflow:auto}\
.bad{color:#a00}";

fn render_step(html: &mut String, step: &StepRecord, screenshot: &Shot) {
    let executed_attempt = chosen_attempt(step);
    let parsed = executed_attempt.and_then(|raw| parse(raw, ParseMode::Tolerant).ok());
    let frame = step.frame;
    let _ = write!(
        html,
        "<section class=\"step\" data-step=\"{index}\"><div class=\"shot\">",
        index = step.index
    );
    let source = match screenshot {
        Shot::Embedded(png) => Some(format!(
            "data:image/png;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(png)
        )),
        Shot::Linked => Some(relative_url(&step.screenshot)),
        Shot::Missing => None,
    };
    match source {
        Some(source) => {
            let _ = write!(
                html,
                "<img alt=\"screenshot of step {}\" src=\"{source}\">",
                step.index,
            );
            html.push_str(&overlay(step, parsed.as_ref().map(|p| &p.output), &frame));
        }
        None => {
            let _ = write!(
                html,
                "<p class=\"bad\">screenshot {} is missing</p>",
                escape(&step.screenshot)
            );
        }
    }
    let taken_over = if step.attempts.iter().any(|a| a.overruled.is_some()) {
        " (the relabelling teacher's answer)"
    } else {
        ""
    };
    let _ = write!(
        html,
        "</div><div class=\"detail\"><h2>Step {} — {}{taken_over}</h2>",
        step.index,
        escape(&outcome_text(step))
    );
    if let Some(parsed) = &parsed {
        let _ = write!(
            html,
            "<p><b>Think</b></p><div class=\"think\">{}</div>",
            escape(parsed.output.think.trim())
        );
    }
    if let Some(executed) = &step.executed {
        let device = executed
            .device
            .as_ref()
            .map(|d| serde_json::to_string(d).unwrap_or_default())
            .unwrap_or_else(|| "none".into());
        let _ = write!(
            html,
            "<p><b>Plan</b> {}</p><p><b>Action</b> <code>{}</code> → device <code>{}</code></p>",
            escape(&executed.plan),
            escape(&serde_json::to_string(&executed.model).unwrap_or_default()),
            escape(&device),
        );
    }
    let t = &step.timings;
    let settle = t
        .settle
        .map(|s| format!(", settle {} ms", s.waited_ms))
        .unwrap_or_default();
    let _ = write!(
        html,
        "<p><b>Time</b> observe {} ms, policy {} ms, perform {} ms{settle}</p>",
        t.observe_ms, t.policy_ms, t.perform_ms
    );
    // Summed wide: the counts come from a file that may have been edited.
    let tokens: u64 = step
        .attempts
        .iter()
        .map(|a| u64::from(a.stats.generated_tokens))
        .sum();
    if tokens > 0 {
        let (encode, prefill, decode) = step.attempts.iter().fold((0.0, 0.0, 0.0), |acc, a| {
            (
                acc.0 + a.stats.encode_ms,
                acc.1 + a.stats.prefill_ms,
                acc.2 + a.stats.decode_ms,
            )
        });
        let _ = write!(
            html,
            "<p><b>Model</b> {tokens} tokens generated; image encode {encode:.0} ms, prefill {prefill:.0} ms, decode {decode:.0} ms</p>"
        );
    }
    if let Some(vote) = &step.vote {
        let groups: Vec<String> = vote.clusters.iter().map(|c| format!("{c:?}")).collect();
        let _ = write!(
            html,
            "<p><b>Vote</b> {} answers, groups {}; executed answer {}</p>",
            step.attempts.len(),
            escape(&groups.join(" ")),
            vote.chosen.saturating_add(1)
        );
    }
    if let Some(reward) = step.reward {
        let _ = write!(html, "<p><b>Reward</b> {reward:.3}</p>");
    }
    let _ = write!(
        html,
        "<details><summary>{} answer(s)</summary>",
        step.attempts.len()
    );
    for (n, attempt) in step.attempts.iter().enumerate() {
        let _ = write!(
            html,
            "<p>answer {} (seed {}): {}</p><pre>{}</pre>",
            n + 1,
            attempt.seed,
            escape(&serde_json::to_string(&attempt.parse).unwrap_or_default()),
            escape(&attempt.raw)
        );
        if let Some(own) = &attempt.overruled {
            let _ = write!(
                html,
                "<p class=\"bad\">executed in place of the policy's own answer, which the relabelling teacher overruled:</p><pre class=\"overruled\">{}</pre>",
                escape(own)
            );
        }
    }
    html.push_str("</details></div></section>\n");
}

/// The raw answer that was executed (or, when none was, the last one).
fn chosen_attempt(step: &StepRecord) -> Option<&str> {
    let index = match &step.vote {
        Some(vote) => vote.chosen,
        None => step.attempts.len().checked_sub(1)?,
    };
    step.attempts.get(index).map(|a| a.raw.as_str())
}

fn outcome_text(step: &StepRecord) -> String {
    use crate::agent::trajectory::StepOutcome::*;
    match &step.outcome {
        Performed => "performed".into(),
        Finished => "finished".into(),
        BlankScreen => "blank or secure screen, not sent to the model".into(),
        NoValidOutput => "no usable answer".into(),
        Blocked => "sensitive action blocked".into(),
        Repeated => "repeated action, not performed again".into(),
        PolicyFailed { error } => format!("policy failed: {error}"),
        DeviceFailed { error } => format!("device failed: {error}"),
    }
}

/// Blink boxes, the tap point and the swipe arrow, in device pixels.
fn overlay(step: &StepRecord, output: Option<&BtlOutput>, frame: &FrameMap) -> String {
    let (w, h) = (frame.device.width, frame.device.height);
    let sx = f64::from(w) / f64::from(frame.model.width.max(1));
    let sy = f64::from(h) / f64::from(frame.model.height.max(1));
    let stroke = f64::from(w.max(h)) / 300.0;
    let mut svg = format!(
        "<svg viewBox=\"0 0 {w} {h}\" xmlns=\"http://www.w3.org/2000/svg\" aria-hidden=\"true\">"
    );
    for roi in output.map_or(&[][..], |o| &o.blink[..]) {
        let b = &roi.bbox;
        let _ = write!(
            svg,
            "<rect class=\"blink\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"rgba(255,200,0,.15)\" stroke=\"#e0a000\" stroke-width=\"{stroke:.1}\"><title>{}</title></rect>",
            b.x1 * sx,
            b.y1 * sy,
            (b.x2 - b.x1).max(0.0) * sx,
            (b.y2 - b.y1).max(0.0) * sy,
            escape(&roi.label)
        );
    }
    match step.executed.as_ref().and_then(|e| e.device.as_ref()) {
        Some(DeviceAction::Tap { at } | DeviceAction::LongPress { at }) => {
            let _ = write!(
                svg,
                "<circle class=\"point\" cx=\"{}\" cy=\"{}\" r=\"{:.1}\" fill=\"rgba(220,0,0,.5)\" stroke=\"#c00\" stroke-width=\"{stroke:.1}\"/>",
                at.x,
                at.y,
                stroke * 6.0
            );
        }
        Some(DeviceAction::Swipe { from, to, .. }) => {
            let _ = write!(
                svg,
                "<defs><marker id=\"head{i}\" viewBox=\"0 0 10 10\" refX=\"5\" refY=\"5\" markerWidth=\"4\" markerHeight=\"4\" orient=\"auto\"><path d=\"M0,0L10,5L0,10z\" fill=\"#c00\"/></marker></defs>\
                 <line class=\"swipe\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#c00\" stroke-width=\"{:.1}\" marker-end=\"url(#head{i})\"/>",
                from.x,
                from.y,
                to.x,
                to.y,
                stroke * 2.0,
                i = step.index
            );
        }
        _ => {}
    }
    svg.push_str("</svg>");
    svg
}

/// `path`, relative to the page, as a URL: every byte but letters,
/// digits, `-._~` and `/` percent-encoded, so that no name (`#`, `?`, a
/// quote) ends the path or the attribute early.
fn relative_url(path: &str) -> String {
    path.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_over_step_shows_the_policy_s_own_answer() {
        use crate::agent::trajectory::{old_oracle_trajectory, parse_trajectory};
        let (episode, log) = old_oracle_trajectory();
        let mut trajectory = parse_trajectory(Path::new("old"), episode, log).unwrap();
        assert!(trajectory.steps.len() >= 2);
        let own = "<think>done</think><link>Finish & stop</link>";
        trajectory.steps[1].attempts[0].overruled = Some(own.to_owned());

        let html = render(&trajectory, &[]);
        let sections: Vec<&str> = html.split("<section class=\"step\"").skip(1).collect();
        assert_eq!(sections.len(), trajectory.steps.len());
        let mark = "(the relabelling teacher's answer)</h2>";
        assert!(sections[1].contains(mark), "{}", sections[1]);
        assert!(sections[1].contains(
            "<pre class=\"overruled\">&lt;think&gt;done&lt;/think&gt;&lt;link&gt;Finish &amp; stop&lt;/link&gt;</pre>"
        ));
        for (i, section) in sections.iter().enumerate().filter(|(i, _)| *i != 1) {
            assert!(!section.contains(mark), "step {i}");
            assert!(!section.contains("class=\"overruled\""), "step {i}");
        }
    }

    /// Numbers an edited step log carries at their limits are shown, not
    /// overflowed (a debug build would panic on the sum or the +1).
    #[test]
    fn counts_at_their_limits_render() {
        use crate::agent::trajectory::{old_oracle_trajectory, parse_trajectory};
        use crate::agent::vote::VoteRecord;
        let (episode, log) = old_oracle_trajectory();
        let mut trajectory = parse_trajectory(Path::new("old"), episode, log).unwrap();
        let step = &mut trajectory.steps[0];
        step.attempts.push(step.attempts[0].clone());
        for attempt in &mut step.attempts {
            attempt.stats.generated_tokens = u32::MAX;
        }
        step.vote = Some(VoteRecord {
            clusters: Vec::new(),
            chosen: usize::MAX,
        });
        let html = render(&trajectory, &[]);
        assert!(html.contains("<b>Model</b> 8589934590 tokens generated"));
        assert!(html.contains(&format!("executed answer {}", usize::MAX)));
    }

    /// Past the page's budget a screenshot is linked by its file name,
    /// never read: the page stays small whatever the files hold.
    #[test]
    fn screenshots_past_the_budget_are_linked() {
        use crate::agent::trajectory::{old_oracle_trajectory, parse_trajectory};
        let dir = tempfile::tempdir().unwrap();
        let (episode, log) = old_oracle_trajectory();
        std::fs::write(dir.path().join("episode.json"), episode).unwrap();
        std::fs::write(dir.path().join("steps.jsonl"), log).unwrap();
        let trajectory = parse_trajectory(dir.path(), episode, log).unwrap();
        let steps = trajectory.steps.len();
        assert!(steps >= 4, "{steps}");
        // The first screenshot takes all but 10 bytes of the budget; the
        // next ones (20 bytes each) do not fit after it; the last step's
        // file is gone.
        let budget = 1000;
        let size = |i: usize| match i {
            0 => budget - 10,
            _ => 20,
        };
        for (i, step) in trajectory.steps.iter().enumerate().take(steps - 1) {
            let file = std::fs::File::create(dir.path().join(&step.screenshot)).unwrap();
            file.set_len(size(i)).unwrap();
        }
        let page = std::fs::read_to_string(write_within(dir.path(), budget).unwrap()).unwrap();
        let images: Vec<&str> = page
            .split("<img ")
            .skip(1)
            .map(|img| {
                img.split_once(" src=\"")
                    .unwrap()
                    .1
                    .split_once('"')
                    .unwrap()
                    .0
            })
            .collect();
        assert_eq!(images.len(), steps - 1, "{images:?}");
        assert!(images[0].starts_with("data:image/png;base64,"));
        assert_eq!(images[1..3], ["step-0002.png", "step-0003.png"]);
        assert!(page.contains(&format!(
            "screenshot {} is missing",
            trajectory.steps[steps - 1].screenshot
        )));
        assert_eq!(
            relative_url("a b/step#1?x=\"é\".png"),
            "a%20b/step%231%3Fx%3D%22%C3%A9%22.png"
        );
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            escape(r#"<b>"Tom's" & co</b>"#),
            "&lt;b&gt;&quot;Tom&#39;s&quot; &amp; co&lt;/b&gt;"
        );
    }
}
