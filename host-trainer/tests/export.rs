//! Export to GGUF checked against llama.cpp's converter, which turned the
//! tiny model into `tiny-qwen25vl-f16.gguf` and `mmproj-tiny-qwen25vl-f16.gguf`.
//! The templates used have their tensor data zeroed first, so every tensor
//! byte of an export comes from the model, through the name mapping.
//!
//! The converter read the float32 original of the model; the committed
//! checkpoint is that model rounded to float16 (`make_reference.py`). The
//! converter's F16 tensors therefore hold exactly the checkpoint's values,
//! but its F32 tensors (norms and biases, 11 in the text file and 39 in the
//! projector) hold the unrounded originals. The reference an export must
//! equal byte for byte is thus the converter's file with its F32 tensors
//! rounded to float16 and back, the same rounding the checkpoint went through.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use host_trainer::Error;
use host_trainer::export::gguf::{self, GgmlType, GgufFile, Value};
use host_trainer::export::{Precision, write_gguf_from_template};
use tch::{Kind, Tensor};

use crate::util::{gguf_dir, load, weights};

const TEXT: &str = "tiny-qwen25vl-f16.gguf";
const TEXT_Q8: &str = "tiny-qwen25vl-q8_0.gguf";
const PROJECTOR: &str = "mmproj-tiny-qwen25vl-f16.gguf";

/// A copy of fixture `name` with every tensor byte set to zero.
fn zeroed_template(dir: &Path, name: &str) -> PathBuf {
    let file = GgufFile::open(&gguf_dir().join(name)).unwrap();
    let out = dir.join(format!("zeroed-{name}"));
    gguf::write(&out, file.header(), |i| {
        Ok(Cow::Owned(vec![0u8; file.tensor_data(i).len()]))
    })
    .unwrap();
    out
}

/// The converter's file `name` with its F32 tensors rounded through float16,
/// as the committed checkpoint's weights are.
fn converter_reference(dir: &Path, name: &str) -> PathBuf {
    let file = GgufFile::open(&gguf_dir().join(name)).unwrap();
    let out = dir.join(format!("reference-{name}"));
    gguf::write(&out, file.header(), |i| {
        let info = &file.header().tensors[i];
        let data = file.tensor_data(i);
        if info.ggml_type != GgmlType::F32 {
            return Ok(Cow::Borrowed(data));
        }
        let rounded = Tensor::from_data_size(data, &info.shape(), Kind::Float)
            .to_kind(Kind::Half)
            .to_kind(Kind::Float);
        let mut bytes = vec![0u8; data.len()];
        rounded.copy_data_u8(&mut bytes, rounded.numel());
        Ok(Cow::Owned(bytes))
    })
    .unwrap();
    out
}

fn assert_same_file(found: &Path, expected: &Path) {
    let (f, e) = (
        std::fs::read(found).unwrap(),
        std::fs::read(expected).unwrap(),
    );
    if f == e {
        return;
    }
    // Name the first differing tensor rather than a byte offset.
    let (ff, ef) = (
        GgufFile::open(found).unwrap(),
        GgufFile::open(expected).unwrap(),
    );
    assert_eq!(ff.header(), ef.header(), "headers differ");
    for (i, t) in ef.header().tensors.iter().enumerate() {
        assert!(
            ff.tensor_data(i) == ef.tensor_data(i),
            "tensor {} differs",
            t.name
        );
    }
    panic!(
        "{} and {} differ outside the tensors",
        found.display(),
        expected.display()
    );
}

/// Names of the tensors whose bytes differ between two files with the same tensor list.
fn differing_tensors(a: &Path, b: &Path) -> Vec<String> {
    let (a, b) = (GgufFile::open(a).unwrap(), GgufFile::open(b).unwrap());
    a.header()
        .tensors
        .iter()
        .enumerate()
        .filter(|&(i, _)| a.tensor_data(i) != b.tensor_data(i))
        .map(|(_, t)| t.name.clone())
        .collect()
}

/// Names of the F32 tensors of `file`.
fn f32_tensor_names(file: &Path) -> Vec<String> {
    GgufFile::open(file)
        .unwrap()
        .header()
        .tensors
        .iter()
        .filter(|t| t.ggml_type == GgmlType::F32)
        .map(|t| t.name.clone())
        .collect()
}

#[test]
fn the_converter_s_files_differ_from_an_export_only_in_their_unrounded_f32_tensors() {
    let weights = weights(&load(Kind::Float));
    let dir = tempfile::tempdir().unwrap();
    for (name, f32_tensors) in [(TEXT, 11), (PROJECTOR, 39)] {
        let out = dir.path().join(name);
        write_gguf_from_template(&gguf_dir().join(name), &weights, Precision::Template, &out)
            .unwrap();
        let converter = gguf_dir().join(name);
        let f32_names = f32_tensor_names(&converter);
        assert_eq!(f32_names.len(), f32_tensors);
        assert_eq!(differing_tensors(&out, &converter), f32_names, "{name}");
    }
}

#[test]
fn text_and_projector_exports_reproduce_the_converter_s_files() {
    let model = load(Kind::Float);
    let weights = weights(&model);
    let dir = tempfile::tempdir().unwrap();

    let out = dir.path().join("text.gguf");
    let template = zeroed_template(dir.path(), TEXT);
    let report = write_gguf_from_template(&template, &weights, Precision::Template, &out).unwrap();
    assert_same_file(&out, &converter_reference(dir.path(), TEXT));
    assert_eq!(
        (report.architecture.as_str(), report.tensors),
        ("qwen2vl", 27)
    );
    assert!(!report.output_from_embeddings);
    // The text file uses every weight but the vision tower's.
    let visual = weights.keys().filter(|n| n.starts_with("visual.")).count();
    assert_eq!(report.unused.len(), visual);
    assert!(report.unused.iter().all(|n| n.starts_with("visual.")));

    let out = dir.path().join("mmproj.gguf");
    let template = zeroed_template(dir.path(), PROJECTOR);
    let report = write_gguf_from_template(&template, &weights, Precision::Template, &out).unwrap();
    assert_same_file(&out, &converter_reference(dir.path(), PROJECTOR));
    assert_eq!((report.architecture.as_str(), report.tensors), ("clip", 71));
    assert_eq!(report.unused.len(), weights.len() - visual);
    assert!(report.unused.iter().all(|n| !n.starts_with("visual.")));
}

#[test]
fn f16_from_the_q8_0_template_is_the_converter_s_f16_file() {
    // The q8_0 file differs from the f16 one only in its tensor types and
    // general.file_type, which precision F16 sets as the converter does.
    let weights = weights(&load(Kind::Float));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("text.gguf");
    write_gguf_from_template(&gguf_dir().join(TEXT_Q8), &weights, Precision::F16, &out).unwrap();
    assert_same_file(&out, &converter_reference(dir.path(), TEXT));

    let out = dir.path().join("mmproj.gguf");
    write_gguf_from_template(&gguf_dir().join(PROJECTOR), &weights, Precision::F16, &out).unwrap();
    assert_same_file(&out, &converter_reference(dir.path(), PROJECTOR));
}

/// Tensor `index` of `file` as a float64 torch tensor.
fn values(file: &GgufFile, index: usize) -> Tensor {
    let info = &file.header().tensors[index];
    let kind = match info.ggml_type {
        GgmlType::F32 => Kind::Float,
        GgmlType::F16 => Kind::Half,
        other => panic!("{} is {other}", info.name),
    };
    Tensor::from_data_size(file.tensor_data(index), &info.shape(), kind).to_kind(Kind::Double)
}

#[test]
fn f32_export_holds_the_same_values_in_f32() {
    let weights = weights(&load(Kind::Float));
    let dir = tempfile::tempdir().unwrap();
    for name in [TEXT, PROJECTOR] {
        let out = dir.path().join(name);
        write_gguf_from_template(&gguf_dir().join(name), &weights, Precision::F32, &out).unwrap();
        let reference = converter_reference(dir.path(), name);
        let (found, expected) = (
            GgufFile::open(&out).unwrap(),
            GgufFile::open(&reference).unwrap(),
        );
        assert_eq!(
            found.header().get("general.file_type"),
            Some(&Value::U32(0))
        );
        for (i, t) in found.header().tensors.iter().enumerate() {
            assert_eq!(t.ggml_type, GgmlType::F32, "{}", t.name);
            assert_eq!(t.dims, expected.header().tensors[i].dims);
            // f16 → f32 is exact, so equal values.
            assert!(
                values(&found, i).equal(&values(&expected, i)),
                "{} differs",
                t.name
            );
        }
    }
}

#[test]
fn transformers_5_names_give_the_same_file() {
    let renamed: HashMap<String, Tensor> = weights(&load(Kind::Float))
        .into_iter()
        .map(|(n, t)| {
            let n = match (n.strip_prefix("model."), n.strip_prefix("visual.")) {
                (Some(rest), _) => format!("model.language_model.{rest}"),
                (_, Some(rest)) => format!("model.visual.{rest}"),
                _ => n,
            };
            (n, t)
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    for name in [TEXT, PROJECTOR] {
        let out = dir.path().join(name);
        write_gguf_from_template(&gguf_dir().join(name), &renamed, Precision::Template, &out)
            .unwrap();
        assert_same_file(&out, &converter_reference(dir.path(), name));
    }
}

#[test]
fn tied_embeddings_fill_the_output_matrix() {
    let mut weights = weights(&load(Kind::Float));
    weights.remove("lm_head.weight");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tied.gguf");
    let report =
        write_gguf_from_template(&gguf_dir().join(TEXT), &weights, Precision::Template, &out)
            .unwrap();
    assert!(report.output_from_embeddings);
    let file = GgufFile::open(&out).unwrap();
    let index = |name: &str| {
        file.header()
            .tensors
            .iter()
            .position(|t| t.name == name)
            .unwrap()
    };
    assert_eq!(
        file.tensor_data(index("output.weight")),
        file.tensor_data(index("token_embd.weight"))
    );
}

/// The error of an export that must fail, after checking it left no output.
fn export_error(
    template: &Path,
    weights: &HashMap<String, Tensor>,
    precision: Precision,
) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.gguf");
    let err = write_gguf_from_template(template, weights, precision, &out).unwrap_err();
    assert!(!out.exists(), "a failed export wrote {}", out.display());
    assert!(
        matches!(err, Error::Export { .. } | Error::Gguf { .. }),
        "{err:?}"
    );
    err.to_string()
}

#[test]
fn a_quantized_template_needs_precision_f16_or_f32() {
    let weights = weights(&load(Kind::Float));
    let text = export_error(&gguf_dir().join(TEXT_Q8), &weights, Precision::Template);
    assert!(text.contains("tensor output.weight is Q8_0"), "{text}");
    assert!(text.contains("btl model quantize"), "{text}");
}

#[test]
fn missing_and_misshapen_weights_are_named() {
    let mut weights = weights(&load(Kind::Float));
    weights.remove("model.layers.1.mlp.up_proj.weight");
    weights.remove("visual.blocks.0.attn.qkv.bias");
    let text = export_error(&gguf_dir().join(TEXT), &weights, Precision::Template);
    assert!(text.contains("1 template tensor(s) have no weight: model.layers.1.mlp.up_proj.weight (for blk.1.ffn_up.weight)"), "{text}");
    let text = export_error(&gguf_dir().join(PROJECTOR), &weights, Precision::Template);
    assert!(text.contains("3 template tensor(s)"), "{text}");
    assert!(
        text.contains("visual.blocks.0.attn.qkv.bias (for v.blk.0.attn_k.bias)"),
        "{text}"
    );

    // The projector made for a 96-wide text model: its last layer cannot take this model's.
    let weights = crate::util::weights(&load(Kind::Float));
    let text = export_error(
        &gguf_dir().join("mmproj-mismatched-f16.gguf"),
        &weights,
        Precision::Template,
    );
    assert!(text.contains("tensor mm.2.bias needs shape [96] (GGUF dimensions [96]), but visual.merger.mlp.2.bias gives [128]"), "{text}");
}

#[test]
fn a_checkpoint_larger_than_its_template_is_refused() {
    // A model grown by a layer: a template of the smaller model would drop it silently.
    let mut weights = weights(&load(Kind::Float));
    let layer = weights["model.layers.1.mlp.up_proj.weight"].copy();
    weights.insert("model.layers.2.mlp.up_proj.weight".to_owned(), layer);
    let text = export_error(&gguf_dir().join(TEXT), &weights, Precision::Template);
    assert!(
        text.contains("1 weight(s) of the checkpoint have no tensor in the template (first: model.layers.2.mlp.up_proj.weight)"),
        "{text}"
    );
    assert!(text.contains("btl-train init --config"), "{text}");
    // The projector leaves the language model out, the grown layer with it.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mmproj.gguf");
    write_gguf_from_template(
        &gguf_dir().join(PROJECTOR),
        &weights,
        Precision::Template,
        &out,
    )
    .unwrap();

    let mut weights = crate::util::weights(&load(Kind::Float));
    let block = weights["visual.blocks.0.attn.qkv.bias"].copy();
    weights.insert("visual.blocks.9.attn.qkv.bias".to_owned(), block);
    let text = export_error(&gguf_dir().join(PROJECTOR), &weights, Precision::Template);
    assert!(
        text.contains("(first: visual.blocks.9.attn.qkv.bias)"),
        "{text}"
    );
}

#[test]
fn a_template_that_is_no_qwen25_vl_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = GgufFile::open(&gguf_dir().join(TEXT)).unwrap();
    let mut header = file.header().clone();
    header.set("general.architecture", Value::String("llama".into()));
    let template = dir.path().join("llama.gguf");
    gguf::write(&template, &header, |i| {
        Ok(Cow::Borrowed(file.tensor_data(i)))
    })
    .unwrap();
    let weights = weights(&load(Kind::Float));
    let text = export_error(&template, &weights, Precision::Template);
    assert!(text.contains("general.architecture is \"llama\""), "{text}");

    let bad = dir.path().join("bad.gguf");
    std::fs::write(&bad, b"GGUF\x03\0\0\0").unwrap();
    let text = export_error(&bad, &weights, Precision::Template);
    assert!(text.contains("truncated"), "{text}");
}

#[test]
fn values_beyond_float16_need_f32() {
    let mut weights = weights(&load(Kind::Float));
    let big = weights["model.layers.0.mlp.up_proj.weight"].shallow_clone() * 1e6;
    weights.insert("model.layers.0.mlp.up_proj.weight".into(), big);
    let text = export_error(&gguf_dir().join(TEXT), &weights, Precision::Template);
    assert!(
        text.contains("tensor blk.0.ffn_up.weight has a value of magnitude"),
        "{text}"
    );
    assert!(text.contains("export it as F32"), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f32.gguf");
    write_gguf_from_template(&gguf_dir().join(TEXT), &weights, Precision::F32, &out).unwrap();
}

#[test]
fn a_hugging_face_checkpoint_from_another_trainer_exports_its_weights_as_they_are() {
    use host_trainer::export::trained::{ExportOptions, RunSettings, export_trained};
    let dir = tempfile::tempdir().unwrap();
    // A Hugging Face Trainer checkpoint, as ms-swift and TRL save one: the
    // model's files beside the state of the run that trained it.
    let checkpoint = dir.path().join("checkpoint-2");
    std::fs::create_dir(&checkpoint).unwrap();
    for entry in std::fs::read_dir(crate::util::checkpoint_dir()).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, checkpoint.join(path.file_name().unwrap())).unwrap();
    }
    let run_state = [
        "optimizer.pt",
        "rng_state.pth",
        "training_args.bin",
        "trainer_state.json",
        "args.json",
    ];
    for name in run_state {
        std::fs::write(checkpoint.join(name), b"{}").unwrap();
    }
    let out = dir.path().join("export");
    let (text_template, mmproj_template) = (gguf_dir().join(TEXT), gguf_dir().join(PROJECTOR));
    let options = |settings| ExportOptions {
        text_template: &text_template,
        mmproj_template: Some(&mmproj_template),
        precision: Precision::Template,
        lora_gguf: false,
        settings,
        out: &out,
    };

    let e = export_trained(&checkpoint, &options(RunSettings::default()))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("checkpoint-2") && e.contains("give --profile and --max-pixels"),
        "{e}"
    );
    let file = dir.path().join("a-file");
    std::fs::write(&file, "kept").unwrap();
    let e = export_trained(
        &checkpoint,
        &ExportOptions {
            out: &file,
            ..options(RunSettings::default())
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("a-file: not a directory"), "{e}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "kept");

    let settings = RunSettings {
        profile: Some(agent_core::protocol::Profile::BtlExtended),
        max_pixels: Some(200_704),
    };
    let exported = export_trained(&checkpoint, &options(settings)).unwrap();
    // The checkpoint's own weights, as the first test finds them in the
    // converter's files: equal but for the converter's unrounded f32 tensors.
    for (file, name) in [
        (&exported.text, TEXT),
        (exported.mmproj.as_ref().unwrap(), PROJECTOR),
    ] {
        let converter = gguf_dir().join(name);
        assert_eq!(
            differing_tensors(file, &converter),
            f32_tensor_names(&converter),
            "{name}"
        );
    }
    let text = GgufFile::open(&exported.text).unwrap();
    assert_eq!(
        text.header().get("btl.profile").and_then(Value::as_str),
        Some("btl-extended")
    );
    assert_eq!(
        text.header().get("btl.max_pixels"),
        Some(&Value::U64(200_704))
    );
    // What describes the model travels; the run's state does not.
    assert!(exported.hf.join("config.json").is_file());
    assert!(exported.hf.join("model.safetensors").is_file());
    for name in run_state {
        assert!(!exported.hf.join(name).exists(), "{name} was copied");
    }

    // Exports that cannot be made whole leave the previous one as it was:
    // an adapter asked of weights that have none (at another size, which
    // a text GGUF written before the refusal would carry), and the two
    // templates given the wrong way round.
    let files = || {
        let mut files: Vec<(String, Vec<u8>)> = files_under(&out)
            .into_iter()
            .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
            .collect();
        files.sort();
        files
    };
    let before = files();
    let e = export_trained(
        &checkpoint,
        &ExportOptions {
            lora_gguf: true,
            ..options(RunSettings {
                max_pixels: Some(401_408),
                ..settings
            })
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("adapter"), "{e}");
    assert!(
        files() == before,
        "a failed --lora-gguf export changed {out:?}"
    );
    let e = export_trained(
        &checkpoint,
        &ExportOptions {
            text_template: &mmproj_template,
            mmproj_template: Some(&text_template),
            ..options(settings)
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("--gguf-template") && e.contains("projector"),
        "{e}"
    );
    assert!(files() == before, "a failed export changed {out:?}");

    // An --out whose files are the export's own inputs: the text template
    // where the exported text model would go, and the checkpoint where
    // hf/ would go.
    let own = dir.path().join("own");
    std::fs::create_dir(&own).unwrap();
    let template = own.join("model-template.gguf");
    std::fs::copy(&text_template, &template).unwrap();
    let kept = std::fs::read(&template).unwrap();
    let e = export_trained(
        &checkpoint,
        &ExportOptions {
            text_template: &template,
            out: &own,
            ..options(settings)
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("model-template.gguf would write over") && e.contains("which this export reads"),
        "{e}"
    );
    assert_eq!(std::fs::read(&template).unwrap(), kept);
    let e = export_trained(
        &checkpoint,
        &ExportOptions {
            out: dir.path(),
            ..options(settings)
        },
    );
    assert!(e.is_ok(), "hf/ beside the checkpoint is no input: {e:?}");
    let hf_checkpoint = dir.path().join("hf");
    let e = export_trained(
        &hf_checkpoint,
        &ExportOptions {
            out: dir.path(),
            ..options(settings)
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("hf would write over"), "{e}");
    // Refused before the model is loaded: weights that cannot load do not
    // come first.
    let unloadable = dir.path().join("unloadable");
    std::fs::create_dir_all(unloadable.join("hf")).unwrap();
    std::fs::copy(
        hf_checkpoint.join("config.json"),
        unloadable.join("hf/config.json"),
    )
    .unwrap();
    std::fs::write(unloadable.join("hf/model.safetensors"), b"not weights").unwrap();
    let e = export_trained(
        &unloadable.join("hf"),
        &ExportOptions {
            out: &unloadable,
            ..options(settings)
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("hf would write over"), "{e}");

    // Another export into the same --out takes the place of the first one
    // whole: the template-precision files it does not write are gone, not
    // left to pass for its own.
    assert!(out.join("model-template.gguf").is_file());
    let again = export_trained(
        &checkpoint,
        &ExportOptions {
            precision: Precision::F32,
            ..options(settings)
        },
    )
    .unwrap();
    assert_eq!(again.text, out.join("model-f32.gguf"));
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["hf", "mmproj-f32.gguf", "model-f32.gguf"]);
    // Templates kept in --out under an export's names are inputs, not an
    // earlier export's leftovers: an export of another precision reads
    // them and leaves them.
    let kept = dir.path().join("kept");
    std::fs::create_dir(&kept).unwrap();
    let (text_copy, mmproj_copy) = (kept.join("model-f16.gguf"), kept.join("mmproj-f16.gguf"));
    std::fs::copy(&text_template, &text_copy).unwrap();
    std::fs::copy(&mmproj_template, &mmproj_copy).unwrap();
    export_trained(
        &checkpoint,
        &ExportOptions {
            text_template: &text_copy,
            mmproj_template: Some(&mmproj_copy),
            precision: Precision::F32,
            out: &kept,
            ..options(settings)
        },
    )
    .unwrap();
    assert_eq!(
        std::fs::read(&text_copy).unwrap(),
        std::fs::read(&text_template).unwrap()
    );
    assert_eq!(
        std::fs::read(&mmproj_copy).unwrap(),
        std::fs::read(&mmproj_template).unwrap()
    );
    assert!(kept.join("model-f32.gguf").is_file());
}

/// Every file under `dir`, at any depth.
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}
