//! Training runs on the tiny model: the reward rises on a toy task, a
//! resumed run continues bit for bit, bad configurations and data are
//! rejected with messages that say where.

use agent_core::reward::RewardBreakdown;
use agent_core::sample::Sample;
use host_trainer::grpo::checkpoint;
use host_trainer::grpo::log::read_metrics;
use host_trainer::grpo::run::{LOCK_FILE, Progress, run};
use host_trainer::grpo::{Reward, TrainConfig, Trainer};

use crate::util::{btl_train, btl_train_succeeds, checkpoint_dir, tokenizer_file};

/// Toy reward that varies inside groups: the share of the completion's
/// characters that are ASCII digits.
pub struct Digits;

impl Reward for Digits {
    fn score(&self, _: &Sample, completion: &str) -> RewardBreakdown {
        let chars = completion.chars().count().max(1);
        let digits = completion.chars().filter(char::is_ascii_digit).count();
        let total = digits as f64 / chars as f64;
        RewardBreakdown {
            format: 0.0,
            blink: 0.0,
            link: 0.0,
            total,
        }
    }
}

/// Three text-only prompts (no image) in the official sample format.
const SAMPLES: &str = r#"[
 {"images": [], "image_sizes": [[100, 100]], "bbox": [], "solution": "[{\"Action\": {\"function\": \"Back\"}}]",
  "messages": [{"role": "user", "content": "Count to five."}]},
 {"images": [], "image_sizes": [[100, 100]], "bbox": [], "solution": "[{\"Action\": {\"function\": \"Back\"}}]",
  "messages": [{"role": "user", "content": "Which year is it?"}]},
 {"images": [], "image_sizes": [[100, 100]], "bbox": [], "solution": "[{\"Action\": {\"function\": \"Back\"}}]",
  "messages": [{"role": "user", "content": "Open the Settings app and turn on Wi-Fi."}]}
]"#;

/// A toy run in `dir`: LoRA r 8 on every projection, G 8, 6 new tokens.
pub fn toy_config(dir: &std::path::Path, steps: u64) -> TrainConfig {
    std::fs::write(dir.join("samples.json"), SAMPLES).unwrap();
    let text = format!(
        r#"
[model]
checkpoint = "{checkpoint}"
tokenizer = "{tokenizer}"
precision = "f32"
device = "cpu"
[data]
samples = ["samples.json"]
[lora]
r = 8
alpha = 16
dropout = 0.05
[grpo]
num_generations = 8
max_completion_length = 6
temperature = 1.0
top_p = 1.0
top_k = 0
micro_batch = 4
[optim]
lr = 0.02
warmup_ratio = 0.0
[run]
steps = {steps}
seed = 7
output_dir = "out"
save_every = 3
"#,
        checkpoint = checkpoint_dir().display(),
        tokenizer = tokenizer_file().display(),
    );
    let file = dir.join("train.toml");
    std::fs::write(&file, text).unwrap();
    TrainConfig::from_file(&file).unwrap()
}

#[test]
fn reward_rises_on_a_toy_task() {
    let dir = tempfile::tempdir().unwrap();
    let mut trainer = Trainer::new(toy_config(dir.path(), 50), Box::new(Digits)).unwrap();
    let mut rewards = Vec::new();
    for _ in 0..50 {
        let m = trainer.step().unwrap();
        rewards.push(m.reward_mean);
    }
    let first = rewards[..10].iter().sum::<f64>() / 10.0;
    let last = rewards[40..].iter().sum::<f64>() / 10.0;
    assert!(
        last > first + 0.2,
        "mean reward {first:.3} → {last:.3}: no clear rise"
    );
}

/// Every trained value (adapter A and B) of a trainer, bit for bit.
fn adapter_values(trainer: &Trainer) -> Vec<(String, Vec<f32>)> {
    trainer
        .model()
        .lora()
        .unwrap()
        .modules()
        .iter()
        .flat_map(|(m, a, b)| {
            [("A", a), ("B", b)].map(|(which, t)| {
                let flat = t.detach().flatten(0, -1);
                (format!("{m}.{which}"), Vec::<f32>::try_from(flat).unwrap())
            })
        })
        .collect()
}

#[test]
fn a_resumed_run_continues_bit_for_bit() {
    let whole_dir = tempfile::tempdir().unwrap();
    let mut whole = Trainer::new(toy_config(whole_dir.path(), 6), Box::new(Digits)).unwrap();
    let mut whole_metrics = Vec::new();
    for _ in 0..6 {
        whole_metrics.push(whole.step().unwrap());
    }

    let split_dir = tempfile::tempdir().unwrap();
    let config = toy_config(split_dir.path(), 6);
    let mut first = Trainer::new(config.clone(), Box::new(Digits)).unwrap();
    for _ in 0..3 {
        first.step().unwrap();
    }
    let saved = checkpoint::save(&first).unwrap();
    assert_eq!(saved.file_name().unwrap(), "checkpoint-000003");
    drop(first);

    let mut second = Trainer::new(config.clone(), Box::new(Digits)).unwrap();
    let from =
        checkpoint::resume(split_dir.path().join("out").as_path(), config, &mut second).unwrap();
    assert_eq!((from.dir, from.steps_done, from.saved_steps), (saved, 3, 6));
    assert_eq!(second.steps_done(), 3);
    let mut tail = Vec::new();
    for _ in 0..3 {
        tail.push(second.step().unwrap());
    }
    assert_eq!(adapter_values(&second), adapter_values(&whole));
    for (a, b) in tail.iter().zip(&whole_metrics[3..]) {
        assert_eq!(
            (a.step, a.reward_mean, a.loss, a.grad_norm),
            (b.step, b.reward_mean, b.loss, b.grad_norm)
        );
    }
    // The run trained: the adapters moved away from B = 0.
    assert!(
        adapter_values(&whole)
            .iter()
            .any(|(n, v)| n.ends_with(".B") && v.iter().any(|&x| x != 0.0))
    );
}

#[test]
fn the_run_loop_writes_metrics_checkpoints_and_a_plot_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let config = toy_config(dir.path(), 4);
    let out = config.run.output_dir.clone();
    let mut seen = 0;
    let outcome = run(config.clone(), Box::new(Digits), None, |p| {
        seen += u64::from(matches!(p, Progress::Step(_)))
    })
    .unwrap();
    assert_eq!((seen, outcome.steps_done, outcome.resumed_at), (4, 4, 0));
    assert!(
        out.join("checkpoint-000003/adapter/adapter_model.safetensors")
            .is_file()
    );
    assert!(
        out.join("checkpoint-000004/optimizer.safetensors")
            .is_file()
    );
    let png = image::open(&outcome.plot).unwrap();
    // GRPO's six panels (reward, KL, loss, gradient norm, flat groups,
    // held-out accuracy), two per row.
    assert_eq!((png.width(), png.height()), (1200, 3 * 330));
    let lines = read_metrics(&outcome.metrics).unwrap();
    assert_eq!(
        lines.iter().map(|m| m.step).collect::<Vec<_>>(),
        vec![1, 2, 3, 4]
    );

    // While a run holds the directory, a second one is refused before it
    // touches the log or the checkpoints.
    let held = std::fs::File::open(out.join(LOCK_FILE)).unwrap();
    held.try_lock().unwrap();
    let err = run(config.clone(), Box::new(Digits), Some(&out), |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("another btl-train run is training into it now"),
        "{err}"
    );
    drop(held);
    assert_eq!(read_metrics(&outcome.metrics).unwrap().len(), 4);

    // An older checkpoint than the directory's latest is refused: its
    // resumption would cut the log back to step 3 and leave checkpoint 4
    // for the next --resume.
    let err = run(
        config.clone(),
        Box::new(Digits),
        Some(&out.join("checkpoint-000003")),
        |_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("holds a later checkpoint"), "{err}");
    assert!(err.contains("checkpoint-000004"), "{err}");
    assert_eq!(read_metrics(&outcome.metrics).unwrap().len(), 4);

    // A longer run resumed from the output directory: the metrics of steps
    // 1–4 stay once, the new ones follow, and the resumption says that the
    // schedule now runs over 6 steps, not the checkpoint's 4.
    let mut longer = config;
    longer.run.steps = 6;
    let mut resumed = None;
    let outcome = run(longer, Box::new(Digits), Some(&out), |p| {
        if let Progress::Resumed(r) = p {
            resumed = Some((r.dir.clone(), r.steps_done, r.saved_steps));
        }
    })
    .unwrap();
    assert_eq!(resumed, Some((out.join("checkpoint-000004"), 4, 4)));
    assert_eq!((outcome.resumed_at, outcome.steps_done), (4, 6));
    let lines = read_metrics(&outcome.metrics).unwrap();
    assert_eq!(
        lines.iter().map(|m| m.step).collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5, 6]
    );
}

/// `run.profile_steps` records its window when a run resumes inside it.
/// A run killed after step 2's checkpoint, inside the window [2, 3], is
/// made here by taking a whole run's later checkpoints and recording away;
/// its resumption records step 3 and says so.
#[test]
fn a_run_resumed_inside_its_profiled_steps_records_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = toy_config(dir.path(), 4);
    config.run.profile_steps = Some([2, 3]);
    config.run.save_every = 1;
    config.validate().unwrap();
    let out = config.run.output_dir.clone();
    let outcome = run(config.clone(), Box::new(Digits), None, |_| {}).unwrap();
    let summary = std::fs::read_to_string(outcome.profile.unwrap()).unwrap();
    assert!(
        summary.starts_with("steps 2–3 of the run\n2 step(s) recorded"),
        "{summary}"
    );
    for left in ["checkpoint-000003", "checkpoint-000004", "profile"] {
        std::fs::remove_dir_all(out.join(left)).unwrap();
    }
    let outcome = run(config, Box::new(Digits), Some(&out), |_| {}).unwrap();
    assert_eq!((outcome.resumed_at, outcome.steps_done), (2, 4));
    let summary = std::fs::read_to_string(outcome.profile.unwrap()).unwrap();
    assert!(
        summary.starts_with("steps 3–3 of the run\n1 step(s) recorded"),
        "{summary}"
    );
}

/// float64 LoRA adapters are written as F64 and come back exactly.
#[test]
fn f64_adapters_checkpoint_and_resume() {
    use host_trainer::grpo::config::Precision;
    let dir = tempfile::tempdir().unwrap();
    let mut config = toy_config(dir.path(), 2);
    config.model.precision = Some(Precision::F64);
    let mut first = Trainer::new(config.clone(), Box::new(Digits)).unwrap();
    first.step().unwrap();
    checkpoint::save(&first).unwrap();
    let mut second = Trainer::new(config.clone(), Box::new(Digits)).unwrap();
    let out = config.run.output_dir.clone();
    checkpoint::resume(&out, config, &mut second).unwrap();
    let values = |trainer: &Trainer| -> Vec<Vec<f64>> {
        let lora = trainer.model().lora().unwrap();
        lora.modules()
            .iter()
            .flat_map(|(_, a, b)| [a, b])
            .map(|t| {
                assert_eq!(t.kind(), tch::Kind::Double);
                Vec::<f64>::try_from(t.detach().flatten(0, -1)).unwrap()
            })
            .collect()
    };
    assert_eq!(values(&second), values(&first));
}

#[test]
fn bad_data_and_configs_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let config = toy_config(dir.path(), 2);
    let samples = dir.path().join("samples.json");
    // A sample whose bbox has three numbers, on line 3.
    std::fs::write(
        &samples,
        "[\n {\"images\": [], \"image_sizes\": [[10, 10]], \"solution\": \"[{\\\"Action\\\": {\\\"function\\\": \\\"Back\\\"}}]\",\n  \"bbox\": [1, 2, 3], \"messages\": []}\n]",
    )
    .unwrap();
    let err = Trainer::new(config.clone(), Box::new(Digits))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("samples.json") && err.contains("line 2") && err.contains("bbox"),
        "{err}"
    );

    std::fs::write(&samples, "[{\"images\": [\"missing.png\"], \"image_sizes\": [[10, 10]], \"bbox\": [], \"solution\": \"[{\\\"Action\\\": {\\\"function\\\": \\\"Back\\\"}}]\", \"messages\": [{\"role\": \"user\", \"content\": \"<image>\"}]}]").unwrap();
    let err = Trainer::new(config.clone(), Box::new(Digits))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("samples.json")
            && err.contains("sample 0's screenshot")
            && err.contains("missing.png"),
        "{err}"
    );
    // Refused as a run, it leaves no output directory where there was none.
    let out = config.run.output_dir.clone();
    let err = run(config.clone(), Box::new(Digits), None, |_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing.png"), "{err}");
    assert!(!out.exists(), "{}", out.display());
    // The held-out samples are checked as early: a run used to train until
    // its first evaluation before it found one missing.
    let heldout = dir.path().join("heldout.json");
    std::fs::rename(&samples, &heldout).unwrap();
    std::fs::write(&samples, SAMPLES).unwrap();
    let mut with_heldout = config.clone();
    with_heldout.data.heldout = vec![heldout];
    let err = Trainer::new(with_heldout, Box::new(Digits))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("heldout.json") && err.contains("missing.png"),
        "{err}"
    );

    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "[model]\ncheckpoint = \"x\"\n[data]\nsamples = [\"s.json\"]\n[grpo]\nbeta = \"high\"\n[run]\nsteps = 1\noutput_dir = \"o\"\n").unwrap();
    let err = TrainConfig::from_file(&file).unwrap_err().to_string();
    assert!(
        err.contains("bad.toml") && err.contains("line 6") && err.contains("beta"),
        "{err}"
    );

    std::fs::write(&samples, SAMPLES).unwrap();
    let mut other = config.clone();
    other.grpo.beta = 0.5;
    let mut trainer = Trainer::new(config, Box::new(Digits)).unwrap();
    trainer.step().unwrap();
    checkpoint::save(&trainer).unwrap();
    let mut again = Trainer::new(other.clone(), Box::new(Digits)).unwrap();
    let err = checkpoint::resume(&other.run.output_dir.clone(), other, &mut again)
        .unwrap_err()
        .to_string();
    assert!(err.contains("another configuration"), "{err}");
    // The refusal names the key and both values, and nothing else.
    assert!(
        err.contains("(grpo.beta is 0.04 in the checkpoint, 0.5 now; only run.steps"),
        "{err}"
    );
}

/// `btl-train grpo` with a configuration file and flags over it; a bad flag
/// value is refused with the field named (exit 2).
#[test]
fn the_grpo_command_trains_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    toy_config(dir.path(), 2);
    let config = dir.path().join("train.toml");
    let config = config.to_str().unwrap();
    let run = [
        "grpo",
        "--config",
        config,
        "--num-generations",
        "4",
        "--save-every",
        "1",
        "--skip-flat-groups",
        "false",
    ];
    let stdout = btl_train_succeeds(&[&run[..], &["--steps", "2"]].concat());
    assert!(stdout.contains("trained 2 steps"), "{stdout}");
    let state =
        std::fs::read_to_string(dir.path().join("out/checkpoint-000002/trainer_state.json"))
            .unwrap();
    assert!(
        state.contains("\"num_generations\": 4") && state.contains("\"skip_flat_groups\": false"),
        "the flags reached the run: {state}"
    );

    // Starting afresh over the run's checkpoints (a forgotten --resume) is
    // refused, and the run's log is kept as it was.
    let metrics = dir.path().join("out/metrics.jsonl");
    let logged = std::fs::read(&metrics).unwrap();
    let out = btl_train(&[&run[..], &["--steps", "3"]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("holds a run's checkpoints (the last: ")
            && stderr.contains("checkpoint-000002): continue it with --resume"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&metrics).unwrap(), logged);

    let stdout = btl_train_succeeds(&[&run[..], &["--steps", "3", "--resume"]].concat());
    assert!(
        stdout.contains("resumed at step 2") && stdout.contains("trained 3 steps"),
        "{stdout}"
    );

    let out = btl_train(&["grpo", "--config", config, "--top-p", "1.5"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("top_p") && stderr.contains("train.toml"),
        "{stderr}"
    );

    // A value of the wrong type is shown on its own line of the file
    // (line 21 of toy_config's text), not on a line of the table the flags
    // were merged into; a flag's is named by its key.
    let text = std::fs::read_to_string(config).unwrap();
    assert_eq!(text.lines().nth(20), Some("lr = 0.02"));
    let typed = dir.path().join("typed.toml");
    std::fs::write(&typed, text.replace("lr = 0.02", "lr = \"fast\"")).unwrap();
    let out = btl_train(&["grpo", "--config", typed.to_str().unwrap(), "--steps", "1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("typed.toml: TOML parse error at line 21, column 6")
            && stderr.contains("21 | lr = \"fast\""),
        "{stderr}"
    );
    let out = btl_train(&["grpo", "--config", config, "--precision", "half"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("unknown variant `half`") && stderr.contains("in `model.precision`"),
        "{stderr}"
    );
    // A LoRA rank above a weight's own is refused before its factors are
    // made: a rank of a million would fill the memory.
    let fresh = dir.path().join("fresh");
    let out = btl_train(&[
        "grpo",
        "--config",
        config,
        "--lora-r",
        "1000000",
        "--output-dir",
        fresh.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("lora: r = 1000000 is above the rank of model.layers.0.self_attn.q_proj"),
        "{stderr}"
    );
}

/// `btl-train` run in the working directory `cwd`.
fn btl_train_in(cwd: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_btl-train"))
        .current_dir(cwd)
        .args(args)
        .output()
        .expect("btl-train runs")
}

/// A run's checkpoints hold its paths absolute, so it resumes from any
/// working directory, through a link, and after its directory was moved;
/// one that stored them relative (before) still resumes; and the log of a
/// run stopped before its first checkpoint survives a fresh start over it.
#[test]
fn a_run_resumes_from_anywhere_and_keeps_an_earlier_log() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let first = root.join("first");
    std::fs::create_dir(&first).unwrap();
    toy_config(&first, 4);
    let flags = ["--num-generations", "4", "--save-every", "1"];
    let run = |cwd: &std::path::Path, config: &std::path::Path, more: &[&str]| {
        let config = config.to_str().unwrap();
        let out = btl_train_in(
            cwd,
            &[&["grpo", "--config", config][..], &flags, more].concat(),
        );
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{more:?}: {text}");
        text
    };
    let file = std::path::Path::new("train.toml");
    // Started with the file's relative name from its own directory.
    run(&first, file, &["--stop-at", "1"]);
    let state_path = first.join("out/checkpoint-000001/trainer_state.json");
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state_path).unwrap()).unwrap();
    let config = &state["config"];
    assert_eq!(
        config["data"]["samples"][0].as_str(),
        first.join("samples.json").to_str()
    );
    assert_eq!(
        config["run"]["output_dir"].as_str(),
        first.join("out").to_str()
    );

    // From elsewhere, through a link to the run's directory.
    let elsewhere = tempfile::tempdir().unwrap();
    let link = root.join("link");
    std::os::unix::fs::symlink(&first, &link).unwrap();
    let text = run(
        elsewhere.path(),
        &link.join(file),
        &["--stop-at", "2", "--resume"],
    );
    assert!(text.contains("resumed at step 1"), "{text}");

    // A checkpoint as runs wrote them before: paths as the file gave them.
    let state_path = first.join("out/checkpoint-000002/trainer_state.json");
    // (The link's spelling, which the last resume gave.)
    let relative = std::fs::read_to_string(&state_path)
        .unwrap()
        .replace(&format!("{}/", link.display()), "");
    assert!(relative.contains("\"output_dir\": \"out\""), "{relative}");
    std::fs::write(&state_path, relative).unwrap();
    let text = run(&first, file, &["--stop-at", "3", "--resume"]);
    assert!(text.contains("resumed at step 2"), "{text}");

    // The run's directory moved: its old paths are gone.
    let moved = root.join("moved");
    std::fs::rename(&first, &moved).unwrap();
    let text = run(elsewhere.path(), &moved.join(file), &["--resume"]);
    assert!(
        text.contains("resumed at step 3") && text.contains("trained 4 steps"),
        "{text}"
    );
    // Another existing data file is another run.
    std::fs::copy(moved.join("samples.json"), moved.join("other.json")).unwrap();
    let out = btl_train_in(
        &moved,
        &[
            &["grpo", "--config", "train.toml", "--samples", "other.json"][..],
            &flags,
            &["--steps", "5", "--resume"],
        ]
        .concat(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("another configuration (data.samples is ["),
        "{stderr}"
    );

    // A fresh start where a stopped run left only its log, one line of it
    // damaged.
    let fresh = moved.join("fresh");
    std::fs::create_dir(&fresh).unwrap();
    let mut earlier = std::fs::read(moved.join("out/metrics.jsonl")).unwrap();
    earlier.splice(0..0, b"{\"step\": tr\n".iter().copied());
    std::fs::write(fresh.join("metrics.jsonl"), &earlier).unwrap();
    let text = run(&moved, file, &["--steps", "1", "--output-dir", "fresh"]);
    let kept = fresh.join("metrics.stopped-1.jsonl");
    assert!(
        text.contains(&format!(
            "stopped before its first checkpoint, is kept as {}",
            kept.display()
        )),
        "{text}"
    );
    assert_eq!(std::fs::read(&kept).unwrap(), earlier);
    let logged = std::fs::read_to_string(fresh.join("metrics.jsonl")).unwrap();
    assert_eq!(logged.lines().count(), 1, "{logged}");
}

/// `precision = "bf16"` (the CUDA default) on the CPU: bfloat16 autocast
/// over bfloat16 frozen base weights, float32 adapters and optimizer; in
/// full fine-tuning the trained weights stay float32 (the master copy) and
/// the frozen reference is bfloat16.
#[test]
fn bf16_trains_float32_weights_under_bfloat16_autocast() {
    use host_trainer::grpo::config::{Precision, TrainMode};
    for mode in [TrainMode::Lora, TrainMode::Full] {
        let dir = tempfile::tempdir().unwrap();
        let mut config = toy_config(dir.path(), 2);
        config.model.precision = Some(Precision::Bf16);
        config.model.mode = mode;
        // A flat group still runs its β·KL update, so the backward always runs.
        config.grpo.skip_flat_groups = false;
        let mut trainer = Trainer::new(config, Box::new(Digits)).unwrap();
        assert_eq!(trainer.autocast(), Some(tch::Kind::BFloat16));
        let m = trainer.step().unwrap();
        assert!(
            m.loss.is_finite() && m.grad_norm.is_finite() && m.grad_norm > 0.0,
            "{mode:?}: {m:?}"
        );
        let model = trainer.model();
        let weight = &model.vars().variables()["model.layers.0.self_attn.q_proj.weight"];
        match mode {
            TrainMode::Lora => {
                assert_eq!(model.lora().unwrap().modules().len(), 14);
                let (_, a, b) = &model.lora().unwrap().modules()[0];
                assert_eq!((a.kind(), b.kind()), (tch::Kind::Float, tch::Kind::Float));
                assert_eq!(weight.kind(), tch::Kind::BFloat16);
            }
            TrainMode::Full => assert_eq!(weight.kind(), tch::Kind::Float),
        }
    }
}

/// Full fine-tuning moves the text model's weights, leaves the frozen vision
/// tower alone, and its checkpoint holds the trained weights.
#[test]
fn full_fine_tuning_trains_the_text_model_and_checkpoints_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = toy_config(dir.path(), 2);
    config.model.mode = host_trainer::grpo::config::TrainMode::Full;
    config.optim.lr = 1e-3;
    let mut trainer = Trainer::new(config, Box::new(Digits)).unwrap();
    assert!(trainer.model().lora().is_none());
    let value = |t: &Trainer, name: &str| {
        Vec::<f32>::try_from(t.model().vars().variables()[name].detach().flatten(0, -1)).unwrap()
    };
    let text = "model.layers.0.mlp.up_proj.weight";
    let vision = "visual.blocks.0.attn.qkv.weight";
    let (text_before, vision_before) = (value(&trainer, text), value(&trainer, vision));
    let trained: u64 = (0..2)
        .map(|_| trainer.step().unwrap())
        .filter(|m| m.flat_groups == 0)
        .count() as u64;
    assert!(trained > 0, "the toy groups vary");
    assert_ne!(value(&trainer, text), text_before);
    assert_eq!(value(&trainer, vision), vision_before);

    let saved = checkpoint::save(&trainer).unwrap();
    assert!(saved.join("model.safetensors").is_file());
    let config = checkpoint::trained_config(&saved).unwrap();
    let loaded = checkpoint::load_trained(&saved, &config).unwrap();
    let loaded_text =
        Vec::<f32>::try_from(loaded.vars().variables()[text].detach().flatten(0, -1)).unwrap();
    assert_eq!(loaded_text, value(&trainer, text));
}

/// Two text-only steps whose solutions carry a Plan, as
/// `btl-train data from-trajectories` writes them; the second has a ranked
/// ROI, so its answer's blink is not empty.
const SFT_SAMPLES: &str = r#"[
 {"id": "a", "images": [], "image_sizes": [[100, 100]], "bbox": [],
  "solution": "[{\"Plan\": \"Go back.\", \"Action\": {\"function\": \"Back\"}}]",
  "messages": [{"role": "user", "content": "Leave this screen."}]},
 {"id": "b", "images": [], "image_sizes": [[100, 100]], "bbox": [10, 10, 50, 30],
  "solution": "[{\"Plan\": \"Tap OK.\", \"Action\": {\"function\": \"Tap\", \"point_2d\": [30, 20]}}]",
  "rois": [{"bbox_2d": [10, 10, 50, 30], "label": "OK", "priority": 1}],
  "messages": [{"role": "user", "content": "Confirm the dialog."}]}
]"#;

/// `btl-train sft`: the loss of the two canonical answers falls, the
/// run resumes, every step is an optimizer update, and a sample with no
/// answer to learn is named.
#[test]
fn the_sft_command_lowers_the_answer_loss_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    toy_config(dir.path(), 8);
    std::fs::write(dir.path().join("samples.json"), SFT_SAMPLES).unwrap();
    let config = dir.path().join("train.toml");
    let text = std::fs::read_to_string(&config).unwrap().replace(
        "samples = [\"samples.json\"]",
        "samples = [\"samples.json\"]\nheldout = [\"samples.json\"]",
    );
    std::fs::write(&config, text).unwrap();
    let config = config.to_str().unwrap();
    let run = ["sft", "--config", config, "--samples-per-step", "2"];
    let out = btl_train(&[&run[..], &["--steps", "8"]].concat());
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("trained 8 steps (8 optimizer updates)"),
        "{stdout}"
    );
    // Not a terminal: one log line per step, held-out numbers where evaluated.
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("btl-train: step "))
        .collect();
    assert_eq!(lines.len(), 8, "{stderr}");
    assert!(
        lines[0].starts_with("btl-train: step 1/8 loss "),
        "{stderr}"
    );
    assert!(lines[2].contains("held-out loss"), "{stderr}");
    assert!(!lines[3].contains("held-out"), "{stderr}");
    let metrics = read_metrics(&dir.path().join("out/metrics.jsonl")).unwrap();
    let (first, last) = (metrics[0].loss, metrics[7].loss);
    assert!(last < 0.5 * first, "loss {first} → {last}");
    assert!(
        metrics
            .iter()
            .all(|m| m.groups == 2 && m.completion_tokens_mean > 10.0)
    );
    // Held-out numbers at the checkpoints (every 3 steps and the last).
    let evaluated: Vec<u64> = metrics
        .iter()
        .filter(|m| m.heldout_loss.is_some() && m.heldout_accuracy.is_some())
        .map(|m| m.step)
        .collect();
    assert_eq!(evaluated, [3, 6, 8]);
    let heldout = |step: usize| metrics[step - 1].heldout_loss.unwrap();
    assert!(
        heldout(8) < heldout(3),
        "held-out loss {} → {}",
        heldout(3),
        heldout(8)
    );
    let state =
        std::fs::read_to_string(dir.path().join("out/checkpoint-000008/trainer_state.json"))
            .unwrap();
    assert!(state.contains("\"objective\": \"sft\""), "{state}");

    let stdout = btl_train_succeeds(&[&run[..], &["--steps", "10", "--resume"]].concat());
    assert!(
        stdout.contains("resumed at step 8")
            && stdout.contains("trained 10 steps (10 optimizer updates)"),
        "{stdout}"
    );

    let grounding = SFT_SAMPLES.replace(
        r#"[{\"Plan\": \"Go back.\", \"Action\": {\"function\": \"Back\"}}]"#,
        r#"[{\"point_2d\": [1, 2]}]"#,
    );
    std::fs::write(dir.path().join("samples.json"), grounding).unwrap();
    let other = dir.path().join("other");
    let out = btl_train(&[&run[..], &["--output-dir", other.to_str().unwrap()]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("a: ") && stderr.contains("grounding"),
        "{stderr}"
    );
}

/// A learning rate of 1e30 makes the weights overflow in the first step:
/// the run stops at the step whose loss is no number, saying so, and
/// metrics.jsonl keeps only steps that are numbers, so it still reads.
#[test]
fn a_diverging_run_stops_rather_than_save_what_is_no_number() {
    let dir = tempfile::tempdir().unwrap();
    toy_config(dir.path(), 4);
    std::fs::write(dir.path().join("samples.json"), SFT_SAMPLES).unwrap();
    let config = dir.path().join("train.toml");
    let run = [
        "sft",
        "--config",
        config.to_str().unwrap(),
        "--lr",
        "1e30",
        "--max-grad-norm",
        "0",
        "--warmup-ratio",
        "0",
    ];
    let out = btl_train(&run);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("diverged") && stderr.contains("train again with a lower optim.lr"),
        "{stderr}"
    );
    let metrics = read_metrics(&dir.path().join("out/metrics.jsonl")).unwrap();
    assert!(metrics.len() < 4, "{metrics:?}");
    assert!(metrics.iter().all(|m| m.loss.is_finite()));
    let saved = std::fs::read_dir(dir.path().join("out"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("checkpoint-")
        })
        .count();
    assert_eq!(saved, 0);
}

/// A model that has learnt the answers gets every held-out action right;
/// the random model it started from gets none.
#[test]
fn heldout_accuracy_counts_right_greedy_actions() {
    use host_trainer::grpo::config::{TrainMode, TrainObjective};
    let dir = tempfile::tempdir().unwrap();
    let mut config = toy_config(dir.path(), 40);
    std::fs::write(dir.path().join("samples.json"), SFT_SAMPLES).unwrap();
    config.run.objective = TrainObjective::Sft;
    config.model.mode = TrainMode::Full;
    config.optim.lr = 3e-3;
    config.sft.samples_per_step = 2;
    config.data.heldout = config.data.samples.clone();
    let mut trainer = Trainer::new(config, Box::new(Digits)).unwrap();
    let before = trainer.evaluate().unwrap().unwrap();
    assert_eq!(before.accuracy, 0.0, "{before:?}");
    for _ in 0..40 {
        trainer.step().unwrap();
    }
    let after = trainer.evaluate().unwrap().unwrap();
    assert_eq!(after.accuracy, 1.0, "{after:?}");
    assert!(after.loss < 0.1 * before.loss, "{before:?} → {after:?}");
}

/// An online run of the tiny model on the virtual phone: wifi_on, two
/// phones, two-step episodes, G 2, screenshots at 50,176 pixels.
fn online_config(dir: &std::path::Path, steps: u64) -> TrainConfig {
    let text = format!(
        r#"
[model]
checkpoint = "{checkpoint}"
tokenizer = "{tokenizer}"
precision = "f32"
device = "cpu"
[data]
max_pixels = 50176
[lora]
r = 8
alpha = 16
[grpo]
num_generations = 2
max_completion_length = 10
temperature = 1.0
top_p = 1.0
top_k = 0
[optim]
lr = 0.02
warmup_ratio = 0.0
[run]
steps = {steps}
seed = 11
output_dir = "out"
save_every = 1
[online]
tasks = ["wifi_on"]
phones = 2
max_steps = 2
keep_rollouts = true
"#,
        checkpoint = checkpoint_dir().display(),
        tokenizer = tokenizer_file().display(),
    );
    let file = dir.join("online.toml");
    std::fs::write(&file, text).unwrap();
    TrainConfig::from_file(&file).unwrap()
}

/// What a step's metrics say, less its time.
fn timeless(m: &host_trainer::grpo::StepMetrics) -> String {
    let mut m = m.clone();
    m.seconds = 0.0;
    serde_json::to_string(&m).unwrap()
}

#[test]
fn online_grpo_rolls_out_on_virtual_phones_deterministically_and_resumes() {
    let whole_dir = tempfile::tempdir().unwrap();
    let config = online_config(whole_dir.path(), 2);
    let mut whole = Trainer::new(config.clone(), Box::new(Digits)).unwrap();
    let whole_metrics: Vec<_> = (0..2).map(|_| whole.step().unwrap()).collect();
    for m in &whole_metrics {
        // Two episodes of at most two steps; a group per state asked about
        // (an unusable answer is asked again, as on a phone).
        assert_eq!(m.episodes, Some(2));
        assert!(m.groups >= 2, "{m:?}");
        assert!(m.outcome.is_some());
    }
    // The episodes are kept as trajectories, every step carrying the
    // oracle's answer on its screen as the target.
    let step_one = whole_dir.path().join("out/rollouts/step-000001");
    let mut episodes: Vec<_> = std::fs::read_dir(&step_one)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    episodes.sort();
    assert_eq!(episodes.len(), 2, "{episodes:?}");
    assert!(episodes[0].starts_with("00-wifi_on-s"), "{episodes:?}");
    let steps = std::fs::read_to_string(step_one.join(&episodes[0]).join("steps.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(steps.lines().next().unwrap()).unwrap();
    let target = first["target"].as_str().unwrap();
    assert!(
        target.contains("\"Tap\"") && target.contains("Settings"),
        "{target}"
    );

    // The same run again, interrupted after a step and resumed: the same
    // episodes, draws, metrics and weights.
    let split_dir = tempfile::tempdir().unwrap();
    let config = online_config(split_dir.path(), 2);
    let mut first = Trainer::new(config.clone(), Box::new(Digits)).unwrap();
    let head = first.step().unwrap();
    checkpoint::save(&first).unwrap();
    drop(first);
    let mut second = Trainer::new(config.clone(), Box::new(Digits)).unwrap();
    checkpoint::resume(split_dir.path().join("out").as_path(), config, &mut second).unwrap();
    let tail = second.step().unwrap();
    assert_eq!(
        [timeless(&head), timeless(&tail)],
        [timeless(&whole_metrics[0]), timeless(&whole_metrics[1])]
    );
    assert_eq!(adapter_values(&second), adapter_values(&whole));
}

#[test]
fn online_configs_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = online_config(dir.path(), 1);
    config.data.samples = vec![dir.path().join("samples.json")];
    let e = config.validate().unwrap_err().to_string();
    assert!(e.contains("data.samples") && e.contains("online"), "{e}");
    let mut config = online_config(dir.path(), 1);
    config.run.objective = host_trainer::grpo::config::TrainObjective::Sft;
    let e = config.validate().unwrap_err().to_string();
    assert!(e.contains("config: online"), "{e}");
    let mut config = online_config(dir.path(), 1);
    config.online.as_mut().unwrap().tasks = vec!["make_coffee".into()];
    let e = Trainer::new(config, Box::new(Digits))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("make_coffee") && e.contains("online.tasks"),
        "{e}"
    );
}

/// Passes on the samples it is asked to score.
struct Recording(std::sync::Arc<std::sync::Mutex<Vec<Sample>>>);

impl Reward for Recording {
    fn score(&self, sample: &Sample, completion: &str) -> RewardBreakdown {
        self.0.lock().unwrap().push(sample.clone());
        Digits.score(sample, completion)
    }
}

/// `[data] max_pixels` resizes the screenshot, so answers are written in
/// that frame; the rewards must judge them there. A 1080×2400 sample
/// recorded at 4,014,080 pixels (frame 1092×2408) with Tap [136, 790] on
/// the box [0, 667, 270, 909], trained at 200,704 pixels (frame 280×644):
/// the point becomes [136·280/1092, 790·644/2408] = [34.87, 211.28] →
/// [35, 211], and an answer tapping there earns the link.
#[test]
fn grpo_scores_answers_in_the_frame_data_max_pixels_sets() {
    let dir = tempfile::tempdir().unwrap();
    let tap = r#"[{"images": [], "image_sizes": [[1080, 2400]], "max_pixels": 4014080,
      "bbox": [0, 667, 270, 909],
      "solution": "[{\"Plan\": \"Open Settings.\", \"Action\": {\"function\": \"Tap\", \"point_2d\": [136, 790]}}]",
      "messages": [{"role": "user", "content": "Open the Settings app."}]}]"#;
    std::fs::write(dir.path().join("tap.json"), tap).unwrap();
    let mut config = toy_config(dir.path(), 1);
    config.data.samples = vec![dir.path().join("tap.json")];
    config.data.max_pixels = Some(200_704);
    config.grpo.num_generations = 2;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut trainer = Trainer::new(config, Box::new(Recording(seen.clone()))).unwrap();
    trainer.step().unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    for sample in seen.iter() {
        assert_eq!(sample.max_pixels, 200_704);
        assert!(
            sample.solution.contains("\"point_2d\": [35, 211]"),
            "{}",
            sample.solution
        );
    }
    let answer = "<blink>```json\n[{\"bbox_2d\": [0, 179, 70, 244], \"label\": \"Settings\"}]\n```</blink>\n\
        <think>Open Settings.</think>\n<link>```json\n[{\"Plan\": \"Open Settings.\", \
        \"Action\": {\"function\": \"Tap\", \"point_2d\": [35, 211]}}]\n```</link>";
    let r = agent_core::reward::score(
        &seen[0],
        answer,
        agent_core::reward::RewardMode::Released,
        agent_core::reward::Weights::default(),
    );
    assert_eq!((r.format, r.blink, r.link), (1.0, 1.0, 1.0));
}

/// Three image prompts that share the system prompt and differ in the goal.
fn image_samples(dir: &std::path::Path) {
    let png = image::RgbImage::from_fn(112, 84, |x, y| {
        image::Rgb([(x * 2) as u8, (y * 3) as u8, ((x + y) % 256) as u8])
    });
    png.save(dir.join("screen.png")).unwrap();
    let sample = |goal: &str, plan: &str| {
        serde_json::json!({
            "images": ["screen.png"], "image_sizes": [[112, 84]], "bbox": [],
            "solution": format!(r#"[{{"Plan": "{plan}", "Action": {{"function": "Back"}}}}]"#),
            "messages": [
                {"role": "system", "content": "You are a GUI agent. Answer in BTL."},
                {"role": "user", "content": format!("## User Instruction\n{goal}\n\n## Screenshots\n<image>")}
            ]
        })
    };
    let samples = serde_json::json!([
        sample("Go back.", "Go back."),
        sample("Leave this screen now.", "Leave it."),
        sample("Return to the list.", "Back to the list."),
    ]);
    std::fs::write(dir.join("images.json"), samples.to_string()).unwrap();
}

/// `sft.micro_batch` evaluates the prompts' common prefix once per
/// micro-batch, or the whole micro-batch as one padded pass; either way the
/// step's loss, gradient norm and update are those of one sample at a time
/// (float64: equal to rounding). The samples' prompts differ in length, so
/// the padded pass pads.
#[test]
fn sft_micro_batches_share_the_prefix_and_train_as_one_by_one() {
    use host_trainer::grpo::config::{Batching, Precision, TrainMode, TrainObjective};
    let run = |micro_batch: usize, batching: Batching| {
        let dir = tempfile::tempdir().unwrap();
        let mut config = toy_config(dir.path(), 1);
        image_samples(dir.path());
        config.data.samples = vec![dir.path().join("images.json")];
        config.data.shuffle = false;
        config.run.objective = TrainObjective::Sft;
        config.model.mode = TrainMode::Full;
        config.model.train_vision = true;
        config.model.precision = Some(Precision::F64);
        config.sft.samples_per_step = 3;
        config.sft.micro_batch = micro_batch;
        config.sft.batching = batching;
        let mut trainer = Trainer::new(config, Box::new(Digits)).unwrap();
        let metrics = trainer.step().unwrap();
        let mut weights: Vec<(String, Vec<f64>)> = trainer
            .model()
            .vars()
            .variables()
            .into_iter()
            .map(|(name, t)| {
                let flat = t.detach().flatten(0, -1);
                (name, Vec::<f64>::try_from(flat).unwrap())
            })
            .collect();
        weights.sort_by(|a, b| a.0.cmp(&b.0));
        (metrics, weights)
    };
    let (one, one_weights) = run(1, Batching::Auto);
    let close = |a: f64, b: f64, tol: f64| (a - b).abs() <= tol * a.abs().max(1.0);
    assert!(one.grad_norm > 0.0);
    for batching in [Batching::SharedPrefix, Batching::Padded] {
        let (three, three_weights) = run(3, batching);
        assert!(
            close(one.loss, three.loss, 1e-12),
            "{batching:?}: {} vs {}",
            one.loss,
            three.loss
        );
        assert!(
            close(one.grad_norm, three.grad_norm, 1e-10),
            "{batching:?}: {} vs {}",
            one.grad_norm,
            three.grad_norm
        );
        let mut compared = 0;
        for ((name, a), (other, b)) in one_weights.iter().zip(&three_weights) {
            assert_eq!(name, other);
            for (x, y) in a.iter().zip(b) {
                assert!((x - y).abs() < 1e-9, "{batching:?}: {name}: {x} vs {y}");
                compared += 1;
            }
        }
        assert!(compared > 10_000, "{compared}");
    }
}

/// Two typing samples whose goals name what they type (the first with a
/// region that shows the value), and one that types text its goal does not
/// hold, with a screenshot each.
fn typing_samples(dir: &std::path::Path) {
    image_samples(dir);
    let sample = |goal: &str, plan: &str, text: &str| {
        serde_json::json!({
            "images": ["screen.png"], "image_sizes": [[112, 84]], "bbox": [],
            "solution": serde_json::json!([{"Plan": plan, "Action": {"function": "Type", "text": text}}]).to_string(),
            "messages": [
                {"role": "system", "content": "You are a GUI agent. Answer in BTL."},
                {"role": "user", "content": format!("## Action Space\nType\n\n## User Instruction\n{goal}\n\n## Action History\n\n\n## Screenshots\n<image>")}
            ]
        })
    };
    // A region whose box and label hold the value too: they are not the
    // goal's value written by the answer, and stay weighted once.
    let mut minutes = sample("Set an alarm for 09:26.", "Type 26 as the minutes.", "26");
    minutes["rois"] =
        serde_json::json!([{"bbox_2d": [26, 26, 52, 60], "label": "26", "priority": 1}]);
    let samples = serde_json::json!([
        minutes,
        sample(
            "Search the web for tide times Kyiv.",
            "Type \"tide times Kyiv\".",
            "tide times Kyiv"
        ),
        sample("Write anything.", "Type hello.", "hello"),
    ]);
    std::fs::write(dir.join("typing.json"), samples.to_string()).unwrap();
}

/// `sft.value_weight` W: the tokens that write the goal's value (in the
/// think, the Plan and the typed text, found as the tokenizer splits them)
/// count W times in the step's loss, every other token once, the mean
/// still over the answer tokens. So the first step's loss (before any
/// update) is affine in W with a positive slope, W = 1 is plain SFT and
/// W = 0 leaves the values out; one sample at a time, the shared prefix
/// and the padded batch agree. A weight that is not a finite number of at
/// least 0, or one on a run that is not SFT, is refused by name.
#[test]
fn sft_value_weight_counts_the_goals_values_more() {
    use host_trainer::grpo::config::{Batching, Precision, TrainMode, TrainObjective};
    use host_trainer::grpo::prompt::PromptTokenizer;
    use host_trainer::sft::{Answer, target_answer};

    // Which tokens: those of the values, each written three times.
    let tokenizer = PromptTokenizer::from_file(&tokenizer_file()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    typing_samples(dir.path());
    let samples: Vec<Sample> =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("typing.json")).unwrap())
            .unwrap();
    for (sample, value) in samples.iter().zip(["26", "tide times Kyiv", ""]) {
        let answer = target_answer(sample, sample.max_pixels, 3).unwrap();
        let encoded = tokenizer.encode_text_spans(&answer).unwrap();
        let stop = tokenizer.stop_ids()[0];
        let learnt = Answer::for_sample(sample, &answer, encoded, stop, 2.0);
        assert_eq!(learnt.ids.last(), Some(&stop));
        let weights = learnt
            .weights
            .unwrap_or_else(|| vec![1.0; learnt.ids.len()]);
        assert_eq!(weights.len(), learnt.ids.len());
        let marked: Vec<i64> = learnt
            .ids
            .iter()
            .zip(&weights)
            .filter(|(_, w)| **w == 2.0)
            .map(|(id, _)| *id)
            .collect();
        // A token may hold a space or the quote beside the value too.
        let bare = |s: &str| s.replace([' ', '"', '\\'], "");
        let text = tokenizer.decode(&marked).unwrap();
        assert_eq!(bare(&text), bare(&value.repeat(3)), "{answer}");
    }

    let first_loss = |value_weight: f64, micro_batch: usize, batching: Batching| {
        let dir = tempfile::tempdir().unwrap();
        let mut config = toy_config(dir.path(), 1);
        typing_samples(dir.path());
        config.data.samples = vec![dir.path().join("typing.json")];
        config.data.shuffle = false;
        config.run.objective = TrainObjective::Sft;
        config.model.mode = TrainMode::Full;
        config.model.precision = Some(Precision::F64);
        config.sft.samples_per_step = 3;
        config.sft.micro_batch = micro_batch;
        config.sft.batching = batching;
        config.sft.value_weight = value_weight;
        let mut trainer = Trainer::new(config, Box::new(Digits)).unwrap();
        trainer.step().unwrap().loss
    };
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-10 * a.abs().max(1.0);
    let loss: Vec<f64> = [0.0, 1.0, 2.0, 5.0]
        .iter()
        .map(|&w| first_loss(w, 1, Batching::Auto))
        .collect();
    let slope = loss[2] - loss[1];
    assert!(slope > 0.0, "{loss:?}");
    assert!(close(loss[1] - loss[0], slope), "{loss:?}");
    assert!(close(loss[3] - loss[1], 4.0 * slope), "{loss:?}");
    for batching in [Batching::SharedPrefix, Batching::Padded] {
        let batched = first_loss(5.0, 3, batching);
        assert!(
            close(batched, loss[3]),
            "{batching:?}: {batched} vs {}",
            loss[3]
        );
    }

    let mut config = toy_config(dir.path(), 1);
    config.run.objective = TrainObjective::Sft;
    for (objective, weight, says) in [
        (TrainObjective::Sft, -1.0, "at least 0"),
        (TrainObjective::Sft, f64::INFINITY, "at least 0"),
        (TrainObjective::Grpo, 2.0, "objective = \"sft\""),
    ] {
        config.run.objective = objective;
        config.sft.value_weight = weight;
        let err = config.validate().unwrap_err().to_string();
        assert!(
            err.contains("sft.value_weight") && err.contains(says),
            "{objective:?} {weight}: {err}"
        );
    }
}

/// A sample file that holds other bytes than the run read is refused on
/// resume (the run would draw other samples from the step it stopped at);
/// put back, it resumes.
#[test]
fn a_changed_sample_file_is_refused_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let config = toy_config(dir.path(), 2);
    let out = config.run.output_dir.clone();
    let mut first = Trainer::new(config.clone(), Box::new(Digits)).unwrap();
    first.step().unwrap();
    checkpoint::save(&first).unwrap();
    let samples = dir.path().join("samples.json");
    let read = std::fs::read_to_string(&samples).unwrap();
    std::fs::write(&samples, format!("{read}\n")).unwrap();
    let mut second = Trainer::new(config.clone(), Box::new(Digits)).unwrap();
    let err = checkpoint::resume(&out, config.clone(), &mut second)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("samples.json is not the file the run read")
            && err.contains(&format!("{} bytes", read.len() + 1)),
        "{err}"
    );
    std::fs::write(&samples, &read).unwrap();
    let mut third = Trainer::new(config.clone(), Box::new(Digits)).unwrap();
    checkpoint::resume(&out, config, &mut third).unwrap();
    assert_eq!(third.steps_done(), 1);
}
