//! A model's weights read back from its GGUF files (`btl-train init
//! --from-gguf`), so that training can go on from a file that was shipped
//! or exported, with no checkpoint beside it (a new machine, the bundled
//! default model).
//!
//! The inverse of [`crate::export`]: [`mapping::source`] says which
//! checkpoint tensor, and which part of it, each GGUF tensor was cut from;
//! here each part is written back into its place. Quantized tensors come
//! back as ggml dequantizes them, so a q8_0 file gives weights within half
//! a quantization step of the ones it was made from.

use std::collections::{BTreeSet, HashMap};

use tch::{Kind, Tensor};

use crate::error::{Error, Result};
use crate::export::gguf::{GgmlType, GgufFile, TensorInfo, Value};
use crate::export::mapping::{self, Family};
use crate::export::{cut, family_of};
use crate::model::Qwen25Vl;
use crate::weights::canonical_name;

/// Q8_0's id in ggml's type table.
const Q8_0: GgmlType = GgmlType(8);
/// Values per Q8_0 block: a float16 scale, then this many int8.
const Q8_0_BLOCK: usize = 32;

/// What [`load_gguf_weights`] found besides the weights it filled.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Imported {
    /// GGUF tensors read, over both files.
    pub tensors: usize,
    /// The text file's `output.weight`, left out because the model ties
    /// its output to the token embedding.
    pub output_ignored: bool,
    /// Types read, with how many tensors had each (e.g. `Q8_0: 28`).
    pub types: Vec<(String, usize)>,
}

/// The values of GGUF tensor `info` (its `bytes`, as the file holds them),
/// as a float32 tensor of its torch shape: F32, F16 and BF16 as stored,
/// Q8_0 as ggml dequantizes it (each block's 32 int8 times its float16
/// scale). Other types are refused with their name.
pub fn dequantize(info: &TensorInfo, bytes: &[u8]) -> std::result::Result<Tensor, String> {
    let shape = info.shape();
    let expected = info.byte_size().ok_or_else(|| {
        format!(
            "tensor {} has dimensions {:?} that type {} cannot hold",
            info.name, info.dims, info.ggml_type
        )
    })?;
    if bytes.len() as u64 != expected {
        return Err(format!(
            "tensor {} has {} bytes of data, its type {} and dimensions {:?} need {expected}",
            info.name,
            bytes.len(),
            info.ggml_type,
            info.dims
        ));
    }
    let torch = |e: tch::TchError| format!("tensor {}: {e}", info.name);
    let float = |kind: Kind| {
        Tensor::f_from_data_size(bytes, &shape, kind)
            .and_then(|t| t.f_to_kind(Kind::Float))
            .map_err(torch)
    };
    match info.ggml_type {
        GgmlType::F32 => float(Kind::Float),
        GgmlType::F16 => float(Kind::Half),
        GgmlType::BF16 => float(Kind::BFloat16),
        Q8_0 => {
            let blocks = bytes.len() / (2 + Q8_0_BLOCK);
            let mut scales = Vec::with_capacity(blocks * 2);
            let mut quants = Vec::with_capacity(blocks * Q8_0_BLOCK);
            for block in bytes.chunks_exact(2 + Q8_0_BLOCK) {
                scales.extend_from_slice(&block[..2]);
                quants.extend_from_slice(&block[2..]);
            }
            let n = blocks as i64;
            let scales = Tensor::f_from_data_size(&scales, &[n, 1], Kind::Half)
                .and_then(|t| t.f_to_kind(Kind::Float))
                .map_err(torch)?;
            Tensor::f_from_data_size(&quants, &[n, Q8_0_BLOCK as i64], Kind::Int8)
                .and_then(|q| q.f_to_kind(Kind::Float))
                .and_then(|q| q.f_mul(&scales))
                .and_then(|t| t.f_reshape(&shape))
                .map_err(torch)
        }
        other => Err(format!(
            "tensor {} is {other}; weights are read from F32, F16, BF16 and Q8_0 tensors",
            info.name
        )),
    }
}

/// Fills every weight of `model` from `text` (the `qwen2vl` text model)
/// and `projector` (the `qwen2.5vl_merger` projector). Each GGUF tensor
/// must have the shape its part of the model's weight has, and every
/// weight must be filled whole; a file of another model size is refused
/// with the first tensor that does not fit.
pub fn load_gguf_weights(
    model: &Qwen25Vl,
    text: &GgufFile,
    projector: &GgufFile,
) -> Result<Imported> {
    let vars: HashMap<String, Tensor> = model
        .vars()
        .variables()
        .into_iter()
        .map(|(name, t)| (canonical_name(&name), t))
        .collect();
    let mut filled: HashMap<String, usize> = HashMap::new();
    let mut types: HashMap<String, usize> = HashMap::new();
    let mut imported = Imported::default();
    for (file, family) in [(text, Family::Text), (projector, Family::Projector)] {
        let bad = |message: String| Error::Gguf {
            path: file.path().to_owned(),
            message,
        };
        let found = family_of(file.header()).map_err(&bad)?;
        if found != family {
            return Err(bad(format!(
                "this is a {} file where the {} was expected",
                describe(found),
                describe(family)
            )));
        }
        for (index, info) in file.header().tensors.iter().enumerate() {
            let source = mapping::source(family, &info.name).ok_or_else(|| {
                bad(format!(
                    "tensor {} is not one of a Qwen2.5-VL {}",
                    info.name,
                    describe(family)
                ))
            })?;
            if source.checkpoint == "lm_head.weight" && !vars.contains_key("lm_head.weight") {
                imported.output_ignored = true;
                continue;
            }
            let var = vars.get(&source.checkpoint).ok_or_else(|| {
                bad(format!(
                    "tensor {} belongs to {}, which the model of this size does not have",
                    info.name, source.checkpoint
                ))
            })?;
            let values = dequantize(info, file.tensor_data(index)).map_err(&bad)?;
            let mut place = cut(var, &source).map_err(&bad)?;
            if place.size() != values.size() {
                return Err(bad(format!(
                    "tensor {} has shape {:?}; the model's {} needs {:?} there",
                    info.name,
                    values.size(),
                    source.checkpoint,
                    place.size()
                )));
            }
            tch::no_grad(|| place.f_copy_(&values))?;
            *filled.entry(source.checkpoint).or_default() += 1;
            *types.entry(info.ggml_type.name().into_owned()).or_default() += 1;
            imported.tensors += 1;
        }
    }
    let unfilled: BTreeSet<&String> = vars
        .keys()
        .filter(|name| {
            let parts = mapping::targets(Family::Text, name).len()
                + mapping::targets(Family::Projector, name).len();
            filled.get(*name).copied().unwrap_or(0) != parts
        })
        .collect();
    if !unfilled.is_empty() {
        return Err(Error::Gguf {
            path: text.path().to_owned(),
            message: format!(
                "the text model and {} leave these weights unfilled or filled twice: {}",
                projector.path().display(),
                unfilled.into_iter().cloned().collect::<Vec<_>>().join(", ")
            ),
        });
    }
    let mut types: Vec<(String, usize)> = types.into_iter().collect();
    types.sort();
    imported.types = types;
    Ok(imported)
}

/// The text GGUF's `tokenizer.ggml.tokens`, to compare with the tokenizer
/// the model is built with.
pub fn gguf_tokens(file: &GgufFile) -> Option<Vec<&str>> {
    match file.header().get("tokenizer.ggml.tokens")? {
        Value::Array(array) => array.items().iter().map(Value::as_str).collect(),
        _ => None,
    }
}

fn describe(family: Family) -> &'static str {
    match family {
        Family::Text => "text model (qwen2vl)",
        Family::Projector => "projector (clip, qwen2.5vl_merger)",
    }
}

#[cfg(test)]
mod tests {
    use super::{Q8_0, dequantize};
    use crate::export::gguf::{GgmlType, TensorInfo};

    fn info(dims: &[u64], ggml_type: GgmlType) -> TensorInfo {
        TensorInfo {
            name: "t".to_owned(),
            dims: dims.to_vec(),
            ggml_type,
        }
    }

    fn values(t: &tch::Tensor) -> Vec<f32> {
        Vec::<f32>::try_from(t.flatten(0, -1)).unwrap()
    }

    #[test]
    fn a_q8_0_block_is_its_int8_values_times_its_float16_scale() {
        // Two blocks of a 32 × 2 tensor (torch shape [2, 32]). Float16 0x3800
        // is 0.5 and 0xC000 is -2.0 (sign 1, exponent 16 - 15 = 1, mantissa 0).
        let mut bytes = vec![0x00, 0x38];
        bytes.extend((0..32).map(|i| (i as i8 - 16) as u8));
        bytes.extend([0x00, 0xC0]);
        bytes.extend((0..32).map(|i| if i == 0 { 127u8 } else { (-128i8) as u8 }));
        let t = dequantize(&info(&[32, 2], Q8_0), &bytes).unwrap();
        assert_eq!(t.size(), [2, 32]);
        let v = values(&t);
        assert_eq!(v[0], -8.0); // -16 × 0.5
        assert_eq!(v[16], 0.0);
        assert_eq!(v[31], 7.5); // 15 × 0.5
        assert_eq!(v[32], -254.0); // 127 × -2
        assert_eq!(v[33], 256.0); // -128 × -2
    }

    #[test]
    fn float_tensors_are_read_as_stored_in_torch_order() {
        // GGUF dimensions [3, 2] are torch shape [2, 3], row-major.
        let stored: Vec<f32> = vec![1.0, 2.0, 3.0, -4.0, 0.25, 1e-3];
        let bytes: Vec<u8> = stored.iter().flat_map(|v| v.to_le_bytes()).collect();
        let t = dequantize(&info(&[3, 2], GgmlType::F32), &bytes).unwrap();
        assert_eq!(t.size(), [2, 3]);
        assert_eq!(values(&t), stored);
        // Float16 1.0 = 0x3C00, -2.5 = 0xC100; bfloat16 1.0 = 0x3F80, -2.5 = 0xC020.
        let half = dequantize(&info(&[2], GgmlType::F16), &[0x00, 0x3C, 0x00, 0xC1]).unwrap();
        assert_eq!(values(&half), [1.0, -2.5]);
        let bf16 = dequantize(&info(&[2], GgmlType::BF16), &[0x80, 0x3F, 0x20, 0xC0]).unwrap();
        assert_eq!(values(&bf16), [1.0, -2.5]);
    }

    #[test]
    fn other_types_and_wrong_sizes_are_refused_by_name() {
        let q4 = dequantize(&info(&[32], GgmlType(2)), &[0; 18]).unwrap_err();
        assert!(q4.contains("Q4_0"), "{q4}");
        let short = dequantize(&info(&[4], GgmlType::F32), &[0; 12]).unwrap_err();
        assert!(
            short.contains("12 bytes") && short.contains("need 16"),
            "{short}"
        );
        let ragged = dequantize(&info(&[33], Q8_0), &[0; 34]).unwrap_err();
        assert!(ragged.contains("cannot hold"), "{ragged}");
    }
}
