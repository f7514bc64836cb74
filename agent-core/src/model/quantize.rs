//! Quantizing a text-model GGUF with llama.cpp's own quantizer (the code
//! behind `llama-quantize`), so a model converted at f16 can be shrunk for
//! a phone without building llama.cpp's tools: `btl model quantize`.
//!
//! Vision projectors (mmproj files, GGUF architecture `clip`) are
//! quantized too: llama.cpp's quantizer knows them and keeps their patch
//! and position embeddings and norms as they are. One type is refused for
//! them: q2_k, whose rules read the attention-head counts a projector's
//! header does not have, which aborts the process inside llama.cpp.
//! What each type costs a projector is measured in
//! docs/robustness-and-speed.md.
//!
//! The output is written to a temporary file beside it and renamed into
//! place, so an interrupted run never leaves a half-written model under
//! the final name.

use super::llama::{LoadError, backend, check_gguf};
use clap::ValueEnum;
use llama_cpp_sys_2 as sys;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// `general.architecture` of a vision projector (mmproj) GGUF.
pub const PROJECTOR_ARCHITECTURE: &str = "clip";

/// The quantization types offered, by `llama-quantize`'s names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
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
    /// Whether a vision projector may be quantized to this type.
    pub fn fits_projectors(self) -> bool {
        self != Self::Q2_K
    }

    /// Its name, as `--type` takes it.
    pub fn name(self) -> String {
        self.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_owned())
    }

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
    #[error(
        "{input} is a vision projector, which cannot be quantized to {ty}; use one of {allowed}"
    )]
    ProjectorType {
        input: PathBuf,
        ty: String,
        allowed: String,
    },
    /// llama.cpp's quantizer failed (it logs why; the usual cause is a GGUF
    /// of an architecture it does not know).
    #[error(
        "llama.cpp could not quantize {input} (a {architecture} GGUF; llama.cpp's log above says why)"
    )]
    Failed {
        input: PathBuf,
        architecture: String,
    },
}

/// The `general.architecture` of a GGUF file (`clip` for a vision
/// projector), read with ggml's GGUF reader without loading any tensor.
pub fn architecture(path: &Path) -> Result<String, QuantizeError> {
    check_gguf(path)?;
    let unreadable = |reason: &str| {
        QuantizeError::Input(LoadError::Unreadable {
            path: path.to_path_buf(),
            reason: reason.to_owned(),
        })
    };
    let c_path = CString::new(path.to_string_lossy().as_bytes())
        .map_err(|_| unreadable("the path contains a NUL byte"))?;
    let params = sys::gguf_init_params {
        no_alloc: true,
        ctx: std::ptr::null_mut(),
    };
    // SAFETY: the path is NUL-terminated and outlives the call; with
    // no_alloc and no ggml context asked for, only the metadata is read.
    let gguf = unsafe { sys::gguf_init_from_file(c_path.as_ptr(), params) };
    if gguf.is_null() {
        return Err(unreadable("ggml cannot read its GGUF header"));
    }
    let key = c"general.architecture";
    // SAFETY: gguf is a valid context until gguf_free below; a string value
    // is NUL-terminated and owned by the context, so it is copied first.
    let value = unsafe {
        let id = sys::gguf_find_key(gguf, key.as_ptr());
        let value =
            (id >= 0 && sys::gguf_get_kv_type(gguf, id) == sys::GGUF_TYPE_STRING).then(|| {
                std::ffi::CStr::from_ptr(sys::gguf_get_val_str(gguf, id))
                    .to_string_lossy()
                    .into_owned()
            });
        sys::gguf_free(gguf);
        value
    };
    value.ok_or_else(|| unreadable("it has no general.architecture"))
}

/// Quantizes `input` to `output` as `ty` with `threads` threads (0: all).
pub fn quantize(
    input: &Path,
    output: &Path,
    ty: QuantType,
    threads: i32,
) -> Result<(), QuantizeError> {
    let architecture = architecture(input)?;
    if architecture == PROJECTOR_ARCHITECTURE && !ty.fits_projectors() {
        return Err(QuantizeError::ProjectorType {
            input: input.to_path_buf(),
            ty: ty.name(),
            allowed: QuantType::value_variants()
                .iter()
                .filter(|t| t.fits_projectors())
                .map(|t| t.name())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
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
            architecture,
        });
    }
    // On disk before it takes the output's name, and the name after: a
    // power cut must not leave a torn model, which the check above would
    // then refuse to quantize again.
    let dir = output
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let durable = std::fs::File::open(&partial)
        .and_then(|f| f.sync_all())
        .and_then(|()| std::fs::rename(&partial, output))
        .and_then(|()| crate::agent::trajectory::sync_entries(dir));
    durable.map_err(|e| {
        let _ = std::fs::remove_file(&partial);
        QuantizeError::Path {
            path: output.to_path_buf(),
            reason: e.to_string(),
        }
    })
}
