//! Throughput of reading and scoring one completion, the per-completion cost
//! a GRPO reward server pays (8 generations per prompt).
//!
//! Three measurements on the canonical answer to the official navigation
//! example (blink box = the GT box, Tap at the GT point), each reported as
//! completions per second:
//! - `parse_tolerant`: the runtime parser alone;
//! - `parse_score_released` / `parse_score_paper`: the parser plus the full
//!   reward (format, blink and link terms) in that mode.
//!
//! Run: `cargo bench -p agent-core --bench reward`. Nothing here asserts on
//! time; the checks before the measurements only make sure the success path
//! (the expensive one) is what gets measured.

use agent_core::protocol::{ParseMode, parse};
use agent_core::reward::{RewardMode, Weights, score};
use agent_core::sample::{Sample, parse_samples};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

const NAVIGATION: &str =
    include_str!("../../tests/data/btl-ui-examples/navigation_meta_format.json");

/// The canonical answer that earns every reward term on the navigation example.
const COMPLETION: &str = "<blink>```json\n\
[{\"bbox_2d\": [614, 1094, 720, 1182], \"label\": \"Search button at the bottom right\"}, \
{\"bbox_2d\": [24, 96, 696, 168], \"label\": \"Search bar\"}]\n\
```</blink>\n\
<think>The weather app shows Los Angeles now. To invite katsunaksu I must leave this screen; \
the search button at the bottom right opens the next step.</think>\n\
<link>```json\n\
[{\"Plan\": \"Tap the search button at the bottom right.\", \
\"Action\": {\"function\": \"Tap\", \"point_2d\": [663, 1135]}}]\n\
```</link>";

fn navigation_sample() -> Sample {
    parse_samples(NAVIGATION)
        .expect("the official navigation example parses")
        .remove(0)
}

fn bench_reward(c: &mut Criterion) {
    let sample = navigation_sample();
    let weights = Weights::default();

    // Not timed: the benchmark must measure a full, successful pass.
    let parsed = parse(COMPLETION, ParseMode::Strict).expect("the completion is canonical");
    assert!(parsed.tolerances.is_empty());
    for mode in [RewardMode::Released, RewardMode::Paper] {
        let r = score(&sample, COMPLETION, mode, weights);
        assert_eq!(
            (r.format, r.blink, r.link),
            (1.0, 1.0, 1.0),
            "{mode:?}: {r:?}"
        );
    }

    let mut group = c.benchmark_group("navigation_completion");
    group.throughput(Throughput::Elements(1));
    group.bench_function("parse_tolerant", |b| {
        b.iter(|| parse(black_box(COMPLETION), ParseMode::Tolerant))
    });
    for (name, mode) in [
        ("parse_score_released", RewardMode::Released),
        ("parse_score_paper", RewardMode::Paper),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let text = black_box(COMPLETION);
                let parsed = parse(text, ParseMode::Tolerant);
                let reward = score(black_box(&sample), text, mode, weights);
                (parsed, reward)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_reward);
criterion_main!(benches);
