//! `btl run` end to end: the agent on the built-in virtual phone with the
//! shipped default model (feature `llama`), the oracle, real adb, resume.

use crate::util::*;
use serde_json::Value;

/// The main job (scripts/run-agent): `btl run --task wifi_on` with no model
/// named loads the shipped default model, which completes the task.
#[cfg(feature = "llama")]
#[test]
fn run_with_the_default_model_completes_its_task_and_writes_a_trajectory() {
    let dir = Dir::new();
    let out = dir.path("episode");
    let run = dir.btl([
        "run",
        "--task",
        "wifi_on",
        "--json",
        "--out",
        path_str(&out),
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    assert!(
        stderr(&run).contains("using the default model")
            && stderr(&run).contains("btl-mini-q8_0.gguf"),
        "{}",
        stderr(&run)
    );
    let result: Value = serde_json::from_str(stdout(&run).trim()).unwrap();
    assert_eq!(result["outcome"]["success"], true, "{result}");
    let episode: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("episode.json")).unwrap()).unwrap();
    assert_eq!(episode["task"]["name"], "wifi_on");
    assert!(out.join("steps.jsonl").exists());
    assert_only_valid_actions_ran(&steps_json(&out));
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

/// Flag values no episode can run with are refused before one starts,
/// naming the flag: seeds past the last (the split's 2^40 instances, or
/// u64's end), no threads or more than ggml takes, a screenshot below
/// Qwen's 3,136-pixel minimum, no tokens, a temperature that is no number,
/// no episodes.
#[test]
fn impossible_settings_are_refused_by_name() {
    let dir = Dir::new();
    let refused = |args: &[&str], says: &str| {
        let out = dir.btl(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    };
    let oracle = ["--policy", "oracle", "--tasks", "wifi_on"];
    let last = u64::MAX.to_string();
    refused(
        &[&["bench", "--seed", &last, "--episodes", "2"][..], &oracle].concat(),
        &format!("--seed: seeds {last} and on, 2 of them, run past the last seed ({last})"),
    );
    refused(
        &[
            &[
                "bench",
                "--split",
                "heldout",
                "--seed",
                "1099511627775",
                "--repeats",
                "2",
            ][..],
            &oracle,
        ]
        .concat(),
        "run past the last instance of the heldout split (1099511627775)",
    );
    refused(
        &[
            "run",
            "--task",
            "wifi_on",
            "--split",
            "train",
            "--seed",
            "1099511627776",
        ],
        "--seed: seeds 1099511627776 and on, 1 of them, run past the last instance",
    );
    refused(
        &[
            &[
                "collect",
                "--sim",
                "1",
                "--seed",
                &last,
                "--episodes",
                "2",
                "--out",
            ][..],
            &[dir.path("c").to_str().unwrap()],
            &oracle,
        ]
        .concat(),
        "run past the last seed",
    );
    for (flag, value) in [
        ("--threads", "0"),
        ("--threads", "513"),
        ("--max-pixels", "3135"),
        ("--max-tokens", "0"),
        ("--temperature", "nan"),
        ("--temperature", "-1"),
    ] {
        refused(
            &["run", "--task", "wifi_on", flag, value],
            &format!("'{value}'"),
        );
    }
    // A used directory is not written over; an empty one is used.
    std::fs::create_dir(dir.path("used")).unwrap();
    let used = dir.write("used/report.html", "kept");
    let used_dir = dir.path("used");
    let run_into = |out: &str| {
        [
            "run", "--task", "wifi_on", "--policy", "oracle", "--out", out,
        ]
        .map(str::to_owned)
    };
    refused(
        &run_into(used_dir.to_str().unwrap())
            .each_ref()
            .map(String::as_str),
        "already exists and is not an empty directory",
    );
    refused(
        &run_into(used.to_str().unwrap())
            .each_ref()
            .map(String::as_str),
        "already exists",
    );
    assert_eq!(std::fs::read_to_string(&used).unwrap(), "kept");
    std::fs::create_dir(dir.path("empty")).unwrap();
    let out = dir.btl(run_into("empty"));
    assert!(out.status.success(), "{}", stderr(&out));
    refused(
        &[&["bench", "--episodes", "0"][..], &oracle].concat(),
        "'0'",
    );
    refused(&[&["bench", "--repeats", "0"][..], &oracle].concat(), "'0'");
}

#[test]
fn run_with_the_oracle_succeeds_and_writes_a_report() {
    let dir = Dir::new();
    let out = dir.path("episode");
    let mut args = vec![
        "run",
        "--task",
        "contact_add",
        "--policy",
        "oracle",
        "--confirm",
        "allow",
        "--roi-count",
        "3",
        "--json",
        "--out",
        path_str(&out),
    ];
    args.extend_from_slice(&FAST_SETTLE);
    let run = dir.btl(&args);
    assert!(run.status.success(), "{}", stderr(&run));
    let result: Value = serde_json::from_str(stdout(&run).trim()).unwrap();
    assert_eq!(result["outcome"]["stop"]["reason"], "succeeded", "{result}");
    assert_eq!(result["outcome"]["success"], true);
    // --roi-count replaced the system prompt's literal $N$.
    let system = steps_json(&out)[0]["prompt"]["system"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        system.contains("locate 3 elements") && !system.contains("$N$"),
        "{system}"
    );
    let report = std::fs::read_to_string(out.join("report.html")).unwrap();
    let steps = steps_json(&out).len();
    assert_eq!(report.matches("<section class=\"step\"").count(), steps);
    assert!(report.contains("data:image/png;base64,"));
}

/// Every executed action came from an answer that parsed and passed the
/// gate, and its point lay on the model frame.
fn assert_only_valid_actions_ran(steps: &[Value]) {
    for step in steps {
        let Some(executed) = step.get("executed").filter(|e| !e.is_null()) else {
            continue;
        };
        let attempt = step["attempts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["parse"]["status"] == "parsed" && a["parse"]["action"] == executed["model"])
            .unwrap_or_else(|| panic!("no parsed attempt for {executed}"));
        assert_eq!(attempt["verdict"]["verdict"], "allow", "{attempt}");
        if let Some(p) = executed["model"]["point_2d"].as_array() {
            let (w, h) = (
                step["frame"]["model"]["width"].as_f64().unwrap(),
                step["frame"]["model"]["height"].as_f64().unwrap(),
            );
            let (x, y) = (p[0].as_f64().unwrap(), p[1].as_f64().unwrap());
            assert!(
                (0.0..=w).contains(&x) && (0.0..=h).contains(&y),
                "{executed}"
            );
        }
    }
}

/// `btl run ARGS… --device SERIAL --adb-port PORT --json --out DIR` on a
/// served virtual phone; returns the printed result and the trajectory.
fn run_over_adb(
    phone: &ServedPhone,
    adb: &AdbServer,
    dir: &Dir,
    extra: &[&str],
) -> (Value, std::path::PathBuf) {
    let out = dir.path("episode");
    let port = adb.port().to_string();
    let mut args = vec![
        "run",
        "--device",
        &phone.serial,
        "--adb-port",
        &port,
        "--json",
        "--out",
        path_str(&out),
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&FAST_SETTLE);
    let run = dir.btl(&args);
    assert!(run.status.success(), "{}", stderr(&run));
    (serde_json::from_str(stdout(&run).trim()).unwrap(), out)
}

#[test]
fn an_episode_through_real_adb_with_the_oracle_succeeds() {
    let phone = ServedPhone::start(&["--seed", "11"]);
    let adb = AdbServer::start();
    let dir = Dir::new();
    let (result, out) = run_over_adb(
        &phone,
        &adb,
        &dir,
        &["--task", "location_on", "--policy", "oracle"],
    );
    assert_eq!(result["outcome"]["success"], true, "{result}");
    let episode = episode_json(&out);
    assert_eq!(episode["device"], phone.serial);
    // The checker read the setting back through adb, as on a real phone.
    let setting = adb.adb([
        "-s",
        &phone.serial,
        "shell",
        "settings",
        "get",
        "secure",
        "location_mode",
    ]);
    assert_ne!(String::from_utf8_lossy(&setting.stdout).trim(), "0");
    assert_only_valid_actions_ran(&steps_json(&out));
}

#[cfg(feature = "llama")]
#[test]
fn an_episode_through_real_adb_with_the_default_model_stops_cleanly() {
    let phone = ServedPhone::start(&["--seed", "12"]);
    let adb = AdbServer::start();
    let dir = Dir::new();
    let (result, out) = run_over_adb(
        &phone,
        &adb,
        &dir,
        &[
            "--task",
            "wifi_on",
            "--max-steps",
            "3",
            "--max-tokens",
            "300",
        ],
    );
    // Which clean stop depends on the model's greedy tokens, whose
    // rounding the CPU's kernels decide; a failure to answer or to act is
    // never one.
    let reason = result["outcome"]["stop"]["reason"]
        .as_str()
        .unwrap_or_default();
    assert!(
        ["succeeded", "finished", "step_budget", "repeated_action"].contains(&reason),
        "{result}"
    );
    let steps = steps_json(&out);
    assert!(
        steps
            .iter()
            .any(|s| s.get("executed").is_some_and(|e| !e.is_null())),
        "no action ran: {result}"
    );
    assert_only_valid_actions_ran(&steps);
}

#[test]
fn a_killed_run_resumes_on_a_rebuilt_phone_and_succeeds() {
    let dir = Dir::new();
    let out = dir.path("episode");
    // Slow settling keeps the episode running long enough to kill it.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_btl"))
        .args([
            "run",
            "--task",
            "note_create",
            "--policy",
            "oracle",
            "--seed",
            "4",
            "--settle-poll-ms",
            "300",
            "--settle-timeout-ms",
            "900",
            "--out",
            path_str(&out),
        ])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let steps = out.join("steps.jsonl");
    // Whole lines only: the kill may land in the middle of one, which the
    // resume drops.
    let whole_lines =
        || std::fs::read(&steps).map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count());
    while whole_lines() < 2 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before it was killed"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let before = whole_lines();
    assert!(
        episode_json(&out)["outcome"].is_null(),
        "killed: no outcome"
    );
    // Another policy may not continue it: the trajectory would mix two
    // policies' steps. Refused before anything is written.
    #[cfg(feature = "llama")]
    {
        let recorded = std::fs::read(out.join("episode.json")).unwrap();
        let other = dir.btl(["run", "--resume", path_str(&out)]);
        assert_eq!(other.status.code(), Some(2), "{}", stderr(&other));
        assert!(
            stderr(&other).contains(
                "holds an episode of oracle of note_create, and this run's policy is btl-mini-q8_0.gguf"
            ),
            "{}",
            stderr(&other)
        );
        assert_eq!(std::fs::read(out.join("episode.json")).unwrap(), recorded);
    }

    // A recorded task whose parameters this btl's suite would not draw
    // for the seed (another btl version, an edited file) is refused,
    // naming each differing parameter.
    let recorded = std::fs::read(out.join("episode.json")).unwrap();
    let mut edited: Value = serde_json::from_slice(&recorded).unwrap();
    let params = edited["task"]["params"].as_object_mut().unwrap();
    let (key, value) = params.iter_mut().next().unwrap();
    let (key, was) = (key.clone(), value.clone());
    *value = "Not drawn".into();
    std::fs::write(out.join("episode.json"), edited.to_string()).unwrap();
    let other = dir.btl(["run", "--resume", path_str(&out), "--policy", "oracle"]);
    assert_eq!(other.status.code(), Some(2), "{}", stderr(&other));
    let named = format!(
        "has other parameters in this btl than recorded (params.{key}: \"Not drawn\" there, {was} here)"
    );
    assert!(stderr(&other).contains(&named), "{}", stderr(&other));
    std::fs::write(out.join("episode.json"), &recorded).unwrap();

    // The episode's own settings go on: flags that would change them are
    // refused rather than left silently unused.
    let mut flagged = vec![
        "run",
        "--resume",
        path_str(&out),
        "--policy",
        "oracle",
        "--max-steps",
        "4",
        "--vote",
        "2",
    ];
    let refused = dir.btl(&flagged);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("--max-steps, --vote do not apply to a resumed episode"),
        "{}",
        stderr(&refused)
    );
    flagged.truncate(5);
    flagged.extend_from_slice(&FAST_SETTLE);
    let refused = dir.btl(&flagged);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("--settle-poll-ms, --settle-timeout-ms do not apply"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(std::fs::read(out.join("episode.json")).unwrap(), recorded);

    let args = [
        "run",
        "--resume",
        path_str(&out),
        "--policy",
        "oracle",
        "--json",
    ];
    let run = dir.btl(args);
    assert!(run.status.success(), "{}", stderr(&run));
    assert!(
        stderr(&run).contains("recorded actions replayed"),
        "{}",
        stderr(&run)
    );
    let result: Value = serde_json::from_str(stdout(&run).trim()).unwrap();
    assert_eq!(result["outcome"]["success"], true, "{result}");
    let episode = episode_json(&out);
    assert_eq!(episode["resumed_at_steps"], serde_json::json!([before]));
    // A finished episode is not resumed again.
    let again = dir.btl(["run", "--resume", path_str(&out), "--policy", "oracle"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        stderr(&again).contains("nothing to resume"),
        "{}",
        stderr(&again)
    );
}

/// A decoding budget too small for any constrained answer on the phone's
/// frame is refused before the episode starts (exit 2, nothing recorded),
/// naming the smallest budget that holds one: one token less is refused,
/// that budget runs a step.
#[test]
#[cfg(feature = "llama")]
fn a_budget_no_answer_fits_is_refused_before_the_episode() {
    let dir = Dir::new();
    let run = |tokens: &str, out: &str| {
        let out = dir.path(out);
        let mut args = vec![
            "run",
            "--task",
            "wifi_on",
            "--max-steps",
            "1",
            "--max-tokens",
            tokens,
            "--out",
            path_str(&out),
        ];
        args.extend_from_slice(&TINY_MODEL);
        (dir.btl(&args), out)
    };
    let (small, out) = run("10", "small");
    let err = stderr(&small);
    assert_eq!(small.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--max-tokens 10: a budget of 10 tokens cannot hold a constrained BTL answer"),
        "{err}"
    );
    assert!(!out.join("episode.json").exists(), "{err}");
    let needed: u32 = err
        .split("give at least ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no budget named: {err}"));
    let (short, _) = run(&(needed - 1).to_string(), "short");
    assert_eq!(short.status.code(), Some(2), "{}", stderr(&short));
    let (enough, out) = run(&needed.to_string(), "enough");
    assert!(enough.status.success(), "{}", stderr(&enough));
    let steps = std::fs::read_to_string(out.join("steps.jsonl")).unwrap();
    assert!(
        !steps.contains("cannot hold a constrained BTL answer"),
        "{steps}"
    );
}
