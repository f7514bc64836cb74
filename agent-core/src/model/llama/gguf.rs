//! What btl reads of a GGUF file itself, with ggml's GGUF reader and
//! without loading any tensor: the layer counts llama.cpp would abort on,
//! an architecture, a quantized tensor, where each tensor lies, and the
//! fingerprint episodes record. The phone's library reads them too, so
//! none of this is host tooling.

use super::{LoadError, backend, check_gguf};
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
    check_gguf(path)?;
    // ggml's log goes where btl sends it (silenced by default) only once
    // the backend has set it up.
    backend()?;
    let unreadable = |reason: &str| LoadError::Unreadable {
        path: path.to_path_buf(),
        reason: reason.to_owned(),
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
    let metadata = Metadata(gguf);
    let value = read(&metadata);
    // SAFETY: made by gguf_init_from_file above and freed once; nothing
    // read from it outlives this.
    unsafe { sys::gguf_free(gguf) };
    Ok(value)
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
