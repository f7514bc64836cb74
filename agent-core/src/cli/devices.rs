//! `btl devices`: the devices an adb server knows, like `adb devices -l`.

use super::{Outcome, json_line};
use crate::device::adb::{DEFAULT_SERVER_PORT, DEFAULT_TIMEOUT, list_devices};
use crate::terminal::printable;
use anyhow::Context;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Port of the adb server on 127.0.0.1.
    #[arg(long, default_value_t = DEFAULT_SERVER_PORT)]
    adb_port: u16,
    /// One JSON object per device.
    #[arg(long)]
    json: bool,
}

pub fn run(args: &Args) -> Outcome {
    let server = SocketAddrV4::new(Ipv4Addr::LOCALHOST, args.adb_port);
    let devices = list_devices(server, DEFAULT_TIMEOUT)
        .with_context(|| format!("cannot list devices of the adb server on {server}"))?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for d in &devices {
        if args.json {
            json_line(&mut out, d)?;
        } else {
            writeln!(
                out,
                "{}\t{}\tproduct:{} model:{} device:{}",
                printable(&d.serial),
                printable(&d.state),
                printable(&d.product),
                printable(&d.model),
                printable(&d.device)
            )
            .map_err(anyhow::Error::from)?;
        }
    }
    if devices.is_empty() && !args.json {
        writeln!(out, "no devices").map_err(anyhow::Error::from)?;
    }
    Ok(())
}
