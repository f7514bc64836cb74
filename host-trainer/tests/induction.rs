//! The copying warm-up: its loss is the masked cross-entropy that SFT's
//! answer loss (checked against transformers) computes, and
//! `btl-train induction` trains, logs its copy accuracy and resumes, and
//! SFT can learn the warm-up's strings beside its samples.

use host_trainer::grpo::config::{InductionSection, TrainMode, TrainObjective};
use host_trainer::grpo::log::read_metrics;
use host_trainer::grpo::rollout::Prompt;
use host_trainer::grpo::{StepMetrics, TrainConfig, Trainer};
use host_trainer::induction::{CopyTokens, IGNORE, copy_batch, copy_loss};
use host_trainer::sft::answer_loss;
use tch::Kind;

use crate::training::{Digits, toy_config};
use crate::util::{btl_train, btl_train_succeeds, checkpoint_dir, load, tokenizer_file};

/// A sequence with one copy ends with it, so its learned tokens are an
/// answer after a prompt: the warm-up's loss must be SFT's answer loss of
/// that split, sequence by sequence (float64).
#[test]
fn the_copy_loss_is_the_answer_loss_of_the_copy() {
    let model = load(Kind::Double);
    let tokenizer = tokenizers::Tokenizer::from_file(tokenizer_file()).unwrap();
    let tokens = CopyTokens::from_tokenizer(&tokenizer).unwrap();
    let section = InductionSection {
        sequences_per_step: 1,
        max_len: 12,
        max_copies: 1,
        max_noise: 6,
        ..InductionSection::default()
    };
    for seed in 0..4 {
        let batch = copy_batch(&tokens, &section, seed);
        let (ids, targets) = (&batch.ids[0], &batch.targets[0]);
        let first = targets.iter().position(|&t| t != IGNORE).unwrap() + 1;
        assert_eq!(*ids.last().unwrap(), tokens.copy[1]);
        assert_eq!(ids.len() - first, batch.learned());
        let prompt = Prompt {
            ids: ids[..first].to_vec(),
            image: None,
        };
        let answer = ids[first..].to_vec();
        let reference = answer_loss(&model, &prompt, &[answer], tokens.pad)
            .unwrap()
            .loss
            .double_value(&[]);
        let ours = copy_loss(&model, &batch).unwrap();
        let loss = ours.loss.double_value(&[]);
        assert!(
            (loss - reference).abs() <= 1e-9 * reference.abs(),
            "seed {seed}: {loss} vs SFT's {reference}"
        );
        let learned = targets.iter().filter(|&&t| t != IGNORE).count();
        assert_eq!(ours.targets, learned);
        assert!(ours.right <= ours.targets);
    }
}

/// `btl-train induction` without sample files: a line per step with the
/// copy accuracy, the metrics and checkpoint say what ran, a run stopped
/// early (`--stop-at`) keeps its schedule and resumes to the end exactly as
/// an uninterrupted run, and sample files or an online section are refused
/// by name.
#[test]
fn the_induction_command_trains_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let (checkpoint, tokenizer) = (checkpoint_dir(), tokenizer_file());
    let base = [
        "induction",
        "--checkpoint",
        checkpoint.to_str().unwrap(),
        "--tokenizer",
        tokenizer.to_str().unwrap(),
        "--mode",
        "full",
        "--device",
        "cpu",
        "--precision",
        "f32",
        "--sequences-per-step",
        "4",
        "--lr",
        "1e-3",
        "--save-every",
        "2",
    ];
    let run = [&base[..], &["--output-dir", out_dir.to_str().unwrap()]].concat();
    // Three steps of a six-step schedule: stopped there, as if interrupted.
    let out = btl_train(&[&run[..], &["--steps", "6", "--stop-at", "3"]].concat());
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("trained 3 steps (3 optimizer updates)"),
        "{stdout}"
    );
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("btl-train: step "))
        .collect();
    assert_eq!(lines.len(), 3, "{stderr}");
    assert!(
        lines[0].starts_with("btl-train: step 1/3 loss ") && lines[0].contains("copy accuracy"),
        "{stderr}"
    );
    let metrics = read_metrics(&out_dir.join("metrics.jsonl")).unwrap();
    assert_eq!(metrics.len(), 3);
    for m in &metrics {
        let accuracy = m.copy_accuracy.unwrap();
        assert!((0.0..=1.0).contains(&accuracy), "{m:?}");
        assert!(m.loss.is_finite() && m.loss > 0.0, "{m:?}");
        assert_eq!(m.groups, 4);
    }
    let state =
        std::fs::read_to_string(out_dir.join("checkpoint-000003/trainer_state.json")).unwrap();
    assert!(state.contains("\"objective\": \"induction\""), "{state}");

    // A stop behind the checkpoint would train nothing: refused by name.
    let behind = btl_train(&[&run[..], &["--steps", "6", "--stop-at", "2", "--resume"]].concat());
    let said = String::from_utf8_lossy(&behind.stderr);
    assert_eq!(behind.status.code(), Some(2), "{said}");
    assert!(said.contains("at step 3, past run.stop_at = 2"), "{said}");

    let stdout = btl_train_succeeds(&[&run[..], &["--steps", "6", "--resume"]].concat());
    assert!(
        stdout.contains("resumed at step 3") && stdout.contains("trained 6 steps"),
        "{stdout}"
    );
    // The stopped run followed the six-step schedule: its steps are the
    // first three of an uninterrupted run, bit for bit.
    let whole = dir.path().join("whole");
    let whole_run = [
        &base[..],
        &["--steps", "6", "--output-dir", whole.to_str().unwrap()],
    ]
    .concat();
    btl_train_succeeds(&whole_run);
    let uninterrupted = read_metrics(&whole.join("metrics.jsonl")).unwrap();
    let resumed = read_metrics(&out_dir.join("metrics.jsonl")).unwrap();
    assert_eq!((resumed.len(), uninterrupted.len()), (6, 6));
    for (a, b) in resumed.iter().zip(&uninterrupted) {
        assert_eq!((a.step, a.lr, a.loss), (b.step, b.lr, b.loss));
        assert_eq!(a.copy_accuracy, b.copy_accuracy);
    }

    let samples = dir.path().join("samples.json");
    std::fs::write(&samples, "[]").unwrap();
    let out = btl_train(
        &[
            &run[..],
            &["--steps", "1", "--samples", samples.to_str().unwrap()],
        ]
        .concat(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("data.samples") && stderr.contains("random strings"),
        "{stderr}"
    );
    let out = btl_train(&[&run[..], &["--steps", "1", "--online"]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("online"), "{stderr}");
}

/// SFT with the warm-up's strings mixed in (`induction.sft_weight`): the
/// first step's answer loss is plain SFT's (both measure the same weights
/// before any update), the update is not (the copies' gradient is in it),
/// copy accuracy is logged only then, and a weight that is not a finite
/// number of at least 0, or one on a run that is not SFT, is refused by
/// name.
#[test]
fn sft_steps_can_learn_the_warm_up_strings_too() {
    let dir = tempfile::tempdir().unwrap();
    let mut plain = toy_config(dir.path(), 2);
    // SFT learns canonical answers, which have a Plan.
    let samples = r#"[
 {"images": [], "image_sizes": [[100, 100]], "bbox": [], "solution": "[{\"Plan\": \"Go back.\", \"Action\": {\"function\": \"Back\"}}]",
  "messages": [{"role": "user", "content": "Leave this screen."}]},
 {"images": [], "image_sizes": [[100, 100]], "bbox": [], "solution": "[{\"Plan\": \"Type it.\", \"Action\": {\"function\": \"Type\", \"text\": \"Kyiv 7\"}}]",
  "messages": [{"role": "user", "content": "Type Kyiv 7."}]}
]"#;
    std::fs::write(dir.path().join("samples.json"), samples).unwrap();
    plain.run.objective = TrainObjective::Sft;
    plain.model.mode = TrainMode::Full;
    plain.induction.sequences_per_step = 4;
    let mut mixed = plain.clone();
    mixed.induction.sft_weight = 1.0;
    mixed.validate().unwrap();
    let run = |config: &TrainConfig| -> Vec<StepMetrics> {
        let mut trainer = Trainer::new(config.clone(), Box::new(Digits)).unwrap();
        (0..2).map(|_| trainer.step().unwrap()).collect()
    };
    let (a, b) = (run(&plain), run(&mixed));
    assert_eq!(a[0].loss, b[0].loss);
    assert_ne!(a[1].loss, b[1].loss);
    assert!(a.iter().all(|m| m.copy_accuracy.is_none()), "{a:?}");
    assert!(
        b.iter()
            .all(|m| m.copy_accuracy.is_some_and(|x| (0.0..=1.0).contains(&x))),
        "{b:?}"
    );

    for (objective, weight, says) in [
        (TrainObjective::Sft, -0.5, "at least 0"),
        (TrainObjective::Sft, f64::NAN, "at least 0"),
        (TrainObjective::Grpo, 0.5, "objective = \"sft\""),
        (TrainObjective::Induction, 0.5, "objective = \"sft\""),
    ] {
        let mut config = mixed.clone();
        config.run.objective = objective;
        config.induction.sft_weight = weight;
        if objective == TrainObjective::Induction {
            config.data.samples.clear();
        }
        let err = config.validate().unwrap_err().to_string();
        assert!(
            err.contains("induction.sft_weight") && err.contains(says),
            "{objective:?} {weight}: {err}"
        );
    }
}
