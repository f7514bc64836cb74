//! How far a quantized vision projector's image embeddings are from a
//! reference projector's (f16), for `scripts/bench/projector-quantization`:
//! each projector encodes the same screenshot through llama.cpp's mtmd,
//! and one JSON line per projector gives the relative L2 distance of the
//! embeddings (all image tokens together) and the mean and least cosine
//! similarity of a token's embedding to the reference's.
//!
//! llama-cpp-2 does not hand mtmd's output embeddings out, so this reads
//! them through llama-cpp-sys-2. llama.cpp's log shows errors only.

use anyhow::{Context, bail, ensure};
use clap::Parser;
use llama_cpp_sys_2 as sys;
use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};

#[path = "support/screenshot.rs"]
mod screenshot;

#[derive(Parser)]
struct Args {
    /// The text model the projectors belong to.
    #[arg(long)]
    model: PathBuf,
    /// The reference projector, then the ones to compare with it.
    #[arg(long, required = true, num_args = 2..)]
    mmproj: Vec<PathBuf>,
    #[arg(long)]
    image: PathBuf,
    /// Resize the screenshot to the model frame of this max_pixels first,
    /// as the agent does.
    #[arg(long)]
    max_pixels: Option<u64>,
    #[arg(long, default_value_t = 2)]
    threads: i32,
}

/// A text model (mapped, so its weights cost nothing until used), freed on
/// drop.
struct TextModel(*mut sys::llama_model);

impl TextModel {
    fn load(path: &Path) -> anyhow::Result<Self> {
        let path = CString::new(path.to_string_lossy().as_bytes())?;
        // SAFETY: default parameters from llama.cpp, changed in plain fields;
        // the path is a valid C string for the call.
        let model = unsafe {
            sys::llama_backend_init();
            sys::llama_log_set(Some(errors_only), std::ptr::null_mut());
            sys::mtmd_helper_log_set(Some(errors_only), std::ptr::null_mut());
            sys::llama_model_load_from_file(path.as_ptr(), sys::llama_model_default_params())
        };
        ensure!(!model.is_null(), "llama.cpp cannot load {path:?}");
        Ok(Self(model))
    }
}

unsafe extern "C" fn errors_only(
    level: sys::ggml_log_level,
    text: *const std::os::raw::c_char,
    _user: *mut std::os::raw::c_void,
) {
    if level == sys::GGML_LOG_LEVEL_ERROR && !text.is_null() {
        // SAFETY: ggml passes a NUL-terminated line.
        eprint!("{}", unsafe { CStr::from_ptr(text) }.to_string_lossy());
    }
}

impl Drop for TextModel {
    fn drop(&mut self) {
        // SAFETY: loaded by llama_model_load_from_file, freed once.
        unsafe { sys::llama_model_free(self.0) }
    }
}

/// The image embeddings `mmproj` makes of `image`: (tokens, width).
fn embeddings(
    model: &TextModel,
    mmproj: &Path,
    image: &image::RgbImage,
    threads: i32,
) -> anyhow::Result<(usize, Vec<f32>)> {
    let path = CString::new(mmproj.to_string_lossy().as_bytes())?;
    // SAFETY: every pointer below comes from the mtmd call that made it and
    // is freed once, after its last use; the bitmap copies the pixels, and
    // the output embeddings are read within the context's lifetime, sized
    // by the chunk's token count times the model's width as mtmd documents.
    unsafe {
        let mut params = sys::mtmd_context_params_default();
        params.use_gpu = false;
        params.print_timings = false;
        params.n_threads = threads;
        params.warmup = false;
        let ctx = sys::mtmd_init_from_file(path.as_ptr(), model.0, params);
        ensure!(!ctx.is_null(), "mtmd cannot load {}", mmproj.display());
        let bitmap = sys::mtmd_bitmap_init(image.width(), image.height(), image.as_raw().as_ptr());
        let chunks = sys::mtmd_input_chunks_init();
        // The prompt is the image alone.
        let marker = CStr::from_ptr(sys::mtmd_default_marker());
        let input = sys::mtmd_input_text {
            text: marker.as_ptr(),
            text_len: marker.to_bytes().len(),
            add_special: false,
            parse_special: true,
        };
        let bitmaps = [bitmap.cast_const()];
        let result = (|| {
            let status = sys::mtmd_tokenize(ctx, chunks, &input, bitmaps.as_ptr(), 1);
            ensure!(status == 0, "mtmd_tokenize failed ({status})");
            let image_chunk = (0..sys::mtmd_input_chunks_size(chunks))
                .map(|i| sys::mtmd_input_chunks_get(chunks, i))
                .find(|&c| sys::mtmd_input_chunk_get_type(c) == sys::MTMD_INPUT_CHUNK_TYPE_IMAGE)
                .context("mtmd made no image chunk")?;
            let status = sys::mtmd_encode_chunk(ctx, image_chunk);
            ensure!(status == 0, "mtmd_encode_chunk failed ({status})");
            let tokens = sys::mtmd_input_chunk_get_n_tokens(image_chunk);
            // What the text model takes in: the projector's output width.
            let width = sys::llama_model_n_embd_inp(model.0) as usize;
            let out = sys::mtmd_get_output_embd(ctx);
            ensure!(!out.is_null(), "mtmd gave no embeddings");
            Ok((
                tokens,
                std::slice::from_raw_parts(out, tokens * width).to_vec(),
            ))
        })();
        sys::mtmd_input_chunks_free(chunks);
        sys::mtmd_bitmap_free(bitmap);
        sys::mtmd_free(ctx);
        result
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let image = screenshot::load(&args.image, args.max_pixels)?;
    let model = TextModel::load(&args.model)?;
    let (first, others) = args.mmproj.split_first().context("no projector given")?;
    let (tokens, reference) = embeddings(&model, first, &image, args.threads)?;
    report(first, tokens, &reference, &reference);
    for mmproj in others {
        let (n, e) = embeddings(&model, mmproj, &image, args.threads)?;
        if n != tokens {
            bail!(
                "{}: {n} image tokens, the reference has {tokens}",
                mmproj.display()
            );
        }
        report(mmproj, tokens, &reference, &e);
    }
    Ok(())
}

/// Prints how far `e` is from `reference` (both `tokens` rows).
fn report(mmproj: &Path, tokens: usize, reference: &[f32], e: &[f32]) {
    let width = reference.len() / tokens;
    let norm = |v: &[f32]| v.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>().sqrt();
    let diff: Vec<f32> = e.iter().zip(reference).map(|(a, b)| a - b).collect();
    let cosines: Vec<f64> = e
        .chunks(width)
        .zip(reference.chunks(width))
        .map(|(a, b)| {
            let dot: f64 = a
                .iter()
                .zip(b)
                .map(|(&x, &y)| f64::from(x) * f64::from(y))
                .sum();
            dot / (norm(a) * norm(b))
        })
        .collect();
    println!(
        "{}",
        serde_json::json!({
            "mmproj": mmproj,
            "image_tokens": tokens,
            "relative_l2": norm(&diff) / norm(reference),
            "mean_cosine": cosines.iter().sum::<f64>() / cosines.len() as f64,
            "min_cosine": cosines.iter().copied().fold(f64::INFINITY, f64::min),
        })
    );
}
