//! Test helpers: the tiny checkpoint, the golden references, comparisons.

use std::collections::HashMap;
use std::path::PathBuf;

use host_trainer::{Grid, Qwen25Vl};
use serde_json::Value;
use tch::{Device, Kind, Tensor};

/// Runs the `btl-train` binary.
pub fn btl_train(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_btl-train"))
        .args(args)
        .output()
        .expect("btl-train runs")
}

/// Runs `btl-train`, which must succeed, and returns what it printed.
pub fn btl_train_succeeds(args: &[&str]) -> String {
    let out = btl_train(args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "btl-train {args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

pub fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

/// The tiny random Qwen2.5-VL (float16 weights) the golden files were made from.
pub fn checkpoint_dir() -> PathBuf {
    data_dir().join("tiny-qwen25vl-hf")
}

pub fn load(kind: Kind) -> Qwen25Vl {
    Qwen25Vl::from_checkpoint(&checkpoint_dir(), Device::Cpu, kind).expect("tiny checkpoint loads")
}

/// `reference.safetensors` and `reference.json`.
pub struct Golden {
    pub tensors: HashMap<String, Tensor>,
    pub json: Value,
}

/// Read per test: tch tensors cannot be shared between the test threads.
pub fn golden() -> Golden {
    let tensors = Tensor::read_safetensors(data_dir().join("reference.safetensors"))
        .expect("reference.safetensors")
        .into_iter()
        .collect();
    let text = std::fs::read_to_string(data_dir().join("reference.json")).expect("reference.json");
    Golden {
        tensors,
        json: serde_json::from_str(&text).expect("reference.json is JSON"),
    }
}

impl Golden {
    pub fn tensor(&self, name: &str) -> &Tensor {
        self.tensors
            .get(name)
            .unwrap_or_else(|| panic!("reference.safetensors has no {name}"))
    }

    pub fn ids(&self, pointer: &str) -> Vec<i64> {
        serde_json::from_value(
            self.json
                .pointer(pointer)
                .unwrap_or_else(|| panic!("no {pointer}"))
                .clone(),
        )
        .unwrap_or_else(|e| panic!("{pointer}: {e}"))
    }

    pub fn id_rows(&self, pointer: &str) -> Vec<Vec<i64>> {
        serde_json::from_value(
            self.json
                .pointer(pointer)
                .unwrap_or_else(|| panic!("no {pointer}"))
                .clone(),
        )
        .unwrap_or_else(|e| panic!("{pointer}: {e}"))
    }

    pub fn grids(&self, pointer: &str) -> Vec<Grid> {
        self.id_rows(pointer)
            .into_iter()
            .map(|g| Grid::new(g[0], g[1], g[2]))
            .collect()
    }

    pub fn grid(&self, pointer: &str) -> Grid {
        let g = self.ids(pointer);
        Grid::new(g[0], g[1], g[2])
    }
}

/// max |a − b| over all elements, in float64.
pub fn max_abs_diff(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.size(), b.size(), "shapes differ");
    (a.to_kind(Kind::Double) - b.to_kind(Kind::Double))
        .abs()
        .max()
        .double_value(&[])
}

/// max |a − b| / max |b|: the error relative to the tensor's scale.
pub fn max_rel_diff(a: &Tensor, b: &Tensor) -> f64 {
    let scale = b.to_kind(Kind::Double).abs().max().double_value(&[]);
    assert!(scale > 0.0, "reference is all zeros");
    max_abs_diff(a, b) / scale
}

/// The tiny model's tokenizer (the fixture of the llama.cpp tests).
pub fn tokenizer_file() -> PathBuf {
    gguf_dir().join("tokenizer.json")
}

/// The GGUF files llama.cpp's converter made from the tiny checkpoint
/// (`tests/data/tiny-qwen25vl/` at the workspace root).
pub fn gguf_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/data/tiny-qwen25vl")
}

/// The model's weights by checkpoint name, as an export takes them.
pub fn weights(model: &Qwen25Vl) -> HashMap<String, Tensor> {
    model.vars().variables()
}
