//! [`LoraAdapter`]: a LoRA adapter GGUF laid over the text model at load
//! time, and its command-line form `FILE[:SCALE]`.
//!
//! The adapter file is what llama.cpp's `convert_lora_to_gguf.py` writes
//! from a PEFT adapter; its own `alpha / rank` factor is stored in it and
//! applied by llama.cpp, so `scale` is only the user's extra multiplier:
//! 1 applies the adapter as trained, 0 turns it off.
//!
//! This type is plain data (no llama.cpp), so the CLI parses `--lora` the
//! same way whether or not btl was built with the llama.cpp backend.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use thiserror::Error;

/// One adapter and how strongly it applies.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LoraAdapter {
    /// The adapter GGUF (`general.type = adapter`, `adapter.type = lora`).
    pub path: PathBuf,
    /// Multiplier of the adapter's update on top of its own alpha / rank.
    #[serde(default = "full")]
    pub scale: f32,
}

fn full() -> f32 {
    1.0
}

impl LoraAdapter {
    /// The adapter at scale 1 (as trained).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            scale: full(),
        }
    }

    pub fn with_scale(self, scale: f32) -> Self {
        Self { scale, ..self }
    }
}

/// Why a `FILE[:SCALE]` argument was refused.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum LoraArgError {
    #[error("the LoRA adapter argument is empty (expected FILE or FILE:SCALE)")]
    Empty,
    #[error("the LoRA adapter argument '{arg}' has no file name before its scale")]
    NoFile { arg: String },
    #[error("the scale of the LoRA adapter '{arg}' must be a finite number, not {scale}")]
    BadScale { arg: String, scale: f32 },
}

impl FromStr for LoraAdapter {
    type Err = LoraArgError;

    /// `FILE` or `FILE:SCALE`. Only a suffix that reads as a number is a
    /// scale, so a path that merely contains a colon (`C:\…`, `a:b.gguf`)
    /// stays whole.
    fn from_str(arg: &str) -> Result<Self, Self::Err> {
        if arg.is_empty() {
            return Err(LoraArgError::Empty);
        }
        let Some((file, scale)) = arg
            .rsplit_once(':')
            .and_then(|(file, s)| Some((file, s.trim().parse::<f32>().ok()?)))
        else {
            return Ok(Self::new(arg));
        };
        if file.is_empty() {
            return Err(LoraArgError::NoFile {
                arg: arg.to_string(),
            });
        }
        if !scale.is_finite() {
            return Err(LoraArgError::BadScale {
                arg: arg.to_string(),
                scale,
            });
        }
        Ok(Self::new(file).with_scale(scale))
    }
}

/// `FILE` at scale 1, else `FILE:SCALE`: the form [`FromStr`] reads back.
impl fmt::Display for LoraAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if self.scale != 1.0 {
            write!(f, ":{}", self.scale)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(s: &str) -> Result<LoraAdapter, LoraArgError> {
        s.parse()
    }

    #[test]
    fn a_bare_file_applies_at_scale_one() {
        let a = parse("adapters/ui-lora-f16.gguf").unwrap();
        assert_eq!(a.path, PathBuf::from("adapters/ui-lora-f16.gguf"));
        assert_eq!(a.scale, 1.0);
    }

    #[test]
    fn a_numeric_suffix_is_the_scale() {
        assert_eq!(parse("a.gguf:0.5").unwrap().scale, 0.5);
        assert_eq!(parse("a.gguf:0").unwrap().scale, 0.0);
        assert_eq!(parse("a.gguf:-1").unwrap().scale, -1.0);
        assert_eq!(parse("a.gguf:2e-1").unwrap().scale, 0.2);
        assert_eq!(parse("a.gguf: 1.5").unwrap().scale, 1.5);
        assert_eq!(
            parse("dir:x/a.gguf:0.25").unwrap(),
            LoraAdapter::new("dir:x/a.gguf").with_scale(0.25)
        );
    }

    #[test]
    fn a_colon_without_a_number_after_it_belongs_to_the_path() {
        assert_eq!(
            parse(r"C:\models\a.gguf").unwrap(),
            LoraAdapter::new(r"C:\models\a.gguf")
        );
        assert_eq!(parse("a.gguf:").unwrap(), LoraAdapter::new("a.gguf:"));
        assert_eq!(parse("a:b.gguf").unwrap(), LoraAdapter::new("a:b.gguf"));
    }

    #[test]
    fn bad_arguments_say_what_is_wrong() {
        assert_eq!(parse(""), Err(LoraArgError::Empty));
        let e = parse(":0.5").unwrap_err();
        assert!(matches!(e, LoraArgError::NoFile { .. }), "{e}");
        assert!(e.to_string().contains(":0.5"), "{e}");
        for s in ["a.gguf:nan", "a.gguf:inf", "a.gguf:-inf", "a.gguf:1e39"] {
            let e = parse(s).unwrap_err();
            assert!(matches!(e, LoraArgError::BadScale { .. }), "{s}: {e}");
            assert!(e.to_string().contains(s), "{e}");
        }
    }

    #[test]
    fn the_scale_defaults_to_one_in_json() {
        let a: LoraAdapter = serde_json::from_str(r#"{"path": "a.gguf"}"#).unwrap();
        assert_eq!(a, LoraAdapter::new("a.gguf"));
    }

    proptest! {
        /// What Display prints parses back to the same adapter, for paths
        /// with colons and any finite scale.
        #[test]
        fn display_round_trips(
            path in "[a-zA-Z0-9_./:-]{0,20}[a-zA-Z_][a-zA-Z0-9_.-]{0,5}",
            scale in proptest::num::f32::NORMAL | proptest::num::f32::ZERO | proptest::num::f32::SUBNORMAL,
        ) {
            // A path ending in ':<number>' would read as FILE:SCALE; the
            // pattern's last segment starts with a letter, and 'inf'/'nan'
            // style names are covered by the explicit tests.
            prop_assume!(path.rsplit_once(':').is_none_or(|(_, s)| s.parse::<f32>().is_err()));
            let adapter = LoraAdapter::new(&path).with_scale(scale);
            let back = parse(&adapter.to_string()).unwrap();
            prop_assert_eq!(back.path, adapter.path);
            prop_assert_eq!(back.scale.to_bits(), adapter.scale.to_bits());
        }
    }
}
