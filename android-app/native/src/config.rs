//! What the app hands the native side to start an episode: one JSON object
//! with the agent's settings, the policy to load and the voting width; and
//! to resume one, only the policy (the settings are the episode's own).
//!
//! The agent settings are agent-core's own [`AgentConfig`] (unknown fields
//! are errors there too), so the app and `btl run` share one vocabulary and
//! the trajectory's `episode.json` records exactly what the app asked for.

use agent_core::agent::AgentConfig;
use serde::Deserialize;
use std::path::PathBuf;

/// The whole request of `NativeAgent.create`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionConfig {
    pub agent: AgentConfig,
    pub policy: PolicyConfig,
    /// Candidates sampled per step for test-time voting; 1 means no voting.
    #[serde(default = "one")]
    pub vote: u32,
}

/// The whole request of `NativeAgent.resume`: the policy to go on with.
/// Everything else (goal, profile, vote, step budget) is the interrupted
/// episode's, as its `episode.json` records it, so the request cannot
/// carry settings that would silently not apply.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResumeConfig {
    pub policy: PolicyConfig,
}

impl ResumeConfig {
    /// Parses and checks a request; every refusal names the setting.
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        let config: Self = serde_json::from_str(text)?;
        config.policy.validate()?;
        Ok(config)
    }
}

/// The most candidates per step: as `btl run --vote` allows.
pub use agent_core::agent::MAX_VOTE;

fn one() -> u32 {
    1
}

/// Where the model's answers come from.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum PolicyConfig {
    /// Qwen2.5-VL GGUF + mmproj on llama.cpp (feature `llama`).
    Llama {
        model: PathBuf,
        mmproj: PathBuf,
        #[serde(default = "default_threads")]
        threads: u32,
        #[serde(default)]
        backend: Backend,
    },
    /// Fixed answers replayed in order: demos and tests.
    Scripted { answers: Vec<String> },
    /// The virtual phone's task oracle answering in BTL text (feature
    /// `host-sim`, host tests only).
    Oracle { task: String, seed: u64 },
}

fn default_threads() -> u32 {
    4
}

/// Where llama.cpp runs the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    #[default]
    Cpu,
    Vulkan,
}

/// Why a session request was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid session config: {0}")]
    Json(#[from] serde_json::Error),
    #[error("invalid session config: {0}")]
    Invalid(String),
}

impl SessionConfig {
    /// Parses and checks a request; every refusal names the setting.
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        let config: Self = serde_json::from_str(text)?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |m: String| Err(ConfigError::Invalid(m));
        if self.agent.goal.trim().is_empty() {
            return invalid("agent.goal is empty".into());
        }
        if self.agent.max_steps == 0 {
            return invalid("agent.max_steps must be at least 1".into());
        }
        if !(1..=MAX_VOTE).contains(&self.vote) {
            return invalid(format!(
                "vote = {} is out of range (1 to {MAX_VOTE})",
                self.vote
            ));
        }
        if let Err(reason) = self.agent.check() {
            return invalid(format!("agent.{reason}"));
        }
        self.policy.validate()
    }
}

impl PolicyConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        let most = agent_core::model::spec::MAX_THREADS;
        if let Self::Llama { threads, .. } = self
            && !(1..=most).contains(&i32::try_from(*threads).unwrap_or(i32::MAX))
        {
            return Err(ConfigError::Invalid(format!(
                "policy.threads is {threads}, and must be 1 to {most}"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_core::protocol::Profile;

    #[test]
    fn reads_a_full_llama_request() {
        let config = SessionConfig::from_json(
            r#"{"agent": {"goal": "Turn on Wi-Fi", "max_pixels": 1000000, "profile": "btl-extended"},
                "policy": {"kind": "llama", "model": "/m.gguf", "mmproj": "/p.gguf", "threads": 6, "backend": "vulkan"},
                "vote": 1}"#,
        )
        .unwrap();
        assert_eq!(config.agent.goal, "Turn on Wi-Fi");
        assert_eq!(config.agent.max_pixels, 1_000_000);
        assert_eq!(config.agent.profile, Profile::BtlExtended);
        // Unset agent fields keep agent-core's defaults.
        assert_eq!(config.agent.max_steps, AgentConfig::default().max_steps);
        assert_eq!(
            config.policy,
            PolicyConfig::Llama {
                model: "/m.gguf".into(),
                mmproj: "/p.gguf".into(),
                threads: 6,
                backend: Backend::Vulkan
            }
        );
    }

    #[test]
    fn defaults_vote_threads_and_backend() {
        let config = SessionConfig::from_json(
            r#"{"agent": {"goal": "x"}, "policy": {"kind": "llama", "model": "m", "mmproj": "p"}}"#,
        )
        .unwrap();
        assert_eq!(config.vote, 1);
        assert!(matches!(
            config.policy,
            PolicyConfig::Llama {
                threads: 4,
                backend: Backend::Cpu,
                ..
            }
        ));
    }

    #[test]
    fn refusals_name_the_setting() {
        let error = |json: &str| SessionConfig::from_json(json).unwrap_err().to_string();
        let scripted = r#""policy": {"kind": "scripted", "answers": []}"#;
        assert!(
            error(&format!(r#"{{"agent": {{"goal": " "}}, {scripted}}}"#)).contains("agent.goal")
        );
        assert!(
            error(&format!(
                r#"{{"agent": {{"goal": "x", "max_steps": 0}}, {scripted}}}"#
            ))
            .contains("agent.max_steps")
        );
        assert!(
            error(&format!(
                r#"{{"agent": {{"goal": "x"}}, {scripted}, "vote": 0}}"#
            ))
            .contains("vote = 0 is out of range (1 to 32)")
        );
        assert!(
            error(&format!(
                r#"{{"agent": {{"goal": "x"}}, {scripted}, "vote": 33}}"#
            ))
            .contains("vote = 33")
        );
        assert!(
            SessionConfig::from_json(&format!(
                r#"{{"agent": {{"goal": "x"}}, {scripted}, "vote": 5}}"#
            ))
            .is_ok()
        );
        assert!(
            error(&format!(
                r#"{{"agent": {{"goal": "x", "max_attempts": 4000000000}}, {scripted}}}"#
            ))
            .contains("agent.max_attempts = 4000000000 is above 32")
        );
        assert!(
            error(r#"{"agent": {"goal": "x"}, "policy": {"kind": "llama", "model": "m", "mmproj": "p", "threads": 0}}"#)
                .contains("policy.threads is 0, and must be 1 to 512")
        );
        // ggml throws past 512 threads, which aborts the app's process.
        for threads in [513u64, 4_294_967_295] {
            assert!(
                error(&format!(
                    r#"{{"agent": {{"goal": "x"}}, "policy": {{"kind": "llama", "model": "m", "mmproj": "p", "threads": {threads}}}}}"#
                ))
                .contains(&format!("policy.threads is {threads}, and must be 1 to 512"))
            );
        }
        assert!(
            error(&format!(
                r#"{{"agent": {{"goal": "x", "max_pixel": 5}}, {scripted}}}"#
            ))
            .contains("max_pixel")
        );
        assert!(error(r#"{"agent": {"goal": "x"}, "policy": {"kind": "gpt"}}"#).contains("gpt"));
        assert!(
            error(r#"{"agent": {"goal": "x"}, "policy": {"kind": "llama", "model": "m", "mmproj": "p", "backend": "metal"}}"#)
                .contains("metal")
        );
    }

    #[test]
    fn a_resume_request_is_the_policy_alone() {
        let config = ResumeConfig::from_json(
            r#"{"policy": {"kind": "llama", "model": "/m.gguf", "mmproj": "/p.gguf"}}"#,
        )
        .unwrap();
        assert!(matches!(
            config.policy,
            PolicyConfig::Llama {
                threads: 4,
                backend: Backend::Cpu,
                ..
            }
        ));
        let error = |json: &str| ResumeConfig::from_json(json).unwrap_err().to_string();
        // The episode's own settings apply; a request naming others is
        // refused rather than ignored.
        assert!(
            error(r#"{"agent": {"goal": "x"}, "policy": {"kind": "scripted", "answers": []}}"#)
                .contains("unknown field `agent`")
        );
        assert!(
            error(r#"{"policy": {"kind": "scripted", "answers": []}, "vote": 3}"#)
                .contains("unknown field `vote`")
        );
        assert!(error("{}").contains("missing field `policy`"));
        assert!(
            error(r#"{"policy": {"kind": "llama", "model": "m", "mmproj": "p", "threads": 0}}"#)
                .contains("policy.threads is 0, and must be 1 to 512")
        );
        assert!(
            error(
                r#"{"policy": {"kind": "llama", "model": "m", "mmproj": "p", "backend": "metal"}}"#
            )
            .contains("metal")
        );
    }
}
