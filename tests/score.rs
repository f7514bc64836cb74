//! `btl score` end to end. The expected terms are the spec §8 vectors, which
//! come from running the official reward plugin.

use crate::util::*;
use serde_json::{Value, json};

/// The navigation example, then variants of it whose ground truth the §8
/// vectors change, then the grounding example.
fn samples_file(dir: &Dir) -> std::path::PathBuf {
    let nav: Value =
        serde_json::from_str(&std::fs::read_to_string(NAVIGATION_SAMPLES).unwrap()).unwrap();
    let ground: Value =
        serde_json::from_str(&std::fs::read_to_string(GROUNDING_SAMPLES).unwrap()).unwrap();
    let base = nav[0].clone();
    let with = |solution: Option<&str>, bbox: Option<Value>| {
        let mut s = base.clone();
        if let Some(sol) = solution {
            s["solution"] = json!(sol);
        }
        if let Some(b) = bbox {
            s["bbox"] = b;
        }
        s
    };
    let samples = json!([
        base.clone(),
        with(None, Some(json!([]))),
        with(
            Some(r#"[{"Action": {"function": "Swipe", "direction": "up"}}]"#),
            None
        ),
        with(
            Some(r#"[{"Action": {"function": "Type", "text": "los angeles"}}]"#),
            None
        ),
        with(
            Some(r#"[{"Action": {"function": "Type", "text": "Los Angeles"}}]"#),
            None
        ),
        with(Some(r#"[{"Action": {"function": "Back"}}]"#), None),
        ground[0].clone(),
    ]);
    dir.write(
        "samples.json",
        &serde_json::to_string_pretty(&samples).unwrap(),
    )
}

const GT_BOX: &str = r#"[{"bbox_2d": [614, 1094, 720, 1182], "label": "result"}]"#;
const TAP_GT: &str = r#"{"function": "Tap", "point_2d": [663, 1135]}"#;

fn tap(x: u32, y: u32) -> String {
    format!(r#"{{"function": "Tap", "point_2d": [{x}, {y}]}}"#)
}

/// (sample index, completion, expected blink, expected link) per §8 row;
/// `None` where §8 gives no number ("–").
fn vectors() -> Vec<(usize, String, Option<f64>, Option<f64>)> {
    let canonical = answer(GT_BOX, TAP_GT);
    vec![
        (0, canonical.clone(), Some(1.0), Some(1.0)),
        (0, canonical.replace("\n```</blink>", "\n ```</blink>"), Some(0.0), Some(1.0)),
        (0, canonical.replace(&format!("```json\n{GT_BOX}\n```"), "None"), Some(0.0), Some(1.0)),
        (1, canonical.replace(&format!("```json\n{GT_BOX}\n```"), "None"), Some(1.0), None),
        (
            0,
            answer(r#"[{"bbox_2d": [614, 1094, 720, 1182], "label": "a"}, {"bbox_2d": [614, 1094, 720, 1180], "label": "b"}]"#, TAP_GT),
            Some(0.0),
            None,
        ),
        (0, answer(GT_BOX, &tap(700, 1100)), None, Some(1.0)),
        (0, answer(GT_BOX, &tap(720, 1100)), None, Some(0.0)),
        (1, answer(GT_BOX, TAP_GT), None, Some(0.0)),
        (2, answer(GT_BOX, r#"{"function": "Swipe", "direction": "up"}"#), None, Some(1.0)),
        (2, answer(GT_BOX, r#"{"function": "Swipe", "direction": "Up"}"#), None, Some(0.0)),
        (3, answer(GT_BOX, r#"{"function": "Type", "text": "Los Angeles CA"}"#), None, Some(1.0)),
        (4, answer(GT_BOX, r#"{"function": "Type", "text": "Angeles"}"#), None, Some(1.0)),
        (4, answer(GT_BOX, r#"{"function": "Type", "text": "LA"}"#), None, Some(0.0)),
        (5, answer(GT_BOX, r#"{"function": "Back", "point_2d": [1, 2]}"#), None, Some(0.0)),
        (
            6,
            "<blink>```json\n[{\"bbox_2d\": [392, 1211, 2141, 1247], \"label\": \"Slide Notes\"}]\n```</blink>\n<think> t </think>\n<link>```json\n[{\"point_2d\": [2000, 1230]}]\n```</link>".into(),
            None,
            Some(1.0),
        ),
    ]
}

#[test]
fn score_reproduces_every_spec_section_8_vector() {
    let dir = Dir::new();
    let samples = samples_file(&dir);
    let rows = vectors();
    let lines: Vec<String> = rows
        .iter()
        .map(|(i, c, _, _)| json!({"sample": i, "completion": c}).to_string())
        .collect();
    let completions = dir.write("completions.jsonl", &lines.join("\n"));
    let out = dir.btl([
        "score",
        "--samples",
        path_str(&samples),
        "--completions",
        path_str(&completions),
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let printed: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        printed.len(),
        rows.len() + 1,
        "one line per completion plus the summary"
    );
    for (n, ((sample, completion, blink, link), got)) in rows.iter().zip(&printed).enumerate() {
        assert_eq!(got["line"], json!(n + 1));
        assert_eq!(got["sample"], json!(sample));
        if let Some(b) = blink {
            assert_eq!(
                got["blink"].as_f64(),
                Some(*b),
                "blink of row {n}: {completion}"
            );
        }
        if let Some(l) = link {
            assert_eq!(
                got["link"].as_f64(),
                Some(*l),
                "link of row {n}: {completion}"
            );
        }
    }
    // Row 0 is canonical: every term 1, total 0.1 + 0.3 + 0.6.
    assert_eq!(printed[0]["format"], json!(1.0));
    assert_eq!(printed[0]["total"].as_f64(), Some(0.1 + 0.3 + 0.6));
    let summary = &printed[rows.len()]["summary"];
    assert_eq!(summary["completions"], json!(rows.len()));
    assert_eq!(summary["mode"], json!("released"));
}

#[test]
fn score_prints_a_table_by_default_and_honours_weights_and_mode() {
    let dir = Dir::new();
    let completions = completions_file(&dir, "c.jsonl", &[answer("[]", TAP_GT)]);
    // Released: format 1, blink 0 (empty blink, GT box present), link 1.
    // With weights 1,1,1 the total is 2.
    let out = dir.btl([
        "score",
        "--samples",
        NAVIGATION_SAMPLES,
        "--completions",
        path_str(&completions),
        "--weights",
        "1,1,1",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("format   blink    link   total"), "{text}");
    assert!(text.contains("1.000   0.000   1.000   2.000"), "{text}");
    assert!(text.contains("mean over 1 completions"), "{text}");
    // Paper mode: an empty blink when the GT action taps a target scores 0 as well.
    let out = dir.btl([
        "score",
        "--samples",
        NAVIGATION_SAMPLES,
        "--completions",
        path_str(&completions),
        "--mode",
        "paper",
        "--json",
    ]);
    let first: Value = serde_json::from_str(stdout(&out).lines().next().unwrap()).unwrap();
    assert_eq!(
        (
            first["format"].as_f64(),
            first["blink"].as_f64(),
            first["link"].as_f64()
        ),
        (Some(1.0), Some(0.0), Some(1.0))
    );
}

/// A sample id holding a terminal escape sequence is shown escaped in the
/// table, not sent to the terminal; `--json` keeps it as JSON escapes.
#[test]
fn a_sample_id_is_shown_escaped_in_the_table() {
    let dir = Dir::new();
    let mut samples: Value =
        serde_json::from_str(&std::fs::read_to_string(NAVIGATION_SAMPLES).unwrap()).unwrap();
    let id = "nav\u{1b}]0;owned\u{7}";
    samples[0]["id"] = json!(id);
    let samples = dir.write("s.json", &samples.to_string());
    let line = json!({"sample": id, "completion": answer(GT_BOX, TAP_GT)}).to_string();
    let completions = dir.write("c.jsonl", &(line + "\n"));
    let args = [
        "score",
        "--samples",
        path_str(&samples),
        "--completions",
        path_str(&completions),
    ];
    let out = dir.btl(args);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("\"nav\\u{1b}]0;owned\\u{7}\""), "{text}");
    assert!(!text.contains('\u{1b}'), "{text}");
    let out = dir.btl(args.into_iter().chain(["--json"]));
    let first: Value = serde_json::from_str(stdout(&out).lines().next().unwrap()).unwrap();
    assert_eq!(first["sample"], json!(id));
}

/// Each bad input: exit code 2, the file and line named, the reason given.
#[test]
fn bad_input_is_named_with_file_line_and_reason() {
    let dir = Dir::new();
    let good = completions_file(&dir, "good.jsonl", &["x".to_string()]);
    let broken_line = dir.write(
        "broken.jsonl",
        "{\"sample\": 0, \"completion\": \"a\"}\n{\"sample\": 0, \"completion\": }\n",
    );
    let out_of_range = dir.write("range.jsonl", "{\"sample\": 9, \"completion\": \"a\"}\n");
    let bad_samples = dir.write("samples.json", "[\n  {\"images\": [],\n   \"image_sizes\": [[720, 1280]],\n   \"messages\": [],\n   \"bbox\": []}\n]");
    let not_json = dir.write("notjson.json", "[{\"images\": ");
    let empty = dir.write("empty.jsonl", "");
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec![
                "--samples",
                NAVIGATION_SAMPLES,
                "--completions",
                path_str(&broken_line),
            ],
            format!("{}:2: expected {{\"sample\"", path_str(&broken_line)),
        ),
        (
            vec![
                "--samples",
                NAVIGATION_SAMPLES,
                "--completions",
                path_str(&out_of_range),
            ],
            format!(
                "{}:1: sample 9 does not exist (1 samples)",
                path_str(&out_of_range)
            ),
        ),
        (
            vec![
                "--samples",
                path_str(&bad_samples),
                "--completions",
                path_str(&good),
            ],
            // The file's line only: serde's position counts from the
            // sample's start, and would name another place.
            format!(
                "{}:5: sample 0: missing field `solution`\n",
                path_str(&bad_samples)
            ),
        ),
        (
            vec![
                "--samples",
                NAVIGATION_SAMPLES,
                "--completions",
                path_str(&empty),
            ],
            format!("{}: no completions to score", path_str(&empty)),
        ),
        (
            vec![
                "--samples",
                path_str(&not_json),
                "--completions",
                path_str(&good),
            ],
            format!("{}:1: not a JSON list of samples", path_str(&not_json)),
        ),
        (
            vec![
                "--samples",
                "missing.json",
                "--completions",
                path_str(&good),
            ],
            "cannot read missing.json".to_string(),
        ),
    ];
    for (args, expected) in cases {
        let out = dir.btl(["score"].into_iter().chain(args.iter().copied()));
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(err.starts_with("btl: error: "), "{err}");
        assert!(err.contains(&expected), "expected {expected:?} in {err:?}");
    }
    let out = dir.btl([
        "score",
        "--samples",
        NAVIGATION_SAMPLES,
        "--completions",
        path_str(&good),
        "--weights",
        "1,2",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("expected three finite numbers"),
        "{}",
        stderr(&out)
    );
}

/// Released mode judges answers in the frame the plugin takes from its
/// MAX_PIXELS environment variable, not the sample's own field.
///
/// Canonical blink (the GT box) and Tap [700, 1100] on the navigation sample
/// (GT [663, 1135]) score 1 / 1 / 1 at the recipe's 4,014,080 pixels (spec
/// §8). At 100,000 pixels smart_resize(720×1280) is 224×420 (1280·720 =
/// 921,600 > 100,000; β = √9.216 = 3.036; ⌊1280/β/28⌋·28 = 420,
/// ⌊720/β/28⌋·28 = 224), a frame that scales the screenshot down, so the GT
/// box is judged scaled into it (docs/scoring.md): [191.0, 359.0, 224.0,
/// 387.8]. The answer's box [614, 1094, 720, 1182] misses it (blink 0) and
/// its point lies outside it (link 0): total 0.1.
#[test]
fn released_mode_normalises_clicks_at_max_pixels_as_the_plugin() {
    let dir = Dir::new();
    let completions = completions_file(&dir, "c.jsonl", &[answer(GT_BOX, &tap(700, 1100))]);
    let mut samples: Value =
        serde_json::from_str(&std::fs::read_to_string(NAVIGATION_SAMPLES).unwrap()).unwrap();
    // The sample's own field says 100,000: released mode ignores it.
    samples[0]["max_pixels"] = json!(100_000);
    let samples = dir.write("s.json", &samples.to_string());
    let score = |flag: Option<&str>, env: Option<&str>| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_btl"));
        command.args([
            "score",
            "--samples",
            path_str(&samples),
            "--completions",
            path_str(&completions),
        ]);
        if let Some(pixels) = flag {
            command.args(["--max-pixels", pixels]);
        }
        command.env_remove("MAX_PIXELS");
        if let Some(pixels) = env {
            command.env("MAX_PIXELS", pixels);
        }
        command.output().unwrap()
    };
    let link = |out: &std::process::Output| -> String {
        assert!(out.status.success(), "{}", stderr(out));
        stdout(out).lines().nth(1).unwrap().to_owned()
    };
    let default = score(None, None);
    assert!(
        link(&default).ends_with("1.000   1.000   1.000   1.000"),
        "{}",
        stdout(&default)
    );
    assert!(
        stdout(&default).contains("normalised at max_pixels 4014080 (default)"),
        "{}",
        stdout(&default)
    );
    let env = score(None, Some("100000"));
    assert!(
        link(&env).ends_with("1.000   0.000   0.000   0.100"),
        "{}",
        stdout(&env)
    );
    assert!(stdout(&env).contains("max_pixels 100000 (MAX_PIXELS)"));
    let flag = score(Some("100000"), None);
    assert!(link(&flag).ends_with("0.000   0.100"), "{}", stdout(&flag));
    // The flag wins over the environment.
    let both = score(Some("4014080"), Some("100000"));
    assert!(link(&both).ends_with("1.000   1.000"), "{}", stdout(&both));
    let bad = score(None, Some("lots"));
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("MAX_PIXELS='lots' is not a pixel count"),
        "{}",
        stderr(&bad)
    );
}
