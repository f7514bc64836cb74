//! Export of trained weights to the GGUF files llama.cpp runs on the phone.
//!
//! The user's base GGUF files serve as templates: every metadata pair
//! (tokenizer, chat template, hyperparameters) and the tensor list and order
//! are copied from the template, and only tensor data is replaced by the
//! trained weights. That keeps the tokenizer export of llama.cpp's Python
//! converter without re-implementing it. One template gives one file: the
//! text model (`qwen2vl`) or the projector (`clip`, `qwen2.5vl_merger`);
//! [`mapping`] says which checkpoint tensor each GGUF tensor comes from.
//!
//! A LoRA adapter can also be written as a GGUF adapter
//! ([`write_lora_gguf`]), in the layout of llama.cpp's
//! `convert_lora_to_gguf.py`, for llama.cpp to apply at load time.
//!
//! - [`gguf`]: the file format;
//! - [`mapping`]: checkpoint names → llama.cpp names;
//! - [`trained`]: a training checkpoint → merged HF checkpoint + GGUFs.

pub mod gguf;
pub mod mapping;
pub mod trained;

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use tch::{Device, Kind, Tensor};

use self::gguf::{GgmlType, GgufFile, Header, TensorInfo, Value};
use self::mapping::{Family, Part, Source};
use crate::error::{Error, Result};
use crate::peft::LoraWeights;
use crate::weights::canonical_name;

/// The tensor types of an exported file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// Each tensor's type in the template (F32, F16 or BF16; a quantized
    /// template is refused).
    Template,
    /// Everything F32 (`general.file_type` 0).
    F32,
    /// Matrices F16, vectors (norms, biases) F32, as llama.cpp's converter
    /// writes `--outtype f16` (`general.file_type` 1). Works from any
    /// template, a quantized one too.
    F16,
}

/// The tensor types of a GGUF LoRA adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdapterPrecision {
    F32,
    F16,
}

/// What an export wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportReport {
    pub output: PathBuf,
    /// `general.architecture` of the file.
    pub architecture: String,
    pub tensors: usize,
    /// Given weights (or adapter modules) this file does not use, sorted; for
    /// the text file these are the vision tower's, for example.
    pub unused: Vec<String>,
    /// The template has `output.weight` but the model ties its embeddings
    /// (no `lm_head.weight`): the token embedding was written there.
    pub output_from_embeddings: bool,
}

/// `general.file_type` values (llama.cpp's `llama_ftype`).
const FILE_TYPE_KEY: &str = "general.file_type";
const FILE_TYPE_F32: u32 = 0;
const FILE_TYPE_F16: u32 = 1;

fn template_error(template: &Path, message: String) -> Error {
    Error::Export {
        template: template.to_owned(),
        message,
    }
}

pub(crate) fn family_of(header: &Header) -> std::result::Result<Family, String> {
    let text = |key: &str| header.get(key).and_then(Value::as_str);
    Family::detect(text("general.architecture"), text("clip.projector_type"))
}

/// The torch kind of a float GGUF type.
fn kind_of(ggml_type: GgmlType) -> Option<Kind> {
    match ggml_type {
        GgmlType::F32 => Some(Kind::Float),
        GgmlType::F16 => Some(Kind::Half),
        GgmlType::BF16 => Some(Kind::BFloat16),
        _ => None,
    }
}

/// Largest finite float16.
const F16_MAX: f64 = 65504.0;

/// Refuses to write `t` (GGUF tensor `name`) as float16 if a value would
/// become infinite there.
fn check_f16_range(t: &Tensor, name: &str) -> Result<std::result::Result<(), String>> {
    let largest = tch::no_grad(|| t.f_abs()?.f_max()?.f_double_value(&[]))?;
    Ok(if largest > F16_MAX {
        Err(format!(
            "tensor {name} has a value of magnitude {largest}, beyond float16's {F16_MAX}; export it as F32"
        ))
    } else {
        Ok(())
    })
}

/// The bytes of `t` as `kind` (float, half or bfloat16), converted on the CPU
/// with round-to-nearest-even as numpy does in llama.cpp's converter.
fn tensor_bytes(t: &Tensor, kind: Kind) -> Result<Vec<u8>> {
    let t = tch::no_grad(|| -> Result<Tensor> {
        Ok(t.f_detach()?
            .f_to_device(Device::Cpu)?
            .f_to_kind(kind)?
            .f_contiguous()?)
    })?;
    let numel = t.numel();
    let mut bytes = vec![0u8; numel * kind.elt_size_in_bytes()];
    t.f_copy_data_u8(&mut bytes, numel)?;
    Ok(bytes)
}

/// Cuts a GGUF tensor out of its checkpoint tensor (a view: writing into it
/// writes into the checkpoint tensor).
pub(crate) fn cut(t: &Tensor, source: &Source) -> std::result::Result<Tensor, String> {
    let size = t.size();
    let fail = |what: &str| {
        format!(
            "{} has shape {size:?}, which has no {what}",
            source.checkpoint
        )
    };
    match source.part {
        Part::Whole => Ok(t.shallow_clone()),
        Part::QkvThird(i) => {
            let rows = *size.first().ok_or_else(|| fail("rows"))?;
            if rows % 3 != 0 {
                return Err(fail("rows divisible in thirds (q, k, v)"));
            }
            t.f_narrow(0, i * rows / 3, rows / 3)
                .map_err(|e| e.to_string())
        }
        Part::Temporal(i) => {
            if size.len() != 5 || size[2] <= i {
                return Err(fail(&format!(
                    "temporal slice {i} (a Conv3d weight is 5-D)"
                )));
            }
            t.f_select(2, i).map_err(|e| e.to_string())
        }
    }
}

/// Checkpoint-style names for the given weights; two names for one tensor
/// (transformers 4 and 5 styles mixed) are an error.
fn canonical_weights<'w>(
    template: &Path,
    weights: &'w HashMap<String, Tensor>,
) -> Result<HashMap<String, &'w Tensor>> {
    let mut out = HashMap::with_capacity(weights.len());
    for (name, tensor) in weights {
        if out.insert(canonical_name(name), tensor).is_some() {
            return Err(template_error(
                template,
                format!(
                    "weight {} is given twice (under two names)",
                    canonical_name(name)
                ),
            ));
        }
    }
    Ok(out)
}

/// Writes the GGUF file of `template`'s kind (text model or projector) with
/// `weights` (Hugging Face checkpoint names → tensors, e.g. a model's
/// `vars().variables()`; transformers 5 module names are accepted too) as the
/// tensor data, atomically to `out`.
///
/// Every template tensor must be made from a weight of the right shape; all
/// problems are checked before anything is written.
pub fn write_gguf_from_template(
    template: &Path,
    weights: &HashMap<String, Tensor>,
    precision: Precision,
    out: &Path,
) -> Result<ExportReport> {
    write_gguf_from_template_with(template, &[], weights, precision, out)
}

/// [`write_gguf_from_template`] with metadata pairs set over the template's
/// (replaced where the template has the key, appended otherwise).
pub fn write_gguf_from_template_with(
    template: &Path,
    metadata: &[(&str, Value)],
    weights: &HashMap<String, Tensor>,
    precision: Precision,
    out: &Path,
) -> Result<ExportReport> {
    let file = GgufFile::open(template)?;
    let mut header = file.header().clone();
    for (key, value) in metadata {
        header.set(key, value.clone());
    }
    write_gguf(template, header, weights, precision, out)
}

/// Writes a GGUF file with no template: `metadata` (every key of the file,
/// `general.architecture` first among them) and one tensor per GGUF tensor
/// the family makes from `weights` (see [`mapping::targets`]), in checkpoint
/// name order, as `precision` says (`Template` means F32 here).
pub fn write_new_gguf(
    metadata: Header,
    weights: &HashMap<String, Tensor>,
    precision: Precision,
    out: &Path,
) -> Result<ExportReport> {
    let family = family_of(&metadata).map_err(|m| template_error(out, m))?;
    let canonical = canonical_weights(out, weights)?;
    let mut names: Vec<&String> = canonical.keys().collect();
    names.sort();
    let mut header = metadata;
    header.tensors.clear();
    for checkpoint in names {
        for name in mapping::targets(family, checkpoint) {
            let source = mapping::source(family, &name).ok_or_else(|| {
                template_error(out, format!("{name} maps back to no checkpoint tensor"))
            })?;
            let piece = cut(canonical[checkpoint], &source).map_err(|m| template_error(out, m))?;
            header.tensors.push(TensorInfo {
                name,
                dims: piece.size().iter().rev().map(|&d| d as u64).collect(),
                ggml_type: GgmlType::F32,
            });
        }
    }
    write_gguf(out, header, weights, precision, out)
}

/// The common part of [`write_gguf_from_template`] and [`write_new_gguf`]:
/// `header`'s tensors filled from `weights`; errors name `template` (the
/// output itself when there is none).
fn write_gguf(
    template: &Path,
    header: Header,
    weights: &HashMap<String, Tensor>,
    precision: Precision,
    out: &Path,
) -> Result<ExportReport> {
    let family = family_of(&header).map_err(|m| template_error(template, m))?;
    let weights = canonical_weights(template, weights)?;

    let mut header = header;
    let mut sources = Vec::with_capacity(header.tensors.len());
    let mut used = BTreeSet::new();
    let mut missing = Vec::new();
    let mut output_from_embeddings = false;
    for info in &mut header.tensors {
        let mut source = mapping::source(family, &info.name).ok_or_else(|| {
            template_error(
                template,
                format!(
                    "tensor {} is not one host-trainer knows how to make from a Qwen2.5-VL checkpoint",
                    info.name
                ),
            )
        })?;
        // A model with tied embeddings has no lm_head: its output matrix is the embedding.
        if source.checkpoint == "lm_head.weight" && !weights.contains_key("lm_head.weight") {
            source.checkpoint = "model.embed_tokens.weight".to_owned();
            output_from_embeddings = true;
        }
        let Some(&tensor) = weights.get(&source.checkpoint) else {
            missing.push(format!("{} (for {})", source.checkpoint, info.name));
            continue;
        };
        used.insert(source.checkpoint.clone());
        let piece = cut(tensor, &source).map_err(|m| template_error(template, m))?;
        if piece.size() != info.shape() {
            return Err(template_error(
                template,
                format!(
                    "tensor {} needs shape {:?} (GGUF dimensions {:?}), but {} gives {:?}",
                    info.name,
                    info.shape(),
                    info.dims,
                    source.checkpoint,
                    piece.size()
                ),
            ));
        }
        info.ggml_type = match precision {
            Precision::Template => info.ggml_type,
            Precision::F32 => GgmlType::F32,
            Precision::F16 if info.dims.len() <= 1 => GgmlType::F32,
            Precision::F16 => GgmlType::F16,
        };
        // Only a template's own type can be another than F32 or F16.
        let Some(kind) = kind_of(info.ggml_type) else {
            return Err(template_error(
                template,
                format!(
                    "tensor {} is {} in the template; export with an F16 or F32 template (or precision F16/F32), then quantize the result with `btl model quantize`",
                    info.name, info.ggml_type
                ),
            ));
        };
        if kind == Kind::Half {
            check_f16_range(&piece, &info.name)?.map_err(|m| template_error(template, m))?;
        }
        sources.push((piece, kind));
    }
    if !missing.is_empty() {
        return Err(template_error(
            template,
            format!(
                "{} template tensor(s) have no weight: {}",
                missing.len(),
                missing.join(", ")
            ),
        ));
    }
    let mut unused: Vec<String> = weights
        .keys()
        .filter(|n| !used.contains(*n))
        .cloned()
        .collect();
    unused.sort();
    // A text file leaves out only the vision tower and a projector only the
    // language model; any other weight left over means the template is of a
    // smaller model (fewer layers), and the file would run a cut-down copy.
    let left_over: Vec<&String> = unused
        .iter()
        .filter(|n| n.starts_with("visual.") == (family == Family::Projector))
        .collect();
    if let Some(first) = left_over.first() {
        return Err(template_error(
            template,
            format!(
                "{} weight(s) of the checkpoint have no tensor in the template (first: {first}): \
                 the template is of a smaller model; make one of this model's size with \
                 `btl-train init --config`",
                left_over.len()
            ),
        ));
    }
    let file_type = match precision {
        Precision::Template => None,
        Precision::F32 => Some(FILE_TYPE_F32),
        Precision::F16 => Some(FILE_TYPE_F16),
    };
    if let Some(ft) = file_type.filter(|_| header.get(FILE_TYPE_KEY).is_some()) {
        header.set(FILE_TYPE_KEY, Value::U32(ft));
    }

    gguf::write(out, &header, |i| {
        let (piece, kind) = &sources[i];
        Ok(Cow::Owned(tensor_bytes(piece, *kind)?))
    })?;
    Ok(ExportReport {
        output: out.to_owned(),
        architecture: header
            .get("general.architecture")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        tensors: header.tensors.len(),
        unused,
        output_from_embeddings,
    })
}

/// What a GGUF LoRA adapter says about itself.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdapterOptions<'a> {
    /// llama.cpp scales B·A by alpha / r (for an rsLoRA adapter pass
    /// [`PeftConfig::llama_cpp_alpha`](crate::peft::PeftConfig::llama_cpp_alpha)).
    pub alpha: f32,
    /// `general.name`; llama.cpp's converter takes the adapter directory's name.
    pub name: &'a str,
    pub precision: AdapterPrecision,
}

/// Writes `adapters` as a GGUF LoRA adapter for the text model of
/// `base_template` (its architecture and tensor shapes are checked), in the
/// layout of llama.cpp's `convert_lora_to_gguf.py`: `general.type = adapter`,
/// `adapter.type = lora`, `adapter.lora.alpha`, and per adapted weight `W`
/// the tensors `W.lora_a` (torch shape (r, in)) and `W.lora_b` ((out, r)),
/// modules in name order. Adapters on the vision tower are left out (llama.cpp
/// applies adapters to the text model only) and listed as unused.
pub fn write_lora_gguf(
    base_template: &Path,
    adapters: &[LoraWeights],
    options: &AdapterOptions,
    out: &Path,
) -> Result<ExportReport> {
    let base = GgufFile::open(base_template)?;
    let fail = |message: String| template_error(base_template, message);
    let family = family_of(base.header()).map_err(&fail)?;
    if family != Family::Text {
        return Err(fail(
            "a LoRA adapter applies to the text model; give the qwen2vl GGUF as base, not the projector"
                .to_owned(),
        ));
    }
    let architecture = mapping::TEXT_ARCH;
    let base_shapes: HashMap<&str, Vec<i64>> = base
        .header()
        .tensors
        .iter()
        .map(|t| (t.name.as_str(), t.shape()))
        .collect();

    let mut sorted: Vec<(String, &LoraWeights)> = adapters
        .iter()
        .map(|a| (canonical_name(&a.module), a))
        .collect();
    sorted.sort_by(|x, y| x.0.cmp(&y.0));
    if let Some(pair) = sorted.windows(2).find(|p| p[0].0 == p[1].0) {
        return Err(fail(format!("module {} is given twice", pair[0].0)));
    }

    let (ggml_type, kind) = match options.precision {
        AdapterPrecision::F32 => (GgmlType::F32, Kind::Float),
        AdapterPrecision::F16 => (GgmlType::F16, Kind::Half),
    };
    let mut header = Header::default();
    for (key, value) in [
        (
            "general.architecture",
            Value::String(architecture.to_owned()),
        ),
        ("general.type", Value::String("adapter".to_owned())),
        ("adapter.type", Value::String("lora".to_owned())),
        ("general.name", Value::String(options.name.to_owned())),
        ("adapter.lora.alpha", Value::F32(options.alpha)),
        ("general.quantization_version", Value::U32(2)),
    ] {
        header.set(key, value);
    }
    let mut data: Vec<&Tensor> = Vec::new();
    let mut unused = Vec::new();
    for (module, lora) in &sorted {
        if module.starts_with("visual.") {
            unused.push(module.clone());
            continue;
        }
        let target = mapping::text_lora_target(module).ok_or_else(|| {
            fail(format!(
                "module {module} is not a linear layer of the text model that llama.cpp can adapt"
            ))
        })?;
        let base_shape = base_shapes.get(target.as_str()).ok_or_else(|| {
            fail(format!(
                "module {module}: the base model has no tensor {target}"
            ))
        })?;
        let (a, b) = (lora.a.size(), lora.b.size());
        let consistent = a.len() == 2
            && b.len() == 2
            && a[0] == b[1]
            && base_shape.len() == 2
            && b[0] == base_shape[0]
            && a[1] == base_shape[1];
        if !consistent {
            return Err(fail(format!(
                "module {module}: A {a:?} and B {b:?} do not adapt {target} of shape {base_shape:?} (A must be (r, in), B (out, r))"
            )));
        }
        for (suffix, t) in [("lora_a", &lora.a), ("lora_b", &lora.b)] {
            let name = format!("{target}.{suffix}");
            if kind == Kind::Half {
                check_f16_range(t, &name)?.map_err(&fail)?;
            }
            header.tensors.push(TensorInfo {
                name,
                dims: t.size().iter().rev().map(|&d| d as u64).collect(),
                ggml_type,
            });
            data.push(t);
        }
    }
    gguf::write(out, &header, |i| {
        Ok(Cow::Owned(tensor_bytes(data[i], kind)?))
    })?;
    Ok(ExportReport {
        output: out.to_owned(),
        architecture: architecture.to_owned(),
        tensors: header.tensors.len(),
        unused,
        output_from_embeddings: false,
    })
}
