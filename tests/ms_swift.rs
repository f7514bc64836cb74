//! `scripts/ms-swift/btl_reward.py`, the ms-swift reward plugin, run by
//! Python against the real `btl score`. ms-swift itself is not installed:
//! a two-line stand-in provides the `swift.plugin` names the plugin
//! registers with (`ORM`, `orms`). The expected terms are spec §8 vectors.

use crate::util::*;
use serde_json::{Value, json};
use std::process::{Command, Output};

const PLUGIN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../scripts/ms-swift/btl_reward.py"
);

/// Loads the plugin as ms-swift's `--external_plugins` would and calls every
/// reward function it registered on the batch in `batch.json`.
const DRIVER: &str = r#"
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("btl_reward", sys.argv[1])
spec.loader.exec_module(importlib.util.module_from_spec(spec))
from swift.plugin import orms
batch = json.load(open(sys.argv[2]))
print(json.dumps({name: orms[name]()(batch["completions"], btl_sample=batch["samples"], trainer_state=None)
                  for name in sorted(orms)}))
"#;

const GT_BOX: &str = r#"[{"bbox_2d": [614, 1094, 720, 1182], "label": "result"}]"#;
const TAP_GT: &str = r#"{"function": "Tap", "point_2d": [663, 1135]}"#;
const TAP_EDGE: &str = r#"{"function": "Tap", "point_2d": [720, 1100]}"#;

fn run_plugin(dir: &Dir, batch: &Value, env: &[(&str, &str)]) -> Output {
    std::fs::create_dir_all(dir.path("stub/swift/plugin")).unwrap();
    dir.write("stub/swift/__init__.py", "");
    dir.write(
        "stub/swift/plugin/__init__.py",
        "class ORM:\n    pass\norms = {}\n",
    );
    let driver = dir.write("driver.py", DRIVER);
    let batch = dir.write("batch.json", &batch.to_string());
    Command::new("python3")
        .arg(driver)
        .arg(PLUGIN)
        .arg(batch)
        .env("PYTHONPATH", dir.path("stub"))
        .env("BTL_BIN", env!("CARGO_BIN_EXE_btl"))
        .envs(env.iter().copied())
        .output()
        .expect("python3 runs (scripts/test needs it for libtorch already)")
}

/// The official navigation sample as the export's `btl_sample` column holds it.
fn btl_sample() -> String {
    let samples: Value =
        serde_json::from_str(&std::fs::read_to_string(NAVIGATION_SAMPLES).unwrap()).unwrap();
    samples[0].to_string()
}

#[test]
fn the_plugin_scores_each_completion_with_btl() {
    let dir = Dir::new();
    let canonical = answer(GT_BOX, TAP_GT);
    let none_blink = canonical.replacen(&format!("```json\n{GT_BOX}\n```"), "None", 1);
    let batch = json!({
        // ms-swift passes strings; a message list is accepted too.
        "completions": [
            canonical,
            answer(GT_BOX, TAP_EDGE),
            [{"role": "assistant", "content": none_blink}],
        ],
        "samples": [btl_sample(), btl_sample(), btl_sample()],
    });
    let out = run_plugin(&dir, &batch, &[("BTL_REWARD_WEIGHTS", "0,0,1")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rewards: Value = serde_json::from_str(&stdout(&out)).unwrap();
    // §8: canonical 1 / 1; Tap on the box edge: link 0; `<blink>None</blink>`: blink 0, link 1.
    assert_eq!(rewards["btl_blink"], json!([1.0, 1.0, 0.0]));
    assert_eq!(rewards["btl_link"], json!([1.0, 0.0, 1.0]));
    assert_eq!(rewards["btl_format"][0], 1.0);
    assert_eq!(
        rewards["btl"], rewards["btl_link"],
        "weights 0,0,1 leave the link"
    );

    let out = run_plugin(&dir, &batch, &[("BTL_REWARD_MODE", "paper")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rewards: Value = serde_json::from_str(&stdout(&out)).unwrap();
    // Paper mode: the canonical answer still scores 0.1 + 0.3 + 0.6.
    assert_eq!(rewards["btl"][0], 1.0);
}

#[test]
fn a_btl_failure_stops_the_reward_with_its_message() {
    let dir = Dir::new();
    let batch = json!({"completions": ["x"], "samples": ["{\"images\": 3}"]});
    let out = run_plugin(&dir, &batch, &[]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("RuntimeError: btl score exited with 2: btl: error: "),
        "{err}"
    );
}

/// The edges where serde_json and Python's `json` part ways, through the
/// plugin: each expected term is what the official plugin's Python gives
/// (spec §4), worked out in the comments.
#[test]
fn the_plugin_scores_python_json_edges_as_the_official_plugin() {
    let dir = Dir::new();
    let link = |body: &str| {
        format!(
            "<blink>```json\n{GT_BOX}\n```</blink>\n<think> t </think>\n<link>```json\n{body}\n```</link>"
        )
    };
    let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let batch = json!({
        "completions": [
            // A blink body that is JSON but no list of boxes: json.loads
            // passes (format 1); x["bbox_2d"] raises (blink 0).
            answer(r#"{"label": "result"}"#, TAP_GT),
            // A string link item: "Plan" in it and "Action" in it are
            // substring tests (format 1); pred["Action"] raises (link 0).
            link(r#"["Plan, then Action"]"#),
            // A list item: element tests (format 1); link 0 as above.
            link(r#"[["point_2d"]]"#),
            // A lone surrogate in the blink label: kept by
            // json.loads (format 1, blink 1, link 1).
            answer(
                r#"[{"bbox_2d": [614, 1094, 720, 1182], "label": "\ud800"}]"#,
                TAP_GT
            ),
            // A label nested 990 deep parses (992 levels in all, under the
            // 994 Python reaches); 2,000 raise RecursionError (format 0,
            // blink 0; the link body is fine: link 1).
            answer(
                &format!(r#"[{{"bbox_2d": [614, 1094, 720, 1182], "label": {}}}]"#, nested(990)),
                TAP_GT
            ),
            answer(
                &format!(r#"[{{"bbox_2d": [614, 1094, 720, 1182], "label": {}}}]"#, nested(2000)),
                TAP_GT
            ),
        ],
        "samples": vec![btl_sample(); 6],
    });
    let out = run_plugin(&dir, &batch, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rewards: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(rewards["btl_format"], json!([1.0, 1.0, 1.0, 1.0, 1.0, 0.0]));
    assert_eq!(rewards["btl_blink"], json!([0.0, 1.0, 1.0, 1.0, 1.0, 0.0]));
    assert_eq!(rewards["btl_link"], json!([1.0, 0.0, 0.0, 1.0, 1.0, 1.0]));
}
