//! The accept loop and the blocking [`Adbd`] handle around it.
//!
//! [`run`] accepts host connections until its shutdown future resolves, then
//! drains: it stops accepting, tells every connection to stop, and returns
//! only once each has closed its socket and aborted its streams, so nothing
//! of the device outlives the call (a backend call already running on the
//! blocking pool finishes on its own; its result is discarded).
//!
//! [`Adbd`] is the same server on its own thread and single-threaded tokio
//! runtime, for callers that are not async: the `btl sim serve` CLI and the
//! system tests.

use super::connection;
use super::fault::Faults;
use super::service::Context;
use crate::sim::backend::AdbBackend;
use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::thread;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, oneshot, watch};
use tokio::task::JoinSet;

/// Most host connections served at once. The adb server holds one per
/// device and adb_client one per device object, so a handful is normal; each
/// connection may pin up to [`MAX_STREAMS_PER_CONNECTION`] streams, so this
/// bounds the device's memory and threads. Further hosts wait in the
/// kernel's accept backlog until a connection ends.
///
/// [`MAX_STREAMS_PER_CONNECTION`]: super::MAX_STREAMS_PER_CONNECTION
pub const MAX_CONNECTIONS: usize = 16;

/// Ports the adb server probes for emulators on start (odd ports
/// 5555–5585). A device there is registered twice, as `emulator-5554` and
/// as `127.0.0.1:5555`, so an ephemeral port is never taken from this range.
pub const EMULATOR_PORTS: RangeInclusive<u16> = 5555..=5585;

/// Ephemeral ports drawn before giving up on leaving [`EMULATOR_PORTS`]; the
/// range is 31 ports out of ~28 000, so more than one retry is rare.
const BIND_ATTEMPTS: usize = 16;

/// First pause after a failed accept (e.g. out of file descriptors); doubles
/// up to [`MAX_ACCEPT_BACKOFF`] and resets on success. The device never
/// gives up: it is a test fixture and must outlive a transient error.
const FIRST_ACCEPT_BACKOFF: Duration = Duration::from_millis(10);
const MAX_ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// How long [`Adbd`] waits on shutdown for backend calls still running on
/// the blocking pool before abandoning them.
const BLOCKING_GRACE: Duration = Duration::from_secs(1);

/// Binds `127.0.0.1:port`, or an ephemeral port outside [`EMULATOR_PORTS`]
/// for `None`. Only loopback: the device has no authentication.
pub fn bind_listener(port: Option<u16>) -> io::Result<std::net::TcpListener> {
    if let Some(port) = port {
        return std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port));
    }
    // Rejected listeners stay bound until we return, so the OS cannot hand
    // the same port out again.
    let mut rejected = Vec::new();
    for _ in 0..BIND_ATTEMPTS {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        if !EMULATOR_PORTS.contains(&listener.local_addr()?.port()) {
            return Ok(listener);
        }
        rejected.push(listener);
    }
    Err(io::Error::new(
        io::ErrorKind::AddrNotAvailable,
        "every ephemeral port offered was in the adb emulator range 5555-5585",
    ))
}

/// Serves ADB hosts on `listener` until `shutdown` resolves, then drains.
pub async fn run(
    listener: TcpListener,
    backend: Arc<dyn AdbBackend>,
    shutdown: impl Future<Output = ()>,
) {
    run_with_faults(listener, backend, Faults::default(), shutdown).await;
}

/// [`run`] with a handle to inject faults (see [`Faults`]).
pub async fn run_with_faults(
    listener: TcpListener,
    backend: Arc<dyn AdbBackend>,
    faults: Faults,
    shutdown: impl Future<Output = ()>,
) {
    let context = Context { backend, faults };
    let (stop, stopped) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::select! {
        () = accept_loop(&listener, &context, &stopped, &mut connections) => {}
        () = shutdown => {}
    }
    drop(listener);
    stop.send_replace(true);
    while connections.join_next().await.is_some() {}
}

async fn accept_loop(
    listener: &TcpListener,
    context: &Context,
    stopped: &watch::Receiver<bool>,
    connections: &mut JoinSet<()>,
) {
    let limit = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut backoff = FIRST_ACCEPT_BACKOFF;
    loop {
        // The semaphore is never closed, so this only waits for a slot.
        let Ok(permit) = Arc::clone(&limit).acquire_owned().await else {
            return;
        };
        let socket = match listener.accept().await {
            Ok((socket, _)) => socket,
            Err(_) => {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_ACCEPT_BACKOFF);
                continue;
            }
        };
        backoff = FIRST_ACCEPT_BACKOFF;
        while connections.try_join_next().is_some() {}
        let context = context.clone();
        let stopped = stopped.clone();
        connections.spawn(async move {
            // A connection's error concerns that host only; the device
            // carries on serving the others.
            let _ = connection::serve(socket, context, stopped).await;
            drop(permit);
        });
    }
}

/// A virtual device serving ADB on `127.0.0.1` from a background thread,
/// until [`Adbd::stop`] or drop.
pub struct Adbd {
    addr: SocketAddr,
    faults: Faults,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Adbd {
    /// Starts serving `backend` on `127.0.0.1:port`, or on an ephemeral port
    /// outside 5555–5585 for `None`. The port is bound before this returns.
    /// An explicit port in 5555–5585 is honoured: an adb server started
    /// without `ADB_EMU=0` then also finds the device as `emulator-N`.
    pub fn start(backend: Arc<dyn AdbBackend>, port: Option<u16>) -> io::Result<Adbd> {
        let std_listener = bind_listener(port)?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let listener = {
            let _context = runtime.enter();
            TcpListener::from_std(std_listener)?
        };
        let faults = Faults::default();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = thread::Builder::new()
            .name(format!("adbd-{}", addr.port()))
            .spawn({
                let faults = faults.clone();
                move || {
                    runtime.block_on(run_with_faults(listener, backend, faults, async {
                        // A dropped sender means the handle is gone: stop too.
                        let _ = stopped.await;
                    }));
                    runtime.shutdown_timeout(BLOCKING_GRACE);
                }
            })?;
        Ok(Adbd {
            addr,
            faults,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The name adb gives the device after `adb connect`: `127.0.0.1:PORT`.
    pub fn serial(&self) -> String {
        self.addr.to_string()
    }

    /// Fault injection for this device (see [`Faults`]).
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// Stops serving and waits until the port is closed and every
    /// connection is gone. Dropping the handle does the same.
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for Adbd {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            // A panic on the server thread was already reported by the
            // panic hook; dropping must not panic again.
            let _ = thread.join();
        }
    }
}
