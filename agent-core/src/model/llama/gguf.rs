//! What btl reads of a GGUF file itself, with ggml's GGUF reader and
//! without loading any tensor: the layer counts llama.cpp would abort on,
//! an architecture, a quantized tensor, where each tensor lies, and the
//! fingerprint episodes record. The phone's library reads them too, so
//! none of this is host tooling.

use super::{LoadError, backend, check_gguf, llama_errors, projector};
use llama_cpp_sys_2 as sys;
use std::ffi::CString;
use std::path::{Path, PathBuf};

/// llama.cpp's most layers (LLAMA_MAX_LAYERS).
const MAX_LAYERS: u32 = 512;

/// Refuses a text model whose layer counts llama.cpp asserts on, which
/// aborts the whole process rather than failing the load:
/// `ARCH.block_count` outside 1..=512, or `ARCH.nextn_predict_layers`
/// past it. (A count of another type llama.cpp refuses in words.)
pub(crate) fn check_layers(path: &Path) -> Result<(), LoadError> {
    // The file was opened and its magic checked already: a header ggml
    // cannot read is the model's fault, as llama.cpp would report it.
    let as_model = |e| match e {
        LoadError::Unreadable { path, reason } => LoadError::Model { path, reason },
        other => other,
    };
    let counts = read_metadata(path, |m| {
        let architecture = m.string(c"general.architecture")?;
        let count = |key: &str| {
            CString::new(format!("{architecture}.{key}"))
                .ok()
                .and_then(|key| m.u32(&key))
        };
        let (layers, next) = (count("block_count"), count("nextn_predict_layers"));
        Some((architecture, layers, next))
    })
    .map_err(as_model)?;
    let Some((architecture, Some(layers), next)) = counts else {
        return Ok(());
    };
    let bad = |reason: String| {
        Err(LoadError::Model {
            path: path.to_path_buf(),
            reason,
        })
    };
    if !(1..=MAX_LAYERS).contains(&layers) {
        return bad(format!(
            "{architecture}.block_count is {layers}; llama.cpp takes 1 to {MAX_LAYERS} layers"
        ));
    }
    if let Some(next) = next.filter(|&n| n > layers) {
        return bad(format!(
            "{architecture}.nextn_predict_layers is {next}, more than its {layers} layers"
        ));
    }
    Ok(())
}

/// The metadata of an open GGUF file.
pub(crate) struct Metadata(*mut sys::gguf_context);

impl Metadata {
    pub(crate) fn string(&self, key: &std::ffi::CStr) -> Option<String> {
        // SAFETY: the context is valid while `self` lives (read_metadata);
        // a string value is NUL-terminated and owned by the context, so it
        // is copied before it ends.
        unsafe {
            let id = sys::gguf_find_key(self.0, key.as_ptr());
            (id >= 0 && sys::gguf_get_kv_type(self.0, id) == sys::GGUF_TYPE_STRING).then(|| {
                std::ffi::CStr::from_ptr(sys::gguf_get_val_str(self.0, id))
                    .to_string_lossy()
                    .into_owned()
            })
        }
    }

    /// The name and type of the first tensor stored quantized (not as
    /// floats), if any: `btl model quantize` refuses such a file, and only
    /// the host quantizes.
    #[cfg(feature = "host")]
    pub(crate) fn quantized_tensor(&self) -> Option<(String, String)> {
        let text = |p: *const std::ffi::c_char| {
            // SAFETY: ggml's names are NUL-terminated and static or owned
            // by the context, and copied before it ends.
            unsafe { std::ffi::CStr::from_ptr(p) }
                .to_string_lossy()
                .into_owned()
        };
        // SAFETY: the context is valid while `self` lives; ids are taken
        // below the count it gives.
        unsafe {
            (0..sys::gguf_get_n_tensors(self.0)).find_map(|id| {
                let ty = sys::gguf_get_tensor_type(self.0, id);
                sys::ggml_is_quantized(ty).then(|| {
                    (
                        text(sys::gguf_get_tensor_name(self.0, id)),
                        text(sys::ggml_type_name(ty)),
                    )
                })
            })
        }
    }

    /// Where each tensor's data lies in the file: its offset from the
    /// file's start, and its length.
    fn tensor_extents(&self) -> Vec<(u64, u64)> {
        // SAFETY: the context is valid while `self` lives; ids are taken
        // below the count it gives.
        unsafe {
            let data = sys::gguf_get_data_offset(self.0) as u64;
            (0..sys::gguf_get_n_tensors(self.0))
                .map(|id| {
                    let at = sys::gguf_get_tensor_offset(self.0, id) as u64;
                    (data + at, sys::gguf_get_tensor_size(self.0, id) as u64)
                })
                .collect()
        }
    }

    /// A value stored as a u32 (ggml asserts on any other type's getter).
    fn u32(&self, key: &std::ffi::CStr) -> Option<u32> {
        // SAFETY: as in `string`; the type is checked before the getter.
        unsafe {
            let id = sys::gguf_find_key(self.0, key.as_ptr());
            (id >= 0 && sys::gguf_get_kv_type(self.0, id) == sys::GGUF_TYPE_UINT32)
                .then(|| sys::gguf_get_val_u32(self.0, id))
        }
    }
}

/// Where each tensor's data lies in the GGUF file at `path` (its offset
/// from the file's start, its length), read with ggml's GGUF reader
/// without loading any tensor.
fn tensor_extents(path: &Path) -> Result<Vec<(u64, u64)>, LoadError> {
    read_metadata(path, Metadata::tensor_extents)
}

/// `read` of the metadata of the GGUF file at `path`, read with ggml's GGUF
/// reader without loading any tensor.
pub(crate) fn read_metadata<T>(
    path: &Path,
    read: impl FnOnce(&Metadata) -> T,
) -> Result<T, LoadError> {
    let opened = Opened::new(path, false)?;
    Ok(read(&Metadata(opened.gguf)))
}

/// A GGUF file opened with ggml's reader, no tensor's data read; with
/// `tensors`, ggml also describes each tensor in a context of its own.
/// Both are freed with it.
struct Opened {
    gguf: *mut sys::gguf_context,
    tensors: *mut sys::ggml_context,
}

impl Opened {
    fn new(path: &Path, tensors: bool) -> Result<Self, LoadError> {
        check_gguf(path)?;
        // ggml's log goes where btl sends it (silenced by default) only
        // once the backend has set it up.
        backend()?;
        let unreadable = |reason: String| LoadError::Unreadable {
            path: path.to_path_buf(),
            reason,
        };
        let c_path = CString::new(path.to_string_lossy().as_bytes())
            .map_err(|_| unreadable("the path contains a NUL byte".into()))?;
        let mut ctx: *mut sys::ggml_context = std::ptr::null_mut();
        let params = sys::gguf_init_params {
            no_alloc: true,
            ctx: match tensors {
                true => &mut ctx,
                false => std::ptr::null_mut(),
            },
        };
        // SAFETY: the path is NUL-terminated and outlives the call; with
        // no_alloc a context asked for holds the tensors' descriptions,
        // not their data.
        let (gguf, logged) =
            llama_errors(|| unsafe { sys::gguf_init_from_file(c_path.as_ptr(), params) });
        if gguf.is_null() {
            // ggml says what it could not read only in its log.
            return Err(unreadable(match logged.is_empty() {
                true => "ggml cannot read its GGUF header".to_owned(),
                false => format!("ggml cannot read its GGUF header: {logged}"),
            }));
        }
        Ok(Self { gguf, tensors: ctx })
    }
}

impl Drop for Opened {
    fn drop(&mut self) {
        // SAFETY: made by gguf_init_from_file and freed once, here;
        // nothing read from them outlives this.
        unsafe {
            sys::gguf_free(self.gguf);
            if !self.tensors.is_null() {
                sys::ggml_free(self.tensors);
            }
        }
    }
}

/// The keys and tensors of the GGUF file at `path`, without any tensor's
/// data, for the projector's checks.
pub(crate) fn read_header(path: &Path) -> Result<projector::Header, LoadError> {
    let len = std::fs::metadata(path)
        .map_err(|e| LoadError::Unreadable {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?
        .len();
    let opened = Opened::new(path, true)?;
    let (gguf, ctx) = (opened.gguf, opened.tensors);
    let text = |p: *const std::ffi::c_char| {
        // SAFETY: ggml's strings are NUL-terminated, static or owned by
        // the contexts, and copied before they end.
        unsafe { std::ffi::CStr::from_ptr(p) }
            .to_string_lossy()
            .into_owned()
    };
    let mut header = projector::Header {
        len,
        ..projector::Header::default()
    };
    // SAFETY: both contexts are valid while `opened` lives; ids are taken
    // below the counts they give, and each getter after its type is
    // checked.
    unsafe {
        for id in 0..sys::gguf_get_n_kv(gguf) {
            let value = match sys::gguf_get_kv_type(gguf, id) {
                sys::GGUF_TYPE_UINT32 => projector::Value::U32(sys::gguf_get_val_u32(gguf, id)),
                sys::GGUF_TYPE_INT32 => projector::Value::I32(sys::gguf_get_val_i32(gguf, id)),
                sys::GGUF_TYPE_FLOAT32 => projector::Value::F32(sys::gguf_get_val_f32(gguf, id)),
                sys::GGUF_TYPE_BOOL => projector::Value::Bool(sys::gguf_get_val_bool(gguf, id)),
                sys::GGUF_TYPE_STRING => {
                    projector::Value::Str(text(sys::gguf_get_val_str(gguf, id)))
                }
                other => projector::Value::Other(text(sys::gguf_type_name(other))),
            };
            header.keys.insert(text(sys::gguf_get_key(gguf, id)), value);
        }
        let data = sys::gguf_get_data_offset(gguf) as u64;
        for id in 0..sys::gguf_get_n_tensors(gguf) {
            let name = sys::gguf_get_tensor_name(gguf, id);
            let described = sys::ggml_get_tensor(ctx, name);
            if described.is_null() {
                return Err(LoadError::Unreadable {
                    path: path.to_path_buf(),
                    reason: format!("ggml did not describe its tensor {}", text(name)),
                });
            }
            let storage = match sys::gguf_get_tensor_type(gguf, id) {
                sys::GGML_TYPE_F32 => projector::Storage::F32,
                sys::GGML_TYPE_F16 => projector::Storage::F16,
                sys::GGML_TYPE_BF16 => projector::Storage::Bf16,
                q if sys::ggml_is_quantized(q) => {
                    projector::Storage::Quantized(text(sys::ggml_type_name(q)))
                }
                other => projector::Storage::Other(text(sys::ggml_type_name(other))),
            };
            let end = data
                .saturating_add(sys::gguf_get_tensor_offset(gguf, id) as u64)
                .saturating_add(sys::gguf_get_tensor_size(gguf, id) as u64);
            let tensor = projector::Tensor {
                ne: (*described).ne,
                storage,
                end,
            };
            header.tensors.insert(text(name), tensor);
        }
    }
    Ok(header)
}

/// Bytes read from the start of each tensor.
const FINGERPRINT_BLOCK: u64 = 4 << 10;

/// A short hex digest of the GGUF `files`: each one's length and the first
/// [`FINGERPRINT_BLOCK`] bytes of every tensor in it. Any tensor that
/// training changes (an adapter touching two of a layer's projections
/// only) changes the digest, without reading gigabytes.
pub(crate) fn fingerprint<'a>(
    files: impl Iterator<Item = &'a PathBuf>,
) -> Result<String, LoadError> {
    use std::io::{Read, Seek, SeekFrom};
    let mut digest = Vec::new();
    for path in files {
        let unreadable = |e: std::io::Error| LoadError::Unreadable {
            path: path.clone(),
            reason: e.to_string(),
        };
        let mut file = std::fs::File::open(path).map_err(unreadable)?;
        let mut bytes = file
            .metadata()
            .map_err(unreadable)?
            .len()
            .to_le_bytes()
            .to_vec();
        for (at, len) in tensor_extents(path)? {
            file.seek(SeekFrom::Start(at)).map_err(unreadable)?;
            (&mut file)
                .take(len.min(FINGERPRINT_BLOCK))
                .read_to_end(&mut bytes)
                .map_err(unreadable)?;
        }
        digest.extend(crate::hash::fnv1a(&[&bytes]).to_le_bytes());
    }
    Ok(format!("{:016x}", crate::hash::fnv1a(&[&digest])))
}
