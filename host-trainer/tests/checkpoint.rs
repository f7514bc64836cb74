//! Checkpoint formats (4.x config, shards with an index, F32/BF16/F16) and
//! the errors that bad checkpoints and bad inputs give.
//!
//! Every variant is made from the committed tiny checkpoint in a temporary
//! directory; the reference for "the same model" is the committed checkpoint
//! as loaded by the same code, whose own parity is pinned in `parity.rs`.

use std::path::Path;

use host_trainer::{Batch, Checkpoint, Error, Grid, Images, KvCache, Qwen25Vl};
use tch::{Device, Kind, Tensor};

use crate::util::{checkpoint_dir, load};

fn stored_tensors() -> Vec<(String, Tensor)> {
    Tensor::read_safetensors(checkpoint_dir().join("model.safetensors")).unwrap()
}

fn config_text() -> String {
    std::fs::read_to_string(checkpoint_dir().join("config.json")).unwrap()
}

/// A checkpoint directory with one safetensors file.
fn write_checkpoint(dir: &Path, tensors: &[(String, Tensor)], config: &str) {
    Tensor::write_safetensors(tensors, dir.join("model.safetensors")).unwrap();
    std::fs::write(dir.join("config.json"), config).unwrap();
}

fn load_dir(dir: &Path) -> host_trainer::Result<Qwen25Vl> {
    Qwen25Vl::from_checkpoint(dir, Device::Cpu, Kind::Float)
}

/// Every variable of `a` equals the one of `b` exactly.
fn assert_same_weights(a: &Qwen25Vl, b: &Qwen25Vl) {
    let (va, vb) = (a.vars().variables(), b.vars().variables());
    assert_eq!(va.len(), vb.len());
    for (name, t) in &va {
        assert!(t.equal(&vb[name]), "{name} differs");
    }
}

#[test]
fn transformers_4x_config_gives_the_same_model() {
    // make_reference.py checked that transformers builds identical logits from both configs.
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        checkpoint_dir().join("model.safetensors"),
        dir.path().join("model.safetensors"),
    )
    .unwrap();
    std::fs::copy(
        checkpoint_dir().join("config-4x.json"),
        dir.path().join("config.json"),
    )
    .unwrap();
    let legacy = load_dir(dir.path()).unwrap();
    let current = load(Kind::Float);
    assert_eq!(legacy.config(), current.config());
    assert_same_weights(&legacy, &current);
}

#[test]
fn sharded_checkpoint_with_transformers_5_names_loads_the_same_weights() {
    let dir = tempfile::tempdir().unwrap();
    let (mut vision, mut text) = (Vec::new(), Vec::new());
    let mut weight_map = serde_json::Map::new();
    for (name, tensor) in stored_tensors() {
        // transformers 5's module names, which some tools write
        let (file, renamed, shard) = if let Some(rest) = name.strip_prefix("visual.") {
            (
                "model-00001-of-00002.safetensors",
                format!("model.visual.{rest}"),
                &mut vision,
            )
        } else if let Some(rest) = name.strip_prefix("model.") {
            (
                "model-00002-of-00002.safetensors",
                format!("model.language_model.{rest}"),
                &mut text,
            )
        } else {
            ("model-00002-of-00002.safetensors", name.clone(), &mut text)
        };
        weight_map.insert(renamed.clone(), file.into());
        shard.push((renamed, tensor));
    }
    Tensor::write_safetensors(&vision, dir.path().join("model-00001-of-00002.safetensors"))
        .unwrap();
    Tensor::write_safetensors(&text, dir.path().join("model-00002-of-00002.safetensors")).unwrap();
    let index = serde_json::json!({"metadata": {"total_size": 0}, "weight_map": weight_map});
    std::fs::write(
        dir.path().join("model.safetensors.index.json"),
        index.to_string(),
    )
    .unwrap();
    std::fs::write(dir.path().join("config.json"), config_text()).unwrap();
    assert_same_weights(&load_dir(dir.path()).unwrap(), &load(Kind::Float));
}

#[test]
fn float32_and_bfloat16_checkpoints_load() {
    let reference = load(Kind::Float);
    assert_eq!(
        Checkpoint::open(&checkpoint_dir())
            .unwrap()
            .stored_kind()
            .unwrap(),
        Kind::Half
    );
    for kind in [Kind::Float, Kind::BFloat16] {
        let dir = tempfile::tempdir().unwrap();
        let converted: Vec<(String, Tensor)> = stored_tensors()
            .into_iter()
            .map(|(n, t)| (n, t.to_kind(kind)))
            .collect();
        write_checkpoint(dir.path(), &converted, &config_text());
        assert_eq!(
            Checkpoint::open(dir.path()).unwrap().stored_kind().unwrap(),
            kind
        );
        let model = load_dir(dir.path()).unwrap();
        let vars = model.vars().variables();
        for (name, expected) in reference.vars().variables() {
            // float16 → float32 is exact; → bfloat16 rounds, as the stored file did.
            let expected = expected.to_kind(kind).to_kind(Kind::Float);
            assert!(vars[&name].equal(&expected), "{kind:?}: {name} differs");
        }
    }
}

/// Tied embeddings (as in Qwen2.5-VL-3B): no lm_head of its own, the logits
/// use the token embedding; a stored lm_head beside them is ignored.
#[test]
fn tied_embeddings_use_the_token_embedding() {
    let tensors = stored_tensors();
    let embed = tensors
        .iter()
        .find(|(n, _)| n == "model.embed_tokens.weight")
        .map(|(_, t)| t.shallow_clone())
        .unwrap();
    // Untied, with lm_head set to the embedding: the reference for the tied model.
    let untied_dir = tempfile::tempdir().unwrap();
    let untied: Vec<(String, Tensor)> = tensors
        .iter()
        .map(|(n, t)| {
            let t = if n == "lm_head.weight" { &embed } else { t };
            (n.clone(), t.shallow_clone())
        })
        .collect();
    write_checkpoint(untied_dir.path(), &untied, &config_text());

    let tied_config = config_text().replace(
        "\"tie_word_embeddings\": false",
        "\"tie_word_embeddings\": true",
    );
    assert_ne!(tied_config, config_text());
    let without_head: Vec<(String, Tensor)> = tensors
        .iter()
        .filter(|(n, _)| n != "lm_head.weight")
        .map(|(n, t)| (n.clone(), t.shallow_clone()))
        .collect();
    let (tied_dir, tied_with_head_dir) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_checkpoint(tied_dir.path(), &without_head, &tied_config);
    write_checkpoint(tied_with_head_dir.path(), &tensors, &tied_config);

    let batch = Batch {
        input_ids: &[vec![5, 17, 300, 1200]],
        images: None,
    };
    let logits = |dir: &Path| {
        let model = load_dir(dir).unwrap();
        tch::no_grad(|| model.forward(&batch)).unwrap()
    };
    let expected = logits(untied_dir.path());
    assert!(logits(tied_dir.path()).equal(&expected));
    assert!(logits(tied_with_head_dir.path()).equal(&expected));
    let tied = load_dir(tied_dir.path()).unwrap();
    assert!(!tied.vars().variables().contains_key("lm_head.weight"));
}

#[test]
fn a_bfloat16_model_runs() {
    let model = load(Kind::BFloat16);
    let logits = tch::no_grad(|| {
        model.forward(&Batch {
            input_ids: &[vec![1, 2, 3]],
            images: None,
        })
    })
    .unwrap();
    assert_eq!(logits.kind(), Kind::BFloat16);
    assert_eq!(logits.size(), [1, 3, 1536]);
}

/// The committed tensors with `edit` applied, written with the committed config.
fn broken_checkpoint(edit: impl FnOnce(&mut Vec<(String, Tensor)>)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut tensors = stored_tensors();
    edit(&mut tensors);
    write_checkpoint(dir.path(), &tensors, &config_text());
    dir
}

fn load_error(dir: &Path) -> (Error, String) {
    let error = load_dir(dir).err().expect("loading fails");
    let message = error.to_string();
    (error, message)
}

#[test]
fn a_missing_tensor_is_named() {
    let dir = broken_checkpoint(|t| t.retain(|(n, _)| n != "model.norm.weight"));
    let (error, message) = load_error(dir.path());
    assert!(matches!(error, Error::MissingTensors { .. }), "{error:?}");
    assert!(
        message.ends_with("lacks 1 tensor(s) the model needs: model.norm.weight"),
        "{message}"
    );
}

#[test]
fn a_wrong_shape_names_the_tensor_and_both_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_text().replace("\"intermediate_size\": 256", "\"intermediate_size\": 255");
    assert_ne!(config, config_text());
    write_checkpoint(dir.path(), &stored_tensors(), &config);
    let (error, message) = load_error(dir.path());
    assert!(matches!(error, Error::ShapeMismatch { .. }), "{error:?}");
    assert!(
        message.ends_with(
            "tensor model.layers.0.mlp.down_proj.weight has shape [128, 256], but the config needs [128, 255]"
        ),
        "{message}"
    );
}

#[test]
fn an_unexpected_tensor_is_named() {
    let dir = broken_checkpoint(|t| {
        t.push((
            "model.layers.2.mlp.up_proj.weight".into(),
            Tensor::zeros([4], (Kind::Half, Device::Cpu)),
        ))
    });
    let (error, message) = load_error(dir.path());
    assert!(
        matches!(error, Error::UnexpectedTensors { .. }),
        "{error:?}"
    );
    assert!(
        message.ends_with(
            "has 1 tensor(s) this model does not use: model.layers.2.mlp.up_proj.weight"
        ),
        "{message}"
    );
}

#[test]
fn an_integer_tensor_is_refused() {
    let dir = broken_checkpoint(|t| {
        for (name, tensor) in t.iter_mut() {
            if name == "model.norm.weight" {
                *tensor = tensor.to_kind(Kind::Int);
            }
        }
    });
    let (error, message) = load_error(dir.path());
    assert!(matches!(error, Error::UnsupportedDtype { .. }), "{error:?}");
    assert!(
        message.ends_with("tensor model.norm.weight is stored as I32; expected F32, BF16 or F16"),
        "{message}"
    );
}

#[test]
fn broken_files_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.json"), config_text()).unwrap();
    let (_, message) = load_error(dir.path());
    assert!(
        message.ends_with("no model.safetensors or model.safetensors.index.json in this directory"),
        "{message}"
    );

    let bytes = std::fs::read(checkpoint_dir().join("model.safetensors")).unwrap();
    std::fs::write(
        dir.path().join("model.safetensors"),
        &bytes[..bytes.len() - 10],
    )
    .unwrap();
    let (error, message) = load_error(dir.path());
    assert!(matches!(error, Error::Checkpoint { .. }), "{error:?}");
    assert!(
        message.contains("model.safetensors: not a valid safetensors file"),
        "{message}"
    );

    std::fs::write(dir.path().join("config.json"), "{\"vision_config\": 3}").unwrap();
    let (error, message) = load_error(dir.path());
    assert!(matches!(error, Error::Config { .. }), "{error:?}");
    assert!(
        message.contains("config.json: unexpected content"),
        "{message}"
    );
}

#[test]
fn an_index_pointing_at_the_wrong_shard_is_refused() {
    let dir = broken_checkpoint(|_| {});
    let index = serde_json::json!({"weight_map": {
        "model.norm.weight": "model.safetensors",
        "model.made_up.weight": "model.safetensors",
    }});
    std::fs::write(
        dir.path().join("model.safetensors.index.json"),
        index.to_string(),
    )
    .unwrap();
    let (_, message) = load_error(dir.path());
    assert!(
        message.ends_with(
            "model.safetensors.index.json: the index puts tensor model.made_up.weight in model.safetensors, which lacks it"
        ),
        "{message}"
    );
}

fn input_error(model: &Qwen25Vl, batch: &Batch) -> String {
    match model.forward(batch) {
        Err(Error::Input(message)) => message,
        other => panic!("expected an input error, got {other:?}"),
    }
}

#[test]
fn bad_inputs_are_described() {
    let model = load(Kind::Float);
    let image = model.config().image_token_id;
    let grids = [Grid::new(1, 4, 6)];
    let pixel_values = Tensor::zeros([24, 1176], (Kind::Float, Device::Cpu));
    let wrong_pixels = Tensor::zeros([20, 1176], (Kind::Float, Device::Cpu));
    let with_image = vec![1, image, image, image, image, image, image];
    // (sequences, pixel values for `grids`, expected message)
    type Case<'a> = (Vec<Vec<i64>>, Option<&'a Tensor>, &'a str);
    let cases: Vec<Case> = vec![
        (vec![], None, "empty batch"),
        (
            vec![vec![1, 2], vec![3]],
            None,
            "sequences must be non-empty and of equal length (lengths [2, 1])",
        ),
        (
            vec![vec![1, 1536]],
            None,
            "token id 1536 at sequence 0, position 1 is outside the vocabulary (vocab_size 1536)",
        ),
        (
            vec![vec![1, image]],
            None,
            "image tokens at position 1 but no image grid is left for them",
        ),
        (
            vec![vec![1, 2]],
            Some(&pixel_values),
            "1 image grid(s) given but the sequences have fewer images",
        ),
        (
            vec![with_image.clone()],
            Some(&wrong_pixels),
            "pixel_values has shape [20, 1176]; the image grids need (24, 1176)",
        ),
    ];
    for (ids, pixels, expected) in cases {
        let batch = Batch {
            input_ids: &ids,
            images: pixels.map(|pixel_values| Images {
                pixel_values,
                grids: &grids,
            }),
        };
        assert_eq!(input_error(&model, &batch), expected);
    }

    let mut cache = KvCache::new();
    let _prefill = model
        .forward_cached(
            &Batch {
                input_ids: &[vec![1, 2]],
                images: None,
            },
            &mut cache,
        )
        .unwrap();
    let again = Batch {
        input_ids: &[with_image],
        images: Some(Images {
            pixel_values: &pixel_values,
            grids: &grids,
        }),
    };
    match model.forward_cached(&again, &mut cache) {
        Err(Error::Input(m)) => assert_eq!(
            m,
            "images can only come with the first tokens of a cached sequence"
        ),
        other => panic!("expected an input error, got {other:?}"),
    }
}
