//! Supervised fine-tuning's masked cross-entropy against transformers in
//! float64, and a few steps that memorise an answer.
//!
//! Golden values: `case_sft` of
//! `scripts/make-trainer-reference/make_reference.py`: two canonical BTL
//! answers (one with an empty blink) after the image prompt, labels -100 on
//! the prompt and the padding, transformers' causal-LM loss (mean over the
//! answer tokens) written out in float64, its per-token log-probs and the
//! gradients of a parameter of every block family.

use host_trainer::Qwen25Vl;
use host_trainer::grpo::optim::{AdamW, AdamWConfig};
use host_trainer::grpo::rollout::Prompt;
use host_trainer::sft::answer_loss;
use tch::Kind;

use crate::util::{Golden, golden, load, max_rel_diff};

const F64_TOLERANCE: f64 = 1e-9;

/// The case's prompt (pixels in `kind`) and its two answers.
fn case(g: &Golden, kind: Kind) -> (Prompt, Vec<Vec<i64>>) {
    let rows = g.id_rows("/sft/input_ids");
    let prompt_len = g.json["sft"]["prompt_len"].as_u64().unwrap() as usize;
    let lengths: Vec<usize> =
        serde_json::from_value(g.json["sft"]["answer_lengths"].clone()).unwrap();
    let prompt = Prompt {
        ids: rows[0][..prompt_len].to_vec(),
        image: Some((
            g.tensor("images.a.pixel_values").to_kind(kind),
            [g.grid("/sft/grid")],
        )),
    };
    let answers = rows
        .iter()
        .zip(&lengths)
        .map(|(row, &n)| row[prompt_len..prompt_len + n].to_vec())
        .collect();
    (prompt, answers)
}

/// `<|endoftext|>`, the padding id of the case.
fn pad(g: &Golden) -> i64 {
    let rows = g.id_rows("/sft/input_ids");
    *rows[1].last().unwrap()
}

#[test]
fn answer_loss_and_gradients_match_transformers_in_float64() {
    let g = golden();
    let model = load(Kind::Double);
    let (prompt, answers) = case(&g, Kind::Double);
    let lengths: Vec<usize> = answers.iter().map(Vec::len).collect();
    assert!(lengths[0] != lengths[1], "the case pads one answer");
    let out = answer_loss(&model, &prompt, &answers, pad(&g)).unwrap();
    assert_eq!(out.tokens, lengths.iter().sum::<usize>());
    out.loss.backward();

    let diff = max_rel_diff(&out.loss.reshape([1]), g.tensor("sft.loss"));
    assert!(diff <= F64_TOLERANCE, "loss: relative error {diff:e}");
    let diff = max_rel_diff(&out.token_log_probs, g.tensor("sft.token_logp"));
    assert!(
        diff <= F64_TOLERANCE,
        "token log-probs: relative error {diff:e}"
    );
    let vars = model.vars().variables();
    let params: Vec<String> =
        serde_json::from_value(g.json["sft"]["gradient_params"].clone()).unwrap();
    for name in &params {
        let diff = max_rel_diff(&vars[name].grad(), g.tensor(&format!("sft.grad.{name}")));
        assert!(
            diff <= F64_TOLERANCE,
            "gradient of {name}: relative error {diff:e}"
        );
    }
}

/// The prompt and padding are masked: changing a padded position's id or
/// the padding id leaves the loss as it was, while the answer's tokens
/// move it.
#[test]
fn only_answer_tokens_count() {
    let g = golden();
    let model = load(Kind::Double);
    let (prompt, answers) = case(&g, Kind::Double);
    let loss = |answers: &[Vec<i64>], pad: i64| {
        tch::no_grad(|| answer_loss(&model, &prompt, answers, pad).unwrap())
            .loss
            .double_value(&[])
    };
    let base = loss(&answers, pad(&g));
    assert_eq!(loss(&answers, 7), base, "the padding id is masked out");
    let mut changed = answers.clone();
    changed[1][0] = (changed[1][0] + 1) % 1000;
    assert!((loss(&changed, pad(&g)) - base).abs() > 1e-6);
    let bad = answer_loss(&model, &prompt, &[Vec::new()], 0);
    assert!(bad.is_err(), "an empty answer is refused");
}

/// 50 AdamW steps on the first answer drive its loss near zero, and greedy
/// decoding from the prompt then writes the answer token for token.
#[test]
fn fifty_steps_memorise_an_answer() {
    let g = golden();
    let model: Qwen25Vl = load(Kind::Float);
    let (prompt, answers) = case(&g, Kind::Float);
    let answer = answers[0].clone();
    let params = model
        .vars()
        .trainable_variables()
        .into_iter()
        .enumerate()
        .map(|(i, t)| (format!("p{i}"), t, false))
        .collect();
    let mut optimizer = AdamW::new(AdamWConfig::default(), params).unwrap();
    let mut first = None;
    let mut last = f64::NAN;
    for _ in 0..50 {
        optimizer.zero_grad();
        let out = answer_loss(&model, &prompt, std::slice::from_ref(&answer), 0).unwrap();
        out.loss.backward();
        last = out.loss.double_value(&[]);
        first.get_or_insert(last);
        optimizer.step(3e-3).unwrap();
    }
    let first = first.unwrap();
    assert!(last < 0.05, "loss {first} → {last}");

    let greedy = model
        .generate_greedy(&prompt.ids, prompt.images(), answer.len(), &[])
        .unwrap();
    assert_eq!(greedy, answer);
}
