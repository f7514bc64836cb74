//! GRPO-style loss and gradients against transformers in float64, and a
//! gradient for every weight.
//!
//! Golden values: `case_grpo` of `scripts/make-trainer-reference/make_reference.py`:
//!
//! ```python
//! logits = model(input_ids=ids, mm_token_type_ids=(ids == image_id).int(),
//!                pixel_values=cat([pv_a, pv_a]).double(), image_grid_thw=[grid_a, grid_a]).logits
//! logp = log_softmax(logits[:, p - 1:-1], -1).gather(-1, ids[:, p:, None])[..., 0]
//! loss = -(advantages[:, None] * logp).mean(-1).mean()
//! loss.backward()
//! ```
//!
//! (transformers' RMSNorm and vision rotary patched to stay in float64; see
//! the script.) Tolerance: 1e-9 relative, as max |Δ| / max |reference| per tensor.

use host_trainer::{Batch, Images, Qwen25Vl};
use tch::{Kind, Tensor};

use crate::util::{Golden, golden, load, max_rel_diff};

const F64_TOLERANCE: f64 = 1e-9;

/// The same loss as the script, on `model`; returns (loss, token log-probs).
fn grpo_loss(model: &Qwen25Vl, g: &Golden) -> (Tensor, Tensor) {
    let ids = g.id_rows("/grpo/input_ids");
    let prompt_len: i64 = serde_json::from_value(g.json["grpo"]["prompt_len"].clone()).unwrap();
    let advantages: Vec<f64> =
        serde_json::from_value(g.json["grpo"]["advantages"].clone()).unwrap();
    let grid = g.grid("/grpo/grid");
    let pv = g.tensor("images.a.pixel_values");
    let pixel_values = Tensor::cat(&[pv, pv], 0);
    let grids = [grid, grid];
    let logits = model
        .forward(&Batch {
            input_ids: &ids,
            images: Some(Images {
                pixel_values: &pixel_values,
                grids: &grids,
            }),
        })
        .unwrap();
    let len = ids[0].len() as i64;
    let completion = len - prompt_len;
    let targets = Tensor::from_slice(&ids.concat())
        .reshape([ids.len() as i64, len])
        .narrow(1, prompt_len, completion);
    let logp = logits
        .narrow(1, prompt_len - 1, completion)
        .log_softmax(-1, Kind::Double)
        .gather(-1, &targets.unsqueeze(-1), false)
        .squeeze_dim(-1);
    let advantages = Tensor::from_slice(&advantages).unsqueeze(-1);
    let loss = -(advantages * &logp)
        .mean_dim(-1, false, Kind::Double)
        .mean(Kind::Double);
    (loss, logp)
}

#[test]
fn grpo_loss_and_gradients_match_transformers_in_float64() {
    let model = load(Kind::Double);
    let g = golden();
    let (loss, logp) = grpo_loss(&model, &g);
    loss.backward();

    let diff = max_rel_diff(&loss.reshape([1]), g.tensor("grpo.loss"));
    assert!(diff <= F64_TOLERANCE, "loss: relative error {diff:e}");
    let diff = max_rel_diff(&logp, g.tensor("grpo.logp"));
    assert!(
        diff <= F64_TOLERANCE,
        "token log-probs: relative error {diff:e}"
    );

    let vars = model.vars().variables();
    let params: Vec<String> =
        serde_json::from_value(g.json["grpo"]["gradient_params"].clone()).unwrap();
    for name in &params {
        let grad = vars[name].grad();
        let diff = max_rel_diff(&grad, g.tensor(&format!("grpo.grad.{name}")));
        assert!(
            diff <= F64_TOLERANCE,
            "gradient of {name}: relative error {diff:e}"
        );
    }

    // The norm of every parameter's gradient, so no weight escapes the check.
    let names: Vec<String> =
        serde_json::from_value(g.json["grpo"]["grad_norm_names"].clone()).unwrap();
    let mut sorted: Vec<&String> = vars.keys().collect();
    sorted.sort();
    assert_eq!(
        sorted,
        names.iter().collect::<Vec<_>>(),
        "the same parameters"
    );
    let norms = Tensor::stack(
        &names
            .iter()
            .map(|n| vars[n].grad().norm())
            .collect::<Vec<_>>(),
        0,
    );
    let expected = g.tensor("grpo.grad_norms");
    let relative = ((&norms - expected).abs() / expected)
        .max()
        .double_value(&[]);
    assert!(
        relative <= F64_TOLERANCE,
        "gradient norms: relative error {relative:e}"
    );
}

/// One backward in float32 reaches every trainable tensor (no detached path:
/// vision blocks, merger, both embeddings, every layer, lm_head).
#[test]
fn every_trainable_tensor_receives_a_gradient() {
    let model = load(Kind::Float);
    let g = golden();
    let (loss, _) = grpo_loss(&model, &g);
    loss.backward();
    let vars = model.vars().variables();
    assert_eq!(model.vars().trainable_variables().len(), vars.len());
    let mut without: Vec<&String> = vars
        .iter()
        .filter(|(_, v)| {
            let grad = v.grad();
            !grad.defined() || grad.abs().sum(Kind::Double).double_value(&[]) == 0.0
        })
        .map(|(n, _)| n)
        .collect();
    without.sort();
    assert!(without.is_empty(), "no gradient for {without:?}");
    assert_eq!(vars.len(), 81, "the tiny model has 81 weight tensors");
}
