//! Quantizing a text-model GGUF with llama.cpp's own quantizer (the code
//! behind `llama-quantize`), so a model converted at f16 can be shrunk for
//! a phone without building llama.cpp's tools: `btl model quantize`.
//!
//! The output is written to a temporary file beside it and renamed into
//! place, so an interrupted run never leaves a half-written model under
//! the final name. The vision projector (mmproj) is not quantized here:
//! llama.cpp's quantizer handles text models only.

use super::llama::{LoadError, backend, check_gguf};
use llama_cpp_sys_2 as sys;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The quantization types offered, by `llama-quantize`'s names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[allow(non_camel_case_types)]
pub enum QuantType {
    #[value(name = "q4_0")]
    Q4_0,
    #[value(name = "q4_1")]
    Q4_1,
    #[value(name = "q5_0")]
    Q5_0,
    #[value(name = "q5_1")]
    Q5_1,
    #[value(name = "q8_0")]
    Q8_0,
    #[value(name = "q2_k")]
    Q2_K,
    #[value(name = "q3_k_s")]
    Q3_K_S,
    #[value(name = "q3_k_m")]
    Q3_K_M,
    #[value(name = "q3_k_l")]
    Q3_K_L,
    #[value(name = "q4_k_s")]
    Q4_K_S,
    #[value(name = "q4_k_m")]
    Q4_K_M,
    #[value(name = "q5_k_s")]
    Q5_K_S,
    #[value(name = "q5_k_m")]
    Q5_K_M,
    #[value(name = "q6_k")]
    Q6_K,
    #[value(name = "f16")]
    F16,
    #[value(name = "bf16")]
    BF16,
}

impl QuantType {
    fn ftype(self) -> sys::llama_ftype {
        match self {
            Self::Q4_0 => sys::LLAMA_FTYPE_MOSTLY_Q4_0,
            Self::Q4_1 => sys::LLAMA_FTYPE_MOSTLY_Q4_1,
            Self::Q5_0 => sys::LLAMA_FTYPE_MOSTLY_Q5_0,
            Self::Q5_1 => sys::LLAMA_FTYPE_MOSTLY_Q5_1,
            Self::Q8_0 => sys::LLAMA_FTYPE_MOSTLY_Q8_0,
            Self::Q2_K => sys::LLAMA_FTYPE_MOSTLY_Q2_K,
            Self::Q3_K_S => sys::LLAMA_FTYPE_MOSTLY_Q3_K_S,
            Self::Q3_K_M => sys::LLAMA_FTYPE_MOSTLY_Q3_K_M,
            Self::Q3_K_L => sys::LLAMA_FTYPE_MOSTLY_Q3_K_L,
            Self::Q4_K_S => sys::LLAMA_FTYPE_MOSTLY_Q4_K_S,
            Self::Q4_K_M => sys::LLAMA_FTYPE_MOSTLY_Q4_K_M,
            Self::Q5_K_S => sys::LLAMA_FTYPE_MOSTLY_Q5_K_S,
            Self::Q5_K_M => sys::LLAMA_FTYPE_MOSTLY_Q5_K_M,
            Self::Q6_K => sys::LLAMA_FTYPE_MOSTLY_Q6_K,
            Self::F16 => sys::LLAMA_FTYPE_MOSTLY_F16,
            Self::BF16 => sys::LLAMA_FTYPE_MOSTLY_BF16,
        }
    }
}

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum QuantizeError {
    #[error(transparent)]
    Input(#[from] LoadError),
    #[error("{0} already exists; choose another output path or remove it")]
    OutputExists(PathBuf),
    #[error("{path}: {reason}")]
    Path { path: PathBuf, reason: String },
    /// llama.cpp's quantizer failed (it logs why; the usual cause is an
    /// input that is not a llama.cpp text model, such as an mmproj).
    #[error(
        "llama.cpp could not quantize {input} (is it a text-model GGUF? projectors cannot be quantized)"
    )]
    Failed { input: PathBuf },
}

/// Quantizes `input` to `output` as `ty` with `threads` threads (0: all).
pub fn quantize(
    input: &Path,
    output: &Path,
    ty: QuantType,
    threads: i32,
) -> Result<(), QuantizeError> {
    check_gguf(input)?;
    if output.exists() {
        return Err(QuantizeError::OutputExists(output.to_path_buf()));
    }
    backend()?;
    let file_name = output
        .file_name()
        .ok_or_else(|| QuantizeError::Path {
            path: output.to_path_buf(),
            reason: "not a file path".into(),
        })?
        .to_string_lossy();
    let partial = output.with_file_name(format!(".{file_name}.partial-{}", std::process::id()));
    let c_path = |p: &Path| {
        CString::new(p.to_string_lossy().as_bytes()).map_err(|_| QuantizeError::Path {
            path: p.to_path_buf(),
            reason: "contains a NUL byte".into(),
        })
    };
    let (c_input, c_partial) = (c_path(input)?, c_path(&partial)?);
    // SAFETY: plain data returned by value.
    let mut params = unsafe { sys::llama_model_quantize_default_params() };
    params.ftype = ty.ftype();
    params.nthread = threads;
    // SAFETY: both paths are NUL-terminated and outlive the call; params is
    // a valid, initialised struct.
    let status =
        unsafe { sys::llama_model_quantize(c_input.as_ptr(), c_partial.as_ptr(), &params) };
    if status != 0 {
        let _ = std::fs::remove_file(&partial);
        return Err(QuantizeError::Failed {
            input: input.to_path_buf(),
        });
    }
    std::fs::rename(&partial, output).map_err(|e| {
        let _ = std::fs::remove_file(&partial);
        QuantizeError::Path {
            path: output.to_path_buf(),
            reason: e.to_string(),
        }
    })
}
