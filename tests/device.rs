//! `AdbDevice` (adb_client through Debian's adb server) against the virtual
//! phone: the host-side backend agents use with real devices.

use crate::util::AdbServer;
use agent_core::device::adb::AdbDevice;
use agent_core::device::{Device, DeviceAction, DeviceError};
use agent_core::protocol::{DevicePoint, Size};
use agent_core::sim::adbd::Adbd;
use agent_core::sim::phone::PhoneConfig;
use agent_core::sim::virtual_phone::VirtualPhone;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;

struct Rig {
    phone: Arc<VirtualPhone>,
    adbd: Adbd,
    device: AdbDevice,
    _adb: AdbServer,
}

fn rig(timeout: Duration) -> Rig {
    let phone = Arc::new(VirtualPhone::new(PhoneConfig::default()));
    let adbd = Adbd::start(phone.clone(), None).unwrap();
    let adb = AdbServer::start();
    let server = SocketAddrV4::new(Ipv4Addr::LOCALHOST, adb.port());
    // `open` runs `adb connect` itself for a TCP serial the server lacks.
    let device = AdbDevice::open(&adbd.serial(), server, timeout).unwrap();
    Rig {
        phone,
        adbd,
        device,
        _adb: adb,
    }
}

#[test]
fn adb_device_observes_the_virtual_phone_exactly() {
    let mut r = rig(Duration::from_secs(20));
    assert_eq!(r.device.screen_size().unwrap(), Size::new(1080, 2400));
    let shot = r.device.screenshot().unwrap();
    assert_eq!(
        shot,
        r.phone.with_phone(|p| p.render()),
        "PNG over adb is lossless"
    );
    let tree = r
        .device
        .ui_tree()
        .unwrap()
        .expect("the virtual phone offers a UI tree");
    assert_eq!(tree, r.phone.with_phone(|p| p.ui_tree()));
}

/// The `framebuffer:` service through Debian's adb server gives the
/// screen the phone rendered, pixel for pixel, as `screencap -p` does.
#[test]
fn the_framebuffer_service_shows_the_rendered_screen() {
    let mut r = rig(Duration::from_secs(20));
    let screen = r.device.framebuffer().unwrap();
    assert_eq!(screen, r.phone.with_phone(|p| p.render()));
}

#[test]
fn adb_device_recovers_exit_codes() {
    let mut r = rig(Duration::from_secs(20));
    assert_eq!(r.device.shell("true").unwrap().exit_code, 0);
    assert_eq!(r.device.shell("false").unwrap().exit_code, 1);
    let missing = r.device.shell("frobnicate").unwrap();
    assert_eq!(missing.exit_code, 127);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("inaccessible or not found"));
    match r.device.run("frobnicate") {
        Err(DeviceError::Command { exit_code: 127, .. }) => {}
        other => panic!("expected a command error, got {other:?}"),
    }
}

#[test]
fn adb_device_actions_reach_the_phone() {
    let mut r = rig(Duration::from_secs(20));
    let tree = r.device.ui_tree().unwrap().unwrap();
    let settings = tree
        .find_by_text("Settings")
        .expect("a Settings icon on the launcher");
    let (x, y) = settings.center();
    let at = DevicePoint {
        x: x as u32,
        y: y as u32,
    };
    r.device.perform(&DeviceAction::Tap { at }).unwrap();
    assert!(
        r.phone
            .with_phone(|p| p.focused_window())
            .starts_with("com.btl.settings/")
    );
    r.device.perform(&DeviceAction::Home).unwrap();
    assert!(
        r.phone
            .with_phone(|p| p.focused_window())
            .starts_with("com.btl.launcher/")
    );
}

#[test]
fn unicode_text_goes_through_the_keyboard_broadcast() {
    let mut r = rig(Duration::from_secs(20));
    r.phone
        .with_phone(|p| p.start_app("com.btl.browser", None))
        .unwrap();
    let tree = r.device.ui_tree().unwrap().unwrap();
    let field = tree
        .find(|n| n.class == "android.widget.EditText")
        .expect("the browser has a search field");
    let (x, y) = field.center();
    r.device
        .perform(&DeviceAction::Tap {
            at: DevicePoint {
                x: x as u32,
                y: y as u32,
            },
        })
        .unwrap();
    let text = "Zürich café 東京 it's";
    r.device
        .perform(&DeviceAction::Type { text: text.into() })
        .unwrap();
    let tree = r.phone.with_phone(|p| p.ui_tree());
    assert!(
        tree.find(|n| n.class == "android.widget.EditText" && n.text == text)
            .is_some(),
        "typed text shows in the field"
    );
}

#[test]
fn a_dropped_connection_is_a_clear_error_not_a_hang() {
    let timeout = Duration::from_secs(10);
    let mut r = rig(timeout);
    r.adbd.faults().drop_connection_on("screencap");
    let err = r.device.screenshot().unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(
            err,
            DeviceError::Disconnected { .. }
                | DeviceError::Protocol { .. }
                | DeviceError::Timeout { .. }
        ),
        "{message}"
    );
    assert!(
        message.contains("screencap"),
        "the error names the command: {message}"
    );
}

#[test]
fn uiautomator_dump_pulled_with_adb_parses_to_the_phone_tree() {
    let r = rig(Duration::from_secs(20));
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("window_dump.xml");
    let adb = &r._adb;
    let serial = r.adbd.serial();
    let out = adb.adb(["-s", serial.as_str(), "shell", "uiautomator", "dump"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "UI hierchary dumped to: /sdcard/window_dump.xml\n"
    );
    let out = adb.adb([
        "-s",
        serial.as_str(),
        "pull",
        "/sdcard/window_dump.xml",
        local.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let xml = std::fs::read_to_string(&local).unwrap();
    let tree = agent_core::device::ui::parse_uiautomator_xml(&xml).unwrap();
    assert_eq!(tree, r.phone.with_phone(|p| p.ui_tree()));
}
