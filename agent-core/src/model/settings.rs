//! How a model file says it must be run: the prompt profile and screenshot
//! size it was trained with, and the version of that profile's prompt text
//! ([`Profile::prompt_version`]), as GGUF
//! metadata (`btl-train export` writes it). `btl run`, `bench` and
//! `collect` take them for the settings the user did not give, and warn
//! when a given one differs, so a model runs as it was trained.
//!
//! A model file without a trained screenshot size runs at the user's
//! [`ScreenshotBudget`], a preset of max_pixels by what a step may cost.

use crate::protocol::{Profile, TRAINING_MAX_PIXELS};

pub const PROFILE_KEY: &str = "btl.profile";
pub const MAX_PIXELS_KEY: &str = "btl.max_pixels";
pub const PROMPT_VERSION_KEY: &str = "btl.prompt_version";

/// How many pixels of a screenshot the model may see (max_pixels), by the
/// step time a device affords. The vision encoder's and the prompt's cost
/// grow with the image tokens; `scripts/bench/screenshot-budget` measures
/// each at Qwen2.5-VL-3B's size and the README estimates a phone's step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "host", derive(clap::ValueEnum))]
pub enum ScreenshotBudget {
    /// 200,704 pixels (256 image tokens at most; 230 for a 1080x2400
    /// screen): what a phone's CPU can encode in a few seconds.
    Phone,
    /// 802,816 pixels (1,024 image tokens at most).
    Balanced,
    /// 4,014,080 pixels (5,120 image tokens at most): BTL-UI's training
    /// value, for a GPU.
    Full,
}

impl ScreenshotBudget {
    pub fn name(self) -> &'static str {
        match self {
            ScreenshotBudget::Phone => "phone",
            ScreenshotBudget::Balanced => "balanced",
            ScreenshotBudget::Full => "full",
        }
    }

    pub fn max_pixels(self) -> u64 {
        match self {
            ScreenshotBudget::Phone => 256 * 28 * 28,
            ScreenshotBudget::Balanced => 1024 * 28 * 28,
            ScreenshotBudget::Full => TRAINING_MAX_PIXELS,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelSettings {
    pub profile: Option<Profile>,
    pub max_pixels: Option<u64>,
    pub prompt_version: Option<u32>,
}

impl ModelSettings {
    /// The settings of a model file; `value` gives a metadata key's value as
    /// text (llama.cpp renders numbers that way), `None` for a missing key.
    /// A value that is present but unusable is an error naming the key.
    pub fn from_metadata(value: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let profile = value(PROFILE_KEY)
            .map(|v| {
                v.parse::<Profile>()
                    .map_err(|e| format!("{PROFILE_KEY}: {e}"))
            })
            .transpose()?;
        let max_pixels = value(MAX_PIXELS_KEY)
            .map(|v| match v.trim().parse::<u64>() {
                Ok(n) if n >= 56 * 56 => Ok(n),
                _ => Err(format!(
                    "{MAX_PIXELS_KEY} is {v:?}; it must be a pixel count of at least 3136"
                )),
            })
            .transpose()?;
        let prompt_version = value(PROMPT_VERSION_KEY)
            .map(|v| {
                v.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("{PROMPT_VERSION_KEY} is {v:?}; it must be a number"))
            })
            .transpose()?;
        Ok(Self {
            profile,
            max_pixels,
            prompt_version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(pairs: &[(&str, &str)]) -> Result<ModelSettings, String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ModelSettings::from_metadata(|k| map.get(k).cloned())
    }

    #[test]
    fn settings_come_from_the_btl_keys() {
        assert_eq!(read(&[]), Ok(ModelSettings::default()));
        assert_eq!(
            read(&[
                (PROFILE_KEY, "btl-extended"),
                (MAX_PIXELS_KEY, "200704"),
                (PROMPT_VERSION_KEY, "1"),
            ]),
            Ok(ModelSettings {
                profile: Some(Profile::BtlExtended),
                max_pixels: Some(200_704),
                prompt_version: Some(1),
            })
        );
    }

    #[test]
    fn unusable_values_name_their_key() {
        for (key, value) in [
            (PROFILE_KEY, "btl-xl"),
            (MAX_PIXELS_KEY, "-5"),
            (MAX_PIXELS_KEY, "100"),
            (PROMPT_VERSION_KEY, "one"),
        ] {
            let err = read(&[(key, value)]).unwrap_err();
            assert!(err.contains(key), "{key}={value}: {err}");
        }
    }
}
