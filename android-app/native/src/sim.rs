//! Host test support (feature `host-sim`, never in the APK): the virtual
//! phone behind `com.btl.agent.host.SimPhone`, so the JVM test's Java
//! device is backed by the same phone `btl run` uses; the episodes are
//! driven by agent-core's `OraclePolicy`, which answers in BTL text what the
//! task's oracle would do on the screen it is shown.
//!
//! The test's episode therefore crosses the JNI boundary both ways at every
//! step: agent-core calls the Java device, whose methods call back into this
//! module's phone.

use crate::session::BridgeError;
use agent_core::device::sim::SimDevice;
use agent_core::device::ui::to_uiautomator_xml;
use agent_core::device::{Device, DeviceAction};
use agent_core::protocol::DevicePoint;
use agent_core::sim::phone::PhoneConfig;
use agent_core::sim::tasks::{self, Task};
use agent_core::sim::virtual_phone::VirtualPhone;
use jni::EnvUnowned;
use jni::objects::{JByteArray, JClass, JString};
use jni::sys::{jboolean, jint, jlong};
use std::sync::Arc;

/// A virtual phone and the task set up on it.
struct SimPhone {
    device: SimDevice,
    task: Option<Box<dyn Task>>,
}

/// # Safety
/// `handle` comes from `nativeOpen` and has not been closed (the Java
/// `SimPhone` guarantees it).
unsafe fn phone<'a>(handle: jlong) -> Result<&'a mut SimPhone, BridgeError> {
    if handle == 0 {
        return Err(BridgeError::Usage("the phone handle is null".into()));
    }
    // SAFETY: per the contract above; the test harness calls a phone from
    // one thread at a time.
    Ok(unsafe { &mut *(handle as *mut SimPhone) })
}

fn perform(handle: jlong, action: DeviceAction) -> Result<(), BridgeError> {
    // SAFETY: the handle is live (see `phone`).
    let phone = unsafe { phone(handle) }?;
    phone
        .device
        .perform(&action)
        .map_err(|e| BridgeError::Usage(e.to_string()))
}

fn point(x: jint, y: jint) -> Result<DevicePoint, BridgeError> {
    match (u32::try_from(x), u32::try_from(y)) {
        (Ok(x), Ok(y)) => Ok(DevicePoint { x, y }),
        _ => Err(BridgeError::Usage(format!("({x}, {y}) is off the screen"))),
    }
}

fn millis(ms: jint) -> Result<u32, BridgeError> {
    u32::try_from(ms).map_err(|_| BridgeError::Usage(format!("{ms} ms is negative")))
}

use crate::ThrowAgentException as Throw;

#[unsafe(no_mangle)]
pub extern "system" fn Java_com_btl_agent_host_SimPhone_nativeOpen<'local>(
    mut env: EnvUnowned<'local>,
    _class: JClass<'local>,
    task: JString<'local>,
    seed: jlong,
) -> jlong {
    env.with_env(|env| -> Result<jlong, BridgeError> {
        let name = task.try_to_string(env)?;
        // Java has no unsigned long: the seed is the same 64 bits.
        let seed = u64::from_ne_bytes(seed.to_ne_bytes());
        let phone = Arc::new(VirtualPhone::new(PhoneConfig {
            seed,
            ..PhoneConfig::default()
        }));
        let task = if name.is_empty() {
            None
        } else {
            let task = tasks::sample(&name, seed)
                .ok_or_else(|| BridgeError::Usage(format!("no task named '{name}'")))?;
            phone.with_phone(|p| task.setup(p));
            Some(task)
        };
        let phone = SimPhone {
            device: SimDevice::new(phone),
            task,
        };
        Ok(Box::into_raw(Box::new(phone)) as jlong)
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_com_btl_agent_host_SimPhone_nativeClose<'local>(
    mut env: EnvUnowned<'local>,
    _class: JClass<'local>,
    handle: jlong,
) {
    env.with_env(|_| -> Result<(), BridgeError> {
        if handle != 0 {
            // SAFETY: from `Box::into_raw` in nativeOpen, closed once.
            drop(unsafe { Box::from_raw(handle as *mut SimPhone) });
        }
        Ok(())
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_com_btl_agent_host_SimPhone_nativeSize<'local>(
    mut env: EnvUnowned<'local>,
    _class: JClass<'local>,
    handle: jlong,
    vertical: jboolean,
) -> jint {
    env.with_env(|_| -> Result<jint, BridgeError> {
        // SAFETY: the handle is live (see `phone`).
        let size = unsafe { phone(handle) }?
            .device
            .screen_size()
            .map_err(|e| BridgeError::Usage(e.to_string()))?;
        let side = if vertical { size.height } else { size.width };
        Ok(jint::try_from(side).unwrap_or(jint::MAX))
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_com_btl_agent_host_SimPhone_nativeScreenshot<'local>(
    mut env: EnvUnowned<'local>,
    _class: JClass<'local>,
    handle: jlong,
) -> JByteArray<'local> {
    env.with_env(|env| -> Result<JByteArray<'local>, BridgeError> {
        // SAFETY: the handle is live (see `phone`).
        let image = unsafe { phone(handle) }?
            .device
            .screenshot()
            .map_err(|e| BridgeError::Usage(e.to_string()))?;
        Ok(env.byte_array_from_slice(image.as_raw())?)
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_com_btl_agent_host_SimPhone_nativeUiXml<'local>(
    mut env: EnvUnowned<'local>,
    _class: JClass<'local>,
    handle: jlong,
) -> JString<'local> {
    env.with_env(|env| -> Result<JString<'local>, BridgeError> {
        // SAFETY: the handle is live (see `phone`).
        let tree = unsafe { phone(handle) }?
            .device
            .ui_tree()
            .map_err(|e| BridgeError::Usage(e.to_string()))?
            .ok_or_else(|| BridgeError::Usage("the virtual phone has no UI tree".into()))?;
        Ok(JString::from_str(env, to_uiautomator_xml(&tree))?)
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_com_btl_agent_host_SimPhone_nativeTap<'local>(
    mut env: EnvUnowned<'local>,
    _class: JClass<'local>,
    handle: jlong,
    x: jint,
    y: jint,
    hold_ms: jint,
) {
    env.with_env(|_| -> Result<(), BridgeError> {
        let at = point(x, y)?;
        // The virtual phone has one long-press length; any hold above a
        // tap's is a long press, as on Android.
        let action = if millis(hold_ms)? >= 500 {
            DeviceAction::LongPress { at }
        } else {
            DeviceAction::Tap { at }
        };
        perform(handle, action)
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_com_btl_agent_host_SimPhone_nativeSwipe<'local>(
    mut env: EnvUnowned<'local>,
    _class: JClass<'local>,
    handle: jlong,
    points: jni::objects::JIntArray<'local>,
    duration_ms: jint,
) {
    env.with_env(|env| -> Result<(), BridgeError> {
        let mut xy = [0; 4];
        points.get_region(env, 0, &mut xy)?;
        let action = DeviceAction::Swipe {
            from: point(xy[0], xy[1])?,
            to: point(xy[2], xy[3])?,
            duration_ms: millis(duration_ms)?,
        };
        perform(handle, action)
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_com_btl_agent_host_SimPhone_nativeType<'local>(
    mut env: EnvUnowned<'local>,
    _class: JClass<'local>,
    handle: jlong,
    text: JString<'local>,
) {
    env.with_env(|env| -> Result<(), BridgeError> {
        let text = text.try_to_string(env)?;
        perform(handle, DeviceAction::Type { text })
    })
    .resolve::<Throw>()
}

/// `key` is 0 for Back, 1 for Home, 2 for waiting `ms` milliseconds.
#[unsafe(no_mangle)]
pub extern "system" fn Java_com_btl_agent_host_SimPhone_nativeKey<'local>(
    mut env: EnvUnowned<'local>,
    _class: JClass<'local>,
    handle: jlong,
    key: jint,
    ms: jint,
) {
    env.with_env(|_| -> Result<(), BridgeError> {
        let action = match key {
            0 => DeviceAction::Back,
            1 => DeviceAction::Home,
            2 => DeviceAction::Wait { ms: millis(ms)? },
            other => return Err(BridgeError::Usage(format!("unknown key {other}"))),
        };
        perform(handle, action)
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_com_btl_agent_host_SimPhone_nativeTaskSucceeded<'local>(
    mut env: EnvUnowned<'local>,
    _class: JClass<'local>,
    handle: jlong,
) -> jboolean {
    env.with_env(|_| -> Result<jboolean, BridgeError> {
        // SAFETY: the handle is live (see `phone`).
        let phone = unsafe { phone(handle) }?;
        let task = phone
            .task
            .as_ref()
            .ok_or_else(|| BridgeError::Usage("this phone was opened without a task".into()))?;
        Ok(phone
            .device
            .phone()
            .with_phone(|p| task.is_successful(p.state())))
    })
    .resolve::<Throw>()
}

/// Panics on purpose, with `message`: the test's proof that a panic
/// reaches Java as an exception instead of aborting the JVM.
#[unsafe(no_mangle)]
pub extern "system" fn Java_com_btl_agent_host_SimPhone_nativePanic<'local>(
    mut env: EnvUnowned<'local>,
    _class: JClass<'local>,
    message: JString<'local>,
) {
    env.with_env(|env| -> Result<(), BridgeError> {
        let message = message.try_to_string(env)?;
        panic!("{message}");
    })
    .resolve::<Throw>()
}
