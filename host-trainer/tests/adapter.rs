//! LoRA adapters: the PEFT fixture (`tests/data/tiny-qwen25vl/lora/`, saved by
//! PEFT 0.21 under transformers 5) read and written back, and turned into the
//! GGUF adapter that llama.cpp's `convert_lora_to_gguf.py` made from it
//! (`tiny-qwen25vl-lora-f32.gguf`), byte for byte.

use std::path::{Path, PathBuf};

use host_trainer::Error;
use host_trainer::export::gguf::{GgmlType, GgufFile, Value};
use host_trainer::export::{AdapterOptions, AdapterPrecision, write_lora_gguf};
use host_trainer::peft::{LoraWeights, PeftAdapter, WEIGHTS_FILE};
use tch::{Kind, Tensor};

use crate::util::gguf_dir;

const BASE: &str = "tiny-qwen25vl-f16.gguf";
const OFFICIAL: &str = "tiny-qwen25vl-lora-f32.gguf";

fn peft_dir() -> PathBuf {
    gguf_dir().join("lora")
}

/// The converter names the adapter after its directory, `lora`.
fn options(adapter: &PeftAdapter) -> AdapterOptions<'static> {
    AdapterOptions {
        alpha: adapter.config.llama_cpp_alpha() as f32,
        name: "Lora",
        precision: AdapterPrecision::F32,
    }
}

#[test]
fn the_peft_fixture_reads_as_saved() {
    let adapter = PeftAdapter::read(&peft_dir()).unwrap();
    assert_eq!((adapter.config.r, adapter.config.lora_alpha), (4, 8.0));
    // 7 projections in each of 2 layers.
    assert_eq!(adapter.modules.len(), 14);
    assert_eq!(adapter.modules[0].module, "model.layers.0.mlp.down_proj");
    assert_eq!(adapter.modules[0].a.size(), [4, 256]);
    assert_eq!(adapter.modules[0].b.size(), [128, 4]);
    assert_eq!(adapter.modules[0].a.kind(), Kind::Float);
}

#[test]
fn written_back_the_adapter_has_the_same_tensors_and_config() {
    let adapter = PeftAdapter::read(&peft_dir()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("lora");
    adapter.write(&out).unwrap();
    let tensors = |d: &Path| {
        let mut t = Tensor::read_safetensors(d.join(WEIGHTS_FILE)).unwrap();
        t.sort_by(|a, b| a.0.cmp(&b.0));
        t
    };
    let (found, expected) = (tensors(&out), tensors(&peft_dir()));
    assert_eq!(found.len(), expected.len());
    for ((fname, ft), (ename, et)) in found.iter().zip(&expected) {
        assert_eq!(fname, ename);
        assert!(ft.equal(et), "{fname} differs");
    }
    let json = |d: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(d.join("adapter_config.json")).unwrap())
            .unwrap()
    };
    assert_eq!(json(&out), json(&peft_dir()));
}

#[test]
fn the_gguf_adapter_is_the_one_llama_cpp_s_converter_writes() {
    let adapter = PeftAdapter::read(&peft_dir()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("lora.gguf");
    let report = write_lora_gguf(
        &gguf_dir().join(BASE),
        &adapter.modules,
        &options(&adapter),
        &out,
    )
    .unwrap();
    assert_eq!((report.tensors, report.unused.len()), (28, 0));
    let (found, expected) = (
        std::fs::read(&out).unwrap(),
        std::fs::read(gguf_dir().join(OFFICIAL)).unwrap(),
    );
    if found != expected {
        let (f, e) = (
            GgufFile::open(&out).unwrap(),
            GgufFile::open(&gguf_dir().join(OFFICIAL)).unwrap(),
        );
        assert_eq!(f.header(), e.header(), "headers differ");
        panic!("same header, different tensor data");
    }
}

#[test]
fn f16_adapters_round_the_matrices() {
    let adapter = PeftAdapter::read(&peft_dir()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("lora-f16.gguf");
    let options = AdapterOptions {
        precision: AdapterPrecision::F16,
        ..options(&adapter)
    };
    write_lora_gguf(&gguf_dir().join(BASE), &adapter.modules, &options, &out).unwrap();
    let (f16, f32) = (
        GgufFile::open(&out).unwrap(),
        GgufFile::open(&gguf_dir().join(OFFICIAL)).unwrap(),
    );
    assert_eq!(f16.header().metadata, f32.header().metadata);
    for (i, t) in f16.header().tensors.iter().enumerate() {
        assert_eq!(t.ggml_type, GgmlType::F16, "{}", t.name);
        let reference = &f32.header().tensors[i];
        assert_eq!((&t.name, &t.dims), (&reference.name, &reference.dims));
        let shape = t.shape();
        let rounded =
            Tensor::from_data_size(f32.tensor_data(i), &shape, Kind::Float).to_kind(Kind::Half);
        let found = Tensor::from_data_size(f16.tensor_data(i), &shape, Kind::Half);
        assert!(found.equal(&rounded), "{} differs", t.name);
    }
}

fn zeros(shape: &[i64]) -> Tensor {
    Tensor::zeros(shape, (Kind::Float, tch::Device::Cpu))
}

fn lora(module: &str, a: &[i64], b: &[i64]) -> LoraWeights {
    LoraWeights {
        module: module.to_owned(),
        a: zeros(a),
        b: zeros(b),
    }
}

/// The error of an adapter export that must fail, after checking it wrote nothing.
fn adapter_error(base: &str, modules: &[LoraWeights]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.gguf");
    let options = AdapterOptions {
        alpha: 8.0,
        name: "x",
        precision: AdapterPrecision::F32,
    };
    let err = write_lora_gguf(&gguf_dir().join(base), modules, &options, &out).unwrap_err();
    assert!(!out.exists());
    assert!(matches!(err, Error::Export { .. }), "{err:?}");
    err.to_string()
}

#[test]
fn vision_adapters_are_left_out_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.gguf");
    let modules = [
        lora("visual.blocks.0.attn.qkv", &[2, 64], &[192, 2]),
        // transformers 5's name of model.layers.1.self_attn.v_proj.
        lora(
            "model.language_model.layers.1.self_attn.v_proj",
            &[2, 128],
            &[64, 2],
        ),
    ];
    let options = AdapterOptions {
        alpha: 4.0,
        name: "x",
        precision: AdapterPrecision::F32,
    };
    let report = write_lora_gguf(&gguf_dir().join(BASE), &modules, &options, &out).unwrap();
    assert_eq!(report.unused, ["visual.blocks.0.attn.qkv"]);
    let file = GgufFile::open(&out).unwrap();
    let names: Vec<&str> = file
        .header()
        .tensors
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(
        names,
        ["blk.1.attn_v.weight.lora_a", "blk.1.attn_v.weight.lora_b"]
    );
    assert_eq!(
        file.header().get("adapter.lora.alpha"),
        Some(&Value::F32(4.0))
    );
}

#[test]
fn adapters_that_do_not_fit_the_base_are_refused() {
    let text = adapter_error(
        BASE,
        &[lora(
            "model.layers.0.self_attn.k_proj",
            &[2, 128],
            &[128, 2],
        )],
    );
    assert!(
        text.contains("do not adapt blk.0.attn_k.weight of shape [64, 128]"),
        "{text}"
    );
    let text = adapter_error(
        BASE,
        &[lora("model.layers.5.self_attn.k_proj", &[2, 128], &[64, 2])],
    );
    assert!(
        text.contains("the base model has no tensor blk.5.attn_k.weight"),
        "{text}"
    );
    let text = adapter_error(BASE, &[lora("model.embed_tokens", &[2, 1536], &[128, 2])]);
    assert!(
        text.contains("module model.embed_tokens is not a linear layer"),
        "{text}"
    );
    let twice = || lora("model.layers.0.self_attn.v_proj", &[2, 128], &[64, 2]);
    let text = adapter_error(BASE, &[twice(), twice()]);
    assert!(text.contains("given twice"), "{text}");
    let text = adapter_error("mmproj-tiny-qwen25vl-f16.gguf", &[twice()]);
    assert!(text.contains("give the qwen2vl GGUF as base"), "{text}");
}
