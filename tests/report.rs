//! `btl report`: the HTML replay of a trajectory, rendered by a real
//! browser (Debian's headless Chromium). A screenshot of the rendered page
//! is kept in the test's target directory for people to look at.

use crate::util::*;
use std::process::Command;

/// Runs the oracle on a task that taps and scrolls (seed 0 puts a photo
/// below the fold), so the report draws points, blink boxes and arrows.
fn recorded_episode(dir: &Dir) -> std::path::PathBuf {
    let out = dir.path("episode");
    let mut args = vec![
        "run",
        "--task",
        "photos_delete_two",
        "--policy",
        "oracle",
        "--confirm",
        "allow",
        "--no-report",
        "--out",
        path_str(&out),
    ];
    args.extend_from_slice(&FAST_SETTLE);
    let run = dir.btl(&args);
    assert!(run.status.success(), "{}", stderr(&run));
    out
}

fn chromium(args: &[&str]) -> std::process::Output {
    Command::new("chromium")
        // Root in CI containers has no user namespace for the sandbox.
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .args(args)
        .output()
        .expect("Debian's chromium is required: run scripts/test, or apt-get install chromium")
}

#[test]
fn the_report_loads_in_chromium_with_one_section_per_step() {
    let dir = Dir::new();
    let episode = recorded_episode(&dir);
    let steps = steps_json(&episode);
    let made = dir.btl(["report", path_str(&episode)]);
    assert!(made.status.success(), "{}", stderr(&made));
    let report = episode.join("report.html");
    assert_eq!(stdout(&made).trim(), path_str(&report));
    let url = format!("file://{}", path_str(&report));

    let dom = chromium(&["--dump-dom", &url]);
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert_eq!(dom.matches("<section class=\"step\"").count(), steps.len());
    assert!(dom.contains(&format!("<dd id=\"step-count\">{}</dd>", steps.len())));
    assert_eq!(
        dom.matches("<img ").count(),
        steps.len(),
        "one screenshot per step"
    );
    assert!(dom.contains("class=\"point\""), "a tap is drawn");
    assert!(dom.contains("class=\"swipe\""), "a swipe is drawn");
    assert!(dom.contains("class=\"blink\""), "blink regions are drawn");

    let artifact = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-screenshot.png");
    let _ = std::fs::remove_file(&artifact);
    let shot = chromium(&[
        &format!("--screenshot={}", path_str(&artifact)),
        "--window-size=1000,1400",
        &url,
    ]);
    assert!(
        shot.status.success(),
        "{}",
        String::from_utf8_lossy(&shot.stderr)
    );
    let png = image::open(&artifact)
        .expect("chromium wrote a PNG")
        .to_rgb8();
    assert_eq!(png.dimensions(), (1000, 1400));
    let first = png.get_pixel(0, 0);
    assert!(
        png.pixels().any(|p| p != first),
        "the page rendered something"
    );
}

#[test]
fn report_of_a_directory_without_an_episode_is_bad_input() {
    let dir = Dir::new();
    std::fs::create_dir(dir.path("empty")).unwrap();
    let out = dir.btl(["report", path_str(&dir.path("empty"))]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("episode.json"), "{}", stderr(&out));
}
