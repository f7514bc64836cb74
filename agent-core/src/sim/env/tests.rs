//! The line protocol end to end, in process: a server on a socket pair,
//! driven as a client would drive `btl sim env`.

use super::*;
use crate::agent::StopReason;
use crate::agent::trajectory::{StepOutcome, read_trajectory};
use base64::Engine;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

struct Client {
    to: UnixStream,
    from: BufReader<UnixStream>,
    server: std::thread::JoinHandle<std::io::Result<()>>,
}

impl Client {
    fn start(options: EnvOptions) -> Self {
        let (to, server_in) = UnixStream::pair().unwrap();
        let (server_out, from) = UnixStream::pair().unwrap();
        // A hung server fails the test instead of stalling it.
        from.set_read_timeout(Some(Duration::from_secs(120)))
            .unwrap();
        let server =
            std::thread::spawn(move || serve(BufReader::new(server_in), server_out, options));
        Self {
            to,
            from: BufReader::new(from),
            server,
        }
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        self.to.write_all(bytes).unwrap();
    }

    fn send(&mut self, request: Value) {
        self.send_raw(format!("{request}\n").as_bytes());
    }

    fn recv(&mut self) -> Value {
        let mut line = String::new();
        self.from.read_line(&mut line).unwrap();
        assert!(line.ends_with('\n'), "a whole line, not {line:?}");
        serde_json::from_str(&line).unwrap()
    }

    fn call(&mut self, request: Value) -> Value {
        self.send(request);
        self.recv()
    }

    /// Ends the input; the server ends every environment and returns.
    fn finish(self) {
        self.to.shutdown(std::net::Shutdown::Write).unwrap();
        self.server.join().unwrap().unwrap();
    }
}

fn reset(env: &str, task: &str, seed: u64) -> Value {
    json!({"id": format!("reset-{env}"), "op": "reset", "env": env, "task": task,
           "seed": seed, "max_pixels": 50176, "teacher": true})
}

fn step(env: &str, answer: &str) -> Value {
    json!({"id": format!("step-{env}"), "op": "step", "env": env, "answer": answer})
}

fn teacher(response: &Value) -> String {
    response["observation"]["teacher"]
        .as_str()
        .unwrap_or_else(|| panic!("no teacher answer in {response}"))
        .to_owned()
}

fn is_finish(answer: &str) -> bool {
    answer.contains(r#""function": "Finish""#)
}

/// Plays `env` with the teacher's answers to the end, from `answer` (the
/// teacher's on the current screen); the responses.
fn play_teacher(client: &mut Client, env: &str, mut answer: String) -> Vec<Value> {
    let mut responses = Vec::new();
    loop {
        let response = client.call(step(env, &answer));
        assert_eq!(response["ok"], true, "{response}");
        let done = response["done"] == true;
        if !done {
            answer = teacher(&response);
        }
        responses.push(response);
        if done {
            return responses;
        }
        assert!(responses.len() < 30, "the teacher never finished");
    }
}

#[test]
fn the_teachers_answers_complete_the_task_for_full_process_and_outcome_rewards() {
    let mut client = Client::start(EnvOptions::default());
    let first = {
        client.send(reset("a", "wifi_on", 3));
        client.recv()
    };
    assert_eq!(first["ok"], true, "{first}");
    assert_eq!(first["id"], "reset-a");
    assert_eq!(first["env"], "a");
    assert_eq!(first["done"], false);
    assert_eq!(first["goal"], "Turn on Wi-Fi.");
    let observation = &first["observation"];
    assert_eq!(observation["turn"], 0);
    assert_eq!(observation["step"], 1);
    assert_eq!(observation["image_size"], json!([1080, 2400]));
    assert!(
        observation["prompt"]["user"]
            .as_str()
            .unwrap()
            .contains("Turn on Wi-Fi.")
    );
    let png = std::fs::read(observation["screenshot"].as_str().unwrap()).unwrap();
    let image = image::load_from_memory(&png).unwrap();
    assert_eq!((image.width(), image.height()), (1080, 2400));

    let mut answer = teacher(&first);
    let mut steps = 0;
    let last = loop {
        let response = client.call(step("a", &answer));
        assert_eq!(response["id"], "step-a");
        let process = &response["reward"]["process"];
        // The answer is the reward's own solution: a well-formed answer whose
        // action matches. Released mode (the plugin) predates Finish and
        // gives it no link credit; the outcome reward is its credit.
        assert_eq!(process["format"], 1.0, "{response}");
        let link = if is_finish(&answer) { 0.0 } else { 1.0 };
        assert_eq!(process["link"], link, "{answer}");
        assert_eq!(response["reward"]["target"], answer.as_str());
        steps += 1;
        if response["done"] == true {
            break response;
        }
        assert_eq!(response["reward"]["outcome"], 0.0);
        assert_eq!(response["observation"]["step"], steps + 1);
        answer = teacher(&response);
    };
    assert!(is_finish(&answer), "the last answer was {answer}");
    assert_eq!(last["why"]["reason"], "finished");
    assert_eq!(last["success"], true);
    assert_eq!(last["reward"]["outcome"], 1.0);
    assert_eq!(last["steps"], steps);
    assert_eq!(last["observation"], Value::Null);
    // The episode is over: a step needs a reset first.
    let after = client.call(step("a", &answer));
    assert_eq!(after["ok"], false);
    assert!(
        after["error"].as_str().unwrap().contains("reset it"),
        "{after}"
    );
    client.finish();
}

#[test]
fn a_wrong_finish_ends_the_episode_without_outcome_reward() {
    let mut client = Client::start(EnvOptions::default());
    client.send(reset("0", "wifi_on", 3));
    let answer = teacher(&client.recv());
    let link = answer.find("<link>").unwrap();
    let finish = format!(
        "{}<link>```json\n[{{\"Plan\": \"Done.\", \"Action\": {{\"function\": \"Finish\"}}}}]\n```</link>",
        &answer[..link]
    );
    let last = client.call(step("0", &finish));
    assert_eq!(last["done"], true, "{last}");
    assert_eq!(last["why"]["reason"], "finished");
    assert_eq!(last["success"], false);
    assert_eq!(last["reward"]["outcome"], 0.0);
    client.finish();
}

#[test]
fn the_same_seed_and_answers_give_the_same_screens_and_rewards() {
    let mut client = Client::start(EnvOptions {
        dir: None,
        ..EnvOptions::default()
    });
    let mut runs = Vec::new();
    for env in ["a", "b"] {
        client.send(
            json!({"op": "reset", "env": env, "task": "alarm_set", "seed": 7,
                           "split": "train", "max_pixels": 50176, "teacher": true,
                           "image": "base64"}),
        );
        let first = client.recv();
        runs.push(play_teacher(&mut client, env, teacher(&first)));
        runs.last_mut().unwrap().insert(0, first);
    }
    assert_eq!(runs[0].len(), runs[1].len());
    for (a, b) in runs[0].iter().zip(&runs[1]) {
        let (mut a, mut b) = (a.clone(), b.clone());
        for r in [&mut a, &mut b] {
            for key in ["env", "id", "dir"] {
                r[key] = Value::Null;
            }
        }
        assert_eq!(a, b);
    }
    // Another seed is another instance.
    client.send(
        json!({"op": "reset", "env": "c", "task": "alarm_set", "seed": 8,
                       "split": "train", "max_pixels": 50176}),
    );
    let other = client.recv();
    client.send(
        json!({"op": "reset", "env": "a", "task": "alarm_set", "seed": 7,
                       "split": "train", "max_pixels": 50176}),
    );
    let again = client.recv();
    assert_eq!(again["seed"], crate::sim::tasks::Split::Train.seed(7));
    assert_eq!(again["goal"], runs[0][0]["goal"]);
    assert_ne!(
        other["goal"], again["goal"],
        "the alarm's time is drawn from the seed"
    );
    client.finish();
}

#[test]
fn base64_observations_hold_the_png() {
    let mut client = Client::start(EnvOptions::default());
    client.send(json!({"op": "reset", "task": "wifi_on", "image": "base64"}));
    let first = client.recv();
    let observation = &first["observation"];
    assert!(observation.get("screenshot").is_none());
    assert!(observation.get("teacher").is_none());
    let png = base64::engine::general_purpose::STANDARD
        .decode(observation["screenshot_base64"].as_str().unwrap())
        .unwrap();
    let image = image::load_from_memory_with_format(&png, image::ImageFormat::Png).unwrap();
    assert_eq!(
        json!([image.width(), image.height()]),
        observation["image_size"]
    );
    client.finish();
}

#[test]
fn bad_requests_get_error_lines_and_change_nothing() {
    let mut client = Client::start(EnvOptions::default());
    let refused = [
        (
            json!({"id": 1, "op": "step", "env": 0, "answer": "x"}),
            "no environment 0",
        ),
        (
            json!({"id": 2, "op": "close", "env": "zz"}),
            "no environment zz",
        ),
        (
            json!({"id": 3, "op": "reset", "task": "fly_to_mars"}),
            "no task named 'fly_to_mars'",
        ),
        (
            json!({"id": 4, "op": "reset", "task": "wifi_on", "max_pixels": 10}),
            "max_pixels 10",
        ),
        (
            json!({"id": 5, "op": "reset", "task": "wifi_on", "profile": "gpt"}),
            "unknown variant `gpt`",
        ),
        (
            json!({"id": 6, "op": "reset", "task": "wifi_on", "env": "../etc"}),
            "is not 1 to 64",
        ),
    ];
    for (request, reason) in refused {
        let response = client.call(request.clone());
        assert_eq!(response["ok"], false, "{request}");
        assert_eq!(response["id"], request["id"]);
        let error = response["error"].as_str().unwrap();
        assert!(error.contains(reason), "{request}: {error}");
    }
    client.send_raw(b"{\"op\": \xff}\n");
    assert!(
        client.recv()["error"]
            .as_str()
            .unwrap()
            .contains("line 7: not UTF-8")
    );
    client.send_raw(b"not json\n\n   \n");
    assert!(
        client.recv()["error"]
            .as_str()
            .unwrap()
            .contains("line 8: not JSON")
    );
    let mut long = vec![b' '; request::MAX_LINE + 10];
    long.push(b'\n');
    client.send_raw(&long);
    let error = client.recv();
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .contains("line 11: longer than"),
        "{error}"
    );
    // None of it opened an environment: the first reset gets number 0.
    let first = client.call(json!({"op": "reset", "task": "wifi_on"}));
    assert_eq!(first["env"], "0", "{first}");
    assert_eq!(first["ok"], true);
    // A bad answer is played, not refused: it earns nothing and the agent
    // asks again.
    let bad = client.call(json!({"op": "step", "env": 0, "answer": "<link>{</link>"}));
    assert_eq!(bad["ok"], true);
    assert_eq!(bad["reward"]["process"]["total"], 0.0);
    assert_eq!(bad["observation"]["step"], 1);
    assert_eq!(bad["observation"]["turn"], 1);
    client.finish();
}

/// Instance 2^40 of a split would be its instance 0 again: a reset past
/// a split's last instance is refused, as `btl run` refuses it.
#[test]
fn a_seed_past_its_splits_last_instance_is_refused() {
    let mut client = Client::start(EnvOptions::default());
    let response = client
        .call(json!({"op": "reset", "task": "wifi_on", "split": "heldout", "seed": 1u64 << 40}));
    assert_eq!(response["ok"], false, "{response}");
    let error = response["error"].as_str().unwrap();
    assert!(
        error.contains("run past the last instance of the heldout split"),
        "{error}"
    );
    let last = client.call(
        json!({"op": "reset", "task": "wifi_on", "split": "heldout", "seed": (1u64 << 40) - 1}),
    );
    assert_eq!(last["ok"], true, "{last}");
    client.finish();
}

#[test]
fn many_environments_play_at_once_up_to_the_limit() {
    let mut client = Client::start(EnvOptions {
        max_envs: 6,
        ..EnvOptions::default()
    });
    let names: Vec<String> = (0..6).map(|k| format!("e{k}")).collect();
    for (k, env) in names.iter().enumerate() {
        let task = ["wifi_on", "alarm_set", "note_create"][k % 3];
        client.send(json!({"id": env, "op": "reset", "env": env, "task": task,
                           "seed": k, "max_pixels": 50176, "teacher": true}));
    }
    client.send(json!({"id": "x", "op": "reset", "env": "e6", "task": "wifi_on"}));
    // The refusal comes from the reader, the six resets from their threads,
    // in whatever order.
    let mut answers = BTreeMap::new();
    for _ in 0..7 {
        let response = client.recv();
        let id = response["id"].as_str().unwrap().to_owned();
        if id == "x" {
            assert_eq!(response["ok"], false);
            assert!(
                response["error"]
                    .as_str()
                    .unwrap()
                    .contains("6 environments are open")
            );
        } else {
            answers.insert(id, teacher(&response));
        }
    }
    assert_eq!(answers.len(), 6);
    // Step them all, then collect: requests to different environments are
    // in flight together.
    let mut done = BTreeMap::new();
    while done.len() < names.len() {
        let playing: Vec<String> = names
            .iter()
            .filter(|n| !done.contains_key(*n))
            .cloned()
            .collect();
        for env in &playing {
            client.send(json!({"id": env, "op": "step", "env": env, "answer": answers[env]}));
        }
        for _ in &playing {
            let response = client.recv();
            let env = response["id"].as_str().unwrap().to_owned();
            assert_eq!(response["env"], env.as_str());
            if response["done"] == true {
                done.insert(env, response);
            } else {
                answers.insert(env, teacher(&response));
            }
        }
    }
    for (env, last) in &done {
        assert_eq!(last["success"], true, "{env}: {last}");
        assert_eq!(last["reward"]["outcome"], 1.0);
    }
    let closed = client.call(json!({"id": "c", "op": "close", "env": "e0"}));
    assert_eq!(
        closed,
        json!({"id": "c", "ok": true, "env": "e0", "closed": true, "episodes": 1})
    );
    let opened = client.call(json!({"op": "reset", "env": "e6", "task": "wifi_on"}));
    assert_eq!(opened["ok"], true, "{opened}");
    client.finish();
}

#[test]
fn a_reset_mid_episode_starts_over_and_recorded_episodes_are_trajectories() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = Client::start(EnvOptions {
        dir: Some(dir.path().to_owned()),
        ..EnvOptions::default()
    });
    client.send(reset("r", "wifi_on", 3));
    let first = client.recv();
    let answer = teacher(&first);
    let second = client.call(step("r", &answer));
    assert_eq!(second["done"], false);
    let again = client.call(reset("r", "wifi_on", 3));
    assert_eq!(again["episode"], 2);
    assert_eq!(again["observation"]["step"], 1);
    assert_eq!(
        again["observation"]["teacher"], first["observation"]["teacher"],
        "a new episode starts on the first screen"
    );
    let responses = play_teacher(&mut client, "r", teacher(&again));
    assert_eq!(responses.last().unwrap()["success"], true);
    client.finish();
    // Both episodes are on disk as `btl run` writes them, with the teacher's
    // answers as targets (what `btl-train data` relabels with).
    let first_episode = read_trajectory(&dir.path().join("r/episode-0001")).unwrap();
    // One step performed, then the one the reset cut short.
    assert_eq!(first_episode.steps.len(), 2);
    assert_eq!(first_episode.steps[0].outcome, StepOutcome::Performed);
    assert_eq!(
        first_episode.steps[0].target.as_deref(),
        Some(answer.as_str())
    );
    assert_eq!(
        first_episode.episode.outcome.unwrap().stop,
        StopReason::Cancelled
    );
    // The step the client was answered for records the process reward the
    // response gave it.
    assert_eq!(
        first_episode.steps[0].reward,
        second["reward"]["process"]["total"].as_f64()
    );
    let second_episode = read_trajectory(&dir.path().join("r/episode-0002")).unwrap();
    assert_eq!(second_episode.steps.len(), responses.len());
    assert!(second_episode.steps.iter().all(|s| s.target.is_some()));
    for (step, response) in second_episode.steps.iter().zip(&responses) {
        assert_eq!(step.reward, response["reward"]["process"]["total"].as_f64());
    }
    assert_eq!(second_episode.episode.outcome.unwrap().success, Some(true));
}

#[test]
fn close_and_the_end_of_input_end_the_episodes_in_play() {
    let mut client = Client::start(EnvOptions::default());
    client.send(reset("a", "wifi_on", 1));
    client.send(reset("b", "alarm_set", 2));
    for _ in 0..2 {
        assert_eq!(client.recv()["ok"], true);
    }
    // Mid-episode: the close cancels a's episode and is answered once.
    let closed = client.call(json!({"id": "c", "op": "close", "env": "a"}));
    assert_eq!(
        closed,
        json!({"id": "c", "ok": true, "env": "a", "closed": true, "episodes": 1})
    );
    let gone = client.call(step("a", "x"));
    assert!(gone["error"].as_str().unwrap().contains("no environment a"));
    // b is still waiting for its answer when the input ends.
    client.finish();
}

/// Lines a server writes, kept for a test to read.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl Write for Lines {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Lines {
    fn parsed(&self) -> Vec<Value> {
        let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// A client that sends steps without waiting for their answers gets
/// exactly one answer for each, and the environment plays on.
#[test]
fn a_client_that_does_not_wait_gets_one_answer_per_request() {
    let mut client = Client::start(EnvOptions::default());
    let opened = client.call(reset("a", "alarm_set", 3));
    assert_eq!(opened["ok"], true, "{opened}");
    let back = r#"<blink>```json
[]
```</blink>
<think>Go back.</think>
<link>```json
[{"Plan": "Go back.", "Action": {"function": "Back"}}]
```</link>"#;
    let sent = 4 * QUEUE;
    let burst: String = (0..sent)
        .map(|i| {
            format!(
                "{}\n",
                json!({"id": i, "op": "step", "env": "a", "answer": back})
            )
        })
        .collect();
    client.send_raw(burst.as_bytes());
    let mut answered = vec![0; sent];
    for _ in 0..sent {
        answered[client.recv()["id"].as_u64().unwrap() as usize] += 1;
    }
    assert!(answered.iter().all(|&n| n == 1), "{answered:?}");
    let closed = client.call(json!({"id": "c", "op": "close", "env": "a"}));
    assert_eq!(closed["ok"], true, "{closed}");
    client.finish();
}

/// An environment that reads nothing holds `QUEUE` requests; the next is
/// refused at once, by name, and reaches it never.
#[test]
fn requests_beyond_the_queue_are_refused() {
    let lines = Lines::default();
    let root = tempfile::tempdir().unwrap();
    let shared = Arc::new(episode::Shared {
        out: Responder::new(lines.clone()),
        root: root.path().to_owned(),
        record: false,
        reward_mode: RewardMode::default(),
        weights: Weights::default(),
        phone: PhoneConfig::default(),
    });
    let (commands, queued) = mpsc::sync_channel(QUEUE);
    let env = EnvId("a".into());
    let mut envs = BTreeMap::from([(
        env.clone(),
        Handle {
            commands,
            thread: std::thread::spawn(|| {}),
        },
    )]);
    for i in 0..=QUEUE {
        let request = Request::Step {
            env: env.clone(),
            answer: "x".into(),
        };
        route(
            Envelope {
                id: json!(i),
                request,
            },
            &mut envs,
            &shared,
            4,
        );
    }
    let lines = lines.parsed();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["id"], QUEUE);
    let error = lines[0]["error"].as_str().unwrap();
    assert!(
        error.contains("environment a has 8 requests waiting"),
        "{error}"
    );
    let waiting: Vec<Value> = queued.try_iter().map(|c| c.id().clone()).collect();
    assert_eq!(waiting, (0..QUEUE).map(|i| json!(i)).collect::<Vec<_>>());
}

/// A bug that panics while an environment plays: the request the client
/// waits on is answered with an error naming it; without a panic the
/// guard only passes the result on.
#[test]
fn a_panic_answers_the_waiting_request() {
    let lines = Lines::default();
    let out = Responder::new(lines.clone());
    let env = EnvId("a".into());
    assert_eq!(
        episode::guarded(&out, &env, || Some(json!(1)), || 5),
        Some(5)
    );
    assert!(lines.parsed().is_empty());
    let failed: Option<()> = episode::guarded(
        &out,
        &env,
        || Some(json!("step-a")),
        || panic!("index 9 out of range"),
    );
    assert_eq!(failed, None);
    let lines = lines.parsed();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["id"], "step-a");
    assert_eq!(lines[0]["ok"], false);
    let error = lines[0]["error"].as_str().unwrap();
    assert!(
        error.contains("environment a failed") && error.contains("index 9 out of range"),
        "{error}"
    );
}
