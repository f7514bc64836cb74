//! Screenshot + one action, through real adb versus in-process, as a ratio.
//!
//! The same virtual phone is driven three ways: `SimDevice` (in-process),
//! `AdbDevice` with `screencap -p` (PNG through the adb server), and
//! `AdbDevice` with the `framebuffer:` service (raw RGBA). Each round is one
//! screenshot plus one tap on an empty spot of the home screen; the table
//! gives the median round time of each and its ratio to in-process.
//!
//! Needs Debian's `adb` (`apt-get install adb`). Run with
//! `scripts/bench/device-roundtrip` or `cargo bench -p agent-core --bench device`.

use agent_core::device::adb::AdbDevice;
use agent_core::device::adb_server::PrivateAdbServer;
use agent_core::device::sim::SimDevice;
use agent_core::device::{Device, DeviceAction};
use agent_core::protocol::DevicePoint;
use agent_core::sim::adbd::Adbd;
use agent_core::sim::phone::PhoneConfig;
use agent_core::sim::virtual_phone::VirtualPhone;
use std::sync::Arc;
use std::time::{Duration, Instant};

const ROUNDS: usize = 15;
const WARM_UP: usize = 3;

/// Median seconds of `ROUNDS` runs of `round`, after a warm-up.
fn median_secs(mut round: impl FnMut()) -> f64 {
    for _ in 0..WARM_UP {
        round();
    }
    let mut times: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            round();
            start.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[ROUNDS / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `cargo test --benches` runs bench binaries with no arguments only to
    // check they start; the measurement is for `cargo bench` (`--bench`).
    if !std::env::args().any(|a| a == "--bench") {
        return Ok(());
    }
    let phone = Arc::new(VirtualPhone::new(PhoneConfig::default()));
    let adbd = Adbd::start(phone.clone(), None)?;
    let server = PrivateAdbServer::start()?;
    let mut adb = AdbDevice::open(&adbd.serial(), server.addr(), Duration::from_secs(30))?;
    let mut sim = SimDevice::new(phone.clone());
    // Below the status bar, between icon rows of the launcher: a tap there
    // changes nothing, so every round sees the same screen.
    let tap = DeviceAction::Tap {
        at: DevicePoint { x: 540, y: 160 },
    };

    let in_process = median_secs(|| {
        sim.screenshot().expect("screenshot");
        sim.perform(&tap).expect("tap");
    });
    let screencap = median_secs(|| {
        adb.screenshot().expect("screencap");
        adb.perform(&tap).expect("tap");
    });
    let framebuffer = median_secs(|| {
        adb.framebuffer().expect("framebuffer");
        adb.perform(&tap).expect("tap");
    });

    println!("screenshot + tap on a 1080x2400 virtual phone, median of {ROUNDS} rounds");
    println!("{:<34} {:>10} {:>8}", "path", "ms/round", "ratio");
    for (name, secs) in [
        ("in-process (SimDevice)", in_process),
        ("adb server, screencap -p (PNG)", screencap),
        ("adb server, framebuffer: (RGBA)", framebuffer),
    ] {
        println!(
            "{name:<34} {:>10.2} {:>7.1}x",
            secs * 1e3,
            secs / in_process
        );
    }
    Ok(())
}
