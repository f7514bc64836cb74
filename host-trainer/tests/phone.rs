//! A trained checkpoint exported for the phone: llama.cpp (agent-core's
//! backend) runs the exported GGUFs and generates the trainer's greedy
//! tokens, both merged and as base + GGUF LoRA adapter; the agent runs a
//! step with them on the virtual phone.

use std::path::Path;
use std::sync::Arc;

use agent_core::agent::stability::{ManualClock, StabilityConfig};
use agent_core::agent::{Agent, AgentConfig};
use agent_core::device::sim::SimDevice;
use agent_core::model::llama::{LlamaConfig, LlamaPolicy};
use agent_core::model::{LoraAdapter, ModelSettings, Policy};
use agent_core::protocol::Profile;
use agent_core::sim::phone::PhoneConfig;
use agent_core::sim::tasks::{self, Task};
use agent_core::sim::virtual_phone::VirtualPhone;
use host_trainer::export::trained::{ExportOptions, RunSettings, export_trained};
use host_trainer::export::{Precision, write_gguf_from_template};
use host_trainer::grpo::checkpoint::{load_trained, trained_config};
use host_trainer::grpo::run::run;
use serde_json::Value;

use crate::training::{Digits, toy_config};
use crate::util::gguf_dir;

const NEW_TOKENS: usize = 24;

/// The fixture's text prompt: its chat text and ids (reference.json).
fn text_prompt() -> (String, Vec<i64>, Vec<i64>) {
    let text = std::fs::read_to_string(gguf_dir().join("reference.json")).unwrap();
    let r: Value = serde_json::from_str(&text).unwrap();
    let case = &r["cases"]["text"];
    let ids = serde_json::from_value(case["prompt_ids"].clone()).unwrap();
    let eog = serde_json::from_value(r["tokenizer"]["eog_ids_llama_cpp"].clone()).unwrap();
    (case["prompt_text"].as_str().unwrap().to_owned(), ids, eog)
}

fn llama_greedy(model: &Path, mmproj: &Path, lora: Option<&Path>, prompt: &str) -> Vec<i64> {
    let mut config = LlamaConfig::new(model, mmproj);
    config.adapters = lora.map(LoraAdapter::new).into_iter().collect();
    config.max_tokens = NEW_TOKENS as u32;
    config.grammar = false;
    let mut policy = LlamaPolicy::load(config).unwrap();
    let generation = policy.generate(prompt, None, 0).unwrap();
    generation.tokens.iter().map(|&t| i64::from(t)).collect()
}

#[test]
fn an_exported_checkpoint_runs_in_llama_cpp_as_the_trainer_runs_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = toy_config(dir.path(), 3);
    let outcome = run(config, Box::new(Digits), None, |_| {}).unwrap();
    let checkpoint = outcome.last_checkpoint.unwrap();

    let out = dir.path().join("export");
    let exported = export_trained(
        &checkpoint,
        &ExportOptions {
            text_template: &gguf_dir().join("tiny-qwen25vl-f16.gguf"),
            mmproj_template: Some(&gguf_dir().join("mmproj-tiny-qwen25vl-f16.gguf")),
            precision: Precision::F32,
            lora_gguf: true,
            settings: RunSettings {
                profile: Some(Profile::BtlExtended),
                max_pixels: None,
            },
            out: &out,
        },
    )
    .unwrap();
    assert!(exported.hf.join("model.safetensors").is_file());
    assert!(exported.hf.join("config.json").is_file());

    let (prompt_text, prompt_ids, eog) = text_prompt();
    let trained = load_trained(&checkpoint, &trained_config(&checkpoint).unwrap()).unwrap();
    let mut expected = trained
        .generate_greedy(&prompt_ids, None, NEW_TOKENS, &eog)
        .unwrap();
    if expected.last().is_some_and(|t| eog.contains(t)) {
        expected.pop();
    }
    trained.set_lora_enabled(false);
    let base = trained
        .generate_greedy(&prompt_ids, None, NEW_TOKENS, &eog)
        .unwrap();
    assert_ne!(
        base[..4],
        expected[..4.min(expected.len())],
        "training changed the greedy answer"
    );

    let mmproj = exported.mmproj.as_ref().unwrap();
    // How to run it: the profile given, the training samples' max_pixels.
    let settings = LlamaPolicy::load(LlamaConfig::new(&exported.text, mmproj))
        .unwrap()
        .settings();
    let sample_pixels =
        host_trainer::data::load_samples(&dir.path().join("samples.json")).unwrap()[0].max_pixels;
    assert_eq!(
        settings,
        ModelSettings {
            profile: Some(Profile::BtlExtended),
            max_pixels: Some(sample_pixels),
            prompt_version: Some(Profile::BtlExtended.prompt_version()),
        }
    );
    let merged = llama_greedy(&exported.text, mmproj, None, &prompt_text);
    assert_eq!(merged, expected, "merged GGUF in llama.cpp vs the trainer");
    // The base model as a GGUF with the exported adapter applied at load
    // time. The base is the trainer's own base weights in f32: the fixture's
    // f16 GGUF keeps its norms and biases unrounded, which the trainer's
    // f16-rounded checkpoint does not, and greedy tokens notice.
    let base_gguf = dir.path().join("base-f32.gguf");
    write_gguf_from_template(
        &gguf_dir().join("tiny-qwen25vl-f16.gguf"),
        &trained.vars().variables(),
        Precision::F32,
        &base_gguf,
    )
    .unwrap();
    let adapted = llama_greedy(&base_gguf, mmproj, exported.lora.as_deref(), &prompt_text);
    assert_eq!(
        adapted, expected,
        "base GGUF + GGUF LoRA adapter in llama.cpp vs the trainer"
    );

    // The merged HF checkpoint is stored like the base (float16 here) and
    // loads back into the trainer with the same answer.
    assert_eq!(
        host_trainer::weights::Checkpoint::open(&exported.hf)
            .unwrap()
            .stored_kind()
            .unwrap(),
        tch::Kind::Half
    );
    let reloaded =
        host_trainer::Qwen25Vl::from_checkpoint(&exported.hf, tch::Device::Cpu, tch::Kind::Float)
            .unwrap();
    let mut again = reloaded
        .generate_greedy(&prompt_ids, None, NEW_TOKENS, &eog)
        .unwrap();
    if again.last().is_some_and(|t| eog.contains(t)) {
        again.pop();
    }
    assert_eq!(again, expected, "merged HF checkpoint");

    // One agent step on the virtual phone with the exported files, as `btl
    // run --model … --mmproj …` does.
    let task: Arc<dyn Task> = Arc::from(tasks::sample("wifi_on", 0).unwrap());
    let phone = Arc::new(VirtualPhone::new(PhoneConfig::default()));
    phone.with_phone(|p| task.setup(p));
    let mut llama = LlamaConfig::new(&exported.text, mmproj);
    llama.max_tokens = 300;
    let policy = LlamaPolicy::load(llama).unwrap();
    let episode = Agent::new(
        &dir.path().join("episode"),
        AgentConfig {
            goal: task.goal(),
            max_steps: 1,
            stability: StabilityConfig {
                poll_interval_ms: 10,
                timeout_ms: 100,
            },
            max_pixels: 200_000,
            ..AgentConfig::default()
        },
        Box::new(SimDevice::new(phone)),
        Box::new(policy),
    )
    .unwrap()
    .with_clock(ManualClock::default())
    .run()
    .unwrap();
    assert_eq!(episode.steps, 1);
}
