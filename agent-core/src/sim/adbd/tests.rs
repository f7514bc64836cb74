//! Loopback tests, mini-redis style: the device serves a fake phone on
//! `127.0.0.1:0` through [`run`], and each test plays the host by hand with
//! raw bytes, asserting the device's exact replies. Expected messages are
//! built by this file's own `frame`, never by the encoder under test.

use super::{Adbd, EMULATOR_PORTS, Faults, MAX_STREAMS_PER_CONNECTION, run, run_with_faults};
use crate::sim::backend::{AdbBackend, Framebuffer, ShellOutput};
use crate::sim::memory_phone::MemoryPhone;
use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::timeout;

/// AOSP adb.h's protocol version and largest payload, written out here
/// rather than taken from the device under test.
const A_VERSION: u32 = 0x0100_0001;
const MAX_PAYLOAD: u32 = 1024 * 1024;

const BANNER: &str = "device::ro.product.name=vphone;ro.product.model=VirtualPhone;\
                      ro.product.device=vphone;features=shell_v2,cmd";

/// Longest a test waits for any one reply.
const TIMEOUT: Duration = Duration::from_secs(5);

/// How long "the device sends nothing" is watched for.
const QUIET: Duration = Duration::from_millis(200);

/// `wait` blocks until this opens, to hold streams busy.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }

    fn wait(&self) {
        let guard = self.open.lock().unwrap();
        // Bounded so a failing test cannot hang the runtime's drop.
        drop(
            self.opened
                .wait_timeout_while(guard, TIMEOUT * 2, |open| !*open),
        );
    }
}

/// `big N`'s output: a pattern that catches reordered or dropped chunks.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// The fake phone: canned commands over an in-memory file system.
fn fake_phone(gate: Arc<Gate>) -> MemoryPhone {
    let framebuffer = Framebuffer {
        width: 2,
        height: 1,
        rgba: vec![255, 0, 0, 255, 0, 0, 255, 128],
    };
    MemoryPhone::new(framebuffer, move |command| {
        let (name, rest) = command.split_once(' ').unwrap_or((command, ""));
        match name {
            "echo" => ShellOutput::ok(format!("{rest}\n")),
            "false" => ShellOutput::fail(1, ""),
            // What pm answers a streamed install.
            "cmd" => ShellOutput::ok("Success\n"),
            "big" => ShellOutput::ok(pattern(rest.parse().unwrap())),
            "wait" => {
                gate.wait();
                ShellOutput::ok("done\n")
            }
            _ => ShellOutput::fail(
                127,
                format!("/system/bin/sh: {name}: inaccessible or not found\n"),
            ),
        }
    })
}

/// The device under test, served by [`run_with_faults`] on this runtime.
struct Device {
    addr: SocketAddr,
    phone: Arc<MemoryPhone>,
    gate: Arc<Gate>,
    faults: Faults,
    stop: oneshot::Sender<()>,
    server: JoinHandle<()>,
}

impl Device {
    async fn start() -> Device {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let gate = Arc::new(Gate::default());
        let phone = Arc::new(fake_phone(gate.clone()));
        let faults = Faults::default();
        let (stop, stopped) = oneshot::channel::<()>();
        let backend: Arc<dyn AdbBackend> = phone.clone();
        let server = tokio::spawn(run_with_faults(listener, backend, faults.clone(), async {
            let _ = stopped.await;
        }));
        Device {
            addr,
            phone,
            gate,
            faults,
            stop,
            server,
        }
    }

    /// A host connection that completed the handshake with `maxdata`.
    async fn host(&self, maxdata: u32) -> Host {
        let mut host = Host::connect(self.addr).await;
        host.handshake(maxdata).await;
        host
    }
}

/// One message's wire bytes, encoded independently of `message.rs`.
fn frame(command: &[u8; 4], arg0: u32, arg1: u32, payload: &[u8]) -> Vec<u8> {
    let code = u32::from_le_bytes(*command);
    let sum: u32 = payload.iter().map(|&b| u32::from(b)).sum();
    let mut out = Vec::new();
    for field in [code, arg0, arg1, payload.len() as u32, sum, !code] {
        out.extend_from_slice(&field.to_le_bytes());
    }
    out.extend_from_slice(payload);
    out
}

/// A sync request or reply: `id + u32 + tail`.
fn sync_packet(id: &[u8; 4], arg: u32, tail: &[u8]) -> Vec<u8> {
    [&id[..], &arg.to_le_bytes(), tail].concat()
}

struct Host {
    io: TcpStream,
}

impl Host {
    async fn connect(addr: SocketAddr) -> Host {
        Host {
            io: TcpStream::connect(addr).await.unwrap(),
        }
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        self.io.write_all(bytes).await.unwrap();
    }

    async fn send(&mut self, command: &[u8; 4], arg0: u32, arg1: u32, payload: &[u8]) {
        self.send_raw(&frame(command, arg0, arg1, payload)).await;
    }

    /// The next message as `(command, arg0, arg1, payload)`, after checking
    /// the device filled checksum and magic.
    async fn recv(&mut self) -> ([u8; 4], u32, u32, Vec<u8>) {
        let mut header = [0u8; 24];
        timeout(TIMEOUT, self.io.read_exact(&mut header))
            .await
            .expect("device replied in time")
            .expect("device kept the connection open");
        let field = |i: usize| u32::from_le_bytes(header[4 * i..4 * i + 4].try_into().unwrap());
        let mut payload = vec![0u8; field(3) as usize];
        timeout(TIMEOUT, self.io.read_exact(&mut payload))
            .await
            .unwrap()
            .unwrap();
        let sum: u32 = payload.iter().map(|&b| u32::from(b)).sum();
        assert_eq!(field(4), sum, "checksum filled");
        assert_eq!(field(5), !field(0), "magic");
        let command = header[..4].try_into().unwrap();
        (command, field(1), field(2), payload)
    }

    /// Asserts the next message's exact bytes.
    async fn expect(&mut self, command: &[u8; 4], arg0: u32, arg1: u32, payload: &[u8]) {
        let (c, a0, a1, p) = self.recv().await;
        assert_eq!(
            frame(&c, a0, a1, &p),
            frame(command, arg0, arg1, payload),
            "got {} {a0} {a1} {:?}, want {} {arg0} {arg1} {:?}",
            String::from_utf8_lossy(&c),
            String::from_utf8_lossy(&p[..p.len().min(64)]),
            String::from_utf8_lossy(command),
            String::from_utf8_lossy(&payload[..payload.len().min(64)]),
        );
    }

    async fn handshake(&mut self, maxdata: u32) {
        self.send(
            b"CNXN",
            A_VERSION,
            maxdata,
            b"host::features=shell_v2,cmd\0",
        )
        .await;
        self.expect(b"CNXN", A_VERSION, MAX_PAYLOAD, BANNER.as_bytes())
            .await;
    }

    /// Opens `service` as host stream `id` and expects the device's OKAY
    /// with device id `local`.
    async fn open(&mut self, id: u32, local: u32, service: &str) {
        self.send(b"OPEN", id, 0, format!("{service}\0").as_bytes())
            .await;
        self.expect(b"OKAY", local, id, b"").await;
    }

    async fn assert_quiet(&mut self) {
        let mut byte = [0u8; 1];
        let read = timeout(QUIET, self.io.read(&mut byte)).await;
        assert!(read.is_err(), "device sent something: {read:?}");
    }

    /// The device closed the connection (FIN or reset), sending nothing more.
    async fn assert_closed(&mut self, after: &str) {
        let mut byte = [0u8; 1];
        match timeout(TIMEOUT, self.io.read(&mut byte)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {}
            other => panic!("connection still open after {after}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn cnxn_is_answered_with_cnxn_and_the_banner_without_auth() {
    let device = Device::start().await;
    let mut adb = Host::connect(device.addr).await;
    adb.handshake(1 << 20).await;
    adb.assert_quiet().await;

    // adb_client speaks version 0x01000000: the device answers with it.
    let mut client = Host::connect(device.addr).await;
    client
        .send(b"CNXN", 0x0100_0000, 1 << 20, b"host::adb_client\0")
        .await;
    client
        .expect(b"CNXN", 0x0100_0000, MAX_PAYLOAD, BANNER.as_bytes())
        .await;
}

#[tokio::test]
async fn shell_v2_sends_stdout_and_exit_then_closes_without_the_last_okay() {
    let device = Device::start().await;
    let mut host = device.host(1 << 20).await;
    host.open(8, 1, "shell,v2,TERM=xterm,raw:echo hi").await;
    #[rustfmt::skip]
    let packets = [
        0x01, 0x03, 0x00, 0x00, 0x00, b'h', b'i', b'\n',  // stdout "hi\n"
        0x03, 0x01, 0x00, 0x00, 0x00, 0x00,               // exit 0
    ];
    host.expect(b"WRTE", 1, 8, &packets).await;
    host.expect(b"CLSE", 1, 8, b"").await;
    // What adb 29 does next: ack, close-stdin, close. All ignored.
    host.send(b"OKAY", 8, 1, b"").await;
    host.send(b"WRTE", 8, 1, &[0x04, 0, 0, 0, 0]).await;
    host.send(b"CLSE", 8, 1, b"").await;
    host.assert_quiet().await;
    // The connection serves the next command with a new device id.
    host.open(9, 2, "shell,v2:echo again").await;
    host.expect(
        b"WRTE",
        2,
        9,
        &[&[1, 6, 0, 0, 0][..], b"again\n", &[3, 1, 0, 0, 0, 0]].concat(),
    )
    .await;
}

#[tokio::test]
async fn shell_v2_reports_exit_codes_and_stderr() {
    let device = Device::start().await;
    let mut host = device.host(1 << 20).await;
    host.open(3, 1, "shell,v2,raw:false").await;
    host.expect(b"WRTE", 1, 3, &[0x03, 1, 0, 0, 0, 1]).await;
    host.expect(b"CLSE", 1, 3, b"").await;

    host.open(4, 2, "shell,v2,raw:nosuch --flag").await;
    let message = b"/system/bin/sh: nosuch: inaccessible or not found\n";
    let mut packets = vec![0x02, message.len() as u8, 0, 0, 0];
    packets.extend_from_slice(message);
    packets.extend_from_slice(&[0x03, 1, 0, 0, 0, 127]);
    host.expect(b"WRTE", 2, 4, &packets).await;
    host.expect(b"CLSE", 2, 4, b"").await;
}

#[tokio::test]
async fn raw_shell_merges_stderr_and_exec_sends_stdout_verbatim() {
    let device = Device::start().await;
    let mut host = device.host(1 << 20).await;
    host.open(5, 1, "shell:nosuch").await;
    host.expect(
        b"WRTE",
        1,
        5,
        b"/system/bin/sh: nosuch: inaccessible or not found\n",
    )
    .await;
    host.expect(b"CLSE", 1, 5, b"").await;

    // adb quotes exec arguments; the backend receives them as sent.
    host.open(6, 2, "exec:echo '-p'").await;
    host.expect(b"WRTE", 2, 6, b"'-p'\n").await;
    host.expect(b"CLSE", 2, 6, b"").await;
}

#[tokio::test]
async fn output_waits_for_the_host_okay_and_is_chunked_to_its_maxdata() {
    let device = Device::start().await;
    let mut host = device.host(4096).await;
    host.open(7, 1, "exec:big 10000").await;
    let expected = pattern(10000);
    host.expect(b"WRTE", 1, 7, &expected[..4096]).await;
    // One outstanding WRTE: nothing more until the host's OKAY.
    host.assert_quiet().await;
    host.send(b"OKAY", 7, 1, b"").await;
    host.expect(b"WRTE", 1, 7, &expected[4096..8192]).await;
    host.assert_quiet().await;
    host.send(b"OKAY", 7, 1, b"").await;
    host.expect(b"WRTE", 1, 7, &expected[8192..]).await;
    host.expect(b"CLSE", 1, 7, b"").await;
}

#[tokio::test]
async fn chunks_never_exceed_the_devices_own_maxdata() {
    let device = Device::start().await;
    // A host announcing 4 MiB still gets 1 MiB WRTEs.
    let mut host = device.host(4 << 20).await;
    let len = (MAX_PAYLOAD as usize) * 2 + 5;
    host.open(1, 1, &format!("exec:big {len}")).await;
    let mut got = Vec::new();
    loop {
        let (command, _, _, payload) = host.recv().await;
        match &command {
            b"WRTE" => {
                assert!(payload.len() <= MAX_PAYLOAD as usize);
                got.extend_from_slice(&payload);
                host.send(b"OKAY", 1, 1, b"").await;
            }
            b"CLSE" => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(got.len(), len);
    assert!(got == pattern(len), "bytes differ");
}

#[tokio::test]
async fn unknown_services_and_interactive_shells_are_refused() {
    let device = Device::start().await;
    let mut host = device.host(1 << 20).await;
    for (id, service) in [
        (5, "reboot:"),
        (6, "shell:"),
        (7, "tcpip:5555"),
        (8, "jdwp:42"),
    ] {
        host.send(b"OPEN", id, 0, format!("{service}\0").as_bytes())
            .await;
        host.expect(b"CLSE", 0, id, b"").await;
    }
    host.open(9, 1, "shell:echo ok").await;
    host.expect(b"WRTE", 1, 9, b"ok\n").await;
}

#[tokio::test]
async fn messages_for_unknown_streams_and_opens_before_cnxn_are_ignored() {
    let device = Device::start().await;
    let mut host = Host::connect(device.addr).await;
    host.send(b"OPEN", 1, 0, b"shell:echo early\0").await;
    host.assert_quiet().await;
    host.handshake(1 << 20).await;
    host.send(b"OKAY", 8, 77, b"").await;
    host.send(b"WRTE", 8, 77, b"stray").await;
    host.send(b"CLSE", 8, 77, b"").await;
    host.send(b"AUTH", 2, 0, &[0; 4]).await;
    host.send(b"OPEN", 0, 0, b"shell:echo id zero\0").await;
    host.assert_quiet().await;
    host.open(2, 1, "shell:echo hi").await;
    host.expect(b"WRTE", 1, 2, b"hi\n").await;
}

#[tokio::test]
async fn malformed_input_closes_only_that_connection() {
    let device = Device::start().await;
    let mut bystander = device.host(1 << 20).await;

    let mut bad_magic = frame(b"OKAY", 1, 1, b"");
    bad_magic[20] ^= 0xFF;
    let mut oversized = frame(b"WRTE", 1, 1, b"")[..24].to_vec();
    oversized[12..16].copy_from_slice(&(MAX_PAYLOAD + 1).to_le_bytes());
    let mut oversized_cnxn = frame(b"CNXN", A_VERSION, 1 << 20, b"")[..24].to_vec();
    oversized_cnxn[12..16].copy_from_slice(&4097u32.to_le_bytes());
    let unknown = frame(b"ABCD", 0, 0, b"");
    let cases: [(&str, bool, Vec<u8>); 6] = [
        ("bad magic", true, bad_magic),
        ("WRTE over 1 MiB", true, oversized),
        ("CNXN over 4 KiB", false, oversized_cnxn),
        ("unknown command", true, unknown),
        (
            "garbage",
            false,
            b"GET / HTTP/1.1\r\nHost: phone\r\n\r\n".to_vec(),
        ),
        (
            "maxdata 16",
            false,
            frame(b"CNXN", A_VERSION, 16, b"host::\0"),
        ),
    ];
    for (name, after_handshake, bytes) in cases {
        let mut host = Host::connect(device.addr).await;
        if after_handshake {
            host.handshake(1 << 20).await;
        }
        host.send_raw(&bytes).await;
        host.assert_closed(name).await;
    }

    // EOF in the middle of a message: also closed, and nothing else harmed.
    let mut truncated = Host::connect(device.addr).await;
    truncated.handshake(1 << 20).await;
    truncated
        .send_raw(&frame(b"OPEN", 1, 0, b"shell:echo x\0")[..30])
        .await;
    truncated.io.shutdown().await.unwrap();
    truncated.assert_closed("EOF mid-message").await;

    bystander.open(3, 1, "shell:echo still here").await;
    bystander.expect(b"WRTE", 1, 3, b"still here\n").await;
}

#[tokio::test]
async fn input_to_a_running_command_is_acknowledged_and_dropped() {
    let device = Device::start().await;
    let mut host = device.host(1 << 20).await;
    host.open(1, 1, "shell,v2,raw:wait").await;
    host.send(b"WRTE", 1, 1, &[0x00, 1, 0, 0, 0, b'x']).await; // stdin "x"
    host.expect(b"OKAY", 1, 1, b"").await;
    host.send(b"WRTE", 1, 1, &[0x04, 0, 0, 0, 0]).await; // close stdin
    host.expect(b"OKAY", 1, 1, b"").await;
    device.gate.open();
    let packets = [&[1, 5, 0, 0, 0][..], b"done\n", &[3, 1, 0, 0, 0, 0]].concat();
    host.expect(b"WRTE", 1, 1, &packets).await;
    host.expect(b"CLSE", 1, 1, b"").await;
}

#[tokio::test]
async fn a_host_flooding_a_stream_is_disconnected() {
    let device = Device::start().await;
    let mut host = device.host(1 << 20).await;
    host.open(1, 1, "shell,v2:wait").await;
    // Eight WRTEs in one burst, none waiting for its OKAY.
    let stdin = frame(b"WRTE", 1, 1, &[0, 1, 0, 0, 0, b'x']);
    host.send_raw(&stdin.repeat(8)).await;
    host.assert_closed("a burst of unacknowledged WRTEs").await;
    device.gate.open();
}

#[tokio::test]
async fn a_second_wrte_before_the_okay_drops_the_connection() {
    let device = Device::start().await;
    let mut host = device.host(4096).await;
    host.open(7, 1, "exec:big 10000").await;
    host.expect(b"WRTE", 1, 7, &pattern(4096)).await;
    // The device is waiting for our OKAY; we send two WRTEs instead.
    let wrte = frame(b"WRTE", 7, 1, b"x");
    host.send_raw(&wrte.repeat(2)).await;
    host.assert_closed("two unacknowledged WRTEs").await;
}

#[tokio::test]
async fn streams_are_capped_and_busy_ones_do_not_block_the_connection() {
    let device = Device::start().await;
    let mut host = device.host(1 << 20).await;
    let cap = MAX_STREAMS_PER_CONNECTION as u32;
    for id in 1..=cap {
        host.open(id, id, "shell:wait").await;
    }
    host.send(b"OPEN", cap + 1, 0, b"shell:echo one too many\0")
        .await;
    host.expect(b"CLSE", 0, cap + 1, b"").await;

    // Every slot is held by a backend call that blocks; I/O still flows.
    device.gate.open();
    let mut closed = Vec::new();
    for _ in 0..cap * 2 {
        let (command, local, remote, payload) = host.recv().await;
        match &command {
            b"WRTE" => assert_eq!(payload, b"done\n"),
            b"CLSE" => closed.push((local, remote)),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(closed.len(), cap as usize);
    // Slots of finished streams are reused even before the host's CLSE.
    host.open(100, cap + 1, "shell:echo room again").await;
    host.expect(b"WRTE", cap + 1, 100, b"room again\n").await;
}

#[tokio::test]
async fn install_is_streamed_and_answered_success() {
    let device = Device::start().await;
    let mut host = device.host(1 << 20).await;
    host.open(3, 1, "exec:cmd package 'install' -S 10").await;
    host.send(b"WRTE", 3, 1, b"PK\x03\x04AB").await;
    host.expect(b"OKAY", 1, 3, b"").await;
    host.send(b"WRTE", 3, 1, b"CDEF").await;
    host.expect(b"OKAY", 1, 3, b"").await;
    host.expect(b"WRTE", 1, 3, b"Success\n").await;
    host.expect(b"CLSE", 1, 3, b"").await;
    assert_eq!(device.phone.inputs(), [b"PK\x03\x04ABCDEF"]);
}

#[tokio::test]
async fn framebuffer_sends_the_v2_header_then_rgba_in_the_first_wrte() {
    let device = Device::start().await;
    let mut host = device.host(1 << 20).await;
    host.open(2, 1, "framebuffer:").await;
    #[rustfmt::skip]
    let expected = [
        2, 0, 0, 0,   32, 0, 0, 0,   1, 0, 0, 0,   // version, bpp, color space (sRGB)
        8, 0, 0, 0,   2, 0, 0, 0,    1, 0, 0, 0,   // size, width, height
        0, 0, 0, 0,   8, 0, 0, 0,                  // red offset, length
        16, 0, 0, 0,  8, 0, 0, 0,                  // blue offset, length
        8, 0, 0, 0,   8, 0, 0, 0,                  // green offset, length
        24, 0, 0, 0,  8, 0, 0, 0,                  // alpha offset, length
        255, 0, 0, 255,   0, 0, 255, 128,          // two RGBA pixels
    ];
    host.expect(b"WRTE", 1, 2, &expected).await;
    host.expect(b"CLSE", 1, 2, b"").await;
}

#[tokio::test]
async fn sync_push_stat_list_pull_and_quit() {
    let device = Device::start().await;
    let mut host = device.host(1 << 20).await;
    host.open(4, 1, "sync:").await;

    // adb 29 packs the whole push into one WRTE.
    let push = [
        sync_packet(b"SEND", 20, b"/sdcard/up.txt,33188"),
        sync_packet(b"DATA", 11, b"hello world"),
        sync_packet(b"DONE", 1_700_000_000, b""),
    ]
    .concat();
    host.send(b"WRTE", 4, 1, &push).await;
    host.expect(b"OKAY", 1, 4, b"").await;
    host.expect(b"WRTE", 1, 4, b"OKAY\0\0\0\0").await;
    host.send(b"OKAY", 4, 1, b"").await;

    // adb_client sends a STAT header and its path in separate WRTEs.
    host.send(b"WRTE", 4, 1, &sync_packet(b"STAT", 14, b""))
        .await;
    host.expect(b"OKAY", 1, 4, b"").await;
    host.send(b"WRTE", 4, 1, b"/sdcard/up.txt").await;
    host.expect(b"OKAY", 1, 4, b"").await;
    #[rustfmt::skip]
    let stat = [
        b'S', b'T', b'A', b'T',
        0xA4, 0x81, 0x00, 0x00,  // mode 0o100644
        0x0B, 0x00, 0x00, 0x00,  // size 11
        0x00, 0xF1, 0x53, 0x65,  // mtime 1700000000
    ];
    host.expect(b"WRTE", 1, 4, &stat).await;
    // adb_client never acks a STAT reply: the device still reads (and acks)
    // the next request, but holds its reply until the host's OKAY.

    host.send(b"WRTE", 4, 1, &sync_packet(b"STAT", 5, b"/nope"))
        .await;
    host.expect(b"OKAY", 1, 4, b"").await;
    host.assert_quiet().await;
    host.send(b"OKAY", 4, 1, b"").await;
    host.expect(b"WRTE", 1, 4, &sync_packet(b"STAT", 0, &[0; 8]))
        .await;
    host.send(b"OKAY", 4, 1, b"").await;

    // `adb pull /sdcard/` stats the path with its trailing slash.
    host.send(b"WRTE", 4, 1, &sync_packet(b"LIST", 8, b"/sdcard/"))
        .await;
    host.expect(b"OKAY", 1, 4, b"").await;
    let dir = |name: &str| {
        let mut dent = sync_packet(b"DENT", 0o040771, &[0, 16, 0, 0, 0, 0, 0, 0]);
        dent.extend_from_slice(&(name.len() as u32).to_le_bytes());
        dent.extend_from_slice(name.as_bytes());
        dent
    };
    let mut file = sync_packet(b"DENT", 0o100644, &[11, 0, 0, 0, 0x00, 0xF1, 0x53, 0x65]);
    file.extend_from_slice(&[6, 0, 0, 0]);
    file.extend_from_slice(b"up.txt");
    let listing = [
        dir("Download"),
        dir("Pictures"),
        file,
        sync_packet(b"DONE", 0, &[0; 12]),
    ]
    .concat();
    host.expect(b"WRTE", 1, 4, &listing).await;
    host.send(b"OKAY", 4, 1, b"").await;

    host.send(b"WRTE", 4, 1, &sync_packet(b"RECV", 14, b"/sdcard/up.txt"))
        .await;
    host.expect(b"OKAY", 1, 4, b"").await;
    let pulled = [
        sync_packet(b"DATA", 11, b"hello world"),
        sync_packet(b"DONE", 0, b""),
    ]
    .concat();
    host.expect(b"WRTE", 1, 4, &pulled).await;
    host.send(b"OKAY", 4, 1, b"").await;

    host.send(b"WRTE", 4, 1, &sync_packet(b"QUIT", 0, b""))
        .await;
    host.expect(b"OKAY", 1, 4, b"").await;
    host.expect(b"CLSE", 1, 4, b"").await;
}

#[tokio::test]
async fn sync_recv_keeps_data_packets_whole_and_done_last() {
    let device = Device::start().await;
    let contents = pattern(10_000);
    device
        .phone
        .fs()
        .write("/sdcard/big.bin", contents.clone(), 0o644, 0)
        .unwrap();
    let mut host = device.host(4096).await;
    host.open(2, 1, "sync:").await;
    host.send(b"WRTE", 2, 1, &sync_packet(b"RECV", 15, b"/sdcard/big.bin"))
        .await;
    host.expect(b"OKAY", 1, 2, b"").await;
    // DATA chunks shrink to maxdata - 8 so each packet fits one WRTE.
    host.expect(
        b"WRTE",
        1,
        2,
        &sync_packet(b"DATA", 4088, &contents[..4088]),
    )
    .await;
    host.send(b"OKAY", 2, 1, b"").await;
    host.expect(
        b"WRTE",
        1,
        2,
        &sync_packet(b"DATA", 4088, &contents[4088..8176]),
    )
    .await;
    host.send(b"OKAY", 2, 1, b"").await;
    let last = [
        sync_packet(b"DATA", 1824, &contents[8176..]),
        sync_packet(b"DONE", 0, b""),
    ]
    .concat();
    host.expect(b"WRTE", 1, 2, &last).await;
}

#[tokio::test]
async fn sync_push_in_pieces_with_an_octal_mode_and_errors() {
    let device = Device::start().await;
    let mut host = device.host(1 << 20).await;
    host.open(6, 1, "sync:").await;
    // adb_client: mode "0777", one packet per WRTE, split mid-header too.
    let push = [
        sync_packet(b"SEND", 17, b"/sdcard/a.sh,0777"),
        sync_packet(b"DATA", 3, b"#!x"),
        sync_packet(b"DONE", 9, b""),
    ]
    .concat();
    for piece in [&push[..5], &push[5..30], &push[30..40], &push[40..]] {
        host.send(b"WRTE", 6, 1, piece).await;
        host.expect(b"OKAY", 1, 6, b"").await;
    }
    host.expect(b"WRTE", 1, 6, b"OKAY\0\0\0\0").await;
    let stat = device.phone.stat("/sdcard/a.sh").unwrap();
    assert_eq!((stat.mode, stat.size, stat.mtime), (0o100777, 3, 9));

    host.send(b"OKAY", 6, 1, b"").await;
    host.send(b"WRTE", 6, 1, &sync_packet(b"RECV", 6, b"/nope/"))
        .await;
    host.expect(b"OKAY", 1, 6, b"").await;
    let missing = b"/nope: No such file or directory";
    host.expect(
        b"WRTE",
        1,
        6,
        &sync_packet(b"FAIL", missing.len() as u32, missing),
    )
    .await;

    // A DATA outside a SEND is a protocol error: FAIL, then the stream ends.
    host.send(b"OKAY", 6, 1, b"").await;
    host.send(b"WRTE", 6, 1, &sync_packet(b"DATA", 1, b"x"))
        .await;
    host.expect(b"OKAY", 1, 6, b"").await;
    let error = b"DATA or DONE without SEND";
    host.expect(
        b"WRTE",
        1,
        6,
        &sync_packet(b"FAIL", error.len() as u32, error),
    )
    .await;
    host.expect(b"CLSE", 1, 6, b"").await;
}

#[tokio::test]
async fn the_fault_hook_drops_the_connection_mid_command_once() {
    let device = Device::start().await;
    let mut host = device.host(1 << 20).await;
    device.faults.drop_connection_on("boom");
    host.open(1, 1, "shell:echo fine").await;
    host.expect(b"WRTE", 1, 1, b"fine\n").await;
    host.expect(b"CLSE", 1, 1, b"").await;

    host.open(2, 2, "shell,v2,raw:echo boom").await;
    host.assert_closed("the fault fired").await;
    assert!(!device.faults.is_armed());

    let mut again = device.host(1 << 20).await;
    again.open(1, 1, "shell:echo boom").await;
    again.expect(b"WRTE", 1, 1, b"boom\n").await;
}

#[tokio::test]
async fn shutdown_closes_connections_and_returns() {
    let device = Device::start().await;
    let mut host = device.host(1 << 20).await;
    let _ = device.stop.send(());
    timeout(TIMEOUT, device.server)
        .await
        .expect("run returned")
        .unwrap();
    host.assert_closed("shutdown").await;
    assert!(TcpStream::connect(device.addr).await.is_err());
}

#[tokio::test]
async fn run_without_faults_serves_too() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(run(listener, Arc::new(fake_phone(Arc::default())), async {
        tokio::time::sleep(TIMEOUT).await;
    }));
    let mut host = Host::connect(addr).await;
    host.handshake(1 << 20).await;
    server.abort();
}

#[test]
fn the_blocking_handle_serves_off_the_emulator_ports_until_dropped() {
    use std::io::{Read, Write};
    let adbd = Adbd::start(Arc::new(fake_phone(Arc::default())), None).unwrap();
    let port = adbd.addr().port();
    assert!(!EMULATOR_PORTS.contains(&port));
    assert_eq!(adbd.serial(), format!("127.0.0.1:{port}"));
    assert!(adbd.addr().ip().is_loopback());

    let mut host = std::net::TcpStream::connect(adbd.addr()).unwrap();
    host.set_read_timeout(Some(TIMEOUT)).unwrap();
    host.write_all(&frame(b"CNXN", A_VERSION, 1 << 20, b"host::\0"))
        .unwrap();
    let expected = frame(b"CNXN", A_VERSION, MAX_PAYLOAD, BANNER.as_bytes());
    let mut reply = vec![0u8; expected.len()];
    host.read_exact(&mut reply).unwrap();
    assert_eq!(reply, expected);

    let addr = adbd.addr();
    adbd.stop();
    assert_eq!(
        host.read(&mut [0u8; 1]).unwrap_or(0),
        0,
        "connection closed"
    );
    assert!(std::net::TcpStream::connect(addr).is_err());
}
