//! Supervised fine-tuning's objective: masked cross-entropy on the answer.
//!
//! The prompt (system text, goal, history and the screenshot's image
//! tokens) conditions the answer but is not learned: only the answer's
//! tokens count (the canonical BTL text and its closing `<|im_end|>`), each
//! with weight one, averaged over every answer token of the batch. That is
//! transformers' causal-LM loss with the prompt and the padding labelled
//! -100, the loss TRL's `SFTTrainer` minimises on prompt–completion data.
//! The prompt is evaluated once and its KV cache shared by the batch's
//! answers (they follow the same prompt), as GRPO scores its completions.
//! Several samples' losses are evaluated either one sample at a time after
//! their shared text prefix ([`shared_prefix_loss`], the least arithmetic:
//! what a CPU wants) or as one padded batch ([`padded_batch_loss`], the
//! fewest and largest kernels: what a GPU wants); the two give one value.
//!
//! What a sample teaches is [`target_answer`]: the canonical BTL text of its
//! step, built from the sample's own fields.
//!
//! `sft.value_weight` is the one departure from equal weights: the tokens
//! that write a value the goal names (a typed name, hour or query;
//! [`goal_value_ranges`]) can count several times. They are a few tokens of
//! a hundred-token answer, so a small model lowers its loss most by getting
//! the rest right and typing each template's most frequent value, never
//! learning to read it from the goal (measured in docs/training.md).

use agent_core::protocol::{
    Action, BBox, BtlOutput, FrameMap, Link, ParseMode, Point, Roi, parse_link_json, render,
    smart_resize,
};
use agent_core::sample::Sample;
use std::ops::Range;
use tch::{Kind, Tensor};

use crate::data::augment::{named_value, whole_matches};
use crate::error::{Error, Result};
use crate::grpo::loss::token_log_probs;
use crate::grpo::prompt::EncodedText;
use crate::grpo::rollout::{Prompt, completion_log_probs, pad_completions};
use crate::model::{Batch, Grid, Images, KvCache, Qwen25Vl};

/// `sample` as seen at another screenshot size: `max_pixels` set to the
/// given one and the solution's point moved from the sample's model frame
/// to the new one (rounded), so the rewards and metrics, which read the
/// frame from `max_pixels`, judge answers written at that size. The sample
/// itself when the two frames are equal.
pub fn in_frame(sample: &Sample, max_pixels: u64) -> Result<Sample> {
    let bad = |why: String| {
        let name = sample.id.as_deref().unwrap_or("a sample");
        Error::Input(format!("{name}: {why}"))
    };
    let size = |max_pixels| {
        smart_resize(sample.image_size(), max_pixels)
            .map_err(|e| bad(format!("its screenshot size: {e}")))
    };
    let (from, to) = (size(sample.max_pixels)?, size(max_pixels)?);
    let mut out = sample.clone();
    out.max_pixels = max_pixels;
    if from == to {
        return Ok(out);
    }
    let (link, _) = parse_link_json(&sample.solution, ParseMode::Strict)
        .map_err(|e| bad(format!("its solution is no canonical link: {e}")))?;
    let scale = |v: f64, from: u32, to: u32| (v * f64::from(to) / f64::from(from)).round();
    let moved = |p: Point| {
        Point::new(
            scale(p.x, from.width, to.width),
            scale(p.y, from.height, to.height),
        )
    };
    out.solution = match link {
        Link::Action {
            plan,
            action: Action::Tap { point_2d },
        } => Link::Action {
            plan,
            action: Action::Tap {
                point_2d: moved(point_2d),
            },
        }
        .to_json(),
        Link::Action {
            plan,
            action: Action::LongPress { point_2d },
        } => Link::Action {
            plan,
            action: Action::LongPress {
                point_2d: moved(point_2d),
            },
        }
        .to_json(),
        Link::Action { .. } => sample.solution.clone(),
        Link::Point(p) => {
            let p = moved(p);
            format!("[{{\"point_2d\": [{}, {}]}}]", p.x, p.y)
        }
    };
    Ok(out)
}

/// The canonical BTL answer a sample teaches (spec §2), in the model frame
/// of its screenshot at `max_pixels` (the sample's own, or the run's
/// `data.max_pixels`, which the image is resized with; see [`in_frame`]):
/// - `<blink>`: the sample's ranked ROIs, best first, at most
///   `max_regions` (the decoding grammar's limit, so a model trained on it
///   can write it back), converted from screen pixels to the model frame
///   and rounded; none when the sample has none;
/// - `<think>`: the solution's Plan (the oracle's reason for the step);
/// - `<link>`: the solution itself (Plan and Action).
///
/// A grounding sample (a bare `point_2d` solution) teaches no whole answer
/// and is refused, as is a solution that does not parse strictly.
pub fn target_answer(sample: &Sample, max_pixels: u64, max_regions: usize) -> Result<String> {
    let name = sample.id.as_deref().unwrap_or("a sample");
    let bad = |why: String| Error::Input(format!("{name}: {why}"));
    let sample = in_frame(sample, max_pixels)?;
    let (link, _) = parse_link_json(&sample.solution, ParseMode::Strict)
        .map_err(|e| bad(format!("its solution is no canonical link: {e}")))?;
    let Link::Action { plan, .. } = &link else {
        return Err(bad(
            "a grounding solution (a bare point) has no BTL answer to learn".to_owned(),
        ));
    };
    let plan = plan.clone();
    let frame = FrameMap::new(sample.image_size(), sample.max_pixels)
        .map_err(|e| bad(format!("its screenshot size: {e}")))?;
    let to_model = |x: f64, y: f64| {
        let (w, h) = (
            f64::from(frame.device.width),
            f64::from(frame.device.height),
        );
        (
            (x.clamp(0.0, w) * f64::from(frame.model.width) / w).round(),
            (y.clamp(0.0, h) * f64::from(frame.model.height) / h).round(),
        )
    };
    let mut rois: Vec<_> = sample.rois.iter().collect();
    rois.sort_by_key(|r| r.priority);
    let blink = rois
        .into_iter()
        .take(max_regions)
        .map(|r| {
            let (x1, y1) = to_model(r.bbox_2d.x1, r.bbox_2d.y1);
            let (x2, y2) = to_model(r.bbox_2d.x2, r.bbox_2d.y2);
            Roi {
                bbox: BBox::new(x1, y1, x2, y2),
                label: r.label.clone(),
            }
        })
        .collect();
    let output = BtlOutput {
        blink,
        think: plan,
        link,
    };
    render(&output).map_err(|e| bad(format!("cannot be written as BTL: {e}")))
}

/// Byte ranges of `answer` (the [`target_answer`] of `sample`) that write a
/// value the sample's goal names: the text its Type action types, wherever
/// the answer writes it from `<think>` on (the thought, the Plan, the
/// action; inside the link as JSON escapes it), as a whole word: "26" in
/// "Type 26." but not in the blink's "[126, 260]". None when the sample
/// types nothing or its goal does not hold the text, which is then not
/// copied from the goal.
pub fn goal_value_ranges(sample: &Sample, answer: &str) -> Vec<Range<usize>> {
    let Ok((
        Link::Action {
            action: Action::Type { text },
            ..
        },
        _,
    )) = parse_link_json(&sample.solution, ParseMode::Strict)
    else {
        return Vec::new();
    };
    let Some(value) = named_value(sample, &text) else {
        return Vec::new();
    };
    let escaped = serde_json::to_string(value).unwrap_or_default();
    let escaped = escaped
        .strip_prefix('"')
        .and_then(|e| e.strip_suffix('"'))
        .unwrap_or(value);
    let from = answer.find("<think>").unwrap_or(answer.len());
    // A match that continues a word or number of the answer is not the value.
    let mut ranges: Vec<Range<usize>> = [value, escaped]
        .iter()
        .take(if escaped == value { 1 } else { 2 })
        .flat_map(|needle| {
            whole_matches(&answer[from..], needle)
                .map(move |at| from + at..from + at + needle.len())
        })
        .collect();
    ranges.sort_by_key(|r| r.start);
    ranges
}

/// Each token's weight in the loss: `weight` for a token whose byte span
/// (`offsets`, as the tokenizer reports them) overlaps one of `ranges`, 1
/// for the others.
pub fn value_weights(offsets: &[(usize, usize)], ranges: &[Range<usize>], weight: f64) -> Vec<f64> {
    offsets
        .iter()
        .map(|&(start, end)| {
            if ranges.iter().any(|r| start < r.end && r.start < end) {
                weight
            } else {
                1.0
            }
        })
        .collect()
}

/// An answer to learn: its token ids (ending with the stop id) and, when
/// some of them count more than once ([`value_weights`]), each id's weight.
pub struct Answer {
    /// Token ids.
    pub ids: Vec<i64>,
    /// Weight of each id in the loss; `None`: all 1.
    pub weights: Option<Vec<f64>>,
}

impl Answer {
    /// Ids, each with weight 1.
    pub fn plain(ids: Vec<i64>) -> Self {
        Self { ids, weights: None }
    }

    /// What SFT learns of `sample`: its [`target_answer`] `text`, as
    /// `encoded` by the tokenizer, then `stop`; the tokens that write a value
    /// the goal names ([`goal_value_ranges`]) count `value_weight` times.
    pub fn for_sample(
        sample: &Sample,
        text: &str,
        encoded: EncodedText,
        stop: i64,
        value_weight: f64,
    ) -> Self {
        let EncodedText { mut ids, spans } = encoded;
        ids.push(stop);
        // Plain SFT skips the search for values: it runs on every step.
        if value_weight == 1.0 {
            return Self::plain(ids);
        }
        let values = goal_value_ranges(sample, text);
        let weights = (!values.is_empty()).then(|| {
            let mut weights = value_weights(&spans, &values, value_weight);
            weights.push(1.0);
            weights
        });
        Self { ids, weights }
    }
}

/// The weights of `answers` end to end, or `None` when all are 1.
fn joined_weights<'a>(answers: impl Iterator<Item = &'a Answer> + Clone) -> Option<Vec<f64>> {
    if answers.clone().all(|a| a.weights.is_none()) {
        return None;
    }
    Some(
        answers
            .flat_map(|a| match &a.weights {
                Some(w) => w.clone(),
                None => vec![1.0; a.ids.len()],
            })
            .collect(),
    )
}

/// The loss of a batch of answers to one prompt.
pub struct AnswerLoss {
    /// Mean of −log p over every answer token of the batch (a scalar with
    /// the model's gradient).
    pub loss: Tensor,
    /// log p of each answer token (rows, longest answer), 0 on padding.
    pub token_log_probs: Tensor,
    /// Answer tokens the mean is over.
    pub tokens: usize,
}

/// The masked cross-entropy of `answers` (token ids, each ending with its
/// stop id) after `prompt`; shorter answers are padded with `pad`, which
/// is masked out.
pub fn answer_loss(
    model: &Qwen25Vl,
    prompt: &Prompt,
    answers: &[Vec<i64>],
    pad: i64,
) -> Result<AnswerLoss> {
    let tokens: usize = answers.iter().map(Vec::len).sum();
    if answers.is_empty() || answers.iter().any(Vec::is_empty) {
        return Err(Error::Input(
            "supervised fine-tuning needs answers of at least one token".to_owned(),
        ));
    }
    let (padded, mask) = pad_completions(answers, pad);
    let logp = completion_log_probs(model, prompt, &padded, 1.0)?;
    let mask = Tensor::f_from_slice(&mask.concat())?
        .f_reshape([answers.len() as i64, -1])?
        .f_to_kind(logp.kind())?
        .f_to_device(logp.device())?;
    let token_log_probs = logp.f_mul(&mask)?;
    let loss = token_log_probs
        .f_sum(Kind::Double)?
        .f_neg()?
        .f_div_scalar(tokens as f64)?;
    Ok(AnswerLoss {
        loss,
        token_log_probs,
        tokens,
    })
}

/// How many leading ids every prompt of a micro-batch shares, up to its
/// first image token and short of the shortest prompt (each keeps at least
/// its last token, whose hidden state predicts the answer's first).
pub fn shared_prefix_len(prompts: &[&Prompt], image_token_id: i64) -> usize {
    let Some(first) = prompts.first() else {
        return 0;
    };
    let shortest = prompts.iter().map(|p| p.ids.len()).min().unwrap_or(0);
    let mut len = first
        .ids
        .iter()
        .position(|&id| id == image_token_id)
        .unwrap_or(first.ids.len())
        .min(shortest.saturating_sub(1));
    for prompt in &prompts[1..] {
        len = first.ids[..len]
            .iter()
            .zip(&prompt.ids)
            .take_while(|(a, b)| a == b)
            .count();
    }
    len
}

/// The summed answer loss of a micro-batch, each token's −log p divided by
/// `tokens` (the step's answer tokens), with the prompts' common text
/// prefix ([`shared_prefix_len`]) evaluated once: its KV cache serves every
/// answer and gathers their gradients. With every weight 1 the value equals
/// the sum of [`answer_loss`] over the samples, each weighted by its share
/// of tokens.
pub fn shared_prefix_loss(
    model: &Qwen25Vl,
    batch: &[(&Prompt, &Answer)],
    tokens: usize,
) -> Result<Tensor> {
    if batch.is_empty() || batch.iter().any(|(_, answer)| answer.ids.is_empty()) {
        return Err(Error::Input(
            "supervised fine-tuning needs answers of at least one token".to_owned(),
        ));
    }
    let prompts: Vec<&Prompt> = batch.iter().map(|(p, _)| *p).collect();
    let shared = shared_prefix_len(&prompts, model.config().image_token_id);
    let prefix = &prompts[0].ids[..shared];
    let mut cache = KvCache::new();
    if shared > 0 {
        // Only the prefix's KV cache is needed; the suffixes predict.
        let _ = model.hidden_cached(
            &Batch {
                input_ids: &[prefix.to_vec()],
                images: None,
            },
            &mut cache,
        )?;
    }
    let mut total: Option<Tensor> = None;
    for (prompt, answer) in batch {
        // The rest of the prompt, then the answer but its last token: the
        // hidden states from the prompt's last token on predict the answer.
        let suffix: Vec<i64> = prompt.ids[shared..]
            .iter()
            .chain(&answer.ids[..answer.ids.len() - 1])
            .copied()
            .collect();
        let images = prompt.images();
        let hidden = if shared > 0 {
            model.hidden_after_prefix(prefix, &cache, &suffix, images.as_ref())?
        } else {
            model.hidden_states(&Batch {
                input_ids: &[suffix],
                images,
            })?
        };
        let start = (prompt.ids.len() - shared - 1) as i64;
        let n = answer.ids.len() as i64;
        let targets = Tensor::f_from_slice(&answer.ids)?
            .f_reshape([1, n])?
            .f_to_device(model.device())?;
        let logits = model.logits(&hidden.f_narrow(1, start, n)?)?;
        let part = mean_nll(&logits, &targets, answer.weights.as_deref(), tokens)?;
        total = Some(match total {
            Some(t) => t.f_add(&part)?,
            None => part,
        });
    }
    total.ok_or_else(|| Error::Input("an empty micro-batch".to_owned()))
}

/// The summed answer loss of a micro-batch in one forward pass, each token's
/// −log p divided by `tokens` as in [`shared_prefix_loss`], which it equals.
/// Each prompt and its answer (but the answer's last token) make one
/// sequence; shorter sequences are padded on the right with `pad`, and
/// causal attention keeps every real position from seeing the padding, so
/// padding changes nothing but the work. The images go through the vision
/// tower together, and only the positions that predict answer tokens reach
/// `lm_head`.
pub fn padded_batch_loss(
    model: &Qwen25Vl,
    batch: &[(&Prompt, &Answer)],
    tokens: usize,
    pad: i64,
) -> Result<Tensor> {
    if batch.is_empty() || batch.iter().any(|(_, answer)| answer.ids.is_empty()) {
        return Err(Error::Input(
            "supervised fine-tuning needs answers of at least one token".to_owned(),
        ));
    }
    let mut sequences: Vec<Vec<i64>> = batch
        .iter()
        .map(|(prompt, answer)| {
            prompt
                .ids
                .iter()
                .chain(&answer.ids[..answer.ids.len() - 1])
                .copied()
                .collect()
        })
        .collect();
    let len = sequences.iter().map(Vec::len).max().unwrap_or(0);
    for sequence in &mut sequences {
        sequence.resize(len, pad);
    }
    let images: Vec<&(Tensor, [Grid; 1])> =
        batch.iter().filter_map(|(p, _)| p.image.as_ref()).collect();
    let pixel_values = match images.as_slice() {
        [] => None,
        [(one, _)] => Some(one.shallow_clone()),
        many => Some(Tensor::f_cat(
            &many.iter().map(|(t, _)| t).collect::<Vec<_>>(),
            0,
        )?),
    };
    let grids: Vec<Grid> = images.iter().map(|(_, [grid])| *grid).collect();
    let hidden = model.hidden_states(&Batch {
        input_ids: &sequences,
        images: pixel_values.as_ref().map(|pixel_values| Images {
            pixel_values,
            grids: &grids,
        }),
    })?;
    // Row of (sequence i, position start_i + j) in the flattened batch: the
    // hidden state that predicts answer token j.
    let mut rows = Vec::with_capacity(tokens);
    let mut targets = Vec::with_capacity(tokens);
    for (i, (prompt, answer)) in batch.iter().enumerate() {
        let start = i * len + prompt.ids.len() - 1;
        rows.extend((start..start + answer.ids.len()).map(|r| r as i64));
        targets.extend_from_slice(&answer.ids);
    }
    let weights = joined_weights(batch.iter().map(|(_, answer)| *answer));
    let device = model.device();
    let width = hidden.size()[2];
    let picked = hidden
        .f_reshape([-1, width])?
        .f_index_select(0, &Tensor::f_from_slice(&rows)?.f_to_device(device)?)?
        .f_unsqueeze(0)?;
    let targets = Tensor::f_from_slice(&targets)?
        .f_unsqueeze(0)?
        .f_to_device(device)?;
    mean_nll(
        &model.logits(&picked)?,
        &targets,
        weights.as_deref(),
        tokens,
    )
}

/// The negative log-likelihood of `targets` under `logits`, each token's
/// times its weight (`None`: 1), summed in float64 and divided by the
/// micro-batch's `tokens`, so parts of one micro-batch add up to its mean.
fn mean_nll(
    logits: &Tensor,
    targets: &Tensor,
    weights: Option<&[f64]>,
    tokens: usize,
) -> Result<Tensor> {
    weighted_nll(&token_log_probs(logits, targets, 1.0)?, weights, tokens)
}

/// −Σ weight · `log_probs` (each weight 1 when `None`; padding positions
/// must hold 0) in float64, divided by `tokens`: the one sum every SFT path
/// takes.
pub(crate) fn weighted_nll(
    log_probs: &Tensor,
    weights: Option<&[f64]>,
    tokens: usize,
) -> Result<Tensor> {
    let summed = match weights {
        None => log_probs.f_sum(Kind::Double)?,
        Some(weights) => log_probs
            .f_to_kind(Kind::Double)?
            .f_mul(
                &Tensor::f_from_slice(weights)?
                    .f_reshape(log_probs.size())?
                    .f_to_device(log_probs.device())?,
            )?
            .f_sum(Kind::Double)?,
    };
    Ok(summed.f_neg()?.f_div_scalar(tokens as f64)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_core::sample::{Message, RankedRoi};

    fn sample(solution: &str, rois: Vec<RankedRoi>) -> Sample {
        Sample {
            id: Some("ep/step-0001".into()),
            images: vec!["s.png".into()],
            // 1080×2400 at 200,704 pixels: the model frame is 280×644
            // (spec §3: β = √(1080·2400/200704) = 3.594, ⌊2400/β/28⌋·28 =
            // 23·28 = 644, ⌊1080/β/28⌋·28 = 10·28 = 280).
            image_sizes: vec![[1080, 2400]],
            max_pixels: 200_704,
            messages: vec![Message {
                role: "user".into(),
                content: "<image>Turn on Wi-Fi.".into(),
            }],
            solution: solution.into(),
            bbox: vec![],
            rois,
        }
    }

    fn roi(b: [f64; 4], label: &str, priority: u32) -> RankedRoi {
        RankedRoi {
            bbox_2d: BBox::new(b[0], b[1], b[2], b[3]),
            label: label.into(),
            priority,
        }
    }

    #[test]
    fn the_answer_is_the_ranked_rois_the_plan_and_the_solution() {
        let s = sample(
            r#"[{"Plan": "Open Wi-Fi.", "Action": {"function": "Tap", "point_2d": [140, 100]}}]"#,
            vec![
                roi([0.0, 300.0, 540.0, 420.0], "Bluetooth", 2),
                roi([0.0, 240.0, 1080.0, 360.0], "Wi-Fi", 1),
                roi([10.0, 10.0, 20.0, 20.0], "Clock", 3),
            ],
        );
        // x · 280/1080, y · 644/2400, rounded half away from zero as the
        // oracle rounds its boxes: 240 → 64.4 → 64, 360 → 96.6 → 97,
        // 540 → 140, 300 → 80.5 → 81, 420 → 112.7 → 113. Two regions of
        // three, by priority.
        let answer = target_answer(&s, s.max_pixels, 2).unwrap();
        assert_eq!(
            answer,
            "<blink>```json\n[{\"bbox_2d\": [0, 64, 280, 97], \"label\": \"Wi-Fi\"}, \
             {\"bbox_2d\": [0, 81, 140, 113], \"label\": \"Bluetooth\"}]\n```</blink>\n\
             <think>Open Wi-Fi.</think>\n<link>```json\n[{\"Plan\": \"Open Wi-Fi.\", \
             \"Action\": {\"function\": \"Tap\", \"point_2d\": [140, 100]}}]\n```</link>"
        );
    }

    /// Trained at another screenshot size, the answer is written in that
    /// frame: the solution's point and the ROIs move with it.
    #[test]
    fn another_max_pixels_moves_the_point_and_the_boxes() {
        let s = sample(
            r#"[{"Plan": "Open Wi-Fi.", "Action": {"function": "Tap", "point_2d": [140, 100]}}]"#,
            vec![roi([0.0, 240.0, 1080.0, 360.0], "Wi-Fi", 1)],
        );
        // At 4,014,080 pixels 1080×2400 becomes 1092×2408 (round(1080/28)
        // = 39 → 1092, round(2400/28) = 86 → 2408, under the limit). The
        // point: 140 · 1092/280 = 546, 100 · 2408/644 = 373.9 → 374. The
        // box: 240 · 2408/2400 = 240.8 → 241, 360 · 2408/2400 = 361.2 → 361.
        let answer = target_answer(&s, 4_014_080, 3).unwrap();
        assert!(
            answer.contains(r#"{"bbox_2d": [0, 241, 1092, 361], "label": "Wi-Fi"}"#),
            "{answer}"
        );
        assert!(answer.contains(r#""point_2d": [546, 374]"#), "{answer}");
    }

    #[test]
    fn in_frame_moves_points_only() {
        let tap = sample(
            r#"[{"Plan": "Open Wi-Fi.", "Action": {"function": "Tap", "point_2d": [140, 100]}}]"#,
            vec![],
        );
        assert_eq!(in_frame(&tap, tap.max_pixels).unwrap(), tap);
        let moved = in_frame(&tap, 4_014_080).unwrap();
        assert_eq!(moved.max_pixels, 4_014_080);
        assert_eq!(
            moved.solution,
            r#"[{"Plan": "Open Wi-Fi.", "Action": {"function": "Tap", "point_2d": [546, 374]}}]"#
        );
        let back = sample(
            r#"[{"Plan": "Go back.", "Action": {"function": "Back"}}]"#,
            vec![],
        );
        assert_eq!(in_frame(&back, 4_014_080).unwrap().solution, back.solution);
        let grounding = sample(r#"[{"point_2d": [28, 64]}]"#, vec![]);
        // 28 · 1092/280 = 109.2 → 109, 64 · 2408/644 = 239.3 → 239.
        assert_eq!(
            in_frame(&grounding, 4_014_080).unwrap().solution,
            r#"[{"point_2d": [109, 239]}]"#
        );
    }

    #[test]
    fn no_rois_give_an_empty_blink_and_bad_solutions_are_named() {
        let s = sample(
            r#"[{"Plan": "Go back.", "Action": {"function": "Back"}}]"#,
            vec![],
        );
        assert!(
            target_answer(&s, s.max_pixels, 3)
                .unwrap()
                .starts_with("<blink>```json\n[]\n```</blink>")
        );
        let grounding = sample(r#"[{"point_2d": [1, 2]}]"#, vec![]);
        let e = target_answer(&grounding, 200_704, 3)
            .unwrap_err()
            .to_string();
        assert!(e.contains("ep/step-0001") && e.contains("grounding"), "{e}");
        let broken = sample("[{", vec![]);
        let e = target_answer(&broken, 200_704, 3).unwrap_err().to_string();
        assert!(e.contains("ep/step-0001") && e.contains("solution"), "{e}");
    }

    fn typing(goal: &str, plan: &str, text: &str) -> Sample {
        let link = Link::Action {
            plan: plan.into(),
            action: Action::Type { text: text.into() },
        };
        let mut s = sample(&link.to_json(), vec![]);
        s.messages[0].content =
            format!("<image>\n\n## User Instruction\n{goal}\n\n## Action History\n");
        s
    }

    #[test]
    fn the_goals_value_is_found_wherever_the_answer_writes_it() {
        let s = typing("Set an alarm for 09:26.", "Type 26 as the minutes.", "26");
        let answer = target_answer(&s, s.max_pixels, 3).unwrap();
        let ranges = goal_value_ranges(&s, &answer);
        // The think, the Plan and the typed text: three times.
        assert_eq!(ranges.len(), 3, "{answer}");
        assert!(ranges.iter().all(|r| &answer[r.clone()] == "26"));
        let think = answer.find("<think>").unwrap();
        let link = answer.find("<link>").unwrap();
        assert!(think < ranges[0].start && ranges[0].end < link);
        assert!(ranges[1].start > link && ranges[2].start > ranges[1].end);

        // Inside the link the value is JSON: its quotes escaped.
        let s = typing(
            r#"Type say "hi" to Ana."#,
            r#"Type say "hi" in the box."#,
            r#"say "hi""#,
        );
        let answer = target_answer(&s, s.max_pixels, 3).unwrap();
        let found: Vec<&str> = goal_value_ranges(&s, &answer)
            .into_iter()
            .map(|r| &answer[r])
            .collect();
        assert_eq!(found, [r#"say "hi""#, r#"say \"hi\""#, r#"say \"hi\""#]);

        // Not in the blink (a label here), nor inside another number or word.
        let mut s = typing("Set an alarm for 09:26.", "Type 26, not 126 or x26.", "26");
        s.rois = vec![roi([126.0, 260.0, 526.0, 626.0], "26", 1)];
        let answer = target_answer(&s, s.max_pixels, 3).unwrap();
        let think = answer.find("<think>").unwrap();
        let ranges = goal_value_ranges(&s, &answer);
        assert_eq!(ranges.len(), 3, "{answer}");
        assert!(
            ranges
                .iter()
                .all(|r| r.start > think && &answer[r.clone()] == "26")
        );

        // Text the goal does not hold, a tap, a goal-less prompt: nothing.
        let s = typing("Set an alarm for 09:26.", "Type 27.", "27");
        assert!(goal_value_ranges(&s, &target_answer(&s, s.max_pixels, 3).unwrap()).is_empty());
        let tap = sample(
            r#"[{"Plan": "Tap 26.", "Action": {"function": "Tap", "point_2d": [1, 2]}}]"#,
            vec![],
        );
        assert!(goal_value_ranges(&tap, "<think>Tap 26.</think>").is_empty());
        let mut bare = typing("x", "Type 26.", "26");
        bare.messages[0].content = "<image>Type 26.".into();
        assert!(goal_value_ranges(&bare, "<think>Type 26.</think>").is_empty());
    }

    #[test]
    fn tokens_overlapping_a_value_take_its_weight() {
        // "Type 26 as" in tokens "Type", " 2", "6", " as": the value 26 is
        // bytes 5..7.
        let offsets = [(0, 4), (4, 6), (6, 7), (7, 10)];
        assert_eq!(
            value_weights(&offsets, std::slice::from_ref(&(5..7)), 4.0),
            [1.0, 4.0, 4.0, 1.0]
        );
        assert_eq!(value_weights(&offsets, &[], 4.0), [1.0; 4]);
        // A range ending where a token starts does not touch it.
        assert_eq!(
            value_weights(&offsets, std::slice::from_ref(&(0..4)), 0.5),
            [0.5, 1.0, 1.0, 1.0]
        );
    }
}
