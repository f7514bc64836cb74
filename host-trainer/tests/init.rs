//! `btl-train init`: a new model of a chosen size. Its GGUF metadata is what
//! llama.cpp's converter wrote for the fixture (same shape, same tokenizer);
//! transformers loads its checkpoint and computes the trainer's logits;
//! llama.cpp runs its GGUFs to the trainer's greedy tokens on an image prompt.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use agent_core::model::llama::{LlamaConfig, LlamaPolicy};
use agent_core::model::preprocess::Qwen2VlImageProcessor;
use agent_core::model::quantize::{QuantType, quantize};
use host_trainer::export::Precision;
use host_trainer::export::gguf::{GgufFile, Value};
use host_trainer::init::{Initialised, ModelSpec, Weights, init};
use host_trainer::{Batch, Grid, Images, Qwen25Vl};
use serde_json::Value as Json;
use tch::{Device, Kind, Tensor};

use crate::util::{btl_train, gguf_dir, golden, max_abs_diff, max_rel_diff, tokenizer_file};

/// The fixture's shape (tests/data/tiny-qwen25vl-hf/config.json) with the
/// fixture's tokenizer; `init_std` large enough that the logits spread
/// far beyond float32 noise.
fn fixture_spec(dir: &Path) -> PathBuf {
    let path = dir.join("tiny.toml");
    std::fs::write(
        &path,
        format!(
            r#"name = "tiny-qwen25vl"
tokenizer = {:?}
seed = 7
init_std = 0.3

[text]
layers = 2
hidden = 128
intermediate = 256
heads = 4
kv_heads = 2
max_position_embeddings = 4096

[vision]
depth = 4
hidden = 64
intermediate = 128
heads = 2
full_attention_every = 2
"#,
            tokenizer_file().display().to_string()
        ),
    )
    .unwrap();
    path
}

fn init_fixture(dir: &Path, precision: Precision) -> Initialised {
    let path = fixture_spec(dir);
    let spec = ModelSpec::from_file(&path).unwrap();
    init(&spec, &path, Weights::Random, precision, &dir.join("model")).unwrap()
}

/// Keys whose values are the model's own name and size, or the chat template
/// (written from `tokenizer_config.json`, which the fixture has none of).
const OWN_KEYS: &[&str] = &[
    "general.name",
    "general.size_label",
    "tokenizer.chat_template",
];

fn metadata(file: &GgufFile) -> BTreeMap<String, Value> {
    file.header()
        .metadata
        .iter()
        .filter(|(k, _)| !OWN_KEYS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn tensors(file: &GgufFile) -> BTreeMap<String, (Vec<u64>, String)> {
    file.header()
        .tensors
        .iter()
        .map(|t| (t.name.clone(), (t.dims.clone(), t.ggml_type.to_string())))
        .collect()
}

#[test]
fn the_ggufs_carry_the_converter_s_metadata_and_tensor_layout() {
    let dir = tempfile::tempdir().unwrap();
    let made = init_fixture(dir.path(), Precision::F16);
    for (ours, converter) in [
        (&made.text, "tiny-qwen25vl-f16.gguf"),
        (&made.mmproj, "mmproj-tiny-qwen25vl-f16.gguf"),
    ] {
        let ours = GgufFile::open(ours).unwrap();
        let theirs = GgufFile::open(&gguf_dir().join(converter)).unwrap();
        let (a, b) = (metadata(&ours), metadata(&theirs));
        for key in a.keys().chain(b.keys()) {
            assert_eq!(a.get(key), b.get(key), "{converter}: key {key}");
        }
        assert_eq!(tensors(&ours), tensors(&theirs), "{converter}: tensors");
    }
    let config: Json =
        serde_json::from_str(&std::fs::read_to_string(made.hf.join("config.json")).unwrap())
            .unwrap();
    let fixture: Json = serde_json::from_str(
        &std::fs::read_to_string(crate::util::checkpoint_dir().join("config.json")).unwrap(),
    )
    .unwrap();
    for pointer in [
        "/image_token_id",
        "/video_token_id",
        "/vision_start_token_id",
        "/vision_end_token_id",
        "/text_config/vocab_size",
        "/text_config/bos_token_id",
        "/text_config/eos_token_id",
        "/text_config/pad_token_id",
        "/text_config/rope_parameters",
        "/vision_config/fullatt_block_indexes",
        "/vision_config/window_size",
    ] {
        assert_eq!(
            config.pointer(pointer),
            fixture.pointer(pointer),
            "{pointer}"
        );
    }
    assert!(made.hf.join("tokenizer.json").is_file());
}

/// host-trainer's logits for the golden BTL image prompt (`case_logits`'s
/// ids and pixel values, which are the fixture tokenizer's).
fn trainer_logits(hf: &Path) -> (Tensor, Vec<i64>, Vec<Grid>, Tensor) {
    let model = Qwen25Vl::from_checkpoint(hf, Device::Cpu, Kind::Float).unwrap();
    let g = golden();
    let ids = g.ids("/logits/input_ids");
    let grids = vec![g.grid("/logits/grid")];
    let pixel_values = g.tensor("images.a.pixel_values").shallow_clone();
    let logits = tch::no_grad(|| {
        model.forward(&Batch {
            input_ids: std::slice::from_ref(&ids),
            images: Some(Images {
                pixel_values: &pixel_values,
                grids: &grids,
            }),
        })
    })
    .unwrap()
    .squeeze_dim(0);
    (logits, ids, grids, pixel_values)
}

#[test]
fn transformers_loads_the_checkpoint_and_computes_the_trainer_s_logits() {
    let python = std::env::var_os("BTL_REFERENCE_PYTHON").unwrap_or_else(|| {
        panic!(
            "BTL_REFERENCE_PYTHON is not set: a Python with torch 2.13.0 and transformers \
             (scripts/make-trainer-reference/requirements.txt) loads the checkpoint; \
             scripts/test makes it"
        )
    });
    let dir = tempfile::tempdir().unwrap();
    let made = init_fixture(dir.path(), Precision::F16);
    let (ours, ids, grids, pixel_values) = trainer_logits(&made.hf);

    let inputs = dir.path().join("inputs.safetensors");
    let grid: Vec<i64> = grids.iter().flat_map(|g| [g.t, g.h, g.w]).collect();
    Tensor::write_safetensors(
        &[
            ("input_ids", Tensor::from_slice(&ids).unsqueeze(0)),
            ("pixel_values", pixel_values),
            ("image_grid_thw", Tensor::from_slice(&grid).view([-1, 3])),
        ],
        &inputs,
    )
    .unwrap();
    let out = dir.path().join("logits.safetensors");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../scripts/make-trainer-reference/logits.py");
    let run = Command::new(&python)
        .arg(&script)
        .arg(&made.hf)
        .arg(&inputs)
        .arg(&out)
        .envs([
            ("CUDA_VISIBLE_DEVICES", ""),
            ("HF_HUB_OFFLINE", "1"),
            ("PYTHONDONTWRITEBYTECODE", "1"),
        ])
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let theirs = Tensor::read_safetensors(&out)
        .unwrap()
        .into_iter()
        .find(|(n, _)| n == "logits")
        .unwrap()
        .1;
    // float32 noise relative to the logits' scale: libtorch's kernels differ
    // by CPU path (ATEN_CPU_CAPABILITY), and these logits spread wider than
    // the fixture's, where the parity tests' absolute 1e-4 holds. Measured
    // under ATEN_CPU_CAPABILITY=default: 1.1e-4 absolute at a logit std of 3.4.
    let spread = theirs.std(true).double_value(&[]);
    assert!(spread > 0.1, "logits too flat to compare: std {spread}");
    let diff = max_rel_diff(&ours, &theirs);
    assert!(
        diff <= 2e-5,
        "max |Δ| / max |logit| = {diff:e} (logit std {spread})"
    );
}

const NEW_TOKENS: usize = 24;

#[test]
fn llama_cpp_runs_the_ggufs_to_the_trainer_s_greedy_tokens_on_an_image_prompt() {
    let dir = tempfile::tempdir().unwrap();
    // F32 files: both sides compute in float32.
    let made = init_fixture(dir.path(), Precision::F32);
    let reference: Json =
        serde_json::from_str(&std::fs::read_to_string(gguf_dir().join("reference.json")).unwrap())
            .unwrap();
    let case = &reference["cases"]["image"];
    let content = |i: usize| case["messages"][i]["content"].as_str().unwrap();
    let prompt = LlamaPolicy::chat_text(content(0), content(1));
    let prompt_ids: Vec<i64> = serde_json::from_value(case["prompt_ids"].clone()).unwrap();
    let eog: Vec<i64> =
        serde_json::from_value(reference["tokenizer"]["eog_ids_llama_cpp"].clone()).unwrap();

    let screenshot = image::open(gguf_dir().join("test-screenshot.png"))
        .unwrap()
        .to_rgb8();
    // Large enough that the 224×448 screenshot is not resized.
    let pixels = Qwen2VlImageProcessor::new(1 << 20)
        .preprocess(&screenshot)
        .unwrap();
    let [t, h, w] = pixels.grid_thw.map(i64::from);
    let values = Tensor::from_slice(&pixels.data).view([pixels.rows as i64, pixels.cols as i64]);
    let grids = [Grid::new(t, h, w)];
    let model = Qwen25Vl::from_checkpoint(&made.hf, Device::Cpu, Kind::Float).unwrap();
    let mut expected = model
        .generate_greedy(
            &prompt_ids,
            Some(Images {
                pixel_values: &values,
                grids: &grids,
            }),
            NEW_TOKENS,
            &eog,
        )
        .unwrap();
    if expected.last().is_some_and(|t| eog.contains(t)) {
        expected.pop();
    }
    assert!(
        expected.len() >= 8,
        "the trainer stopped early: {expected:?}"
    );

    let mut config = LlamaConfig::new(&made.text, &made.mmproj);
    config.max_tokens = NEW_TOKENS as u32;
    config.grammar = false;
    let mut policy = LlamaPolicy::load(config).unwrap();
    let generation = policy.generate(&prompt, Some(&screenshot), 0).unwrap();
    let found: Vec<i64> = generation.tokens.iter().map(|&t| i64::from(t)).collect();
    // llama.cpp keeps its KV cache in float16 (llama.cpp's default), so its
    // logits are off by about float16's relative step (2^-11) of their
    // range, and a random model has near ties at that scale. Where llama.cpp
    // departs from the trainer, the token it took must be the trainer's top
    // within 1e-3 of the logit range; the first 8 tokens must agree.
    let Some(split) = found.iter().zip(&expected).position(|(a, b)| a != b) else {
        assert_eq!(found, expected, "llama.cpp vs the trainer");
        return;
    };
    assert!(split >= 8, "llama.cpp {found:?}\ntrainer {expected:?}");
    let ids: Vec<i64> = prompt_ids
        .iter()
        .chain(&expected[..split])
        .copied()
        .collect();
    let logits = tch::no_grad(|| {
        model.forward(&Batch {
            input_ids: std::slice::from_ref(&ids),
            images: Some(Images {
                pixel_values: &values,
                grids: &grids,
            }),
        })
    })
    .unwrap()
    .squeeze_dim(0)
    .get(ids.len() as i64 - 1);
    let (top, _) = logits.topk(2, -1, true, true);
    let margin = top.double_value(&[0]) - top.double_value(&[1]);
    let theirs = logits.double_value(&[found[split]]);
    let gap = top.double_value(&[0]) - theirs;
    let range = logits.max().double_value(&[]) - logits.min().double_value(&[]);
    assert!(
        gap <= 1e-3 * range,
        "token {split}: llama.cpp took {} ({gap:e} below the trainer's top, margin {margin:e}, logit range {range})",
        found[split]
    );
}

#[test]
fn the_cli_writes_the_model_and_refuses_bad_specs_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let spec = fixture_spec(dir.path());
    let out = dir.path().join("made");
    let (spec_arg, out_arg) = (spec.to_str().unwrap(), out.to_str().unwrap());
    let run = btl_train(&["init", "--config", spec_arg, "--out", out_arg]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(stdout.contains("M parameters"), "{stdout}");
    for file in [
        "hf/config.json",
        "hf/model.safetensors",
        "model-f16.gguf",
        "mmproj-f16.gguf",
    ] {
        assert!(out.join(file).is_file(), "{file}");
    }

    // An existing output is kept unless --force.
    let again = btl_train(&["init", "--config", spec_arg, "--out", out_arg]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    // A file where the model's directory would go is kept, --force or not.
    let file = dir.path().join("a-file");
    std::fs::write(&file, "kept").unwrap();
    let file_arg = file.to_str().unwrap();
    let over = btl_train(&["init", "--config", spec_arg, "--out", file_arg, "--force"]);
    assert_eq!(over.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&over.stderr).contains("a-file: not a directory"),
        "{}",
        String::from_utf8_lossy(&over.stderr)
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "kept");
    // --force replaces a directory whole: never the one holding the spec.
    let mine = btl_train(&[
        "init",
        "--config",
        spec_arg,
        "--out",
        dir.path().to_str().unwrap(),
        "--force",
    ]);
    assert_eq!(mine.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&mine.stderr).contains("which this command reads"),
        "{}",
        String::from_utf8_lossy(&mine.stderr)
    );
    assert!(spec.is_file() && out.join("model-f16.gguf").is_file());

    let text = std::fs::read_to_string(&spec).unwrap();
    for (from, to, named) in [
        (
            "heads = 4\n",
            "heads = 3\n",
            "text.hidden 128 is not divisible by text.heads 3",
        ),
        (
            "full_attention_every = 2",
            "full_attention_every = 5",
            "vision.full_attention_every 5",
        ),
        ("seed = 7", "seed = 7\nlayers = 3", "unknown field `layers`"),
        (
            "init_std = 0.3",
            "init_std = inf",
            "init_std is inf; it must be a positive number",
        ),
        // Values that make every logit NaN are named, not found as a
        // diverged first step.
        (
            "kv_heads = 2",
            "kv_heads = 2\nrope_theta = nan",
            "text.rope_theta is NaN; it must be a positive number",
        ),
        (
            "kv_heads = 2",
            "kv_heads = 2\nrms_norm_eps = -1.0",
            "text.rms_norm_eps is -1; it must be a positive number",
        ),
        (
            "seed = 7",
            "seed = 7\nvocab_size = 0",
            "vocab_size is 0; it must be positive",
        ),
        // Sizes whose weights no machine holds are refused before a byte
        // of them is made, not ended by the out-of-memory killer (the
        // machine's memory as Linux's /proc/meminfo gives it).
        (
            "seed = 7",
            "seed = 7\nvocab_size = 10000000000",
            "vocab_size is 10000000000; at most 16777216",
        ),
        (
            "hidden = 128",
            "hidden = 1048576",
            "GiB as float32, more than this machine's",
        ),
        (
            "tokenizer = ",
            "tokenizer = \"missing.json\"\n#",
            "missing.json",
        ),
    ] {
        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, text.replacen(from, to, 1)).unwrap();
        let other = dir.path().join("other");
        let run = btl_train(&[
            "init",
            "--config",
            bad.to_str().unwrap(),
            "--out",
            other.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{named}: {stderr}");
        assert!(stderr.contains(named), "{named}: {stderr}");
        assert!(!other.exists(), "{named}: nothing is written");
    }
}

/// The float32 tensors of a checkpoint `init` wrote.
fn checkpoint_tensors(hf: &Path) -> BTreeMap<String, Tensor> {
    let bytes = std::fs::read(hf.join("model.safetensors")).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    file.tensors()
        .into_iter()
        .map(|(name, view)| {
            assert_eq!(view.dtype(), safetensors::Dtype::F32, "{name}");
            let shape: Vec<i64> = view.shape().iter().map(|&d| d as i64).collect();
            let t = Tensor::f_from_data_size(view.data(), &shape, Kind::Float).unwrap();
            (name, t)
        })
        .collect()
}

#[test]
fn a_model_made_from_its_ggufs_has_the_weights_they_were_made_from() {
    let dir = tempfile::tempdir().unwrap();
    let original = init_fixture(dir.path(), Precision::F32);
    let spec_path = fixture_spec(dir.path());
    let spec = ModelSpec::from_file(&spec_path).unwrap();
    let from = |text: &Path, out: &str| {
        let weights = Weights::Gguf {
            text,
            projector: &original.mmproj,
        };
        init(
            &spec,
            &spec_path,
            weights,
            Precision::F32,
            &dir.path().join(out),
        )
        .unwrap()
    };
    let expected = checkpoint_tensors(&original.hf);

    // From float32 files: every weight back bit for bit, the fused qkv and
    // the two temporal slices of the patch embedding put together again.
    let same = from(&original.text, "same");
    let imported = same.imported.as_ref().unwrap();
    assert_eq!(imported.types, [("F32".to_owned(), imported.tensors)]);
    let got = checkpoint_tensors(&same.hf);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
    for (name, t) in &expected {
        assert!(t.equal(&got[name]), "{name} differs");
    }

    // From llama.cpp's q8_0 quantization of the text model: ggml's q8_0
    // stores each block of 32 as round(x / d) with d = max|x| / 127 (a
    // float16), so no value moves by more than about half of d.
    let q8 = dir.path().join("model-q8_0.gguf");
    quantize(&original.text, &q8, QuantType::Q8_0, 1).unwrap();
    let quantized = from(&q8, "q8");
    let types = &quantized.imported.as_ref().unwrap().types;
    assert!(types.iter().any(|(ty, _)| ty == "Q8_0"), "{types:?}");
    let got = checkpoint_tensors(&quantized.hf);
    let mut moved = 0;
    for (name, t) in &expected {
        let diff = max_abs_diff(t, &got[name]);
        if name.starts_with("visual.") {
            assert_eq!(diff, 0.0, "{name} comes from the float32 projector");
            continue;
        }
        let step = t.abs().max().double_value(&[]) / 127.0;
        assert!(diff <= 0.55 * step, "{name}: moved {diff}, step {step}");
        moved += usize::from(diff > 0.0);
    }
    assert!(moved > 0, "no text weight was quantized");
}

#[test]
fn the_cli_takes_the_shipped_model_back_and_refuses_ggufs_of_another_size() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let (text, mmproj) = (
        root.join("agent-core/models/btl-mini-q8_0.gguf"),
        root.join("agent-core/models/mmproj-btl-mini-f16.gguf"),
    );
    let mini = root.join("host-trainer/models/btl-mini.toml");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("shipped");
    let arg = |p: &Path| p.to_str().unwrap().to_owned();
    let run = btl_train(&[
        "init",
        "--config",
        &arg(&mini),
        "--out",
        &arg(&out),
        "--from-gguf",
        &arg(&text),
        "--from-mmproj",
        &arg(&mmproj),
    ]);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        stdout.contains("Q8_0") && stdout.contains("F16"),
        "{stdout}"
    );

    // Exported again (float32) and quantized by llama.cpp as the shipped
    // file was, the checkpoint gives back the shipped tensors byte for
    // byte: ggml's q8_0 of a dequantized q8_0 block is that block (its
    // largest value is 127 times the stored scale), and float16 values
    // survive float32.
    let export = |precision: &str| {
        let to = dir.path().join(format!("export-{precision}"));
        let run = btl_train(&[
            "export",
            &arg(&out.join("hf")),
            "--gguf-template",
            &arg(&text),
            "--mmproj-template",
            &arg(&mmproj),
            "--precision",
            precision,
            "--profile",
            "btl-extended",
            "--max-pixels",
            "200704",
            "--out",
            &arg(&to),
        ]);
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        to
    };
    let requantized = dir.path().join("again-q8_0.gguf");
    quantize(
        &export("f32").join("model-f32.gguf"),
        &requantized,
        QuantType::Q8_0,
        1,
    )
    .unwrap();
    // The projector ships as the export's f16 (matrices f16, vectors f32).
    let reprojected = export("f16").join("mmproj-f16.gguf");
    for (shipped, again) in [(&text, &requantized), (&mmproj, &reprojected)] {
        let (shipped, again) = (
            GgufFile::open(shipped).unwrap(),
            GgufFile::open(again).unwrap(),
        );
        assert_eq!(
            tensors(&again),
            tensors(&shipped),
            "{}",
            again.path().display()
        );
        for (i, info) in shipped.header().tensors.iter().enumerate() {
            let j = again
                .header()
                .tensors
                .iter()
                .position(|t| t.name == info.name)
                .unwrap();
            assert!(
                shipped.tensor_data(i) == again.tensor_data(j),
                "{} differs from the shipped file's",
                info.name
            );
        }
    }

    // The fixture's size with btl-mini's files: refused, naming a tensor,
    // and nothing written.
    let other = dir.path().join("other");
    let run = btl_train(&[
        "init",
        "--config",
        &arg(&fixture_spec(dir.path())),
        "--out",
        &arg(&other),
        "--from-gguf",
        &arg(&text),
        "--from-mmproj",
        &arg(&mmproj),
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("btl-mini-q8_0.gguf"), "{stderr}");
    assert!(
        stderr.contains("shape") || stderr.contains("does not have"),
        "{stderr}"
    );
    assert!(!other.exists());

    // The two files go together.
    let run = btl_train(&[
        "init",
        "--config",
        &arg(&mini),
        "--out",
        &arg(&other),
        "--from-gguf",
        &arg(&text),
    ]);
    assert_eq!(run.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&run.stderr).contains("--from-mmproj"));
}

#[test]
fn a_grown_model_computes_exactly_what_the_small_one_does() {
    let dir = tempfile::tempdir().unwrap();
    let small = init_fixture(dir.path(), Precision::F32);
    let spec = fixture_spec(dir.path());
    let deeper = dir.path().join("deeper.toml");
    let text = std::fs::read_to_string(&spec).unwrap();
    let grown_spec =
        text.replacen("layers = 2\n", "layers = 4\n", 1)
            .replacen("depth = 4\n", "depth = 8\n", 1);
    std::fs::write(&deeper, &grown_spec).unwrap();
    let arg = |p: &Path| p.to_str().unwrap().to_owned();
    let grow = |config: &Path, out: &Path| {
        btl_train(&[
            "init",
            "--config",
            &arg(config),
            "--out",
            &arg(out),
            "--from-gguf",
            &arg(&small.text),
            "--from-mmproj",
            &arg(&small.mmproj),
            "--grow",
        ])
    };
    let out = dir.path().join("grown");
    let run = grow(&deeper, &out);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );

    // Twice as deep, and the same logits to the last bit: the copies add
    // exact zeros to the residual stream.
    let tensors = checkpoint_tensors(&out.join("hf"));
    assert!(tensors.contains_key("model.layers.3.mlp.up_proj.weight"));
    assert!(tensors.contains_key("visual.blocks.7.attn.qkv.weight"));
    let (expected, ..) = trainer_logits(&small.hf);
    let (got, ..) = trainer_logits(&out.join("hf"));
    assert!(
        expected.equal(&got),
        "max diff {}",
        max_abs_diff(&expected, &got)
    );
    // The copies are not inert: their inputs are the original layer's.
    let original = checkpoint_tensors(&small.hf);
    assert!(
        tensors["model.layers.1.self_attn.q_proj.weight"]
            .equal(&original["model.layers.0.self_attn.q_proj.weight"])
    );

    // A depth that is no whole multiple is refused, naming the file.
    let odd = dir.path().join("odd.toml");
    std::fs::write(&odd, text.replacen("layers = 2\n", "layers = 3\n", 1)).unwrap();
    let run = grow(&odd, &dir.path().join("odd"));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("it has 2 text layers; the spec's 3 is no whole multiple of them"),
        "{stderr}"
    );
    assert!(stderr.contains(small.text.to_str().unwrap()), "{stderr}");
    assert!(!dir.path().join("odd").exists());
}
