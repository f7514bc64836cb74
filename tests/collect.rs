//! `btl collect`: episodes on several devices at once; a device that fails
//! is reported and skipped, and the others finish the work.

use crate::util::*;
use serde_json::Value;

#[test]
fn two_virtual_phones_collect_everything_while_a_dead_device_is_skipped() {
    let adb = AdbServer::start();
    let dir = Dir::new();
    let out = dir.path("data");
    let args = beside_a_dead_device(&adb, &out, "2", "wifi_on,note_delete,web_search", "2");
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
    // Every line names the phone that ran it (which of the two took which
    // job is the scheduler's choice), and its device as its trajectory
    // does.
    assert!(
        index.iter().all(
            |l| ["virtual phone 2", "virtual phone 3"].contains(&l["worker"].as_str().unwrap())
        ),
        "{index:?}"
    );
    assert!(
        index
            .iter()
            .all(|l| l["device"] == "virtual phone (in-process)"),
        "{index:?}"
    );

    // Running it again finds everything done.
    let again = dir.btl(&args);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("6 of 6 episodes already finished"),
        "{}",
        stderr(&again)
    );
    // Each line without its worker, in order.
    let lines = |index: &str| {
        let mut lines: Vec<String> = index
            .lines()
            .map(|l| {
                let mut line: Value = serde_json::from_str(l).unwrap();
                line.as_object_mut().unwrap().remove("worker");
                line.to_string()
            })
            .collect();
        lines.sort();
        lines
    };
    let listed = std::fs::read_to_string(out.join("collect.jsonl")).unwrap();
    assert_eq!(lines(&listed).len(), 6, "{listed}");
    // A run killed between an episode's end and its index line, and a
    // line a crash cut short: the next run lists both episodes again, as
    // they were but for the worker, which this run does not know.
    let kept: Vec<&str> = listed.lines().collect();
    let cut = format!("{}\n{}", kept[..4].join("\n"), &kept[4][..10]);
    std::fs::write(out.join("collect.jsonl"), cut).unwrap();
    let repaired = dir.btl(&args);
    assert!(repaired.status.success(), "{}", stderr(&repaired));
    assert!(
        stderr(&repaired).contains("2 finished episodes were missing from"),
        "{}",
        stderr(&repaired)
    );
    let relisted = std::fs::read_to_string(out.join("collect.jsonl")).unwrap();
    assert_eq!(lines(&relisted), lines(&listed));
    let relisted_workers: Vec<Option<Value>> = relisted
        .lines()
        .skip(4)
        .map(|l| {
            serde_json::from_str::<Value>(l)
                .unwrap()
                .get("worker")
                .cloned()
        })
        .collect();
    assert_eq!(relisted_workers, [None, None]);
    // A line in the middle that is no record (edited) is said and passed
    // over; its episode is listed again.
    let mut edited: Vec<&str> = relisted.lines().collect();
    edited[1] = "{not a record";
    std::fs::write(out.join("collect.jsonl"), edited.join("\n") + "\n").unwrap();
    let mended = dir.btl(&args);
    assert!(mended.status.success(), "{}", stderr(&mended));
    assert!(
        stderr(&mended).contains("line 2 of ")
            && stderr(&mended).contains("is not a record")
            && stderr(&mended).contains("1 finished episode was missing from"),
        "{}",
        stderr(&mended)
    );
    // A whole last record without its newline (written by hand) is a
    // record: its episode is listed, not listed twice.
    let whole = std::fs::read_to_string(out.join("collect.jsonl")).unwrap();
    std::fs::write(out.join("collect.jsonl"), whole.trim_end()).unwrap();
    let closed = dir.btl(&args);
    assert!(closed.status.success(), "{}", stderr(&closed));
    assert!(
        !stderr(&closed).contains("missing from"),
        "{}",
        stderr(&closed)
    );
    assert_eq!(
        std::fs::read_to_string(out.join("collect.jsonl")).unwrap(),
        whole.trim_end()
    );
    // Finished episodes of other settings are refused, not counted as this
    // collection's.
    let mut other = args.clone();
    other.extend(["--max-steps", "5"].map(String::from));
    let refused = dir.btl(&other);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("holds an episode run with other settings (max_steps: ")
            && stderr(&refused).contains(" there, 5 here)"),
        "{}",
        stderr(&refused)
    );
    // While another collection writes into the directory (here its lock
    // on the index, held by this test), a second is refused.
    let index = std::fs::File::open(out.join("collect.jsonl")).unwrap();
    index.lock().unwrap();
    let second = dir.btl(&args);
    assert_eq!(second.status.code(), Some(2), "{}", stderr(&second));
    assert!(
        stderr(&second).contains("another collection is writing into"),
        "{}",
        stderr(&second)
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

    // Two workers on one phone would record each other's taps.
    let out = dir.btl([
        "collect",
        "--tasks",
        "all",
        "--out",
        "x",
        "--policy",
        "oracle",
        "--devices",
        "emulator-5554,emulator-5556,emulator-5554",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--devices names emulator-5554 twice"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.path("x").exists());
}

/// The arguments of `btl collect` of the oracle's episodes (`episodes` per
/// task) on `sim` virtual phones and on an adb device that never comes up:
/// nothing listens on port 9 (discard).
fn beside_a_dead_device(
    adb: &AdbServer,
    out: &std::path::Path,
    sim: &str,
    tasks: &str,
    episodes: &str,
) -> Vec<String> {
    let port = adb.port().to_string();
    let args = [
        "collect",
        "--devices",
        "127.0.0.1:9",
        "--adb-port",
        &port,
        "--sim",
        sim,
        "--tasks",
        tasks,
        "--episodes",
        episodes,
        "--policy",
        "oracle",
        "--out",
        path_str(out),
    ];
    args.iter()
        .chain(&FAST_SETTLE)
        .map(|a| a.to_string())
        .collect()
}

/// A dead phone is reported even when the others leave it no job it
/// could run (over adb, the settings tasks only).
#[test]
fn a_dead_device_without_a_job_it_could_run_is_still_reported() {
    let adb = AdbServer::start();
    let dir = Dir::new();
    let out = dir.path("data");
    let run = dir.btl(beside_a_dead_device(&adb, &out, "1", "note_delete", "1"));
    assert!(run.status.success(), "{}", stderr(&run));
    assert!(
        stderr(&run).contains("device adb device 127.0.0.1:9 failed and is skipped"),
        "{}",
        stderr(&run)
    );
    assert!(
        stdout(&run).contains("collected 1 episodes (1 successful)")
            && stdout(&run).contains("1 devices skipped"),
        "{}",
        stdout(&run)
    );
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

/// A phone lost in the middle of an episode (Debian's adb in between; the
/// virtual phone's fault hook drops the connection): the episode is kept as
/// it stopped, and once the phone is back a second run resumes the episode
/// on it, its first steps untouched, while a virtual phone added to the
/// run leaves the lost episode alone (the other may be either's).
#[test]
fn a_device_lost_mid_episode_is_resumed_when_it_comes_back() {
    use agent_core::sim::adbd::Adbd;
    use agent_core::sim::phone::PhoneConfig;
    use agent_core::sim::virtual_phone::VirtualPhone;
    use std::sync::Arc;

    let adb = AdbServer::start();
    let adbd = Adbd::start(Arc::new(VirtualPhone::new(PhoneConfig::default())), None).unwrap();
    let serial = adbd.serial();
    // The episode's first tap (opening Settings) runs; the second, on the
    // switch, never does: the connection drops as it is sent.
    adbd.faults().drop_connection_on_nth("input tap", 2);
    let dir = Dir::new();
    let out = dir.path("data");
    let port = adb.port().to_string();
    let mut args = vec![
        "collect",
        "--devices",
        &serial,
        "--adb-port",
        &port,
        "--tasks",
        "wifi_on,bluetooth_on",
        "--policy",
        "oracle",
        "--out",
        path_str(&out),
    ];
    args.extend_from_slice(&FAST_SETTLE);

    // The phone alone takes the first job, and no other device is there
    // to take the second.
    let first = dir.btl(&args);
    let err = stderr(&first);
    assert_eq!(first.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "wifi_on seed 0 on adb device {serial}: interrupted after 2 steps"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("device adb device {serial} failed and is skipped")),
        "{err}"
    );
    assert!(
        err.contains("1 episodes could not run on any device, 1 were interrupted"),
        "{err}"
    );
    assert!(
        stdout(&first).contains("collected 0 episodes"),
        "{}",
        stdout(&first)
    );
    assert!(!out.join("bluetooth_on-s0").exists());
    let lost = out.join("wifi_on-s0");
    assert_eq!(episode_json(&lost)["device"], serial.as_str());
    let stopped = episode_json(&lost);
    assert_eq!(
        stopped["outcome"]["stop"]["reason"], "device_failed",
        "{stopped}"
    );
    let before = steps_json(&lost);
    assert_eq!(before.len(), 2, "{before:?}");
    assert_eq!(before[0]["outcome"]["kind"], "performed", "{before:?}");
    assert_eq!(before[1]["outcome"]["kind"], "device_failed", "{before:?}");

    // The phone comes back.
    let _ = adb.adb(["disconnect", &serial]);
    let back = adb.adb(["connect", &serial]);
    assert!(stdout(&back).contains("connected to"), "{}", stdout(&back));
    let ready = adb.adb(["-s", &serial, "wait-for-device"]);
    assert!(ready.status.success(), "{}", stderr(&ready));

    // A virtual phone joins; it leaves the lost episode alone, which is
    // the adb phone's, and may run the other one.
    args.extend_from_slice(&["--sim", "1"]);
    let second = dir.btl(&args);
    assert!(second.status.success(), "{}", stderr(&second));
    assert!(
        stdout(&second).contains("collected 2 episodes (2 successful)"),
        "{}",
        stdout(&second)
    );
    let index = std::fs::read_to_string(out.join("collect.jsonl")).unwrap();
    let resumer = index
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["dir"] == "wifi_on-s0")
        .expect("the resumed episode is listed")["worker"]
        .clone();
    assert_eq!(resumer, format!("adb device {serial}").as_str(), "{index}");
    let resumed = episode_json(&lost);
    assert_eq!(resumed["outcome"]["success"], true, "{resumed}");
    assert_eq!(
        resumed["resumed_at_steps"],
        serde_json::json!([2]),
        "{resumed}"
    );
    let after = steps_json(&lost);
    assert_eq!(
        after[..2],
        before[..],
        "the steps before the loss are kept as they were"
    );
    assert!(after.len() > 2, "{after:?}");
    assert_eq!(index.lines().count(), 2, "{index}");
}
