//! [`SimDevice`]: the virtual phone in-process, without ADB in between.
//! Same phone, same behaviour as over ADB, a thousand times less latency:
//! the fast path for tests, benchmarks and data collection.

use super::{Device, DeviceAction, DeviceError};
use crate::device::ui::UiNode;
use crate::protocol::Size;
use crate::sim::virtual_phone::VirtualPhone;
use image::RgbaImage;
use std::sync::Arc;

pub struct SimDevice {
    phone: Arc<VirtualPhone>,
}

impl SimDevice {
    /// What trajectories record as this device's name.
    pub const NAME: &str = "virtual phone (in-process)";

    pub fn new(phone: Arc<VirtualPhone>) -> Self {
        Self { phone }
    }

    pub fn phone(&self) -> &Arc<VirtualPhone> {
        &self.phone
    }
}

impl Device for SimDevice {
    fn name(&self) -> String {
        Self::NAME.into()
    }

    fn screen_size(&mut self) -> Result<Size, DeviceError> {
        let (w, h) = self.phone.with_phone(|p| p.size());
        Ok(Size::new(w, h))
    }

    fn screenshot(&mut self) -> Result<RgbaImage, DeviceError> {
        Ok(self.phone.with_phone(|p| p.render()))
    }

    fn ui_tree(&mut self) -> Result<Option<UiNode>, DeviceError> {
        Ok(Some(self.phone.with_phone(|p| p.ui_tree())))
    }

    fn perform(&mut self, action: &DeviceAction) -> Result<(), DeviceError> {
        let signed = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
        self.phone.with_phone(|p| match action {
            DeviceAction::Tap { at } => p.tap(signed(at.x), signed(at.y)),
            DeviceAction::LongPress { at } => p.long_press(signed(at.x), signed(at.y)),
            DeviceAction::Swipe {
                from,
                to,
                duration_ms,
            } => p.swipe(
                signed(from.x),
                signed(from.y),
                signed(to.x),
                signed(to.y),
                *duration_ms,
            ),
            DeviceAction::Type { text } => p.input_text(text),
            DeviceAction::Back => p.key(crate::sim::phone::Key::Back),
            DeviceAction::Home => p.key(crate::sim::phone::Key::Home),
            DeviceAction::Wait { ms } => p.advance_ms(u64::from(*ms)),
        });
        Ok(())
    }

    fn setting(&mut self, namespace: &str, key: &str) -> Result<Option<String>, DeviceError> {
        Ok(self.phone.with_phone(|p| p.settings_get(namespace, key)))
    }

    fn put_setting(&mut self, namespace: &str, key: &str, value: &str) -> Result<(), DeviceError> {
        self.phone
            .with_phone(|p| p.settings_put(namespace, key, value));
        Ok(())
    }
}
