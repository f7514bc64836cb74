//! `btl predict`: the default model answers every sample of an
//! official-format file, and `btl metrics` scores the result.

use crate::util::*;
use serde_json::Value;

/// The official navigation sample, pointed at the tiny model's test
/// screenshot (224×448) copied beside the samples file.
fn samples(dir: &Dir) -> std::path::PathBuf {
    let png = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/tiny-qwen25vl/test-screenshot.png"
    );
    std::fs::create_dir(dir.path("images")).unwrap();
    std::fs::copy(png, dir.path("images/screen.png")).unwrap();
    let mut list: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(NAVIGATION_SAMPLES).unwrap()).unwrap();
    for sample in &mut list {
        sample["images"] = serde_json::json!(["images/screen.png"]);
        sample["image_sizes"] = serde_json::json!([[224, 448]]);
    }
    let two = vec![list[0].clone(), list[0].clone()];
    dir.write("samples.json", &serde_json::to_string(&two).unwrap())
}

/// `btl predict` on `samples`, which must succeed: its stdout and its
/// lines as JSON.
#[cfg(feature = "llama")]
fn predict(dir: &Dir, samples: &std::path::Path) -> (String, Vec<Value>) {
    let run = dir.btl([
        "predict",
        "--samples",
        path_str(samples),
        "--max-tokens",
        "300",
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    let lines = stdout(&run)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (stdout(&run), lines)
}

/// `btl metrics --json` of `predictions` (what `btl predict` printed)
/// against `samples`, which must succeed.
#[cfg(feature = "llama")]
fn metrics(dir: &Dir, samples: &std::path::Path, predictions: &str) -> Value {
    let predictions = dir.write("predictions.jsonl", predictions);
    let run = dir.btl([
        "metrics",
        "--samples",
        path_str(samples),
        "--predictions",
        path_str(&predictions),
        "--json",
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    serde_json::from_str(stdout(&run).trim()).unwrap()
}

#[cfg(feature = "llama")]
#[test]
fn predictions_for_every_sample_are_scored_by_btl_metrics() {
    let dir = Dir::new();
    let samples = samples(&dir);
    let (out, lines) = predict(&dir, &samples);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["sample"], 0);
    assert_eq!(lines[1]["sample"], 1);
    // Greedy decoding: the same sample gives the same answer.
    assert_eq!(lines[0]["completion"], lines[1]["completion"]);
    let report = metrics(&dir, &samples, &out);
    assert_eq!(report["steps"], 2, "{report}");
}

/// A grounding sample is answered with a point, the link its system
/// message asks for (spec §2): the decoding grammar follows the prompt,
/// so `btl metrics` finds the answer's type right whatever the point.
#[cfg(feature = "llama")]
#[test]
fn a_grounding_sample_is_answered_with_a_point() {
    let dir = Dir::new();
    samples(&dir);
    let mut list: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(GROUNDING_SAMPLES).unwrap()).unwrap();
    // The release writes this sample's screenshot under `image`.
    list[0]["image"] = serde_json::json!(["images/screen.png"]);
    list[0]["image_sizes"] = serde_json::json!([[224, 448]]);
    let samples = dir.write("grounding.json", &serde_json::to_string(&list).unwrap());
    let (out, lines) = predict(&dir, &samples);
    assert_eq!(lines.len(), 1);
    let completion = lines[0]["completion"].as_str().unwrap();
    let link = completion.split("<link>").nth(1).unwrap();
    assert!(
        link.starts_with("```json\n[{\"point_2d\": [") && link.ends_with("]}]\n```</link>"),
        "{completion}"
    );
    let report = metrics(&dir, &samples, &out);
    assert_eq!(
        report["type"],
        serde_json::json!({"correct": 1, "total": 1}),
        "{report}"
    );
}

/// A text-only sample (no image, its prompt without the placeholder, as
/// `btl-train data augment-typed --text-only` writes) is answered from its
/// prompt alone, beside one with its screenshot.
#[cfg(feature = "llama")]
#[test]
fn a_text_only_sample_is_answered_without_an_image() {
    let dir = Dir::new();
    let samples = samples(&dir);
    let mut list: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&samples).unwrap()).unwrap();
    list[1]["images"] = serde_json::json!([]);
    for message in list[1]["messages"].as_array_mut().unwrap() {
        if message["role"] == "user" {
            let user = message["content"].as_str().unwrap().replace("<image>", "");
            message["content"] = user.into();
        }
    }
    let samples = dir.write("samples.json", &serde_json::to_string(&list).unwrap());
    let (_, lines) = predict(&dir, &samples);
    assert_eq!(lines.len(), 2);
    assert!(
        lines
            .iter()
            .all(|l| l["completion"].as_str().is_some_and(|c| !c.is_empty()))
    );
}

/// `--out` holds what stdout would have; a run that fails on a sample
/// leaves an earlier file as it was, and the samples file is not an output.
#[cfg(feature = "llama")]
#[test]
fn predictions_replace_an_out_file_only_when_whole() {
    let dir = Dir::new();
    let samples = samples(&dir);
    let (printed, _) = predict(&dir, &samples);
    let out = dir.write("predictions.jsonl", "earlier\n");
    let with_out = |samples: &std::path::Path, out: &std::path::Path| {
        dir.btl([
            "predict",
            "--samples",
            path_str(samples),
            "--max-tokens",
            "300",
            "--out",
            path_str(out),
        ])
    };
    let run = with_out(&samples, &out);
    assert!(run.status.success(), "{}", stderr(&run));
    assert_eq!(stdout(&run), "");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), printed);
    // The second sample's image is missing: the first answer is not kept.
    let mut list: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&samples).unwrap()).unwrap();
    list[1]["images"] = serde_json::json!(["images/gone.png"]);
    let broken = dir.write("broken.json", &serde_json::to_string(&list).unwrap());
    let run = with_out(&broken, &out);
    assert_eq!(run.status.code(), Some(2), "{}", stderr(&run));
    assert!(
        stderr(&run).contains("sample 1: cannot read image"),
        "{}",
        stderr(&run)
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), printed);
    let run = with_out(&samples, &samples);
    assert_eq!(run.status.code(), Some(2), "{}", stderr(&run));
    assert!(
        stderr(&run).contains("it is the samples file this command reads"),
        "{}",
        stderr(&run)
    );
    for (out, why) in [
        ("images", "it is a directory; give a file"),
        ("none/p.jsonl", "its directory does not exist"),
    ] {
        let run = with_out(&samples, &dir.path(out));
        assert_eq!(run.status.code(), Some(2), "{}", stderr(&run));
        assert!(stderr(&run).contains(why), "{}", stderr(&run));
    }
    let leftovers: Vec<_> = std::fs::read_dir(dir.path(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_missing_image_is_bad_input_naming_the_sample() {
    let dir = Dir::new();
    let samples = samples(&dir);
    std::fs::remove_file(dir.path("images/screen.png")).unwrap();
    let run = dir.btl(["predict", "--samples", path_str(&samples)]);
    if cfg!(feature = "llama") {
        assert_eq!(run.status.code(), Some(2));
        assert!(
            stderr(&run).contains("sample 0: cannot read image"),
            "{}",
            stderr(&run)
        );
    } else {
        assert_eq!(run.status.code(), Some(2), "{}", stderr(&run));
    }
}

/// `predict` answers with a model: the episode-only options (the oracle,
/// relabelling) are not its options, in its help or on its command line.
#[test]
fn predict_takes_only_model_options() {
    let dir = Dir::new();
    let help = dir.btl(["predict", "--help"]);
    assert!(help.status.success());
    let text = stdout(&help);
    assert!(
        text.contains("--model") && text.contains("--max-tokens"),
        "{text}"
    );
    for episode_only in ["--policy", "--relabel", "--take-over-early-finish"] {
        assert!(!text.contains(episode_only), "{episode_only} in:\n{text}");
    }
    let oracle = dir.btl(["predict", "--samples", "s.json", "--policy", "oracle"]);
    assert_eq!(oracle.status.code(), Some(2));
    assert!(
        stderr(&oracle).contains("unexpected argument '--policy'"),
        "{}",
        stderr(&oracle)
    );
}
