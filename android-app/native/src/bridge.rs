//! The Java side as agent-core sees it: one [`Device`] whose every call
//! goes to a `com.btl.agent.core.DeviceBridge` object, the [`Confirmer`]
//! and progress reports that go to an `AgentListener`, and the stop flag
//! the app's stop button sets.
//!
//! Calls come from the thread running the episode, which Java started and
//! is therefore attached; each call runs in its own JNI local frame, so an
//! episode of any length holds no local references between calls. A Java
//! exception thrown by a callback is caught and cleared here and becomes a
//! [`DeviceError`] (the episode then ends with a recorded stop reason);
//! it never stays pending across another JNI call.

use agent_core::agent::safety::{ConfirmRequest, Confirmer};
use agent_core::device::ui::{UiNode, parse_uiautomator_xml};
use agent_core::device::{Device, DeviceAction, DeviceError, LONG_PRESS_MS, check_screen};
use agent_core::model::{Observation, Policy, PolicyError, PolicyOutput};
use agent_core::protocol::Size;
use image::RgbaImage;
use jni::objects::{JByteArray, JObject, JString};
use jni::refs::Global;
use jni::{Env, JValue, JavaVM, jni_sig, jni_str};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// Why an episode that was stopped from the app reports it.
pub const STOPPED_BY_USER: &str = "the episode was stopped by the user";

/// The Java objects of one session and the state both sides share.
pub struct JavaSide {
    vm: JavaVM,
    device: Global<JObject<'static>>,
    listener: Global<JObject<'static>>,
    /// Shared with the agent, which ends the episode as cancelled.
    stopped: Arc<AtomicBool>,
    /// Actions performed so far: the step number progress reports show.
    performed: AtomicU32,
}

impl JavaSide {
    pub fn new(env: &Env, device: &JObject, listener: &JObject) -> jni::errors::Result<Self> {
        Ok(Self {
            vm: env.get_java_vm()?,
            device: env.new_global_ref(device)?,
            listener: env.new_global_ref(listener)?,
            stopped: Arc::new(AtomicBool::new(false)),
            performed: AtomicU32::new(0),
        })
    }

    /// Asks the running episode to stop before its next device action or
    /// model call; the one in flight finishes.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
    }

    /// The flag the agent watches.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stopped.clone()
    }

    /// Progress reports count on from `steps` already recorded: a resumed
    /// episode's notification shows the episode's step, not the run's.
    pub fn count_from(&self, steps: u32) {
        self.performed.store(steps, Ordering::SeqCst);
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// Runs `f` in a fresh local frame of the current thread, turning a
    /// Java exception into the text "Class: message".
    fn call<T>(
        &self,
        f: impl FnOnce(&mut Env, &JObject, &JObject) -> jni::errors::Result<T>,
    ) -> Result<T, String> {
        self.vm
            .attach_current_thread(|env| f(env, self.device.as_obj(), self.listener.as_obj()))
            .map_err(describe_jni_error)
    }

    fn progress(&self, message: &str) {
        let step = self.performed.load(Ordering::SeqCst).saturating_add(1);
        let reported = self.call(|env, _, listener| {
            let text = JString::from_str(env, message)?;
            env.call_method(
                listener,
                jni_str!("onProgress"),
                jni_sig!("(ILjava/lang/String;)V"),
                &[JValue::Int(to_jint(step)), JValue::Object(&text)],
            )?
            .v()
        });
        // Progress is cosmetic: a listener that fails must not end the
        // episode, but the failure is worth a log line.
        if let Err(error) = reported {
            log::warn!("onProgress failed: {error}");
        }
    }
}

/// The text of a JNI failure; for a Java exception, its class and message.
fn describe_jni_error(error: jni::errors::Error) -> String {
    match error {
        jni::errors::Error::CaughtJavaException { name, msg, .. } => format!("{name}: {msg}"),
        other => other.to_string(),
    }
}

fn to_jint(v: u32) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

/// The phone as the app reaches it: every call goes to the Java
/// `DeviceBridge` (the accessibility service on a phone, the virtual phone
/// in the host test).
pub struct JavaDevice {
    side: Arc<JavaSide>,
}

impl JavaDevice {
    pub fn new(side: Arc<JavaSide>) -> Self {
        Self { side }
    }

    fn checked(&self, operation: &str) -> Result<(), DeviceError> {
        if self.side.is_stopped() {
            return Err(DeviceError::Unsupported {
                action: operation.into(),
                reason: STOPPED_BY_USER.into(),
            });
        }
        Ok(())
    }

    fn call<T>(
        &self,
        operation: &str,
        f: impl FnOnce(&mut Env, &JObject) -> jni::errors::Result<T>,
    ) -> Result<T, DeviceError> {
        self.side
            .call(|env, device, _| f(env, device))
            .map_err(|reason| DeviceError::Unsupported {
                action: operation.into(),
                reason,
            })
    }
}

impl Device for JavaDevice {
    fn name(&self) -> String {
        let name = self.call("name", |env, device| {
            let name = env
                .call_method(
                    device,
                    jni_str!("name"),
                    jni_sig!("()Ljava/lang/String;"),
                    &[],
                )?
                .l()?;
            let name = env.cast_local::<JString>(name)?;
            name.try_to_string(env)
        });
        name.unwrap_or_else(|e| format!("Android device (name unavailable: {e})"))
    }

    fn screen_size(&mut self) -> Result<Size, DeviceError> {
        self.call("screen size", |env, device| {
            let width = env
                .call_method(device, jni_str!("screenWidth"), jni_sig!("()I"), &[])?
                .i()?;
            let height = env
                .call_method(device, jni_str!("screenHeight"), jni_sig!("()I"), &[])?
                .i()?;
            Ok((width, height))
        })
        .and_then(|(w, h)| match (u32::try_from(w), u32::try_from(h)) {
            (Ok(w), Ok(h)) if w > 0 && h > 0 => Ok(Size::new(w, h)),
            _ => Err(DeviceError::Protocol {
                operation: "screen size".into(),
                reason: format!("the device reports {w}x{h}"),
            }),
        })
    }

    fn screenshot(&mut self) -> Result<RgbaImage, DeviceError> {
        self.checked("screenshot")?;
        let (width, height, rgba) = self.call("screenshot", |env, device| {
            let frame = env
                .call_method(
                    device,
                    jni_str!("screenshot"),
                    jni_sig!("()Lcom/btl/agent/core/RgbaFrame;"),
                    &[],
                )?
                .l()?;
            if frame.is_null() {
                return Err(jni::errors::Error::NullPtr("screenshot() returned null"));
            }
            let width = env
                .get_field(&frame, jni_str!("width"), jni_sig!("I"))?
                .i()?;
            let height = env
                .get_field(&frame, jni_str!("height"), jni_sig!("I"))?
                .i()?;
            let pixels = env
                .get_field(&frame, jni_str!("rgba"), jni_sig!("[B"))?
                .l()?;
            let pixels = env.cast_local::<JByteArray>(pixels)?;
            Ok((width, height, env.convert_byte_array(&pixels)?))
        })?;
        rgba_image(width, height, rgba)
    }

    fn ui_tree(&mut self) -> Result<Option<UiNode>, DeviceError> {
        let xml = self.call("UI tree", |env, device| {
            let xml = env
                .call_method(
                    device,
                    jni_str!("uiTreeXml"),
                    jni_sig!("()Ljava/lang/String;"),
                    &[],
                )?
                .l()?;
            if xml.is_null() {
                return Ok(None);
            }
            let xml = env.cast_local::<JString>(xml)?;
            xml.try_to_string(env).map(Some)
        })?;
        xml.map(|xml| {
            parse_uiautomator_xml(&xml).map_err(|e| DeviceError::Protocol {
                operation: "UI tree".into(),
                reason: e.to_string(),
            })
        })
        .transpose()
    }

    fn perform(&mut self, action: &DeviceAction) -> Result<(), DeviceError> {
        let operation = match action {
            DeviceAction::Tap { .. } => "tap",
            DeviceAction::LongPress { .. } => "long press",
            DeviceAction::Swipe { .. } => "swipe",
            DeviceAction::Type { .. } => "type",
            DeviceAction::Back => "back",
            DeviceAction::Home => "home",
            DeviceAction::Wait { .. } => "wait",
        };
        self.checked(operation)?;
        self.side.progress(&describe(action));
        self.call(operation, |env, device| {
            let int = |v: u32| JValue::Int(to_jint(v));
            match action {
                DeviceAction::Tap { at } => env.call_method(
                    device,
                    jni_str!("tap"),
                    jni_sig!("(II)V"),
                    &[int(at.x), int(at.y)],
                ),
                DeviceAction::LongPress { at } => env.call_method(
                    device,
                    jni_str!("longPress"),
                    jni_sig!("(III)V"),
                    &[int(at.x), int(at.y), int(LONG_PRESS_MS)],
                ),
                DeviceAction::Swipe {
                    from,
                    to,
                    duration_ms,
                } => env.call_method(
                    device,
                    jni_str!("swipe"),
                    jni_sig!("(IIIII)V"),
                    &[
                        int(from.x),
                        int(from.y),
                        int(to.x),
                        int(to.y),
                        int(*duration_ms),
                    ],
                ),
                DeviceAction::Type { text } => {
                    let text = JString::from_str(env, text)?;
                    env.call_method(
                        device,
                        jni_str!("typeText"),
                        jni_sig!("(Ljava/lang/String;)V"),
                        &[JValue::Object(&text)],
                    )
                }
                DeviceAction::Back => {
                    env.call_method(device, jni_str!("back"), jni_sig!("()V"), &[])
                }
                DeviceAction::Home => {
                    env.call_method(device, jni_str!("home"), jni_sig!("()V"), &[])
                }
                DeviceAction::Wait { ms } => {
                    env.call_method(device, jni_str!("waitMs"), jni_sig!("(I)V"), &[int(*ms)])
                }
            }?
            .v()
        })?;
        self.side.performed.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// A `w`x`h` RGBA image from the bytes Java sent, checked for size: exactly
/// four bytes a pixel, since a longer buffer (rows padded to a stride)
/// would make an image whose PNG encoding panics when the step is written.
fn rgba_image(width: i32, height: i32, rgba: Vec<u8>) -> Result<RgbaImage, DeviceError> {
    let bad = |reason: String| DeviceError::Protocol {
        operation: "screenshot".into(),
        reason,
    };
    let (w, h) = match (u32::try_from(width), u32::try_from(height)) {
        (Ok(w), Ok(h)) if w > 0 && h > 0 => (w, h),
        _ => return Err(bad(format!("the frame is {width}x{height}"))),
    };
    check_screen("screenshot", w, h)?;
    let needed = u64::from(w) * u64::from(h) * 4;
    let len = rgba.len();
    match RgbaImage::from_raw(w, h, rgba) {
        Some(image) if len as u64 == needed => Ok(image),
        _ => Err(bad(format!(
            "a {w}x{h} frame needs {needed} RGBA bytes, got {len}"
        ))),
    }
}

/// The action as the progress notification shows it.
fn describe(action: &DeviceAction) -> String {
    match action {
        DeviceAction::Tap { at } => format!("Tap ({}, {})", at.x, at.y),
        DeviceAction::LongPress { at } => format!("LongPress ({}, {})", at.x, at.y),
        DeviceAction::Swipe { from, to, .. } => {
            format!("Swipe ({}, {}) → ({}, {})", from.x, from.y, to.x, to.y)
        }
        DeviceAction::Type { text } => format!("Type \"{text}\""),
        DeviceAction::Back => "Back".into(),
        DeviceAction::Home => "Home".into(),
        DeviceAction::Wait { ms } => format!("Wait {ms} ms"),
    }
}

/// Asks the app whether a sensitive action may run (the safety gate's
/// `ask`); the app shows a dialog or a notification and blocks until the
/// user answers. Anything but a clear yes declines.
pub struct JavaConfirmer {
    side: Arc<JavaSide>,
}

impl JavaConfirmer {
    pub fn new(side: Arc<JavaSide>) -> Self {
        Self { side }
    }
}

impl Confirmer for JavaConfirmer {
    fn confirm(&mut self, request: &ConfirmRequest) -> bool {
        if self.side.is_stopped() {
            return false;
        }
        let action = serde_json::to_string(request.action).unwrap_or_default();
        let answer = self.side.call(|env, _, listener| {
            let goal = JString::from_str(env, request.goal)?;
            let plan = JString::from_str(env, request.plan)?;
            let action = JString::from_str(env, &action)?;
            let pattern = JString::from_str(env, &request.sensitive.pattern)?;
            let text = JString::from_str(env, &request.sensitive.text)?;
            env.call_method(
                listener,
                jni_str!("confirmSensitive"),
                jni_sig!(
                    "(Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;)Z"
                ),
                &[
                    JValue::Object(&goal),
                    JValue::Object(&plan),
                    JValue::Object(&action),
                    JValue::Object(&pattern),
                    JValue::Object(&text),
                ],
            )?
            .z()
        });
        answer.unwrap_or_else(|error| {
            log::warn!("confirmSensitive failed, declining: {error}");
            false
        })
    }
}

/// Wraps the model: reports "thinking" progress and refuses to start a new
/// answer once the episode was stopped.
pub struct StoppablePolicy {
    inner: Box<dyn Policy>,
    side: Arc<JavaSide>,
}

impl StoppablePolicy {
    pub fn new(inner: Box<dyn Policy>, side: Arc<JavaSide>) -> Self {
        Self { inner, side }
    }
}

impl Policy for StoppablePolicy {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn fingerprint(&self) -> Option<String> {
        self.inner.fingerprint()
    }

    fn settings(&self) -> agent_core::model::ModelSettings {
        self.inner.settings()
    }

    fn decoding(&self) -> Option<agent_core::model::Decoding> {
        self.inner.decoding()
    }

    fn act(&mut self, obs: &Observation) -> Result<PolicyOutput, PolicyError> {
        if self.side.is_stopped() {
            return Err(PolicyError::Backend(STOPPED_BY_USER.into()));
        }
        self.side.progress("thinking");
        self.inner.act(obs)
    }

    fn act_many(
        &mut self,
        obs: &Observation,
        seeds: &[u64],
    ) -> Result<Vec<PolicyOutput>, PolicyError> {
        if self.side.is_stopped() {
            return Err(PolicyError::Backend(STOPPED_BY_USER.into()));
        }
        self.side.progress("thinking");
        self.inner.act_many(obs, seeds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_core::protocol::DevicePoint;

    #[test]
    fn frames_of_the_wrong_size_are_refused() {
        assert_eq!(
            rgba_image(2, 1, vec![1, 2, 3, 4, 5, 6, 7, 8])
                .unwrap()
                .get_pixel(1, 0)
                .0,
            [5, 6, 7, 8]
        );
        let short = rgba_image(2, 2, vec![0; 15]).unwrap_err().to_string();
        assert!(short.contains("needs 16 RGBA bytes, got 15"), "{short}");
        let padded = rgba_image(2, 2, vec![0; 20]).unwrap_err().to_string();
        assert!(padded.contains("needs 16 RGBA bytes, got 20"), "{padded}");
        let huge = rgba_image(100_000, 100_000, vec![])
            .unwrap_err()
            .to_string();
        assert!(huge.contains("100000x100000 is past"), "{huge}");
        let empty = rgba_image(0, 5, vec![]).unwrap_err().to_string();
        assert!(empty.contains("0x5"), "{empty}");
        assert!(rgba_image(-1, 5, vec![]).is_err());
    }

    #[test]
    fn progress_texts_name_the_action() {
        let at = DevicePoint { x: 540, y: 1200 };
        assert_eq!(describe(&DeviceAction::Tap { at }), "Tap (540, 1200)");
        assert_eq!(
            describe(&DeviceAction::Type {
                text: "héllo".into()
            }),
            "Type \"héllo\""
        );
        assert_eq!(describe(&DeviceAction::Wait { ms: 1000 }), "Wait 1000 ms");
    }
}
