//! `btl model quantize`: llama.cpp's quantizer on the bundled f16 model; the
//! result loads and still agrees with transformers where quantization
//! allows (the reference ids of tests/data/tiny-qwen25vl/reference.json).

#![cfg(feature = "llama")]

use crate::util::*;

const F16: &str = TINY_TEXT;

#[test]
fn quantized_to_q8_0_the_model_loads_and_keeps_its_first_tokens() {
    use agent_core::model::llama::{LlamaConfig, LlamaPolicy};
    let dir = Dir::new();
    let out = dir.path("tiny-q8_0.gguf");
    // A quantization of this output killed earlier left its partial file
    // a while ago; one that still runs holds its own locked; one just made
    // may not be locked yet.
    let partial = |suffix: &str| dir.path(&format!(".tiny-q8_0.gguf.partial-{suffix}"));
    let (dead, live, fresh) = (partial("a1b2c3"), partial("d4e5f6"), partial("g7h8i9"));
    let a_while_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(120);
    for path in [&dead, &live, &fresh] {
        std::fs::write(path, "half a model").unwrap();
    }
    for path in [&dead, &live] {
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(a_while_ago).unwrap();
    }
    let writer = std::fs::File::open(&live).unwrap();
    writer.lock().unwrap();
    let run = dir.btl(["model", "quantize", F16, path_str(&out), "--type", "q8_0"]);
    assert!(run.status.success(), "{}", stderr(&run));
    assert_eq!(stdout(&run).trim(), path_str(&out));
    assert!(!dead.exists() && live.exists() && fresh.exists());
    drop(writer);
    for path in [&live, &fresh] {
        std::fs::remove_file(path).unwrap();
    }
    // Made as File::create makes a file (0666 less the umask), not a
    // temporary file's private 0600.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let other = Dir::new();
    std::fs::File::create(other.path("plain")).unwrap();
    assert_eq!(mode(&out), mode(&other.path("plain")));
    assert_ne!(mode(&out), 0o600);
    let f16_len = std::fs::metadata(F16).unwrap().len();
    let q8_len = std::fs::metadata(&out).unwrap().len();
    // q8_0 stores 32 weights in 34 bytes, f16 in 64: the weights shrink to
    // 0.53; norms and metadata stay, so the file lands a little above.
    let ratio = q8_len as f64 / f16_len as f64;
    assert!((0.53..0.65).contains(&ratio), "q8_0 / f16 = {ratio}");
    // No temporary file is left beside the output.
    assert_eq!(std::fs::read_dir(dir.path("")).unwrap().count(), 1);
    // Quantizing the result again is refused in words, naming its first
    // quantized tensor, and nothing is written.
    let again = dir.path("tiny-q4_0.gguf");
    let run = quantize(&dir, path_str(&out), &again, "q4_0");
    refused(
        &run,
        2,
        &["is quantized already (its tensor ", " is q8_0)"],
        &again,
    );

    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(std::path::Path::new(TINY_DIR).join("reference.json")).unwrap(),
    )
    .unwrap();
    let mut config = LlamaConfig::new(&out, TINY_MMPROJ);
    config.max_tokens = 3;
    config.context_tokens = 512;
    let mut policy = LlamaPolicy::load(config).unwrap();
    // llama.cpp's file type 7 is MOSTLY_Q8_0.
    assert_eq!(policy.metadata("general.file_type").as_deref(), Some("7"));
    let text = &reference["cases"]["text"];
    let generated = policy
        .generate(text["prompt_text"].as_str().unwrap(), None, 0)
        .unwrap();
    // Greedy tokens must agree with transformers while transformers' own
    // top-1 margin is at least 0.25 logits; quantizing f16 weights again to
    // q8_0 moves logits by more than the 0.18 margin of step 4 (measured).
    let margins = text["step_top1_margins"].as_array().unwrap();
    let agreeing = margins
        .iter()
        .take_while(|m| m.as_f64().unwrap() >= 0.25)
        .count();
    assert_eq!(agreeing, 3, "the reference's margins: {margins:?}");
    let expected: Vec<i32> = text["generated_ids"].as_array().unwrap()[..agreeing]
        .iter()
        .map(|v| v.as_i64().unwrap() as i32)
        .collect();
    assert_eq!(generated.tokens[..agreeing], expected);
}

#[test]
fn quantize_refuses_bad_input_and_never_overwrites() {
    let dir = Dir::new();
    let not_gguf = dir.write("model.gguf", "not a model");
    let run = dir.btl([
        "model",
        "quantize",
        path_str(&not_gguf),
        "out.gguf",
        "--type",
        "q8_0",
    ]);
    assert_eq!(run.status.code(), Some(2));
    assert!(stderr(&run).contains("model.gguf"), "{}", stderr(&run));
    let existing = dir.write("existing.gguf", "keep me");
    let run = dir.btl([
        "model",
        "quantize",
        F16,
        path_str(&existing),
        "--type",
        "q8_0",
    ]);
    assert_eq!(run.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "keep me");
    let run = dir.btl(["model", "quantize", F16, "x.gguf", "--type", "q9_9"]);
    assert_eq!(run.status.code(), Some(2));
}

/// When llama.cpp's quantizer fails, its own reason, which only its log
/// holds, is the error's: here an architecture it does not know (the tiny
/// model's "qwen2vl" renamed "qwen9vl").
#[test]
fn a_failed_quantization_says_llama_cpps_reason() {
    let dir = Dir::new();
    let model = patched(&dir, "renamed.gguf", b"general.architecture", |value| {
        // The value's type (8, a string) and length (7) come before it.
        assert_eq!(&value[12..19], b"qwen2vl");
        value[16] = b'9';
    });
    let out = dir.path("out.gguf");
    let run = quantize(&dir, path_str(&model), &out, "q8_0");
    let says = [
        "(a qwen9vl GGUF): ",
        "unknown model architecture: 'qwen9vl'",
    ];
    refused(&run, 1, &says, &out);
}

/// Asserts that a quantization exited with `code`, saying each of `says`,
/// and wrote nothing at `output`.
fn refused(run: &std::process::Output, code: i32, says: &[&str], output: &std::path::Path) {
    assert_eq!(run.status.code(), Some(code), "{}", stderr(run));
    for words in says {
        assert!(stderr(run).contains(words), "{words}: {}", stderr(run));
    }
    assert!(!output.exists());
}

/// A model file whose metadata llama.cpp refuses is refused with
/// llama.cpp's reason, which only its log holds (the binding says "null
/// result"): here `qwen2vl.embedding_length` stored as a float.
#[test]
fn a_model_llama_cpp_refuses_is_refused_with_its_reason() {
    let dir = Dir::new();
    let model = patched(
        &dir,
        "float-width.gguf",
        b"qwen2vl.embedding_length",
        |value| {
            // GGUF value types: 4 is a u32, 6 an f32 of the same four bytes.
            assert_eq!(value[..4], 4u32.to_le_bytes());
            value[..4].copy_from_slice(&6u32.to_le_bytes());
        },
    );
    let run = run_wifi_on(&dir, &model, &[]);
    assert_eq!(run.status.code(), Some(2), "{}", stderr(&run));
    let e = stderr(&run);
    assert!(
        e.contains("float-width.gguf") && e.contains("qwen2vl.embedding_length"),
        "{e}"
    );
    assert!(!e.contains("null result"), "{e}");
}

/// A run setting in the model file that is not text is refused naming its
/// key, not taken as missing: the shipped model with the bytes of its
/// `btl.profile` ("btl-extended") made invalid UTF-8 would otherwise run
/// with the default profile's prompt, which it was not trained on.
#[test]
fn a_run_setting_that_is_not_text_is_refused_by_its_key() {
    let dir = Dir::new();
    let shipped = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/models"));
    let mut bytes = std::fs::read(shipped.join("btl-mini-q8_0.gguf")).unwrap();
    let key = b"btl.profile";
    let at = bytes.windows(key.len()).position(|w| w == key).unwrap() + key.len();
    // A string value: its type (8), its length, its bytes.
    assert_eq!(bytes[at..at + 4], 8u32.to_le_bytes());
    assert_eq!(&bytes[at + 12..at + 24], b"btl-extended");
    bytes[at + 12..at + 15].copy_from_slice(b"\xff\xfe\xfd");
    let model = dir.path("not-text.gguf");
    std::fs::write(&model, bytes).unwrap();
    let mmproj = shipped.join("mmproj-btl-mini-f16.gguf");
    let run = run_with(&dir, &model, &mmproj, &["--max-steps", "1"]);
    assert_eq!(run.status.code(), Some(2), "{}", stderr(&run));
    let e = stderr(&run);
    assert!(
        e.contains("not-text.gguf") && e.contains("btl.profile"),
        "{e}"
    );
}

/// A model file ggml cannot read is refused with what ggml could not read,
/// which only its log says: here a GGUF version it does not know.
#[test]
fn a_header_ggml_cannot_read_is_refused_with_its_reason() {
    let dir = Dir::new();
    let mut bytes = std::fs::read(F16).unwrap();
    assert_eq!(bytes[4..8], 3u32.to_le_bytes(), "GGUF version 3");
    bytes[4..8].copy_from_slice(&99u32.to_le_bytes());
    let model = dir.path("version-99.gguf");
    std::fs::write(&model, bytes).unwrap();
    let run = run_wifi_on(&dir, &model, &[]);
    assert_eq!(run.status.code(), Some(2), "{}", stderr(&run));
    let e = stderr(&run);
    assert!(
        e.contains("version-99.gguf")
            && e.contains("ggml cannot read its GGUF header: ")
            && e.contains("is version 99 but"),
        "{e}"
    );
}

/// A projector whose header does not fit its tensors made llama.cpp abort
/// the whole process (a ggml assertion while its graph is built); each is
/// now refused in words naming the key or tensor. The values are those a
/// hostile-input review patched into a copy of the tiny projector.
#[test]
fn a_projector_llama_cpp_would_abort_on_is_refused_in_words() {
    let dir = Dir::new();
    let cases: [(&[u8], u32, &str); 5] = [
        (b"clip.vision.attention.head_count", 0, "head_count is 0"),
        (
            b"clip.vision.attention.head_count",
            3,
            "not clip.vision.attention.head_count 3 heads",
        ),
        (b"clip.vision.block_count", 0, "block_count is 0"),
        (
            b"clip.vision.patch_size",
            13,
            "tensor v.patch_embd.weight is [14, 14, 3, 64]",
        ),
        (
            b"clip.vision.projection_dim",
            512,
            "tensor mm.2.bias is [128]",
        ),
    ];
    for (key, value, says) in cases {
        let mut bytes = std::fs::read(TINY_MMPROJ).unwrap();
        let at = bytes.windows(key.len()).position(|w| w == key).unwrap() + key.len();
        assert_eq!(bytes[at..at + 4], 4u32.to_le_bytes(), "a u32 value");
        bytes[at + 4..at + 8].copy_from_slice(&value.to_le_bytes());
        let mmproj = dir.path("patched-mmproj.gguf");
        std::fs::write(&mmproj, bytes).unwrap();
        let run = run_with(
            &dir,
            std::path::Path::new(F16),
            &mmproj,
            &["--max-steps", "1"],
        );
        let e = stderr(&run);
        assert_eq!(run.status.code(), Some(2), "{says}: {e}");
        assert!(
            e.contains("patched-mmproj.gguf") && e.contains(says),
            "{says}: {e}"
        );
    }
}

/// An answer budget past the model's context is refused at load, naming
/// the flag, rather than as llama.cpp's failure to make a context at the
/// first step.
#[test]
fn an_answer_budget_past_the_models_context_is_refused_by_flag() {
    let dir = Dir::new();
    let run = run_wifi_on(
        &dir,
        std::path::Path::new(F16),
        &["--max-tokens", "4294967295"],
    );
    assert_eq!(run.status.code(), Some(2), "{}", stderr(&run));
    let e = stderr(&run);
    assert!(
        e.contains(
            "answers of up to 4294967295 tokens (--max-tokens) do not fit the 4096-token context"
        ),
        "{e}"
    );
}

/// `btl run --task wifi_on` with the text model `model`, the tiny
/// projector and `extra` arguments.
fn run_wifi_on(dir: &Dir, model: &std::path::Path, extra: &[&str]) -> std::process::Output {
    run_with(dir, model, std::path::Path::new(TINY_MMPROJ), extra)
}

/// `btl run --task wifi_on` with the model files `model` and `mmproj` and
/// `extra` arguments.
fn run_with(
    dir: &Dir,
    model: &std::path::Path,
    mmproj: &std::path::Path,
    extra: &[&str],
) -> std::process::Output {
    let args = ["run", "--task", "wifi_on", "--model", path_str(model)];
    dir.btl([&args[..], &["--mmproj", path_str(mmproj)], extra].concat())
}

/// The tiny text model written to `name` in `dir` with `patch` applied to
/// the bytes after the metadata key `key` (its value's type, then the
/// value).
fn patched(dir: &Dir, name: &str, key: &[u8], patch: impl FnOnce(&mut [u8])) -> std::path::PathBuf {
    let mut bytes = std::fs::read(F16).unwrap();
    let at = bytes.windows(key.len()).position(|w| w == key).unwrap() + key.len();
    patch(&mut bytes[at..]);
    let path = dir.path(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// The tiny text model with its `qwen2vl.block_count` (a u32 after the
/// key and its type, 4) set to `layers`.
fn with_layers(dir: &Dir, layers: u32) -> std::path::PathBuf {
    let name = format!("layers-{layers}.gguf");
    patched(dir, &name, b"qwen2vl.block_count", |value| {
        assert_eq!(value[..4], 4u32.to_le_bytes(), "a u32 value");
        value[4..8].copy_from_slice(&layers.to_le_bytes());
    })
}

/// A killed episode resumed with other weights under its model's file name
/// is refused from the files' headers, before the model loads: the new
/// file here is one llama.cpp would refuse to load, and the refusal names
/// the weights, not the load.
#[test]
fn a_resume_with_other_weights_is_refused_before_the_model_loads() {
    let dir = Dir::new();
    let model = dir.path("model.gguf");
    std::fs::copy(F16, &model).unwrap();
    let out = dir.path("episode");
    let budget = ["--max-steps", "1", "--max-tokens", "300"];
    let run = run_wifi_on(
        &dir,
        &model,
        &[&budget[..], &["--out", path_str(&out)]].concat(),
    );
    let episode_file = out.join("episode.json");
    assert!(episode_file.is_file(), "{}", stderr(&run));
    // Killed: no outcome.
    let mut episode: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&episode_file).unwrap()).unwrap();
    episode["outcome"] = serde_json::Value::Null;
    std::fs::write(&episode_file, episode.to_string()).unwrap();
    // Other weights (the fingerprint reads a file's length and each
    // tensor's first bytes, so a byte appended past the last tensor will
    // do), in a file that could not load (no layers).
    let other = with_layers(&dir, 0);
    let mut bytes = std::fs::read(&other).unwrap();
    bytes.push(0);
    std::fs::write(&model, bytes).unwrap();
    // A refused resume: its message.
    let refused = || {
        let resumed = dir.btl([
            "run",
            "--resume",
            path_str(&out),
            "--model",
            path_str(&model),
            "--mmproj",
            TINY_MMPROJ,
        ]);
        assert_eq!(resumed.status.code(), Some(2), "{}", stderr(&resumed));
        stderr(&resumed)
    };
    let e = refused();
    assert!(
        e.contains("holds an episode of model.gguf with other weights (fingerprint "),
        "{e}"
    );
    assert!(!e.contains("block_count"), "{e}");

    // The same weights decoding otherwise (the default budget, not the
    // recorded 300 tokens) are refused too, from the flags.
    std::fs::copy(F16, &model).unwrap();
    let e = refused();
    assert!(
        e.contains(
            "holds an episode of model.gguf decoded otherwise (max_tokens: 300 there, 2200 here)"
        ),
        "{e}"
    );
}

/// A model file with no layers, or more than llama.cpp's 512, would make
/// llama.cpp abort the whole process (an assertion, not an error): `run`
/// and `quantize` refuse it in words first.
#[test]
fn a_layer_count_llama_cpp_asserts_on_is_refused() {
    let dir = Dir::new();
    for layers in [0, 513, 100_000] {
        let model = with_layers(&dir, layers);
        let says = format!("qwen2vl.block_count is {layers}; llama.cpp takes 1 to 512 layers");
        let run = run_wifi_on(&dir, &model, &[]);
        assert_eq!(run.status.code(), Some(2), "{}", stderr(&run));
        assert!(stderr(&run).contains(&says), "{}", stderr(&run));
        let out = dir.path("out.gguf");
        let quantize = dir.btl([
            "model",
            "quantize",
            path_str(&model),
            path_str(&out),
            "--type",
            "q8_0",
        ]);
        assert_ne!(quantize.status.code(), Some(0));
        assert_ne!(
            quantize.status.code(),
            None,
            "killed by a signal: {}",
            stderr(&quantize)
        );
        assert!(stderr(&quantize).contains(&says), "{}", stderr(&quantize));
    }
}

/// A vision projector quantizes to every type it takes: each file is
/// smaller than the f16 one (f16 and bf16 aside), loads beside the text
/// model and answers the reference's image prompt; at q8_0 the first token,
/// where transformers' top-1 margin is 1.8 logits, is still transformers'.
#[test]
fn projectors_quantize_to_the_types_they_take_and_still_see() {
    use agent_core::model::llama::{LlamaConfig, LlamaPolicy};
    use agent_core::model::quantize::QuantType;
    use clap::ValueEnum;
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(std::path::Path::new(TINY_DIR).join("reference.json")).unwrap(),
    )
    .unwrap();
    let case = &reference["cases"]["image"];
    let text = case["prompt_text"].as_str().unwrap();
    let (start, end) = (
        text.find("<|vision_start|>").unwrap(),
        text.find("<|vision_end|>").unwrap() + "<|vision_end|>".len(),
    );
    let prompt = format!(
        "{}{}{}",
        &text[..start],
        llama_cpp_2::mtmd::mtmd_default_marker(),
        &text[end..]
    );
    let screenshot = image::open(std::path::Path::new(TINY_DIR).join("test-screenshot.png"))
        .unwrap()
        .to_rgb8();
    let first = case["generated_ids"][0].as_i64().unwrap() as i32;
    let f16_len = std::fs::metadata(TINY_MMPROJ).unwrap().len();
    let dir = Dir::new();
    for ty in QuantType::value_variants()
        .iter()
        .filter(|t| t.fits_projectors())
    {
        let name = ty.name();
        let out = dir.path(&format!("mmproj-{name}.gguf"));
        let run = quantize(&dir, TINY_MMPROJ, &out, &name);
        assert!(run.status.success(), "{name}: {}", stderr(&run));
        let len = std::fs::metadata(&out).unwrap().len();
        if !matches!(ty, QuantType::F16 | QuantType::BF16) {
            assert!(len < f16_len, "{name}: {len} bytes against f16's {f16_len}");
        }
        let mut config = LlamaConfig::new(F16, &out);
        config.max_tokens = 1;
        config.context_tokens = 1024;
        let generated = LlamaPolicy::load(config)
            .unwrap()
            .generate(&prompt, Some(&screenshot), 0)
            .unwrap();
        assert_eq!(generated.stats.prompt_tokens, 774, "{name}");
        if *ty == QuantType::Q8_0 {
            assert_eq!(generated.tokens, [first], "{name}");
        }
    }
}

/// q2_k would abort the process inside llama.cpp on a projector (its rules
/// read attention-head counts a projector's header lacks): it is refused
/// first, naming the types that work, and nothing is written.
#[test]
fn a_projector_type_that_would_crash_llama_cpp_is_refused() {
    let dir = Dir::new();
    let out = dir.path("mmproj-q2_k.gguf");
    let run = quantize(&dir, TINY_MMPROJ, &out, "q2_k");
    assert_eq!(run.status.code(), Some(2), "{}", stderr(&run));
    let err = stderr(&run);
    assert!(
        err.contains("vision projector") && err.contains("q2_k") && err.contains("q8_0"),
        "{err}"
    );
    assert!(!out.exists());
    assert_eq!(std::fs::read_dir(dir.path("")).unwrap().count(), 0);
}

/// `btl model quantize INPUT OUTPUT --type TY` run in `dir`.
fn quantize(dir: &Dir, input: &str, output: &std::path::Path, ty: &str) -> std::process::Output {
    dir.btl(["model", "quantize", input, path_str(output), "--type", ty])
}
