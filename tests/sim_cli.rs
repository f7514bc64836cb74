//! `btl sim serve` and `btl devices` as a user runs them.

use crate::util::*;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// The serving `btl`, killed when dropped.
struct Serving(Child);

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn sim_serve_prints_a_serial_that_adb_connects_to() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_btl"))
        .args(["sim", "serve", "--size", "720x1280", "--seed", "3"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start btl sim serve");
    let stdout = child.stdout.take().expect("piped stdout");
    let serving = Serving(child);
    // The reader stays alive until the end so the server's stdout stays open.
    let mut reader = BufReader::new(stdout);
    let mut first = String::new();
    reader.read_line(&mut first).unwrap();
    let serial = first
        .trim()
        .strip_prefix("virtual phone listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_string();
    let port: u16 = serial.rsplit(':').next().unwrap().parse().unwrap();
    assert!(
        !(5555..=5585).contains(&port),
        "outside the emulator scan range"
    );

    let adb = AdbServer::start();
    let out = adb.adb(["connect", &serial]);
    assert_eq!(stdout_of(&out), format!("connected to {serial}\n"));
    let out = adb.adb(["-s", &serial, "shell", "wm", "size"]);
    assert_eq!(stdout_of(&out), "Physical size: 720x1280\n");

    let dir = Dir::new();
    let out = dir.btl(["devices", "--adb-port", &adb.port().to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let listed = stdout_of(&out);
    assert!(
        listed.contains(&format!(
            "{serial}\tdevice\tproduct:btl_phone model:BTL_Virtual_Phone"
        )),
        "{listed}"
    );
    drop(serving);
    drop(reader);
}

/// A size the virtual phone does not take is refused, not quietly made
/// another (a 63-pixel side was 64).
#[test]
fn sim_serve_rejects_a_bad_size() {
    for size in ["10x10", "63x2400", "1080x8193"] {
        let out = Dir::new().btl(["sim", "serve", "--size", size]);
        assert_eq!(out.status.code(), Some(2));
        assert!(
            stderr(&out).contains(&format!(
                "'{size}' is not WIDTHxHEIGHT with sides from 64 to 8192"
            )),
            "{}",
            stderr(&out)
        );
    }
}

fn stdout_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}
