//! JNI bridge between the btl Android app and agent-core: the app's
//! `com.btl.agent.core.NativeAgent` creates an episode, runs it on a worker
//! thread, stops it from the UI and frees it; agent-core's own agent loop
//! does the rest, reaching the phone through the Java `DeviceBridge`.
//!
//! # The Java surface
//! `NativeAgent` (static natives, one `long` handle per episode):
//! - `nativeCreate(String configJson, String trajectoryDir, DeviceBridge,
//!   AgentListener) -> long`: see [`config::SessionConfig`];
//! - `nativeResume(String requestJson, String trajectoryDir, DeviceBridge,
//!   AgentListener) -> long`: an interrupted episode, see
//!   [`config::ResumeConfig`] and [`Session::resume`];
//! - `nativeRun(long) -> String`: blocks until the episode ends; the JSON
//!   outcome as `episode.json` records it;
//! - `nativeCancel(long)`: from any thread, while `nativeRun` runs;
//! - `nativeFree(long)`.
//!
//! The Java class owns the handle and serialises these calls: `nativeFree`
//! never runs while `nativeRun` or `nativeCancel` does, nor twice.
//!
//! # Errors and panics
//! Every entry point runs inside `EnvUnowned::with_env`, which catches
//! panics; errors and panics alike become a
//! `com.btl.agent.core.AgentException` thrown into Java. Nothing unwinds
//! into the JVM.
//!
//! # Layout
//! - [`config`]: the JSON request. Pure.
//! - [`bridge`]: the Java device, confirmer, progress and stop flag.
//! - [`session`]: an episode from request to outcome.
//! - `sim` (feature `host-sim`): the virtual phone and task oracles through
//!   JNI, for the host JVM test only.

pub mod bridge;
pub mod config;
pub mod session;
#[cfg(feature = "host-sim")]
pub mod sim;

use jni::errors::ErrorPolicy;
use jni::objects::{JClass, JObject, JString};
use jni::sys::jlong;
use jni::{Env, EnvUnowned, jni_str};
use session::{BridgeError, Session};
use std::any::Any;
use std::path::PathBuf;

/// Throws `com.btl.agent.core.AgentException` for an error or a panic,
/// unless a Java exception is already pending (it then wins), and returns
/// the type's default to the JVM.
pub struct ThrowAgentException;

const AGENT_EXCEPTION: &jni::strings::JNIStr = jni_str!("com/btl/agent/core/AgentException");

impl<T: Default, E: std::error::Error> ErrorPolicy<T, E> for ThrowAgentException {
    type Captures<'unowned_env_local: 'native_method, 'native_method> = ();

    fn on_error<'unowned_env_local: 'native_method, 'native_method>(
        env: &mut Env<'unowned_env_local>,
        _: &mut Self::Captures<'unowned_env_local, 'native_method>,
        error: E,
    ) -> jni::errors::Result<T> {
        throw(env, &error_chain(&error))
    }

    fn on_panic<'unowned_env_local: 'native_method, 'native_method>(
        env: &mut Env<'unowned_env_local>,
        _: &mut Self::Captures<'unowned_env_local, 'native_method>,
        payload: Box<dyn Any + Send + 'static>,
    ) -> jni::errors::Result<T> {
        throw(
            env,
            &format!("internal error (Rust panic): {}", panic_message(&*payload)),
        )
    }
}

fn throw<T: Default>(env: &mut Env, message: &str) -> jni::errors::Result<T> {
    if !env.exception_check() {
        let message = jni::strings::JNIString::new(message);
        // `throw_new` reports the exception it raised as an error; raising
        // it is the point, so only a failure to raise it counts.
        match env.throw_new(AGENT_EXCEPTION, &message) {
            Ok(()) | Err(jni::errors::Error::JavaException) => {}
            Err(other) => return Err(other),
        }
    }
    Ok(T::default())
}

/// An error and its causes, outermost first.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        // thiserror's `transparent` and `{0}` variants repeat their source.
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

fn panic_message(payload: &(dyn Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message")
}

fn init_logging() {
    #[cfg(target_os = "android")]
    android_logger::init_once(
        android_logger::Config::default()
            .with_max_level(log::LevelFilter::Info)
            .with_tag("btl"),
    );
}

/// The session behind a handle `nativeCreate` returned.
///
/// # Safety
/// `handle` must come from `nativeCreate` and not have been freed; the Java
/// `NativeAgent` guarantees both.
unsafe fn session<'a>(handle: jlong) -> Result<&'a Session, BridgeError> {
    if handle == 0 {
        return Err(BridgeError::Usage("the episode handle is null".into()));
    }
    // SAFETY: per the contract above, `handle` is a live `Box<Session>`.
    Ok(unsafe { &*(handle as *const Session) })
}

/// What `nativeCreate` and `nativeResume` are given, as Rust values; `call`
/// names the Java method in the refusal of a null argument.
fn request_and_dir(
    env: &mut Env,
    call: &str,
    request: &JString,
    dir: &JString,
) -> Result<(String, PathBuf), BridgeError> {
    init_logging();
    if request.is_null() || dir.is_null() {
        return Err(BridgeError::Usage(format!(
            "NativeAgent.{call} needs a request and a trajectory directory, got null"
        )));
    }
    Ok((request.try_to_string(env)?, dir.try_to_string(env)?.into()))
}

/// The handle Java keeps for `session` until `nativeFree`.
fn into_handle(session: Session) -> jlong {
    Box::into_raw(Box::new(session)) as jlong
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_com_btl_agent_core_NativeAgent_nativeCreate<'local>(
    mut env: EnvUnowned<'local>,
    _class: JClass<'local>,
    config: JString<'local>,
    trajectory_dir: JString<'local>,
    device: JObject<'local>,
    listener: JObject<'local>,
) -> jlong {
    env.with_env(|env| -> Result<jlong, BridgeError> {
        let (config, dir) = request_and_dir(env, "create", &config, &trajectory_dir)?;
        Session::create(env, &config, &dir, &device, &listener).map(into_handle)
    })
    .resolve::<ThrowAgentException>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_com_btl_agent_core_NativeAgent_nativeResume<'local>(
    mut env: EnvUnowned<'local>,
    _class: JClass<'local>,
    request: JString<'local>,
    trajectory_dir: JString<'local>,
    device: JObject<'local>,
    listener: JObject<'local>,
) -> jlong {
    env.with_env(|env| -> Result<jlong, BridgeError> {
        let (request, dir) = request_and_dir(env, "resume", &request, &trajectory_dir)?;
        Session::resume(env, &request, &dir, &device, &listener).map(into_handle)
    })
    .resolve::<ThrowAgentException>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_com_btl_agent_core_NativeAgent_nativeRun<'local>(
    mut env: EnvUnowned<'local>,
    _class: JClass<'local>,
    handle: jlong,
) -> JString<'local> {
    env.with_env(|env| -> Result<JString<'local>, BridgeError> {
        // SAFETY: the handle is live (see `session`).
        let outcome = unsafe { session(handle) }?.run()?;
        Ok(JString::from_str(env, outcome)?)
    })
    .resolve::<ThrowAgentException>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_com_btl_agent_core_NativeAgent_nativeCancel<'local>(
    mut env: EnvUnowned<'local>,
    _class: JClass<'local>,
    handle: jlong,
) {
    env.with_env(|_| -> Result<(), BridgeError> {
        // SAFETY: the handle is live (see `session`).
        unsafe { session(handle) }?.stop();
        Ok(())
    })
    .resolve::<ThrowAgentException>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_com_btl_agent_core_NativeAgent_nativeFree<'local>(
    mut env: EnvUnowned<'local>,
    _class: JClass<'local>,
    handle: jlong,
) {
    env.with_env(|_| -> Result<(), BridgeError> {
        if handle != 0 {
            // SAFETY: the handle came from `Box::into_raw` in nativeCreate
            // and Java frees it once.
            drop(unsafe { Box::from_raw(handle as *mut Session) });
        }
        Ok(())
    })
    .resolve::<ThrowAgentException>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn error_chains_list_causes_once() {
        let error = Outer(std::io::Error::other("disk full"));
        assert_eq!(error_chain(&error), "outer: disk full");
        let config = BridgeError::Config(crate::config::ConfigError::Invalid("vote".into()));
        assert_eq!(error_chain(&config), "invalid session config: vote");
    }

    #[test]
    fn panic_messages_of_both_payload_kinds() {
        let text: Box<dyn Any + Send> = Box::new("static");
        assert_eq!(panic_message(&*text), "static");
        let owned: Box<dyn Any + Send> = Box::new(String::from("formatted 7"));
        assert_eq!(panic_message(&*owned), "formatted 7");
        let other: Box<dyn Any + Send> = Box::new(7u8);
        assert_eq!(panic_message(&*other), "a panic without a message");
    }
}
