//! PEFT adapter directories: round trips, both module-name styles, and the
//! adapters that must be refused.

use std::path::Path;

use serde_json::{Value, json};
use tch::{Kind, Tensor};

use super::{CONFIG_FILE, LoraWeights, PeftAdapter, PeftConfig, TargetModules, WEIGHTS_FILE};
use crate::error::Error;

fn lora(module: &str, r: i64, out: i64, inp: i64, seed: f64) -> LoraWeights {
    let values =
        |n: i64, offset: f64| Tensor::arange(n, (Kind::Float, tch::Device::Cpu)) * 0.01 + offset;
    LoraWeights {
        module: module.to_owned(),
        a: values(r * inp, seed).reshape([r, inp]),
        b: values(out * r, -seed).reshape([out, r]),
    }
}

fn adapter() -> PeftAdapter {
    PeftAdapter {
        config: PeftConfig::new(2, 4.0, 0.05, vec!["q_proj".into(), "qkv".into()]),
        modules: vec![
            lora("model.layers.0.self_attn.q_proj", 2, 8, 6, 1.0),
            lora("model.layers.1.self_attn.q_proj", 2, 8, 6, 2.0),
            lora("visual.blocks.0.attn.qkv", 2, 12, 4, 3.0),
        ],
    }
}

fn assert_same(a: &PeftAdapter, b: &PeftAdapter) {
    assert_eq!(a.config, b.config);
    assert_eq!(a.modules.len(), b.modules.len());
    for (x, y) in a.modules.iter().zip(&b.modules) {
        assert_eq!(x.module, y.module);
        assert!(x.a.equal(&y.a) && x.b.equal(&y.b), "{} differs", x.module);
    }
}

/// The keys and shapes in the safetensors file, sorted.
fn stored_keys(dir: &Path) -> Vec<(String, Vec<i64>)> {
    let mut keys: Vec<(String, Vec<i64>)> = Tensor::read_safetensors(dir.join(WEIGHTS_FILE))
        .unwrap()
        .into_iter()
        .map(|(n, t)| (n, t.size()))
        .collect();
    keys.sort();
    keys
}

#[test]
fn an_adapter_is_written_in_peft_s_layout_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("adapter");
    let original = adapter();
    original.write(&out).unwrap();
    let p = "base_model.model.model";
    assert_eq!(
        stored_keys(&out),
        vec![
            (
                format!("{p}.language_model.layers.0.self_attn.q_proj.lora_A.weight"),
                vec![2, 6]
            ),
            (
                format!("{p}.language_model.layers.0.self_attn.q_proj.lora_B.weight"),
                vec![8, 2]
            ),
            (
                format!("{p}.language_model.layers.1.self_attn.q_proj.lora_A.weight"),
                vec![2, 6]
            ),
            (
                format!("{p}.language_model.layers.1.self_attn.q_proj.lora_B.weight"),
                vec![8, 2]
            ),
            (
                format!("{p}.visual.blocks.0.attn.qkv.lora_A.weight"),
                vec![2, 4]
            ),
            (
                format!("{p}.visual.blocks.0.attn.qkv.lora_B.weight"),
                vec![12, 2]
            ),
        ]
    );
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join(CONFIG_FILE)).unwrap()).unwrap();
    assert_eq!(config["peft_type"], "LORA");
    assert_eq!(config["r"], 2);
    assert_eq!(config["lora_alpha"], json!(4));
    assert_eq!(config["target_modules"], json!(["q_proj", "qkv"]));
    assert_same(&PeftAdapter::read(&out).unwrap(), &original);
}

#[test]
fn checkpoint_style_names_and_other_config_keys_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let l = lora("model.layers.3.mlp.down_proj", 4, 5, 7, 0.5);
    Tensor::write_safetensors(
        &[
            (
                "base_model.model.model.layers.3.mlp.down_proj.lora_A.weight",
                &l.a,
            ),
            (
                "base_model.model.model.layers.3.mlp.down_proj.lora_B.weight",
                &l.b,
            ),
        ],
        dir.path().join(WEIGHTS_FILE),
    )
    .unwrap();
    let config = json!({
        "peft_type": "LORA", "r": 4, "lora_alpha": 16, "target_modules": "^.*down_proj$",
        "base_model_name_or_path": "Qwen/Qwen2.5-VL-3B-Instruct", "task_type": "CAUSAL_LM",
        "use_dora": false, "bias": "none", "rank_pattern": {}, "modules_to_save": null,
    });
    std::fs::write(dir.path().join(CONFIG_FILE), config.to_string()).unwrap();
    let read = PeftAdapter::read(dir.path()).unwrap();
    assert_eq!(read.modules.len(), 1);
    assert_eq!(read.modules[0].module, "model.layers.3.mlp.down_proj");
    assert!(read.modules[0].a.equal(&l.a));
    assert_eq!(read.config.r, 4);
    assert_eq!(read.config.lora_dropout, 0.0);
    assert_eq!(
        read.config.target_modules,
        TargetModules::Regex("^.*down_proj$".into())
    );
    // Keys host-trainer does not model survive a round trip.
    let out = dir.path().join("copy");
    read.write(&out).unwrap();
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join(CONFIG_FILE)).unwrap()).unwrap();
    assert_eq!(
        written["base_model_name_or_path"],
        "Qwen/Qwen2.5-VL-3B-Instruct"
    );
    assert_eq!(written["task_type"], "CAUSAL_LM");
}

#[test]
fn the_scale_follows_plain_and_rank_stabilized_lora() {
    let mut config = PeftConfig::new(4, 8.0, 0.0, vec![]);
    let mut fractional = config.clone();
    fractional.lora_alpha = 2.5;
    assert_eq!(
        serde_json::to_value(&fractional).unwrap()["lora_alpha"],
        json!(2.5)
    );
    assert_eq!((config.scale(), config.llama_cpp_alpha()), (2.0, 8.0));
    // rsLoRA: alpha / sqrt(r) = 8 / 2; llama.cpp divides by r, so it needs 4 · 4.
    config.use_rslora = true;
    assert_eq!((config.scale(), config.llama_cpp_alpha()), (4.0, 16.0));
}

/// Writes `adapter()` to a fresh directory, lets `damage` change it, and
/// returns the error reading gives.
fn read_error(damage: impl FnOnce(&Path)) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("adapter");
    adapter().write(&out).unwrap();
    damage(&out);
    let err = PeftAdapter::read(&out).unwrap_err();
    assert!(
        matches!(err, Error::Adapter { .. } | Error::Io { .. }),
        "{err:?}"
    );
    err.to_string()
}

fn edit_config(dir: &Path, key: &str, value: Value) {
    let path = dir.join(CONFIG_FILE);
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config[key] = value;
    std::fs::write(path, config.to_string()).unwrap();
}

#[test]
fn unsupported_or_broken_adapters_are_refused() {
    for (key, value, needle) in [
        ("use_dora", json!(true), "use_dora is true"),
        ("bias", json!("all"), "bias is \"all\""),
        ("fan_in_fan_out", json!(true), "fan_in_fan_out is true"),
        ("rank_pattern", json!({"q_proj": 8}), "rank_pattern is"),
        ("modules_to_save", json!(["lm_head"]), "modules_to_save is"),
        ("peft_type", json!("IA3"), "only \"LORA\""),
        ("r", json!(0), "r is 0"),
        (
            "r",
            json!(3),
            "with rank 3 they must be (r, in) and (out, r)",
        ),
        ("r", json!("two"), "not a PEFT adapter config"),
    ] {
        let text = read_error(|d| edit_config(d, key, value.clone()));
        assert!(
            text.contains(needle),
            "{key}: expected {needle:?} in {text:?}"
        );
    }

    let text = read_error(|d| std::fs::remove_file(d.join(WEIGHTS_FILE)).unwrap());
    assert!(text.contains(WEIGHTS_FILE), "{text}");
    let text = read_error(|d| std::fs::write(d.join(WEIGHTS_FILE), b"junk").unwrap());
    assert!(text.contains("not a valid safetensors file"), "{text}");

    let rewrite = |d: &Path, tensors: &[(&str, Tensor)]| {
        Tensor::write_safetensors(tensors, d.join(WEIGHTS_FILE)).unwrap()
    };
    let a = || Tensor::zeros([2, 6], (Kind::Float, tch::Device::Cpu));
    let text = read_error(|d| {
        rewrite(
            d,
            &[(
                "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight",
                a(),
            )],
        )
    });
    assert!(
        text.contains("module model.layers.0.self_attn.q_proj has no lora_B matrix"),
        "{text}"
    );
    let text = read_error(|d| rewrite(d, &[("base_model.model.model.embed_tokens.weight", a())]));
    assert!(
        text.contains("tensor base_model.model.model.embed_tokens.weight is not a LoRA matrix"),
        "{text}"
    );
    let text = read_error(|d| {
        rewrite(
            d,
            &[
                (
                    "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight",
                    a(),
                ),
                (
                    "base_model.model.model.language_model.layers.0.self_attn.q_proj.lora_A.weight",
                    a(),
                ),
            ],
        )
    });
    assert!(text.contains("two A matrices"), "{text}");
    let text = read_error(|d| {
        rewrite(
            d,
            &[(
                "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight",
                a().to_kind(Kind::Int),
            )],
        )
    });
    assert!(text.contains("expected F32, F64, F16 or BF16"), "{text}");
}

#[test]
fn writing_refuses_inconsistent_modules_and_keeps_the_old_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("adapter");
    adapter().write(&out).unwrap();
    let mut bad = adapter();
    bad.modules
        .push(lora("model.layers.0.self_attn.q_proj", 2, 8, 6, 9.0));
    let err = bad.write(&out).unwrap_err().to_string();
    assert!(
        err.contains("module model.layers.0.self_attn.q_proj is given twice"),
        "{err}"
    );
    let mut bad = adapter();
    bad.modules[0].a = Tensor::zeros([3, 6], (Kind::Float, tch::Device::Cpu));
    let err = bad.write(&out).unwrap_err().to_string();
    assert!(err.contains("with rank 2"), "{err}");
    assert_same(&PeftAdapter::read(&out).unwrap(), &adapter());
}
