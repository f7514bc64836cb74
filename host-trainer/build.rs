//! Links host-trainer's binaries and tests to the libtorch that torch-sys found.
//!
//! - Compiles the C++ shims (`csrc/`: autocast, profiler) against its headers.
//! - Checks that it is torch 2.13.0, the one release tch 0.26 is made for.
//!   torch-sys checks only libtorch archives (`build-version`) and
//!   `LIBTORCH_USE_PYTORCH`; a PyPI `site-packages/torch` given as `LIBTORCH`
//!   has a `version.py` instead, which it never reads. (This runs after
//!   torch-sys has compiled its C++ shim, which another major release's headers
//!   usually break first; scripts/lib/libtorch.sh checks before cargo runs.)
//! - Records libtorch's lib dir as an rpath, so tests and binaries start
//!   without `LD_LIBRARY_PATH`.
//! - Keeps `libtorch_cuda.so` as a real dependency of a CUDA libtorch:
//!   nothing in the binary refers to its symbols (CUDA kernels register
//!   themselves when the library loads), so the linker's `--as-needed` would
//!   drop it and `Cuda::is_available()` would say false on a GPU host.
//!   PyPI's wheel always ships `libtorch_cuda.so`, also in the slim CPU install
//!   of scripts/test, which leaves out the CUDA libraries it needs; so it is
//!   linked when it can be loaded (`dlopen`), or as `BTL_TORCH_CUDA=1|0` says.

use std::path::Path;

const TORCH_VERSION: &str = "2.13.0";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=LIBTORCH_BYPASS_VERSION_CHECK");
    println!("cargo:rerun-if-env-changed=BTL_TORCH_CUDA");
    // torch-sys declares `links = "tch"` and prints `libtorch_lib`.
    let Ok(lib) = std::env::var("DEP_TCH_LIBTORCH_LIB") else {
        fail("torch-sys did not report a libtorch lib dir (DEP_TCH_LIBTORCH_LIB is not set)");
    };
    let lib = Path::new(&lib);
    if std::env::var_os("LIBTORCH_BYPASS_VERSION_CHECK").is_none() {
        check_version(lib);
    }
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    compile_shims(lib);
    // tch's C++ glue and llama.cpp's mtmd helper each compile stb_image's
    // implementation, so a binary with both (btl-train next to agent-core's
    // `llama` feature, as a workspace build unifies it) defines every public
    // `stbi_*` function twice. The copies are the same library and neither
    // side's image loading is used (tch's is unused; btl hands mtmd decoded
    // bitmaps), so keeping one definition is safe.
    println!("cargo:rustc-link-arg=-Wl,--allow-multiple-definition");
    if link_cuda(lib) {
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed,-ltorch_cuda,--as-needed");
    }
}

/// `csrc/autocast.cpp` and `csrc/profiler.cpp` (see `src/autocast.rs` and
/// `src/profile.rs`), against the headers next to libtorch's lib dir and
/// with its C++ ABI, as torch-sys builds its glue.
fn compile_shims(lib: &Path) {
    println!("cargo:rerun-if-changed=csrc/autocast.cpp");
    println!("cargo:rerun-if-changed=csrc/profiler.cpp");
    println!("cargo:rerun-if-changed=csrc/guarded.h");
    println!("cargo:rerun-if-env-changed=LIBTORCH_CXX11_ABI");
    let include = lib.parent().unwrap_or(lib).join("include");
    if !include.join("ATen/autocast_mode.h").exists() {
        fail(&format!(
            "libtorch's headers are not at {} (ATen/autocast_mode.h is missing)",
            include.display()
        ));
    }
    let abi = std::env::var("LIBTORCH_CXX11_ABI").unwrap_or_else(|_| "1".to_owned());
    cc::Build::new()
        .cpp(true)
        .file("csrc/autocast.cpp")
        .file("csrc/profiler.cpp")
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .flag("-std=c++17")
        .flag(format!("-D_GLIBCXX_USE_CXX11_ABI={abi}"))
        // libtorch's headers are not ours to keep warning-free.
        .warnings(false)
        .extra_warnings(false)
        .flag_if_supported("-w")
        .compile("btl_shims");
}

fn link_cuda(lib: &Path) -> bool {
    let cuda = lib.join("libtorch_cuda.so");
    match std::env::var("BTL_TORCH_CUDA").as_deref() {
        Ok("1") if !cuda.exists() => fail(&format!(
            "BTL_TORCH_CUDA=1 but {} does not exist (not a CUDA build of libtorch)",
            cuda.display()
        )),
        Ok("1") => true,
        Ok("0") => false,
        _ if !cuda.exists() => false,
        _ => match loadable(&cuda) {
            Ok(()) => true,
            Err(why) => {
                println!(
                    "cargo:warning=building host-trainer for the CPU only: {} cannot be loaded ({why})",
                    cuda.display()
                );
                false
            }
        },
    }
}

/// Whether the dynamic loader finds everything `path` needs.
fn loadable(path: &Path) -> Result<(), String> {
    use std::ffi::{CStr, CString};
    use std::os::unix::ffi::OsStrExt;

    let name = CString::new(path.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: dlopen/dlerror with a valid C string; the handle is closed right away.
    unsafe {
        let handle = libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
        if handle.is_null() {
            let error = libc::dlerror();
            return Err(if error.is_null() {
                "dlopen failed".to_owned()
            } else {
                CStr::from_ptr(error).to_string_lossy().into_owned()
            });
        }
        libc::dlclose(handle);
    }
    Ok(())
}

fn check_version(lib: &Path) {
    let root = lib.parent().unwrap_or(lib);
    let found = if let Ok(text) = std::fs::read_to_string(root.join("version.py")) {
        text.lines()
            .find_map(|l| l.strip_prefix("__version__ = "))
            .map(|v| v.trim().trim_matches(['\'', '"']).to_owned())
    } else {
        std::fs::read_to_string(root.join("build-version"))
            .ok()
            .map(|v| v.trim().to_owned())
    };
    let Some(found) = found else {
        // LIBTORCH_USE_PYTORCH: torch-sys has already asked Python for the version.
        return;
    };
    let release = found.split_once('+').map_or(found.as_str(), |(v, _)| v);
    if release != TORCH_VERSION {
        fail(&format!(
            "libtorch at {} is torch {found}, but host-trainer (tch 0.26) needs torch {TORCH_VERSION}; \
             install it with `pip install torch=={TORCH_VERSION}` (see docs/training.md, \"Training on a GPU host\") \
             or let scripts/test set it up",
            root.display()
        ));
    }
}

fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(1);
}
