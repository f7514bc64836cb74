//! `btl run` end to end: the agent on the built-in virtual phone with the
//! bundled tiny model (feature `llama`).

use crate::util::*;
use serde_json::Value;

#[cfg(feature = "llama")]
#[test]
fn run_with_the_bundled_model_reaches_a_stop_reason_and_writes_a_trajectory() {
    let dir = Dir::new();
    let out = dir.path("episode");
    let run = dir.btl([
        "run",
        "--task",
        "wifi_on",
        "--max-steps",
        "2",
        "--json",
        "--out",
        path_str(&out),
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    assert!(
        stderr(&run).contains("bundled tiny random test model"),
        "{}",
        stderr(&run)
    );
    let result: Value = serde_json::from_str(stdout(&run).trim()).unwrap();
    assert!(result["outcome"]["stop"]["reason"].is_string(), "{result}");
    let episode: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("episode.json")).unwrap()).unwrap();
    assert_eq!(episode["task"]["name"], "wifi_on");
    assert!(out.join("steps.jsonl").exists());
}

#[test]
fn run_rejects_an_unknown_task() {
    let run = Dir::new().btl(["run", "--task", "no_such_task"]);
    assert_eq!(run.status.code(), Some(2));
    assert!(
        stderr(&run).contains("no task named 'no_such_task'"),
        "{}",
        stderr(&run)
    );
}
