//! `btl sim env` as an RL engine's worker drives it: the real binary behind
//! scripts/ms-swift/btl_env.py: several environments from several Python
//! threads, a refused request, and the episodes recorded under `--dir` as
//! `btl run` records them.

use crate::util::*;
use serde_json::Value;
use std::process::Command;

const CLIENT_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/ms-swift");

/// Plays three environments at once, each from its own thread, with the
/// teacher's answers (the observation's `teacher`), then makes a request
/// the server refuses. Prints one JSON summary.
const DRIVER: &str = r#"
import json, sys, threading
sys.path.insert(0, sys.argv[1])
from btl_env import BtlEnvError, BtlEnvServer

results, envs = {}, []

def play(server, task, seed):
    env = server.env()
    first = env.reset(task, seed=seed, split="heldout", max_pixels=50176, teacher=True)
    answer, rewards = first["observation"]["teacher"], []
    while True:
        step = env.step(answer)
        rewards.append(step["reward"]["process"]["total"] + step["reward"]["outcome"])
        if step["done"]:
            results[task] = {"env": env.name, "why": step["why"]["reason"],
                             "success": step["success"], "rewards": rewards,
                             "screenshot": first["observation"]["screenshot"]}
            envs.append(env)
            return
        answer = step["observation"]["teacher"]

with BtlEnvServer(args=["--dir", sys.argv[2]]) as server:
    threads = [threading.Thread(target=play, args=(server, task, seed))
               for seed, task in enumerate(["wifi_on", "alarm_set", "note_create"])]
    for t in threads: t.start()
    for t in threads: t.join()
    # Closed only now, so that no name is handed out twice.
    for env in envs: env.close()
    try:
        server.env("x").step("<link>")
        results["refused"] = None
    except BtlEnvError as e:
        results["refused"] = str(e)
print(json.dumps(results))
"#;

#[test]
fn the_python_client_plays_environments_in_parallel_threads() {
    let dir = Dir::new();
    let driver = dir.write("driver.py", DRIVER);
    let out = Command::new("python3")
        .arg(driver)
        .arg(CLIENT_DIR)
        .arg(dir.path("episodes"))
        .env("BTL_BIN", env!("CARGO_BIN_EXE_btl"))
        .output()
        .expect("python3 runs (scripts/test needs it for libtorch already)");
    assert!(out.status.success(), "{}", stderr(&out));
    let results: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let mut names = Vec::new();
    for task in ["wifi_on", "alarm_set", "note_create"] {
        let result = &results[task];
        assert_eq!(result["why"], "finished", "{task}: {result}");
        assert_eq!(result["success"], true, "{task}: {result}");
        // Each teacher answer earns the whole format credit at least, and
        // the Finish that ends a done task the outcome reward of 1.
        let rewards = result["rewards"].as_array().unwrap();
        assert!(
            rewards.iter().all(|r| r.as_f64().unwrap() >= 0.1),
            "{task}: {rewards:?}"
        );
        assert!(
            rewards.last().unwrap().as_f64().unwrap() >= 1.0,
            "{task}: {rewards:?}"
        );
        let env = result["env"].as_str().unwrap();
        names.push(env.to_owned());
        // Recorded under --dir as `btl run` records an episode.
        let episode = episode_json(&dir.path(&format!("episodes/{env}/episode-0001")));
        assert_eq!(episode["task"]["name"], task);
        assert_eq!(episode["outcome"]["success"], true);
        let shot = result["screenshot"].as_str().unwrap();
        assert!(shot.starts_with(path_str(&dir.path("episodes"))), "{shot}");
        assert!(std::path::Path::new(shot).is_file());
    }
    names.sort();
    assert_eq!(
        names,
        ["0", "1", "2"],
        "the server numbers unnamed environments"
    );
    let refused = results["refused"].as_str().unwrap();
    assert!(refused.contains("no environment x"), "{refused}");
}
