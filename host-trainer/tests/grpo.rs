//! GRPO with LoRA against transformers + PEFT in float64, and the merge of
//! an adapter into the base weights.
//!
//! Golden values: `case_grpo_lora` of
//! `scripts/make-trainer-reference/make_reference.py`: the image prompt, four
//! completions of lengths 8, 5, 8, 3 (padded), rewards [1, 0.2, 0.5, 0.5],
//! β 0.04, ε 0.2, a PEFT adapter (r 4, α 8) with seeded non-zero A and B on
//! every text projection; the reference log-probs with the adapter disabled.

use host_trainer::Qwen25Vl;
use host_trainer::autocast::autocast;
use host_trainer::grpo::loss::{Objective, group_advantages, objective};
use host_trainer::grpo::rollout::{Prompt, completion_log_probs};
use host_trainer::lora::{LoraConfig, LoraInit};
use tch::{Device, Kind, Tensor};

use crate::util::{Golden, checkpoint_dir, golden, max_rel_diff};

const F64_TOLERANCE: f64 = 1e-9;

fn lora_config(g: &Golden) -> LoraConfig {
    let c = &g.json["grpo_lora"];
    LoraConfig {
        r: c["r"].as_i64().unwrap(),
        alpha: c["alpha"].as_f64().unwrap(),
        dropout: 0.0,
        target_modules: serde_json::from_value(c["target_module_suffixes"].clone()).unwrap(),
    }
}

/// The tiny model with the case's adapter values loaded.
fn adapted_model(g: &Golden, kind: Kind) -> Qwen25Vl {
    let mut model = Qwen25Vl::from_checkpoint_with_lora(
        &checkpoint_dir(),
        Device::Cpu,
        kind,
        Some(LoraInit {
            config: &lora_config(g),
            seed: 0,
        }),
    )
    .unwrap();
    model.freeze_base();
    let modules: Vec<String> =
        serde_json::from_value(g.json["grpo_lora"]["lora_modules"].clone()).unwrap();
    let weights: Vec<(String, Tensor, Tensor)> = modules
        .iter()
        .map(|m| {
            (
                m.clone(),
                g.tensor(&format!("grpo_lora.lora.{m}.lora_A"))
                    .shallow_clone(),
                g.tensor(&format!("grpo_lora.lora.{m}.lora_B"))
                    .shallow_clone(),
            )
        })
        .collect();
    model.lora().unwrap().load(&weights).unwrap();
    assert_eq!(model.lora().unwrap().modules().len(), modules.len());
    model
}

/// max |Δ| / max |reference| over the unmasked entries only.
fn masked_rel_diff(got: &Tensor, expected: &Tensor, mask: &Tensor) -> f64 {
    max_rel_diff(&(got * mask), &(expected * mask))
}

/// The case's prompt (pixels in `kind`), completions and completion mask.
fn case(g: &Golden, kind: Kind) -> (Prompt, Vec<Vec<i64>>, Tensor) {
    let c = &g.json["grpo_lora"];
    let rows = g.id_rows("/grpo_lora/input_ids");
    let prompt_len = c["prompt_len"].as_u64().unwrap() as usize;
    let grid = g.grid("/grpo_lora/grid");
    let prompt = Prompt {
        ids: rows[0][..prompt_len].to_vec(),
        image: Some((g.tensor("images.a.pixel_values").to_kind(kind), grid)),
    };
    assert!(rows.iter().all(|r| r[..prompt_len] == prompt.ids[..]));
    let completions: Vec<Vec<i64>> = rows.iter().map(|r| r[prompt_len..].to_vec()).collect();
    let mask_rows: Vec<Vec<f64>> = serde_json::from_value(c["completion_mask"].clone()).unwrap();
    let mask = Tensor::from_slice(&mask_rows.concat()).reshape([4, -1]);
    (prompt, completions, mask)
}

/// Runs a forward pass under autocast to `dtype`, or as is.
fn forward<T>(dtype: Option<Kind>, f: impl FnOnce() -> T) -> T {
    match dtype {
        Some(dtype) => autocast(Device::Cpu, dtype, f).unwrap(),
        None => f(),
    }
}

/// Reference and policy log-probs of the case, and its GRPO loss, whose
/// gradient is left in the adapters.
fn case_loss(g: &Golden, model: &Qwen25Vl, precision: Option<Kind>) -> (Tensor, Tensor, Tensor) {
    let (prompt, completions, mask) = case(g, model_kind(model));
    let c = &g.json["grpo_lora"];
    let rewards: Vec<f64> = serde_json::from_value(c["rewards"].clone()).unwrap();
    let advantages = group_advantages(&rewards).unwrap();
    let expected: Vec<f64> = serde_json::from_value(c["advantages"].clone()).unwrap();
    for (a, e) in advantages.iter().zip(&expected) {
        assert!(
            (a - e).abs() <= 1e-12 * e.abs().max(1.0),
            "advantages {advantages:?} vs {expected:?}"
        );
    }

    model.set_lora_enabled(false);
    let reference = forward(precision, || {
        tch::no_grad(|| completion_log_probs(model, &prompt, &completions, 1.0))
    })
    .unwrap();
    model.set_lora_enabled(true);
    let logp = forward(precision, || {
        completion_log_probs(model, &prompt, &completions, 1.0)
    })
    .unwrap();
    let constants = Objective {
        beta: c["beta"].as_f64().unwrap(),
        epsilon: c["epsilon"].as_f64().unwrap(),
    };
    let terms = objective(
        &logp,
        &logp.detach(),
        Some(&reference),
        &Tensor::from_slice(&advantages),
        &mask,
        constants,
    )
    .unwrap();
    let loss = terms.per_sequence.mean(Kind::Double);
    loss.backward();
    (reference * &mask, logp * &mask, loss)
}

fn model_kind(model: &Qwen25Vl) -> Kind {
    model.vars().variables()["model.embed_tokens.weight"].kind()
}

/// The largest relative error of the case's log-probs and adapter
/// gradients against transformers + PEFT (float64).
fn case_errors(g: &Golden, model: &Qwen25Vl, precision: Option<Kind>) -> Vec<(String, f64)> {
    let (_, _, mask) = case(g, Kind::Double);
    let (reference, logp, loss) = case_loss(g, model, precision);
    let mut errors = vec![
        (
            "reference log-probs".to_owned(),
            masked_rel_diff(&reference, g.tensor("grpo_lora.ref_logp"), &mask),
        ),
        (
            "policy log-probs".to_owned(),
            masked_rel_diff(&logp, g.tensor("grpo_lora.logp"), &mask),
        ),
        (
            "loss".to_owned(),
            max_rel_diff(&loss.reshape([1]), g.tensor("grpo_lora.loss")),
        ),
    ];
    for (module, a, b) in model.lora().unwrap().modules() {
        for (name, var) in [("lora_A", a), ("lora_B", b)] {
            let expected = g.tensor(&format!("grpo_lora.grad.{module}.{name}"));
            errors.push((
                format!("gradient of {module}.{name}"),
                max_rel_diff(&var.grad(), expected),
            ));
        }
    }
    errors
}

#[test]
fn grpo_lora_loss_and_gradients_match_transformers_and_peft_in_float64() {
    let g = golden();
    let model = adapted_model(&g, Kind::Double);
    for (what, diff) in case_errors(&g, &model, None) {
        assert!(diff <= F64_TOLERANCE, "{what}: relative error {diff:e}");
    }
    // The base weights are frozen: no gradient reaches them.
    assert!(
        model
            .vars()
            .variables()
            .values()
            .all(|v| !v.grad().defined())
    );
}

/// `precision = "bf16"`: float32 adapters over bfloat16 base weights, every
/// forward pass under bfloat16 autocast. There is no bfloat16 reference to
/// match bit for bit, so this checks the size of the error against
/// transformers' float64 values: within bfloat16's band (measured here:
/// log-probs 2.4% and 5.1% of their largest magnitude, gradient direction
/// cosine 0.85 — the GRPO gradient is a difference of near-equal terms),
/// and far beyond float32's (1e-6), so bfloat16 did the arithmetic. The
/// gradients reach the adapters in float32.
#[test]
fn bf16_autocast_stays_within_bfloat16_error_of_transformers() {
    let g = golden();
    let model = adapted_model(&g, Kind::BFloat16);
    let errors = case_errors(&g, &model, Some(Kind::BFloat16));
    for (what, diff) in &errors[..2] {
        assert!(*diff <= 0.2, "{what}: relative error {diff:e}");
        assert!(
            *diff > 1e-4,
            "{what}: relative error {diff:e}: was bfloat16 used?"
        );
    }
    let (mut got, mut expected) = (Vec::new(), Vec::new());
    for (module, a, b) in model.lora().unwrap().modules() {
        for (name, var) in [("lora_A", a), ("lora_B", b)] {
            assert_eq!(var.grad().kind(), Kind::Float, "{module}.{name}");
            got.push(var.grad().to_kind(Kind::Double).flatten(0, -1));
            expected.push(
                g.tensor(&format!("grpo_lora.grad.{module}.{name}"))
                    .to_kind(Kind::Double)
                    .flatten(0, -1),
            );
        }
    }
    let (got, expected) = (Tensor::cat(&got, 0), Tensor::cat(&expected, 0));
    let cosine = (&got * &expected).sum(Kind::Double).double_value(&[])
        / (got.norm().double_value(&[]) * expected.norm().double_value(&[]));
    assert!(cosine >= 0.7, "gradient direction: cosine {cosine}");
}

/// Merging `(α / r) · B A` into the weights gives the model transformers'
/// `merge_and_unload` gives: the same greedy ids, in float32.
#[test]
fn merged_weights_generate_what_peft_merged_generates() {
    let g = golden();
    let adapted = adapted_model(&g, Kind::Float);
    let merged = adapted.merged_weights().unwrap();
    let plain = Qwen25Vl::from_checkpoint(&checkpoint_dir(), Device::Cpu, Kind::Float).unwrap();
    let vars = plain.vars().variables();
    tch::no_grad(|| {
        for (name, value) in &merged {
            vars[name].shallow_clone().copy_(value);
        }
    });
    let case = &g.json["grpo_lora"]["merged_greedy"];
    let input: Vec<i64> = serde_json::from_value(case["input_ids"].clone()).unwrap();
    let expected: Vec<i64> = serde_json::from_value(case["greedy_ids"].clone()).unwrap();
    let got = plain
        .generate_greedy(&input, None, expected.len(), &[])
        .unwrap();
    assert_eq!(got, expected, "merged model");
    // The adapter itself (not merged) agrees, and differs from the base model.
    let unmerged = adapted
        .generate_greedy(&input, None, expected.len(), &[])
        .unwrap();
    assert_eq!(unmerged, expected, "adapter applied at run time");
    adapted.set_lora_enabled(false);
    let base = adapted
        .generate_greedy(&input, None, expected.len(), &[])
        .unwrap();
    assert_ne!(base, expected, "the adapter changes the model");
}
