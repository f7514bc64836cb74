//! The task suite through real adb: every template's oracle, seeing only
//! `uiautomator dump` output, solves its task through `AdbDevice`, Debian's
//! adb server and the virtual phone's `Adbd`, exactly as it would an
//! emulator.

use crate::util::AdbServer;
use agent_core::device::DeviceAction;
use agent_core::device::adb::AdbDevice;
use agent_core::sim::adbd::Adbd;
use agent_core::sim::phone::{Phone, PhoneConfig};
use agent_core::sim::tasks::{run_oracle, sample, templates};
use agent_core::sim::virtual_phone::VirtualPhone;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Seeds per template: 25 templates × 10 = 250 instances, about two
/// seconds on localhost.
const SEEDS: u64 = 10;

/// One phone behind its own `Adbd`, reached through an adb server. The
/// phone is replaced in place for each instance, so one connection serves
/// them all.
struct Rig {
    phone: Arc<VirtualPhone>,
    device: AdbDevice,
    _adbd: Adbd,
}

impl Rig {
    fn start(adb_port: u16) -> Rig {
        let phone = Arc::new(VirtualPhone::new(PhoneConfig::default()));
        let adbd = Adbd::start(phone.clone(), None).unwrap();
        let server = SocketAddrV4::new(Ipv4Addr::LOCALHOST, adb_port);
        let device = AdbDevice::open(&adbd.serial(), server, Duration::from_secs(20)).unwrap();
        Rig {
            phone,
            device,
            _adbd: adbd,
        }
    }

    /// Runs one instance on a fresh phone and returns how many of its
    /// steps typed non-ASCII text; `Err` describes a failure.
    fn solve(&mut self, name: &str, seed: u64) -> Result<usize, String> {
        let task = sample(name, seed).ok_or(format!("no template {name}"))?;
        self.phone.with_phone(|p| {
            *p = Phone::new(PhoneConfig {
                seed,
                ..Default::default()
            });
            task.setup(p);
        });
        let run = run_oracle(task.as_ref(), &mut self.device)
            .map_err(|e| format!("{name} seed {seed}: {e}"))?;
        let solved = self.phone.with_phone(|p| task.is_successful(p.state()));
        if !(run.finished && solved) {
            let plans: Vec<&str> = run.steps.iter().map(|s| s.plan.as_str()).collect();
            return Err(format!(
                "{name} seed {seed} ({}): finished {}, solved {solved}, steps {plans:?}",
                task.goal(),
                run.finished
            ));
        }
        // `input text` cannot carry these: they take the keyboard broadcast.
        let unicode = run
            .steps
            .iter()
            .filter(|s| matches!(&s.action, DeviceAction::Type { text } if !text.is_ascii()))
            .count();
        Ok(unicode)
    }
}

#[test]
fn every_oracle_solves_its_task_through_real_adb() {
    let started = Instant::now();
    let adb = AdbServer::start();
    let mut rig = Rig::start(adb.port());
    let results: Vec<Result<usize, String>> = templates()
        .iter()
        .flat_map(|t| (0..SEEDS).map(move |seed| (t.name, seed)))
        .map(|(name, seed)| rig.solve(name, seed))
        .collect();
    let failures: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(templates().len() >= 20);
    assert!(results.len() >= 100, "{} instances", results.len());
    let unicode: usize = results.iter().filter_map(|r| r.as_ref().ok()).sum();
    assert!(unicode > 0, "no instance typed non-ASCII text");
    eprintln!(
        "{} task instances solved through adb in {:.1?}",
        results.len(),
        started.elapsed()
    );
}
