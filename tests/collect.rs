//! `btl collect`: episodes on several devices at once; a device that fails
//! is reported and skipped, and the others finish the work.

use crate::util::*;
use serde_json::Value;

#[test]
fn two_virtual_phones_collect_everything_while_a_dead_device_is_skipped() {
    let adb = AdbServer::start();
    let dir = Dir::new();
    let out = dir.path("data");
    let port = adb.port().to_string();
    // Nothing listens on port 9 (discard): the adb device never comes up.
    let mut args = vec![
        "collect",
        "--devices",
        "127.0.0.1:9",
        "--adb-port",
        &port,
        "--sim",
        "2",
        "--tasks",
        "wifi_on,note_delete,web_search",
        "--episodes",
        "2",
        "--policy",
        "oracle",
        "--out",
        path_str(&out),
    ];
    args.extend_from_slice(&FAST_SETTLE);
    let run = dir.btl(&args);
    assert!(run.status.success(), "{}", stderr(&run));
    let err = stderr(&run);
    assert!(
        err.contains("device adb device 127.0.0.1:9 failed and is skipped"),
        "{err}"
    );
    assert!(
        stdout(&run).contains("collected 6 episodes (6 successful)"),
        "{}",
        stdout(&run)
    );
    let index: Vec<Value> = std::fs::read_to_string(out.join("collect.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(index.len(), 6);
    for line in &index {
        assert_eq!(line["outcome"]["success"], true, "{line}");
        let episode = episode_json(&out.join(line["dir"].as_str().unwrap()));
        assert_eq!(episode["task"]["name"], line["task"]);
    }
    // Both phones worked, one episode at a time each.
    let devices: std::collections::BTreeSet<&str> = index
        .iter()
        .map(|l| l["device"].as_str().unwrap())
        .collect();
    assert_eq!(
        devices.into_iter().collect::<Vec<_>>(),
        ["virtual phone 2", "virtual phone 3"]
    );

    // Running it again finds everything done.
    let again = dir.btl(&args);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("6 of 6 episodes already finished"),
        "{}",
        stderr(&again)
    );
}

#[test]
fn collect_without_devices_is_bad_usage() {
    let dir = Dir::new();
    let out = dir.btl([
        "collect", "--tasks", "all", "--out", "x", "--policy", "oracle",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no devices"), "{}", stderr(&out));
}

#[test]
fn relabelled_collection_records_the_oracle_s_answer_at_every_step() {
    let dir = Dir::new();
    let out = dir.path("data");
    // The tiny random model acts; the oracle labels every screen it sees.
    let mut args = vec![
        "collect",
        "--sim",
        "1",
        "--tasks",
        "wifi_on",
        "--policy",
        "model",
        "--relabel",
        "oracle",
        "--max-steps",
        "2",
        "--max-pixels",
        "200704",
        "--max-tokens",
        "300",
        "--out",
        path_str(&out),
    ];
    args.extend_from_slice(&FAST_SETTLE);
    args.extend_from_slice(&TINY_MODEL);
    let run = dir.btl(&args);
    assert!(run.status.success(), "{}", stderr(&run));
    let episode = out.join("wifi_on-s0");
    let steps: Vec<Value> = std::fs::read_to_string(episode.join("steps.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!steps.is_empty());
    // The first screen is the launcher: the oracle opens Settings, whatever
    // the model did.
    let first = steps[0]["target"].as_str().expect("a recorded target");
    assert!(first.contains("Open the Settings app."), "{first}");
    for step in &steps {
        assert!(step["target"].is_string(), "{step}");
    }
    assert!(
        episode_json(&episode)["policy"]
            .as_str()
            .unwrap()
            .contains("relabelled by the oracle of wifi_on"),
        "{}",
        episode_json(&episode)
    );

    // Without a task there is nothing to relabel against.
    let bad = dir.btl(["run", "Turn on Wi-Fi", "--relabel", "oracle"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(
        stderr(&bad).contains("--relabel oracle needs a task"),
        "{}",
        stderr(&bad)
    );
}
