//! The rule-based BTL reward (spec §4): R = w_f·R_format + w_b·R_blink + w_l·R_link.
//!
//! Two modes share this entry point:
//! - [`RewardMode::Released`] reproduces the official reward plugin, including
//!   its exact regular expressions (a completion the tolerant parser accepts
//!   can still score 0 here) and the Python semantics of its `try/except`;
//! - [`RewardMode::Paper`] implements §3.3 of the paper with the constants the
//!   spec fixes (λ = 5 ranked regions, Hungarian matching at IoU ≥ 0.5).
//!
//! Rewards read raw completion text, never the runtime parser's output, so
//! they stay faithful to the training recipe whatever the parser forgives.

mod paper;
pub(crate) mod pyjson;
pub(crate) mod pyvalue;
mod released;

pub(crate) use released::{link_rule_holds, normalized_distance};

use crate::sample::Sample;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RewardMode {
    /// The official reward plugin's semantics.
    #[default]
    Released,
    /// The paper's §3.3 semantics.
    Paper,
}

impl RewardMode {
    pub fn name(self) -> &'static str {
        match self {
            Self::Released => "released",
            Self::Paper => "paper",
        }
    }
}

impl std::str::FromStr for RewardMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "released" => Ok(Self::Released),
            "paper" => Ok(Self::Paper),
            _ => Err(format!(
                "unknown reward mode '{s}' (expected released or paper)"
            )),
        }
    }
}

/// Weights of the three terms. The paper's Eq. 3 is the unweighted sum
/// (all 1); the training recipe uses 0.1 / 0.3 / 0.6.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Weights {
    pub format: f64,
    pub blink: f64,
    pub link: f64,
}

impl Default for Weights {
    fn default() -> Self {
        Self {
            format: 0.1,
            blink: 0.3,
            link: 0.6,
        }
    }
}

/// The three terms (each 0 or 1 in `released` mode; blink in `[0, 1]` in
/// `paper` mode) and their weighted total.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RewardBreakdown {
    pub format: f64,
    pub blink: f64,
    pub link: f64,
    pub total: f64,
}

/// Scores one completion against its sample.
pub fn score(
    sample: &Sample,
    completion: &str,
    mode: RewardMode,
    weights: Weights,
) -> RewardBreakdown {
    let sample = &*sample.judged();
    let (format, blink, link) = match mode {
        RewardMode::Released => (
            released::format(completion),
            released::blink(completion, sample),
            released::link(completion, sample),
        ),
        RewardMode::Paper => (
            paper::format(completion),
            paper::blink(completion, sample),
            paper::link(completion, sample),
        ),
    };
    RewardBreakdown {
        format,
        blink,
        link,
        total: weights.format * format + weights.blink * blink + weights.link * link,
    }
}

/// 1.0 for true, 0.0 for false: the terms are indicator functions.
fn indicator(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

#[cfg(test)]
mod tests;
