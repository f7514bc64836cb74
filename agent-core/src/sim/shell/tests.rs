//! The shell against a default phone: outputs as Android's tools print them.

use crate::sim::phone::PhoneConfig;

use crate::device::ui::parse_uiautomator_xml;
use crate::sim::virtual_phone::VirtualPhone;

fn phone() -> VirtualPhone {
    VirtualPhone::new(PhoneConfig {
        width: 1080,
        height: 2400,
        density: 420,
        seed: 1,
    })
}

fn stdout(phone: &VirtualPhone, line: &str) -> String {
    let out = phone.shell(line);
    assert_eq!(
        out.exit_code,
        0,
        "{line}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn basic_tools_answer_like_android() {
    let p = phone();
    assert_eq!(stdout(&p, "wm size"), "Physical size: 1080x2400\n");
    assert_eq!(stdout(&p, "wm density"), "Physical density: 420\n");
    assert_eq!(stdout(&p, "echo hi  there"), "hi there\n");
    assert_eq!(stdout(&p, "echo -n hi"), "hi");
    assert!(
        stdout(&p, "pm list packages")
            .lines()
            .all(|l| l.starts_with("package:"))
    );
    assert!(!stdout(&p, "getprop ro.product.model").trim().is_empty());
    assert!(stdout(&p, "getprop").starts_with('['));
}

#[test]
fn unknown_commands_fail_with_127() {
    let out = phone().shell("frobnicate --now");
    assert_eq!(out.exit_code, 127);
    assert_eq!(
        out.stderr,
        b"/system/bin/sh: frobnicate: inaccessible or not found\n"
    );
}

#[test]
fn status_lists_and_redirections() {
    let p = phone();
    assert_eq!(stdout(&p, "false; echo rc=$?"), "rc=1\n");
    assert_eq!(stdout(&p, "false || echo fallback"), "fallback\n");
    assert_eq!(stdout(&p, "true && echo then"), "then\n");
    assert_eq!(
        stdout(
            &p,
            "echo saved > /sdcard/a.txt; echo more >> /sdcard/a.txt; cat /sdcard/a.txt"
        ),
        "saved\nmore\n"
    );
    assert_eq!(stdout(&p, "nosuch 2>/dev/null; echo rc=$?"), "rc=127\n");
    let merged = p.shell("nosuch 2>&1");
    assert!(String::from_utf8_lossy(&merged.stdout).contains("inaccessible or not found"));
    let syntax = p.shell("ls | grep x");
    assert_eq!(syntax.exit_code, 2);
    assert!(String::from_utf8_lossy(&syntax.stderr).contains("pipes are not supported"));
}

#[test]
fn screencap_png_and_raw() {
    let p = phone();
    let png = p.shell("screencap -p").stdout;
    let image = image::load_from_memory(&png).unwrap();
    assert_eq!((image.width(), image.height()), (1080, 2400));
    let raw = p.shell("screencap").stdout;
    let header: Vec<u32> = raw[..16]
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(header, [1080, 2400, 1, 0]);
    assert_eq!(raw.len(), 16 + 1080 * 2400 * 4);
    assert_eq!(stdout(&p, "screencap -p /sdcard/s.png"), "");
    assert_eq!(p.shell("cat /sdcard/s.png").stdout, png);
}

#[test]
fn uiautomator_dump_to_file_and_tty() {
    let p = phone();
    assert_eq!(
        stdout(&p, "uiautomator dump"),
        "UI hierchary dumped to: /sdcard/window_dump.xml\n"
    );
    let xml = stdout(&p, "cat /sdcard/window_dump.xml");
    assert!(parse_uiautomator_xml(&xml).is_ok());
    let tty = stdout(&p, "uiautomator dump /dev/tty");
    let (xml_part, tail) = tty.split_at(tty.rfind("UI hierchary").unwrap());
    assert_eq!(tail, "UI hierchary dumped to: /dev/tty\n");
    assert_eq!(xml_part, xml);
}

#[test]
fn apps_start_and_focus_is_reported() {
    let p = phone();
    assert!(stdout(&p, "pm list packages").contains("package:com.btl.notes\n"));
    assert_eq!(
        stdout(&p, "monkey -p com.btl.notes 1"),
        "Events injected: 1\n"
    );
    assert!(
        stdout(&p, "dumpsys window").contains("mCurrentFocus=Window{7e1d2a0 u0 com.btl.notes/")
    );
    assert!(
        stdout(&p, "am start -n com.btl.settings/.MainActivity")
            .starts_with("Starting: Intent { cmp=com.btl.settings/.MainActivity }")
    );
    assert!(stdout(&p, "dumpsys window").contains("u0 com.btl.settings/"));
    let missing = p.shell("monkey -p com.nope 1");
    assert_ne!(missing.exit_code, 0);
}

#[test]
fn settings_round_trip() {
    let p = phone();
    assert_eq!(
        stdout(
            &p,
            "settings put global btl_test 7; settings get global btl_test"
        ),
        "7\n"
    );
    assert_eq!(stdout(&p, "settings get global no_such_key"), "null\n");
}

#[test]
fn bad_arguments_are_usage_errors_not_panics() {
    let p = phone();
    for line in [
        "input tap x y",
        "input swipe 1 2",
        "input",
        "input keyevent NOPE",
        "wm",
        "am start",
        "uiautomator",
        "settings get",
        "screencap -p /sdcard",
    ] {
        let out = p.shell(line);
        assert_ne!(out.exit_code, 0, "{line}");
        assert!(!out.stderr.is_empty(), "{line}");
    }
    let out = p.shell("am broadcast -a ADB_INPUT_B64 --es msg !!!");
    assert_ne!(out.exit_code, 0);
}
