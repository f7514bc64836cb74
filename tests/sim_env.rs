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

/// Runs the Python `driver` with the client's directory and DIR/episodes
/// as its arguments and the real `btl`; the JSON it prints.
fn run_driver(dir: &Dir, driver: &str) -> Value {
    let driver = dir.write("driver.py", driver);
    let out = Command::new("python3")
        .arg(driver)
        .arg(CLIENT_DIR)
        .arg(dir.path("episodes"))
        .env("BTL_BIN", env!("CARGO_BIN_EXE_btl"))
        .output()
        .expect("python3 runs (scripts/test needs it for libtorch already)");
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

#[test]
fn the_python_client_plays_environments_in_parallel_threads() {
    let dir = Dir::new();
    let results = run_driver(&dir, DRIVER);
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

/// The ms-swift plugin's hooks (ms-swift's own classes stood in for: the
/// hooks are what is tested) against the real server, limited to one open
/// environment: a batch that fails at its second row closes the episode
/// its first row opened, and a step that fails drops its rollout and
/// closes its episode, so in both cases the next reset finds the server's
/// one environment free.
const PLUGIN_DRIVER: &str = r#"
import asyncio, json, os, sys, types
sys.path.insert(0, sys.argv[1])

class MultiTurnScheduler:
    def __init__(self, max_turns=None, **kwargs):
        self.max_turns = max_turns

stubs = {name: types.ModuleType(name) for name in
         ["swift", "swift.rollout", "swift.rollout.multi_turn", "swift.rewards"]}
stubs["swift.rollout.multi_turn"].MultiTurnScheduler = MultiTurnScheduler
stubs["swift.rollout.multi_turn"].multi_turns = {}
stubs["swift.rewards"].ORM = object
stubs["swift.rewards"].orms = {}
sys.modules.update(stubs)
os.environ["BTL_ENV_ARGS"] = f"--max-envs 1 --dir {sys.argv[2]}"
os.environ["MAX_PIXELS"] = "50176"
import btl_env_plugin as plugin

class Request:
    def __init__(self, row):
        self.data_dict, self.messages = row, []

results = {}
scheduler = plugin.BtlPhoneScheduler(max_turns=30)
try:
    asyncio.run(scheduler.on_trajectory_start(
        [Request({"btl_task": "wifi_on"}), Request({"btl_task": "no_such_task"})]))
except Exception as e:
    results["batch"] = str(e)
results["open_after_batch"] = len(scheduler._rollouts)

request = Request({"btl_task": "wifi_on", "btl_seed": 1})
asyncio.run(scheduler.on_trajectory_start([request]))
results["started"] = len(request.messages)
rollout = scheduler._rollouts[request.data_dict[plugin._KEY]]
def lost(answer):
    raise ConnectionError("lost the connection")
rollout.env.step = lost
choice = types.SimpleNamespace(message=types.SimpleNamespace(content="<link>"))
try:
    asyncio.run(scheduler.on_turn_end(request, choice, 1))
except ConnectionError as e:
    results["step"] = str(e)
results["open_after_step"] = len(scheduler._rollouts)

again = Request({"btl_task": "alarm_set", "btl_seed": 2})
asyncio.run(scheduler.on_trajectory_start([again]))
results["reopened"] = len(again.messages)
plugin._env_server().close()
print(json.dumps(results))
"#;

#[test]
fn the_ms_swift_plugin_closes_the_episodes_of_failed_rollouts() {
    let results = run_driver(&Dir::new(), PLUGIN_DRIVER);
    // The second row was refused (no such task, or no free environment
    // while the first row's episode held the only one).
    let batch = results["batch"].as_str().unwrap();
    assert!(
        batch.contains("no_such_task") || batch.contains("environments are open"),
        "{batch}"
    );
    assert_eq!(results["open_after_batch"], 0);
    assert_eq!(results["started"], 2, "system and user turns: {results}");
    assert_eq!(results["step"], "lost the connection");
    assert_eq!(results["open_after_step"], 0);
    // Only free if both failures closed their episodes.
    assert_eq!(results["reopened"], 2, "{results}");
}
