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

use super::llama::gguf::{check_layers, read_metadata};
use super::llama::{LOG_ENV, LoadError, backend, llama_errors};
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
    /// Quantizing again loses what the first quantization kept; llama.cpp
    /// refuses it unless asked, and btl does not ask.
    #[error(
        "{input} is quantized already (its tensor {tensor} is {ty}); quantize the f16 or f32 file it was made from"
    )]
    Quantized {
        input: PathBuf,
        tensor: String,
        ty: String,
    },
    /// llama.cpp's quantizer failed, for the reason its error log gives
    /// (a GGUF of an architecture it does not know).
    #[error("llama.cpp could not quantize {input} (a {architecture} GGUF): {reason}")]
    Failed {
        input: PathBuf,
        architecture: String,
        reason: String,
    },
}

/// What quantizing a GGUF file needs to know of it first, read with ggml's
/// GGUF reader without loading any tensor: its `general.architecture`
/// (`clip` for a vision projector), and a tensor of it that is quantized
/// already, with that tensor's type.
fn quantizing(path: &Path) -> Result<(String, Option<(String, String)>), QuantizeError> {
    let (architecture, quantized) = read_metadata(path, |m| {
        (m.string(c"general.architecture"), m.quantized_tensor())
    })?;
    let architecture = architecture.ok_or_else(|| {
        QuantizeError::Input(LoadError::Unreadable {
            path: path.to_path_buf(),
            reason: "it has no general.architecture".into(),
        })
    })?;
    Ok((architecture, quantized))
}

/// Quantizes `input` to `output` as `ty` with `threads` threads (0: all).
pub fn quantize(
    input: &Path,
    output: &Path,
    ty: QuantType,
    threads: i32,
) -> Result<(), QuantizeError> {
    let (architecture, quantized) = quantizing(input)?;
    if let Some((tensor, ty)) = quantized {
        return Err(QuantizeError::Quantized {
            input: input.to_path_buf(),
            tensor,
            ty,
        });
    }
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
    if architecture != PROJECTOR_ARCHITECTURE {
        check_layers(input)?;
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
    let partial_prefix = format!(".{file_name}.partial-");
    let dir = crate::atomic::parent_dir(output);
    // What quantizations of the same output killed mid-way left.
    crate::atomic::remove_abandoned(dir, &partial_prefix);
    // A name of its own, held locked while llama.cpp writes it (it
    // truncates this same file): another quantization of the same output
    // meanwhile neither writes into it nor removes it.
    let temp =
        crate::atomic::staging_file(dir, &partial_prefix).map_err(|e| QuantizeError::Path {
            path: dir.to_path_buf(),
            reason: e.to_string(),
        })?;
    let partial = temp.path().to_path_buf();
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
    let (status, logged) = llama_errors(|| unsafe {
        sys::llama_model_quantize(c_input.as_ptr(), c_partial.as_ptr(), &params)
    });
    if status != 0 {
        let reason = match logged.is_empty() {
            true => format!("it logged no error; {LOG_ENV}=1 shows llama.cpp's whole log"),
            false => logged,
        };
        return Err(QuantizeError::Failed {
            input: input.to_path_buf(),
            architecture,
            reason,
        });
    }
    // On disk before it takes the output's name, and the name after: a
    // power cut must not leave a torn model, which the check above would
    // then refuse to quantize again. A failure removes the part.
    let fail = |e: std::io::Error| QuantizeError::Path {
        path: output.to_path_buf(),
        reason: e.to_string(),
    };
    temp.as_file().sync_all().map_err(fail)?;
    // A file that took the name while the model was quantized stays.
    match temp.persist_noclobber(output) {
        Ok(_) => {}
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists || output.exists() => {
            return Err(QuantizeError::OutputExists(output.to_path_buf()));
        }
        // A filesystem with neither a no-replace rename nor hard links
        // (vfat, some network mounts): the name was free a moment ago.
        Err(e)
            if matches!(
                e.error.kind(),
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::Unsupported
            ) =>
        {
            e.file.persist(output).map_err(|e| fail(e.error))?;
        }
        Err(e) => return Err(fail(e.error)),
    }
    crate::atomic::sync_dir(dir).map_err(fail)
}
