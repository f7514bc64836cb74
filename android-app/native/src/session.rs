//! One episode as the app holds it: created from a JSON request and the
//! Java device and listener (or resumed from its trajectory), run once on a
//! worker thread, stoppable from any thread, then freed.

use crate::bridge::{JavaConfirmer, JavaDevice, JavaSide, StoppablePolicy};
use crate::config::{Backend, PolicyConfig, ResumeConfig, SessionConfig};
use agent_core::agent::{Agent, AgentConfig, AgentError};
use agent_core::model::spec::{ALL_LAYERS, GPU_BACKEND};
use agent_core::model::{LlamaConfig, Policy, PolicySpec};
use jni::Env;
use jni::objects::JObject;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use thiserror::Error;

/// Why a native call failed; it reaches Java as an `AgentException`.
#[derive(Debug, Error)]
pub enum BridgeError {
    #[error("JNI call failed: {0}")]
    Jni(#[from] jni::errors::Error),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("cannot load the policy: {0}")]
    Policy(String),
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// The Java side broke the calling contract (null argument, second run).
    #[error("{0}")]
    Usage(String),
}

/// An episode and the Java objects it talks to.
pub struct Session {
    side: Arc<JavaSide>,
    /// Taken by the one run; `None` afterwards.
    agent: Mutex<Option<Agent>>,
    dir: PathBuf,
}

impl Session {
    /// Loads the policy and starts the trajectory in `dir` (which must not
    /// hold an episode yet); reads the screen size through the device.
    pub fn create(
        env: &mut Env,
        config_json: &str,
        dir: &Path,
        device: &JObject,
        listener: &JObject,
    ) -> Result<Self, BridgeError> {
        let side = java_side(env, "create", device, listener)?;
        let config = SessionConfig::from_json(config_json)?;
        let policy = StoppablePolicy::new(load_policy(&config.policy)?, side.clone());
        let agent_config = AgentConfig {
            vote: config.vote,
            ..config.agent
        };
        let agent = Agent::new(
            dir,
            agent_config,
            Box::new(JavaDevice::new(side.clone())),
            Box::new(policy),
        )?;
        Ok(Self::holding(agent, side, dir))
    }

    /// Goes on with the episode in `dir` that ended without an outcome (the
    /// app's process was killed) or on a device failure (the accessibility
    /// service went away): agent-core's [`Agent::resume`], with the policy
    /// the request names, which must be the one that recorded it.
    pub fn resume(
        env: &mut Env,
        request_json: &str,
        dir: &Path,
        device: &JObject,
        listener: &JObject,
    ) -> Result<Self, BridgeError> {
        let side = java_side(env, "resume", device, listener)?;
        let request = ResumeConfig::from_json(request_json)?;
        let policy = StoppablePolicy::new(load_policy(&request.policy)?, side.clone());
        let agent = Agent::resume(
            dir,
            Box::new(JavaDevice::new(side.clone())),
            Box::new(policy),
        )?;
        Ok(Self::holding(agent, side, dir))
    }

    fn holding(agent: Agent, side: Arc<JavaSide>, dir: &Path) -> Self {
        side.count_from(agent.steps());
        let agent = agent
            .with_confirmer(JavaConfirmer::new(side.clone()))
            .with_cancel(side.stop_flag());
        Self {
            side,
            agent: Mutex::new(Some(agent)),
            dir: dir.to_path_buf(),
        }
    }

    /// Runs the episode to its end; returns `{"trajectory": DIR, "outcome":
    /// {...}}` with the outcome as `episode.json` records it.
    pub fn run(&self) -> Result<String, BridgeError> {
        let agent = self
            .agent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .ok_or_else(|| BridgeError::Usage("this episode has already run".into()))?;
        let outcome = agent.run()?;
        Ok(serde_json::json!({"trajectory": self.dir, "outcome": outcome}).to_string())
    }

    pub fn stop(&self) {
        self.side.stop();
    }
}

/// The Java side of an episode; `call` names the `NativeAgent` method in
/// the refusal of a null argument.
fn java_side(
    env: &mut Env,
    call: &str,
    device: &JObject,
    listener: &JObject,
) -> Result<Arc<JavaSide>, BridgeError> {
    if device.is_null() || listener.is_null() {
        return Err(BridgeError::Usage(format!(
            "NativeAgent.{call} needs a device and a listener, got null"
        )));
    }
    Ok(Arc::new(JavaSide::new(env, device, listener)?))
}

/// The policy a request names, if this build has it.
fn load_policy(config: &PolicyConfig) -> Result<Box<dyn Policy>, BridgeError> {
    let spec = match config {
        PolicyConfig::Scripted { answers } => PolicySpec::Scripted(answers.clone()),
        PolicyConfig::Llama {
            model,
            mmproj,
            threads,
            backend,
        } => {
            if *backend == Backend::Vulkan && !GPU_BACKEND {
                return Err(BridgeError::Policy(
                    "backend vulkan: this libbtl_android was built without the vulkan feature"
                        .into(),
                ));
            }
            let mut llama = LlamaConfig::new(model, mmproj);
            llama.threads = i32::try_from(*threads).unwrap_or(i32::MAX);
            // A Vulkan build runs on the CPU too when asked: nothing is offloaded.
            llama.gpu_layers = match backend {
                Backend::Cpu => 0,
                Backend::Vulkan => ALL_LAYERS,
            };
            PolicySpec::Llama(llama)
        }
        PolicyConfig::Oracle { task, seed } => PolicySpec::Oracle {
            task: task.clone(),
            seed: *seed,
        },
    };
    spec.load().map_err(|e| BridgeError::Policy(e.to_string()))
}
