//! Fuzzes the reader of safetensors checkpoints (`btl-train` loads a
//! model's weights with it): the file header, the sharded index, and
//! reading each tensor the header lists.
//!
//! The input is one file, or, when the first byte is odd, an index: two
//! bytes of length, the `model.safetensors.index.json` text, then the one
//! shard it may name (`model-00001-of-00001.safetensors`). The files are
//! written to a directory of their own (in memory where /dev/shm exists).
//! Beyond "never panics": every tensor a checkpoint that opens lists, read
//! at the shape its header gives, is returned or refused with an error.

#![no_main]

use host_trainer::weights::Checkpoint;
use libfuzzer_sys::fuzz_target;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const SINGLE: &str = "model.safetensors";
const INDEX: &str = "model.safetensors.index.json";
const SHARD: &str = "model-00001-of-00001.safetensors";

fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = Path::new("/dev/shm");
        let base = if base.is_dir() {
            base.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let dir = base.join(format!("btl-fuzz-safetensors-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let dir = dir();
    for file in [SINGLE, INDEX, SHARD] {
        let _ = std::fs::remove_file(dir.join(file));
    }
    let shard = match data.split_first() {
        Some((&mode, rest)) if mode & 1 == 1 => {
            let Some((len, rest)) = rest.split_first_chunk::<2>() else {
                return;
            };
            let (index, shard) =
                rest.split_at(usize::from(u16::from_le_bytes(*len)).min(rest.len()));
            std::fs::write(dir.join(INDEX), index).expect("writing the index");
            std::fs::write(dir.join(SHARD), shard).expect("writing the shard");
            shard
        }
        Some((_, rest)) => {
            std::fs::write(dir.join(SINGLE), rest).expect("writing the file");
            rest
        }
        None => return,
    };
    let Ok(checkpoint) = Checkpoint::open(dir) else {
        return;
    };
    let _ = checkpoint.stored_kind();
    for (name, shape) in listed_tensors(shard) {
        let _ = checkpoint.tensor(&name, &shape);
    }
});

/// The tensors a safetensors header lists, with their shapes, read here
/// without host-trainer's reader; names as stored (transformers 5 names map
/// to others in the checkpoint, so some are not found, which is an error).
fn listed_tensors(file: &[u8]) -> Vec<(String, Vec<i64>)> {
    let Some((len, rest)) = file.split_first_chunk::<8>() else {
        return Vec::new();
    };
    let Some(header) = usize::try_from(u64::from_le_bytes(*len))
        .ok()
        .and_then(|n| rest.get(..n))
    else {
        return Vec::new();
    };
    let Ok(serde_json::Value::Object(map)) = serde_json::from_slice(header) else {
        return Vec::new();
    };
    map.iter()
        .filter_map(|(name, info)| {
            let shape = info.get("shape")?.as_array()?;
            let shape = shape
                .iter()
                .map(|d| d.as_i64())
                .collect::<Option<Vec<_>>>()?;
            Some((name.clone(), shape))
        })
        .collect()
}
