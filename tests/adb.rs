//! Debian's real `adb` against the virtual device: each test starts its own
//! adb server and its own [`Adbd`] over a small test phone, then drives it
//! with the same commands a developer types.

use crate::util::AdbServer;
use agent_core::sim::adbd::Adbd;
use agent_core::sim::backend::{Framebuffer, ShellOutput};
use agent_core::sim::memory_phone::MemoryPhone;
use std::process::Output;
use std::sync::Arc;

/// `blob N`'s output: N pseudo-random bytes (xorshift), so a reordered or
/// dropped chunk cannot go unnoticed.
fn blob(len: usize) -> Vec<u8> {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

/// A phone with a handful of commands, enough to exercise the transport.
fn test_phone() -> MemoryPhone {
    let framebuffer = Framebuffer {
        width: 1,
        height: 1,
        rgba: vec![0, 0, 0, 255],
    };
    MemoryPhone::new(framebuffer, |command| {
        // `adb exec-out` quotes each argument: `blob '5000000'`.
        let words: Vec<&str> = command
            .split_whitespace()
            .map(|word| word.trim_matches('\''))
            .collect();
        match words.as_slice() {
            ["echo", rest @ ..] => ShellOutput::ok(format!("{}\n", rest.join(" "))),
            ["false"] => ShellOutput::fail(1, ""),
            // What pm answers a streamed install.
            ["cmd", "package", "install", ..] => ShellOutput::ok("Success\n"),
            ["bytes"] => ShellOutput::ok((0..=255u8).collect::<Vec<_>>()),
            ["blob", len] => ShellOutput::ok(blob(len.parse().unwrap_or(0))),
            [name, ..] => ShellOutput::fail(
                127,
                format!("/system/bin/sh: {name}: inaccessible or not found\n"),
            ),
            [] => ShellOutput::default(),
        }
    })
}

/// A device, an adb server that has connected to it, and the device's serial.
/// Fields drop in order: the adb server is killed before the device stops.
struct Setup {
    adb: AdbServer,
    phone: Arc<MemoryPhone>,
    serial: String,
    _device: Adbd,
}

fn connected() -> Setup {
    let phone = Arc::new(test_phone());
    let device = Adbd::start(phone.clone(), None).unwrap();
    let serial = device.serial();
    let adb = AdbServer::start();
    let out = adb.adb(["connect", &serial]);
    assert_eq!(text(&out.stdout), format!("connected to {serial}\n"));
    let out = adb.adb(["-s", &serial, "wait-for-device"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    Setup {
        adb,
        phone,
        serial,
        _device: device,
    }
}

impl Setup {
    /// `adb -s SERIAL args…`
    fn on_device(&self, args: &[&str]) -> Output {
        self.adb
            .adb(["-s", self.serial.as_str()].iter().chain(args))
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn adb_lists_the_phone_as_a_device_with_its_identity() {
    let setup = connected();
    let out = setup.adb.adb(["devices", "-l"]);
    let listing = text(&out.stdout);
    let line = listing
        .lines()
        .find(|line| line.starts_with(&setup.serial))
        .unwrap_or_else(|| panic!("{} not in:\n{listing}", setup.serial));
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        fields[..5],
        [
            setup.serial.as_str(),
            "device",
            "product:vphone",
            "model:VirtualPhone",
            "device:vphone"
        ],
        "{line}"
    );
    assert_eq!(text(&setup.on_device(&["get-state"]).stdout), "device\n");

    let out = setup.adb.adb(["disconnect", &setup.serial]);
    assert_eq!(
        text(&out.stdout),
        format!("disconnected {}\n", setup.serial)
    );
    let listing = text(&setup.adb.adb(["devices"]).stdout);
    assert!(!listing.contains(&setup.serial), "{listing}");
}

#[test]
fn adb_shell_passes_stdout_stderr_and_exit_codes() {
    let setup = connected();
    let out = setup.on_device(&["shell", "echo", "hi"]);
    assert_eq!(text(&out.stdout), "hi\n");
    assert_eq!(out.status.code(), Some(0));

    let out = setup.on_device(&["shell", "false"]);
    assert_eq!(out.status.code(), Some(1));

    let out = setup.on_device(&["shell", "nosuchcmd", "--flag"]);
    assert_eq!(out.status.code(), Some(127));
    assert_eq!(text(&out.stdout), "");
    assert_eq!(
        text(&out.stderr),
        "/system/bin/sh: nosuchcmd: inaccessible or not found\n"
    );
}

#[test]
fn adb_exec_out_is_binary_safe_and_survives_flow_control() {
    let setup = connected();
    let out = setup.on_device(&["exec-out", "bytes"]);
    assert!(out.status.success());
    assert_eq!(out.stdout, (0..=255u8).collect::<Vec<_>>());

    // Five 1 MiB WRTEs and a tail, each waiting for adb's OKAY.
    let len = 5_000_000;
    let out = setup.on_device(&["exec-out", "blob", &len.to_string()]);
    assert!(out.status.success());
    assert_eq!(out.stdout.len(), len);
    assert!(out.stdout == blob(len), "exec-out bytes differ");

    // Through shell v2, packets straddle WRTE boundaries.
    let len = 3_000_000;
    let out = setup.on_device(&["shell", "blob", &len.to_string()]);
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout == blob(len), "shell bytes differ");
}

#[test]
fn adb_push_and_pull_round_trip_a_file() {
    let setup = connected();
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("up.bin");
    let contents = blob(300_000);
    std::fs::write(&local, &contents).unwrap();

    let out = setup.on_device(&["push", local.to_str().unwrap(), "/sdcard/Download/"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("1 file pushed"), "{out:?}");
    let on_phone = setup.phone.fs().read("/sdcard/Download/up.bin");
    assert!(on_phone.unwrap() == contents, "pushed bytes differ");

    let out = setup.on_device(&["ls", "/sdcard/Download"]);
    let listing = text(&out.stdout);
    assert!(
        listing
            .lines()
            .any(|line| line.ends_with(" up.bin") && line.contains("000493e0")),
        "size 300000 = 0x493e0 in:\n{listing}"
    );

    let pulled = dir.path().join("down.bin");
    let out = setup.on_device(&["pull", "/sdcard/Download/up.bin", pulled.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("1 file pulled"), "{out:?}");
    assert!(
        std::fs::read(&pulled).unwrap() == contents,
        "pulled bytes differ"
    );

    let out = setup.on_device(&["pull", "/sdcard/missing.bin", pulled.to_str().unwrap()]);
    assert!(!out.status.success());
    // adb 29 prints this error on stdout.
    let said = text(&out.stdout) + &text(&out.stderr);
    assert!(
        said.contains("remote object '/sdcard/missing.bin' does not exist"),
        "{said}"
    );
}

#[test]
fn adb_install_streams_the_apk() {
    let setup = connected();
    let dir = tempfile::tempdir().unwrap();
    let apk = dir.path().join("some.apk");
    let contents = [&b"PK\x03\x04"[..], &blob(100_000)].concat();
    std::fs::write(&apk, &contents).unwrap();

    let out = setup.on_device(&["install", apk.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).ends_with("Success\n"), "{out:?}");
    assert!(setup.phone.inputs() == [contents], "installed bytes differ");
}
