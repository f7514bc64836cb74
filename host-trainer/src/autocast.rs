//! Mixed precision: libtorch's autocast with a chosen lower-precision dtype.
//!
//! Inside [`autocast`], libtorch runs matrix products (linear layers,
//! attention) in the lower precision, casting their float32 inputs and
//! weights as it goes, and keeps the numerically touchy operations (softmax,
//! norms, losses) in float32 — `torch.autocast(device_type, dtype=...)`. tch
//! 0.26 only turns CUDA autocast on with libtorch's float16 default, so the
//! state is set through a small C++ shim (`csrc/autocast.cpp`, built by
//! `build.rs` against libtorch's headers).
//!
//! The state is per thread, as in PyTorch. Regions nest; the casts libtorch
//! caches for float32 leaf tensors are dropped when the outermost region
//! ends, so weights an optimizer changes are cast afresh next time.

use crate::{Error, Result};
use std::ffi::{CStr, c_char, c_int};
use tch::{Device, Kind};

unsafe extern "C" {
    fn btl_autocast_error() -> *const c_char;
    fn btl_autocast_state(device_type: c_int, enabled: *mut bool, dtype: *mut c_int) -> c_int;
    fn btl_autocast_enter(device_type: c_int, dtype: c_int) -> c_int;
    fn btl_autocast_exit(device_type: c_int, was_enabled: bool, was_dtype: c_int) -> c_int;
}

/// c10::DeviceType of the devices autocast is offered for.
fn device_type(device: Device) -> Result<c_int> {
    match device {
        Device::Cpu => Ok(0),
        Device::Cuda(_) => Ok(1),
        other => Err(Error::Input(format!(
            "autocast is offered on the CPU and CUDA, not on {other:?}"
        ))),
    }
}

/// c10::ScalarType numbers of the dtypes autocast can compute in, and of
/// float32 (a device's state may hold it).
const HALF: c_int = 5;
const FLOAT: c_int = 6;
const BFLOAT16: c_int = 15;

fn lower_precision(dtype: Kind) -> Result<c_int> {
    match dtype {
        Kind::Half => Ok(HALF),
        Kind::BFloat16 => Ok(BFLOAT16),
        other => Err(Error::Input(format!(
            "autocast computes in float16 or bfloat16, not {other:?}"
        ))),
    }
}

fn kind_of(dtype: c_int) -> Result<Kind> {
    match dtype {
        HALF => Ok(Kind::Half),
        FLOAT => Ok(Kind::Float),
        BFLOAT16 => Ok(Kind::BFloat16),
        other => Err(Error::Input(format!(
            "libtorch's autocast holds dtype number {other}, which btl-train does not use"
        ))),
    }
}

fn check(status: c_int, doing: &str) -> Result<()> {
    if status == 0 {
        return Ok(());
    }
    // SAFETY: the shim returns its thread's last message, NUL-terminated,
    // valid until its next failure on this thread.
    let why = unsafe { CStr::from_ptr(btl_autocast_error()) }.to_string_lossy();
    Err(Error::Input(format!("libtorch could not {doing}: {why}")))
}

/// Whether autocast is on for `device`'s type on this thread, and its dtype.
pub fn state(device: Device) -> Result<(bool, Kind)> {
    let (mut enabled, mut dtype) = (false, 0);
    // SAFETY: both pointers are to live locals.
    let status = unsafe { btl_autocast_state(device_type(device)?, &mut enabled, &mut dtype) };
    check(status, "read its autocast state")?;
    Ok((enabled, kind_of(dtype)?))
}

/// Runs `f` with autocast in `dtype` on `device`'s type, then restores the
/// state before it (also when `f` panics).
pub fn autocast<T>(device: Device, dtype: Kind, f: impl FnOnce() -> T) -> Result<T> {
    let device_type = device_type(device)?;
    let dtype = lower_precision(dtype)?;
    let (mut was_enabled, mut was_dtype) = (false, 0);
    // SAFETY: both pointers are to live locals.
    let status = unsafe { btl_autocast_state(device_type, &mut was_enabled, &mut was_dtype) };
    check(status, "read its autocast state")?;
    // SAFETY: plain values; the shim validates nothing that can fault.
    check(
        unsafe { btl_autocast_enter(device_type, dtype) },
        "turn autocast on",
    )?;
    let region = Region {
        device_type,
        was_enabled,
        was_dtype,
    };
    let out = f();
    region.leave()?;
    Ok(out)
}

/// An entered autocast region; leaving it restores the previous state.
struct Region {
    device_type: c_int,
    was_enabled: bool,
    was_dtype: c_int,
}

impl Region {
    fn leave(self) -> Result<()> {
        let this = std::mem::ManuallyDrop::new(self);
        this.exit()
    }

    fn exit(&self) -> Result<()> {
        // SAFETY: plain values saved from the state before the region.
        let status =
            unsafe { btl_autocast_exit(self.device_type, self.was_enabled, self.was_dtype) };
        check(status, "turn autocast off")
    }
}

impl Drop for Region {
    /// Only reached when `f` panicked: the state is still restored.
    fn drop(&mut self) {
        let _ = self.exit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrices() -> (tch::Tensor, tch::Tensor) {
        let a = tch::Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0]).reshape([2, 2]);
        (a.shallow_clone(), a.transpose(0, 1))
    }

    #[test]
    fn matrix_products_run_in_the_chosen_dtype_inside_only() {
        let (a, b) = matrices();
        for dtype in [Kind::BFloat16, Kind::Half] {
            let inside = autocast(Device::Cpu, dtype, || a.matmul(&b)).unwrap();
            assert_eq!(inside.kind(), dtype);
            // a · aᵀ = [[5, 11], [11, 25]]: exact in both dtypes.
            let expected = tch::Tensor::from_slice(&[5.0f32, 11.0, 11.0, 25.0]).reshape([2, 2]);
            assert!(inside.to_kind(Kind::Float).equal(&expected));
        }
        assert_eq!(a.matmul(&b).kind(), Kind::Float);
        // Touchy operations stay in float32 inside too.
        let soft = autocast(Device::Cpu, Kind::BFloat16, || a.log_softmax(-1, None)).unwrap();
        assert_eq!(soft.kind(), Kind::Float);
    }

    #[test]
    fn regions_nest_and_restore_the_state_before_them() {
        let before = state(Device::Cpu).unwrap();
        assert!(!before.0, "autocast is off outside regions: {before:?}");
        autocast(Device::Cpu, Kind::BFloat16, || {
            assert_eq!(state(Device::Cpu).unwrap(), (true, Kind::BFloat16));
            autocast(Device::Cpu, Kind::Half, || {
                assert_eq!(state(Device::Cpu).unwrap(), (true, Kind::Half));
            })
            .unwrap();
            assert_eq!(state(Device::Cpu).unwrap(), (true, Kind::BFloat16));
        })
        .unwrap();
        assert_eq!(state(Device::Cpu).unwrap(), before);
    }

    #[test]
    fn a_panic_inside_still_restores_the_state() {
        let before = state(Device::Cpu).unwrap();
        let caught = std::panic::catch_unwind(|| {
            autocast(Device::Cpu, Kind::BFloat16, || panic!("inside")).unwrap()
        });
        assert!(caught.is_err());
        assert_eq!(state(Device::Cpu).unwrap(), before);
    }

    #[test]
    fn other_dtypes_and_devices_are_refused_by_name() {
        let e = autocast(Device::Cpu, Kind::Float, || ()).unwrap_err();
        assert!(e.to_string().contains("not Float"), "{e}");
        let e = autocast(Device::Mps, Kind::BFloat16, || ()).unwrap_err();
        assert!(e.to_string().contains("Mps"), "{e}");
    }

    /// The CUDA state is set and read like the CPU's (no GPU is needed to
    /// hold it), independently of it.
    #[test]
    fn the_cuda_state_is_its_own() {
        let cpu = state(Device::Cpu).unwrap();
        autocast(Device::Cuda(0), Kind::BFloat16, || {
            assert_eq!(state(Device::Cuda(0)).unwrap(), (true, Kind::BFloat16));
            assert_eq!(state(Device::Cpu).unwrap(), cpu);
        })
        .unwrap();
        assert!(!state(Device::Cuda(0)).unwrap().0);
    }
}
