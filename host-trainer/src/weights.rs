//! Reading a Hugging Face checkpoint's safetensors into the model's variables.
//!
//! A checkpoint directory holds either one `model.safetensors` or shards
//! listed by `model.safetensors.index.json` (`weight_map`: tensor → file).
//! Shards are memory-mapped, so a 7B checkpoint is never read into memory
//! whole. Tensors may be stored as F32, BF16 or F16; each is converted to the
//! dtype and device of the variable it fills.
//!
//! Tensor names follow the checkpoint files of Qwen2.5-VL (`model.layers.N…`,
//! `visual.blocks.N…`, `lm_head.weight`), which transformers 4.x and 5.x both
//! write. The names of transformers 5's modules (`model.language_model.…`,
//! `model.visual.…`) are accepted too.
//!
//! Loading is strict: every variable must be found with the shape the config
//! implies, and a tensor the model does not use is an error too (it means
//! another architecture or size), except `lm_head.weight` beside tied embeddings.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use safetensors::SafeTensors;
use safetensors::tensor::{Dtype, Metadata};
use serde::Deserialize;
use tch::{Kind, Tensor, nn};

use crate::error::{Error, Result};

const SINGLE_FILE: &str = "model.safetensors";
const INDEX_FILE: &str = "model.safetensors.index.json";

/// The safetensors files of one checkpoint directory.
pub struct Checkpoint {
    dir: PathBuf,
    shards: Vec<Shard>,
    /// Canonical tensor name → where it is stored.
    entries: BTreeMap<String, Entry>,
}

struct Shard {
    path: PathBuf,
    mmap: Mmap,
    /// Start of the data section (after the length word and the JSON header).
    data_start: usize,
    metadata: Metadata,
}

struct Entry {
    shard: usize,
    stored_name: String,
}

#[derive(Deserialize)]
struct Index {
    weight_map: BTreeMap<String, String>,
}

impl Checkpoint {
    /// Opens the safetensors of a checkpoint directory and checks their headers.
    pub fn open(dir: &Path) -> Result<Self> {
        let index_path = dir.join(INDEX_FILE);
        let (files, index) = if index_path.exists() {
            let text = std::fs::read_to_string(&index_path).map_err(|source| Error::Io {
                path: index_path.clone(),
                source,
            })?;
            let index: Index = serde_json::from_str(&text).map_err(|e| Error::Checkpoint {
                path: index_path.clone(),
                message: format!("not a safetensors index: {e}"),
            })?;
            let files: BTreeSet<String> = index.weight_map.values().cloned().collect();
            (files.into_iter().collect::<Vec<_>>(), Some(index))
        } else if dir.join(SINGLE_FILE).exists() {
            (vec![SINGLE_FILE.to_owned()], None)
        } else {
            return Err(Error::Checkpoint {
                path: dir.to_owned(),
                message: format!("no {SINGLE_FILE} or {INDEX_FILE} in this directory"),
            });
        };
        let shards = files
            .iter()
            .map(|file| Shard::open(&dir.join(file)))
            .collect::<Result<Vec<_>>>()?;
        let shard_of: HashMap<&str, usize> = files
            .iter()
            .enumerate()
            .map(|(i, f)| (f.as_str(), i))
            .collect();

        let mut entries = BTreeMap::new();
        let mut add = |stored_name: &str, shard: usize, path: &Path| -> Result<()> {
            let canonical = canonical_name(stored_name);
            let previous = entries.insert(
                canonical.clone(),
                Entry {
                    shard,
                    stored_name: stored_name.to_owned(),
                },
            );
            match previous {
                Some(_) => Err(Error::Checkpoint {
                    path: path.to_owned(),
                    message: format!("tensor {canonical} is stored twice (under two names)"),
                }),
                None => Ok(()),
            }
        };
        match index {
            Some(index) => {
                for (name, file) in &index.weight_map {
                    let shard = shard_of[file.as_str()];
                    if !shards[shard].metadata.tensors().contains_key(name) {
                        return Err(Error::Checkpoint {
                            path: index_path.clone(),
                            message: format!(
                                "the index puts tensor {name} in {file}, which lacks it"
                            ),
                        });
                    }
                    add(name, shard, &index_path)?;
                }
                // A tensor in a shard but not in the index would be silently ignored by
                // transformers; here it is a sign of a mixed-up directory.
                for shard in &shards {
                    if let Some(name) = shard
                        .metadata
                        .tensors()
                        .keys()
                        .find(|n| !index.weight_map.contains_key(*n))
                    {
                        return Err(Error::Checkpoint {
                            path: shard.path.clone(),
                            message: format!("tensor {name} is not listed in {INDEX_FILE}"),
                        });
                    }
                }
            }
            None => {
                let names: Vec<String> = shards[0].metadata.tensors().keys().cloned().collect();
                for name in names {
                    add(&name, 0, &shards[0].path)?;
                }
            }
        }
        Ok(Self {
            dir: dir.to_owned(),
            shards,
            entries,
        })
    }

    /// The dtype most of the checkpoint is stored in (by element count).
    pub fn stored_kind(&self) -> Result<Kind> {
        let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
        for entry in self.entries.values() {
            let shard = &self.shards[entry.shard];
            let info = shard.info(&entry.stored_name);
            let label = match info.dtype {
                Dtype::F32 => "F32",
                Dtype::BF16 => "BF16",
                Dtype::F16 => "F16",
                other => {
                    return Err(Error::UnsupportedDtype {
                        path: shard.path.clone(),
                        name: entry.stored_name.clone(),
                        dtype: format!("{other:?}"),
                    });
                }
            };
            *counts.entry(label).or_default() += info.shape.iter().product::<usize>();
        }
        let most = counts.into_iter().max_by_key(|&(_, n)| n).map(|(l, _)| l);
        Ok(match most {
            Some("BF16") => Kind::BFloat16,
            Some("F16") => Kind::Half,
            _ => Kind::Float,
        })
    }

    /// Reads one tensor (by canonical name) onto the CPU in its stored dtype,
    /// checking it has the expected shape.
    pub fn tensor(&self, name: &str, expected: &[i64]) -> Result<Tensor> {
        let entry = self
            .entries
            .get(name)
            .ok_or_else(|| Error::MissingTensors {
                dir: self.dir.clone(),
                names: vec![name.to_owned()],
            })?;
        self.shards[entry.shard].read(&entry.stored_name, name, expected)
    }

    /// Fills every variable of `vars` (named by [`Path`](nn::Path)s that follow
    /// the checkpoint's names) from the checkpoint, converting dtype and device.
    pub fn load_into(&self, vars: &nn::VarStore, tied_embeddings: bool) -> Result<()> {
        let variables = vars.variables();
        let mut missing: Vec<String> = variables
            .keys()
            .filter(|n| !self.entries.contains_key(*n))
            .cloned()
            .collect();
        missing.sort();
        if !missing.is_empty() {
            return Err(Error::MissingTensors {
                dir: self.dir.clone(),
                names: missing,
            });
        }
        let unexpected: Vec<String> = self
            .entries
            .keys()
            .filter(|n| !variables.contains_key(*n))
            .filter(|n| !(tied_embeddings && n.as_str() == "lm_head.weight"))
            .cloned()
            .collect();
        if !unexpected.is_empty() {
            return Err(Error::UnexpectedTensors {
                dir: self.dir.clone(),
                names: unexpected,
            });
        }
        let mut names: Vec<&String> = variables.keys().collect();
        names.sort();
        tch::no_grad(|| -> Result<()> {
            for name in names {
                let mut var = variables[name].shallow_clone();
                let stored = self.tensor(name, &var.size())?;
                var.f_copy_(&stored)?;
            }
            Ok(())
        })
    }
}

impl Shard {
    fn open(path: &Path) -> Result<Self> {
        let io = |source| Error::Io {
            path: path.to_owned(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        // SAFETY: the map is read-only; a checkpoint rewritten while training reads
        // it is outside what host-trainer supports (as for transformers' safe_open).
        let mmap = unsafe { Mmap::map(&file) }.map_err(io)?;
        let (header_len, metadata) =
            SafeTensors::read_metadata(&mmap).map_err(|e| Error::Checkpoint {
                path: path.to_owned(),
                message: format!("not a valid safetensors file: {e:?}"),
            })?;
        Ok(Self {
            path: path.to_owned(),
            mmap,
            data_start: 8 + header_len,
            metadata,
        })
    }

    fn info(&self, stored_name: &str) -> &safetensors::tensor::TensorInfo {
        self.metadata.tensors()[stored_name]
    }

    fn read(&self, stored_name: &str, name: &str, expected: &[i64]) -> Result<Tensor> {
        let info = self.info(stored_name);
        let found: Vec<i64> = info.shape.iter().map(|&d| d as i64).collect();
        if found != expected {
            return Err(Error::ShapeMismatch {
                path: self.path.clone(),
                name: name.to_owned(),
                expected: expected.to_vec(),
                found,
            });
        }
        let kind = match info.dtype {
            Dtype::F32 => Kind::Float,
            Dtype::BF16 => Kind::BFloat16,
            Dtype::F16 => Kind::Half,
            other => {
                return Err(Error::UnsupportedDtype {
                    path: self.path.clone(),
                    name: stored_name.to_owned(),
                    dtype: format!("{other:?}"),
                });
            }
        };
        // read_metadata has checked that the offsets lie inside the file.
        let (begin, end) = info.data_offsets;
        let bytes = &self.mmap[self.data_start + begin..self.data_start + end];
        Ok(Tensor::f_from_data_size(bytes, &found, kind)?)
    }
}

/// Maps transformers 5's module names to the names checkpoint files use.
pub(crate) fn canonical_name(stored: &str) -> String {
    if let Some(rest) = stored.strip_prefix("model.language_model.") {
        format!("model.{rest}")
    } else if let Some(rest) = stored.strip_prefix("model.visual.") {
        format!("visual.{rest}")
    } else {
        stored.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::canonical_name;

    #[test]
    fn transformers_5_module_names_map_to_checkpoint_names() {
        assert_eq!(
            canonical_name("model.language_model.layers.3.mlp.up_proj.weight"),
            "model.layers.3.mlp.up_proj.weight"
        );
        assert_eq!(
            canonical_name("model.visual.blocks.0.attn.qkv.bias"),
            "visual.blocks.0.attn.qkv.bias"
        );
        assert_eq!(
            canonical_name("model.embed_tokens.weight"),
            "model.embed_tokens.weight"
        );
        assert_eq!(canonical_name("lm_head.weight"), "lm_head.weight");
    }
}
