//! `btl metrics` end to end.

use crate::util::*;
use serde_json::{Value, json};

#[test]
fn metrics_reports_counts_behind_every_rate() {
    let dir = Dir::new();
    // Three predictions for the navigation example (GT Tap [663, 1135] in box
    // [614, 1094, 720, 1182]): a hit, a Tap outside the box but within 0.14
    // (btl: wrong; os-atlas: right), and unparseable text.
    let preds = completions_file(
        &dir,
        "p.jsonl",
        &[
            answer("[]", r#"{"function": "Tap", "point_2d": [663, 1135]}"#),
            answer("[]", r#"{"function": "Tap", "point_2d": [600, 1135]}"#),
            "I would tap the result".to_string(),
        ],
    );
    let out = dir.btl([
        "metrics",
        "--samples",
        NAVIGATION_SAMPLES,
        "--predictions",
        path_str(&preds),
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(report["steps"], json!(3));
    assert_eq!(report["unparsed"], json!(1));
    assert_eq!(report["type"], json!({"correct": 2, "total": 3}));
    assert_eq!(report["grounding"], json!({"correct": 1, "total": 3}));
    assert_eq!(report["success"], json!({"correct": 1, "total": 3}));
    assert_eq!(report["screenspot"], json!({"correct": 0, "total": 0}));

    let out = dir.btl([
        "metrics",
        "--samples",
        NAVIGATION_SAMPLES,
        "--predictions",
        path_str(&preds),
        "--preset",
        "os-atlas",
    ]);
    let text = stdout(&out);
    assert!(
        text.contains("preset os-atlas: 3 steps, 1 unparsed"),
        "{text}"
    );
    assert!(text.contains("SR           66.67% (2/3)"), "{text}");
    assert!(text.contains("ScreenSpot       - (0/0)"), "{text}");
}

#[test]
fn unknown_preset_is_a_usage_error() {
    let dir = Dir::new();
    let preds = completions_file(&dir, "p.jsonl", &["x".to_string()]);
    let out = dir.btl([
        "metrics",
        "--samples",
        NAVIGATION_SAMPLES,
        "--predictions",
        path_str(&preds),
        "--preset",
        "nope",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown metrics preset 'nope'"),
        "{}",
        stderr(&out)
    );
}

/// A sample whose solution is no action is the user's input to fix (exit
/// 2), named with the predictions line that scored it and why it is not
/// read, not an internal failure.
#[test]
fn an_unreadable_solution_is_named_with_its_line() {
    let dir = Dir::new();
    let mut samples: Value =
        serde_json::from_str(&std::fs::read_to_string(NAVIGATION_SAMPLES).unwrap()).unwrap();
    samples[0]["solution"] = json!(r#"[{"Action": {"function": "Fly"}}]"#);
    let samples = dir.write("s.json", &samples.to_string());
    let line = json!({"sample": 0, "completion": "x"}).to_string();
    let preds = dir.write("p.jsonl", &format!("\n{line}\n"));
    let out = dir.btl([
        "metrics",
        "--samples",
        path_str(&samples),
        "--predictions",
        path_str(&preds),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(
        e.contains("s.json: sample 0 (scored by line 2 of ")
            && e.contains("p.jsonl): its solution is not a readable action: ")
            && e.contains("Fly"),
        "{e}"
    );
}
