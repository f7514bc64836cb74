//! [`AdbDevice`]: a phone reached through the adb server with `adb_client`.
//!
//! `adb_client` is blocking and its reads never time out, so every call runs
//! on a worker thread that owns the connection, and the caller waits at most
//! the call's time limit. A worker that misses its deadline is abandoned (its
//! blocked read ends when the server closes the socket) and the next call
//! starts a fresh one, so one hung command never hangs the agent.
//!
//! `adb_client` drops the exit code of shell-v2 commands, so each command is
//! followed by `echo __btl_rc=$?` and the code is read back from stdout.

use super::framebuffer::{FramebufferHeader, header_len};
use super::{Device, DeviceAction, DeviceError, LONG_PRESS_MS};
use crate::device::ui::{UiNode, parse_uiautomator_xml};
use crate::protocol::{DevicePoint, Size};
use adb_client::ADBDeviceExt;
use adb_client::server_device::ADBServerDevice;
use base64::Engine;
use image::RgbaImage;
use std::io::{Read, Write};
use std::net::{SocketAddrV4, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Port of a default adb server.
pub const DEFAULT_SERVER_PORT: u16 = 5037;
/// Time limit of one device call unless configured otherwise: generous for a
/// full-resolution screenshot over a slow USB link, short enough that a dead
/// device is noticed.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15);

const RC_MARKER: &str = "__btl_rc=";

/// The most bytes one shell command may print on each of its streams: a
/// `screencap -p` of the largest screen [`super::check_screen`] admits
/// fits, a device or server that streams without end does not fill the
/// memory.
pub const MAX_SHELL_OUTPUT: usize = 192 << 20;

/// The most bytes of a `uiautomator dump`: a screen's is tens of
/// kilobytes, a long web page's a few megabytes, and the parser's node cap
/// ([`crate::device::ui::MAX_UI_NODES`]) is reached well before this.
pub const MAX_UI_DUMP: usize = 32 << 20;

/// A stream of a shell command, refused past `limit` bytes.
struct Capped {
    bytes: Vec<u8>,
    limit: usize,
    over: bool,
}

impl Capped {
    fn new(limit: usize) -> Self {
        Self {
            bytes: Vec::new(),
            limit,
            over: false,
        }
    }
}

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.len() > self.limit - self.bytes.len() {
            self.over = true;
            return Err(std::io::Error::other("the output is past its limit"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What a shell command produced, with its exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellResult {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit_code: i32,
}

type Job = Box<dyn FnOnce(&mut ADBServerDevice) + Send>;

/// A thread that owns one `adb_client` device handle and runs jobs on it.
struct Worker {
    jobs: mpsc::Sender<Job>,
}

impl Worker {
    fn spawn(serial: String, server: SocketAddrV4) -> Self {
        let (jobs, queue) = mpsc::channel::<Job>();
        // If the thread cannot start, the queue is dropped with it and the
        // first job reports a stopped worker: no separate error path needed.
        let _ = std::thread::Builder::new()
            .name(format!("adb {serial}"))
            .spawn(move || {
                let mut device = ADBServerDevice::new(serial, Some(server));
                for job in queue {
                    job(&mut device);
                }
            });
        Self { jobs }
    }
}

/// An Android device reached through an adb server.
pub struct AdbDevice {
    serial: String,
    server: SocketAddrV4,
    timeout: Duration,
    worker: Option<Worker>,
}

impl AdbDevice {
    /// Opens the device `serial` on the adb server at `server`, connecting it
    /// first (`adb connect`) when the serial is a TCP address the server does
    /// not list yet. Fails when the device is not online. Each request to
    /// the server waits at most `timeout` (listing, connecting and listing
    /// again: three at most).
    pub fn open(
        serial: &str,
        server: SocketAddrV4,
        timeout: Duration,
    ) -> Result<Self, DeviceError> {
        let listed = list_devices(server, timeout)?;
        let state = match listed.iter().find(|d| d.serial == serial) {
            Some(d) => d.state.clone(),
            None => match serial.parse::<SocketAddrV4>() {
                Ok(addr) => {
                    within("adb connect", timeout, move || {
                        connect(server, addr, timeout)
                    })?;
                    list_devices(server, timeout)?
                        .into_iter()
                        .find(|d| d.serial == serial)
                        .map_or_else(|| "absent".to_string(), |d| d.state)
                }
                Err(_) => "absent".to_string(),
            },
        };
        if state != "device" {
            return Err(DeviceError::Disconnected {
                operation: "open".into(),
                reason: format!("device {serial} is {state}, not online"),
            });
        }
        Ok(Self {
            serial: serial.to_string(),
            server,
            timeout,
            worker: None,
        })
    }

    pub fn serial(&self) -> &str {
        &self.serial
    }

    /// Runs `job` on the worker, waiting at most the time limit.
    fn call<R: Send + 'static>(
        &mut self,
        operation: &str,
        job: impl FnOnce(&mut ADBServerDevice) -> Result<R, DeviceError> + Send + 'static,
    ) -> Result<R, DeviceError> {
        let (serial, server) = (self.serial.clone(), self.server);
        let worker = self
            .worker
            .get_or_insert_with(|| Worker::spawn(serial, server));
        let (reply, answer) = mpsc::sync_channel(1);
        let sent = worker.jobs.send(Box::new(move |device| {
            let _ = reply.send(job(device));
        }));
        if sent.is_err() {
            self.worker = None;
            return Err(DeviceError::Disconnected {
                operation: operation.into(),
                reason: "the adb worker stopped".into(),
            });
        }
        match answer.recv_timeout(self.timeout) {
            Ok(result) => result,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                self.worker = None;
                Err(DeviceError::Timeout {
                    operation: operation.into(),
                    after: self.timeout,
                })
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                self.worker = None;
                Err(DeviceError::Disconnected {
                    operation: operation.into(),
                    reason: "the adb worker stopped".into(),
                })
            }
        }
    }

    /// Runs a shell command and returns its output and exit code.
    pub fn shell(&mut self, command: &str) -> Result<ShellResult, DeviceError> {
        self.shell_within(command, MAX_SHELL_OUTPUT)
    }

    /// [`Self::shell`] with at most `limit` bytes on each stream.
    fn shell_within(&mut self, command: &str, limit: usize) -> Result<ShellResult, DeviceError> {
        let line = format!("{command}; echo {RC_MARKER}$?");
        let op = command.to_string();
        let answer = self.call(command, move |device| {
            let (mut out, mut err) = (Capped::new(limit), Capped::new(limit));
            let done = device.shell_command(&line, Some(&mut out), Some(&mut err));
            if out.over || err.over {
                return Err(DeviceError::Protocol {
                    operation: op,
                    reason: format!("the command printed more than {limit} bytes"),
                });
            }
            done.map_err(|e| disconnected(&op, e))?;
            Ok((out.bytes, err.bytes))
        });
        // A command cut short may leave its socket streaming; dropping the
        // worker closes it now rather than at the next command's connect.
        let (stdout, stderr) = answer.inspect_err(|_| self.worker = None)?;
        split_exit_code(stdout, stderr).ok_or_else(|| DeviceError::Protocol {
            operation: command.into(),
            reason: "the command's exit code never arrived (the connection may have dropped)"
                .into(),
        })
    }

    /// The screen through the `framebuffer:` service (raw pixels, no PNG
    /// encoding on the device); the alternative to `screencap -p`. Read by
    /// btl itself rather than adb_client, which allocates whatever size
    /// the device's header claims.
    pub fn framebuffer(&mut self) -> Result<RgbaImage, DeviceError> {
        let (serial, server) = (self.serial.clone(), self.server);
        let timeout = self.timeout;
        within("framebuffer", timeout, move || {
            read_framebuffer(server, &serial, timeout).map_err(|e| e.of("framebuffer"))
        })
    }

    /// Runs a command that must succeed; returns its stdout.
    pub fn run(&mut self, command: &str) -> Result<Vec<u8>, DeviceError> {
        self.run_within(command, MAX_SHELL_OUTPUT)
    }

    /// [`Self::run`] with at most `limit` bytes on each stream.
    fn run_within(&mut self, command: &str, limit: usize) -> Result<Vec<u8>, DeviceError> {
        let r = self.shell_within(command, limit)?;
        if r.exit_code == 0 {
            Ok(r.stdout)
        } else {
            Err(DeviceError::Command {
                command: command.into(),
                exit_code: r.exit_code,
                stderr: String::from_utf8_lossy(&r.stderr).trim().to_string(),
            })
        }
    }
}

/// Splits `…__btl_rc=N\n` off the end of stdout.
pub fn split_exit_code(mut stdout: Vec<u8>, stderr: Vec<u8>) -> Option<ShellResult> {
    let at = stdout
        .windows(RC_MARKER.len())
        .rposition(|w| w == RC_MARKER.as_bytes())?;
    let code = std::str::from_utf8(&stdout[at + RC_MARKER.len()..])
        .ok()?
        .trim();
    let exit_code = code.parse().ok()?;
    stdout.truncate(at);
    Some(ShellResult {
        stdout,
        stderr,
        exit_code,
    })
}

fn disconnected(operation: &str, e: adb_client::RustADBError) -> DeviceError {
    DeviceError::Disconnected {
        operation: operation.into(),
        reason: e.to_string(),
    }
}

/// One line of `adb devices -l`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ListedDevice {
    pub serial: String,
    pub state: String,
    pub product: String,
    pub model: String,
    pub device: String,
}

/// The devices the adb server knows (`adb devices -l`), waiting at most
/// `timeout` for its answer. A server on this machine that is not running
/// is started, as `adb devices` does. A line that names no device is
/// passed over: one odd line must not hide the others.
pub fn list_devices(
    server: SocketAddrV4,
    timeout: Duration,
) -> Result<Vec<ListedDevice>, DeviceError> {
    let listing = within("adb devices", timeout, move || {
        let ask = || host_request(server, "host:devices-l", timeout);
        let answer = match ask() {
            Err(HostError::Io(e))
                if e.kind() == std::io::ErrorKind::ConnectionRefused
                    && server.ip().is_loopback() =>
            {
                start_server(server.port()).and_then(|()| ask())
            }
            answer => answer,
        };
        answer.map_err(|e| e.of("adb devices"))
    })?;
    Ok(String::from_utf8_lossy(&listing)
        .lines()
        .filter_map(parse_device_line)
        .collect())
}

/// Starts an adb server on this machine's `port` (`adb -P PORT
/// start-server`, which returns once it listens).
fn start_server(port: u16) -> Result<(), HostError> {
    let failed = |why: String| {
        HostError::Reply(format!(
            "no adb server listens on port {port}, and `adb start-server` could not start one: \
             {why}"
        ))
    };
    let out = std::process::Command::new("adb")
        .args(["-P", &port.to_string(), "start-server"])
        .output()
        .map_err(|e| failed(format!("{e} (is adb installed?)")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(failed(
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ))
    }
}

/// The most bytes of a reply of the adb server's host services: its
/// length field has four hex digits.
const MAX_HOST_REPLY: usize = 0xffff;

#[derive(Debug)]
enum HostError {
    Io(std::io::Error),
    Reply(String),
    /// What the device sent through the server, refused as it says.
    Device(DeviceError),
}

impl HostError {
    /// The error of `operation` this is: a broken connection, a reply
    /// that is not what adb sends, or what the device sent refused.
    fn of(self, operation: &str) -> DeviceError {
        match self {
            Self::Io(e) => DeviceError::Disconnected {
                operation: operation.into(),
                reason: e.to_string(),
            },
            Self::Reply(reason) => DeviceError::Protocol {
                operation: operation.into(),
                reason,
            },
            Self::Device(e) => e,
        }
    }
}

impl From<std::io::Error> for HostError {
    fn from(e: std::io::Error) -> Self {
        Self::Io(e)
    }
}

/// `adb connect ADDR`: the server answers `OKAY` either way and says in
/// words whether it connected.
fn connect(server: SocketAddrV4, addr: SocketAddrV4, timeout: Duration) -> Result<(), DeviceError> {
    let reply = host_request(server, &format!("host:connect:{addr}"), timeout)
        .map_err(|e| e.of("adb connect"))?;
    let reply = String::from_utf8_lossy(&reply);
    match reply.starts_with("connected to") || reply.starts_with("already connected to") {
        true => Ok(()),
        false => Err(DeviceError::Disconnected {
            operation: "adb connect".into(),
            reason: reply.trim().to_owned(),
        }),
    }
}

/// Sends one request to the adb server's host services and reads its
/// reply: `OKAY` and a length-prefixed payload, or `FAIL` and a message.
fn host_request(
    server: SocketAddrV4,
    request: &str,
    timeout: Duration,
) -> Result<Vec<u8>, HostError> {
    let mut connection = Connection::open(server, timeout)?;
    connection.ask(request)?;
    connection.read_payload()
}

/// A connection to the adb server that gives up at its deadline, twice
/// the call's time limit from its start: the caller stops waiting at the
/// limit ([`within`]), and the thread left behind then ends too, even
/// with a server or device that keeps sending a byte at a time.
struct Connection {
    stream: TcpStream,
    deadline: Instant,
}

impl Connection {
    fn open(server: SocketAddrV4, timeout: Duration) -> Result<Self, HostError> {
        let patience = timeout.saturating_mul(2);
        let deadline = Instant::now().checked_add(patience).ok_or_else(|| {
            HostError::Reply(format!(
                "a time limit of {timeout:?} is past what the clock counts"
            ))
        })?;
        let stream = TcpStream::connect_timeout(&server.into(), patience)?;
        stream.set_write_timeout(Some(patience))?;
        Ok(Self { stream, deadline })
    }

    /// Reads exactly `buffer`'s length before the deadline; the other end
    /// closing first is named by `what` was still to come.
    fn read_all(&mut self, buffer: &mut [u8], what: &str) -> Result<(), HostError> {
        let mut filled = 0;
        while filled < buffer.len() {
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(HostError::Io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("the server had not sent its {what} by the deadline"),
                )));
            }
            self.stream.set_read_timeout(Some(left))?;
            match self.stream.read(&mut buffer[filled..]) {
                Ok(0) => {
                    return Err(HostError::Reply(format!(
                        "the server closed the connection before its {what}"
                    )));
                }
                Ok(n) => filled += n,
                // A read timeout (which the kernel may round to a tick
                // either way) sends the loop back to the deadline's check.
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::Interrupted
                            | std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => return Err(HostError::Io(e)),
            }
        }
        Ok(())
    }

    /// Sends one request and reads its status: `OKAY`, or `FAIL` and the
    /// server's message as the error.
    fn ask(&mut self, request: &str) -> Result<(), HostError> {
        self.stream
            .write_all(format!("{:04x}{request}", request.len()).as_bytes())?;
        let mut status = [0; 4];
        self.read_all(&mut status, "status")?;
        match &status {
            b"OKAY" => Ok(()),
            b"FAIL" => Err(HostError::Reply(format!(
                "the server refused: {}",
                String::from_utf8_lossy(&self.read_payload()?)
            ))),
            _ => Err(HostError::Reply(format!(
                "the status {:?} is neither OKAY nor FAIL (is it an adb server?)",
                status.escape_ascii().to_string()
            ))),
        }
    }

    /// A payload after its four hex digits of length.
    fn read_payload(&mut self) -> Result<Vec<u8>, HostError> {
        let mut length = [0; 4];
        self.read_all(&mut length, "reply's length")?;
        let length = std::str::from_utf8(&length)
            .ok()
            .and_then(|hex| usize::from_str_radix(hex, 16).ok())
            .filter(|&n| n <= MAX_HOST_REPLY)
            .ok_or_else(|| {
                HostError::Reply(format!(
                    "{:?} is no length of four hex digits",
                    length.escape_ascii().to_string()
                ))
            })?;
        let mut payload = vec![0; length];
        self.read_all(&mut payload, "whole reply")?;
        Ok(payload)
    }
}

/// The screen through the device's `framebuffer:` service: the server is
/// asked to switch this connection to the device, then for the service.
/// The header is checked before anything is allocated for the pixels
/// ([`FramebufferHeader::parse`]).
fn read_framebuffer(
    server: SocketAddrV4,
    serial: &str,
    timeout: Duration,
) -> Result<RgbaImage, HostError> {
    let mut connection = Connection::open(server, timeout)?;
    connection.ask(&format!("host:transport:{serial}"))?;
    connection.ask("framebuffer:")?;
    let mut version = [0; 4];
    connection.read_all(&mut version, "framebuffer header")?;
    let mut header = vec![0; header_len(version).map_err(HostError::Device)?];
    header[..4].copy_from_slice(&version);
    connection.read_all(&mut header[4..], "whole framebuffer header")?;
    let header = FramebufferHeader::parse(&header).map_err(HostError::Device)?;
    let mut pixels = vec![0; header.pixel_bytes()];
    connection.read_all(&mut pixels, "framebuffer's pixels")?;
    header.decode(pixels).map_err(HostError::Device)
}

/// The fields adb writes after a device's state, each `key:value`.
const DEVICE_FIELDS: [&str; 5] = ["usb:", "product:", "model:", "device:", "transport_id:"];

/// One line of `adb devices -l`: the serial (which may hold spaces: AOSP's
/// adb writes `(no serial number)` for an empty one), the state (one word
/// such as `device` or `offline`, or `no permissions (…); see […]`), then
/// `key:value` fields, which AOSP's adb puts last so that a reader can
/// find them from the end. `None` for a line without a serial.
pub fn parse_device_line(line: &str) -> Option<ListedDevice> {
    let mut words: Vec<&str> = line.split_whitespace().collect();
    let fields_from = words
        .iter()
        .rposition(|w| !DEVICE_FIELDS.iter().any(|k| w.starts_with(k)))
        .map_or(0, |last| last + 1);
    let fields = words.split_off(fields_from);
    // What is left is the serial and the state.
    let state_at = match words.windows(2).position(|w| w == ["no", "permissions"]) {
        Some(at) => at,
        None => words.len().checked_sub(1)?,
    };
    if state_at == 0 {
        return None;
    }
    let mut device = ListedDevice {
        serial: words[..state_at].join(" "),
        state: words[state_at..].join(" "),
        product: String::new(),
        model: String::new(),
        device: String::new(),
    };
    for field in fields {
        let (key, value) = field.split_once(':').unwrap_or((field, ""));
        let slot = match key {
            "product" => &mut device.product,
            "model" => &mut device.model,
            "device" => &mut device.device,
            _ => continue,
        };
        *slot = value.to_owned();
    }
    Some(device)
}

/// Runs `request` to the adb server on a thread of its own and waits at
/// most `timeout` for it: adb_client's requests have no time limit, and a
/// server that takes the connection but never answers would hang the
/// caller. A request that times out is left to its thread, blocked on its
/// socket until the server answers or closes it: a thread per refusal,
/// which ends a command anyway.
fn within<R: Send + 'static>(
    operation: &str,
    timeout: Duration,
    request: impl FnOnce() -> Result<R, DeviceError> + Send + 'static,
) -> Result<R, DeviceError> {
    let (reply, answer) = mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("btl-adb-request".into())
        .spawn(move || {
            let _ = reply.send(request());
        })
        .map_err(|e| DeviceError::Disconnected {
            operation: operation.into(),
            reason: format!("cannot start a thread: {e}"),
        })?;
    match answer.recv_timeout(timeout) {
        Ok(result) => result,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(DeviceError::Timeout {
            operation: operation.into(),
            after: timeout,
        }),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(DeviceError::Disconnected {
            operation: operation.into(),
            reason: "the adb request stopped".into(),
        }),
    }
}

/// Quotes one word for the device's POSIX shell.
fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The shell command that performs an action, `None` for a wait.
fn action_command(action: &DeviceAction) -> Option<String> {
    let point = |p: &DevicePoint| format!("{} {}", p.x, p.y);
    Some(match action {
        DeviceAction::Tap { at } => format!("input tap {}", point(at)),
        DeviceAction::LongPress { at } => {
            format!("input swipe {} {} {LONG_PRESS_MS}", point(at), point(at))
        }
        DeviceAction::Swipe {
            from,
            to,
            duration_ms,
        } => {
            format!("input swipe {} {} {duration_ms}", point(from), point(to))
        }
        DeviceAction::Type { text } => type_command(text),
        DeviceAction::Back => "input keyevent KEYCODE_BACK".into(),
        DeviceAction::Home => "input keyevent KEYCODE_HOME".into(),
        DeviceAction::Wait { .. } => return None,
    })
}

/// `input text` handles printable ASCII only (and reads `%s` as a space);
/// other text goes through the ADB keyboard broadcast, base64-encoded so no
/// shell or intent quoting can mangle it.
fn type_command(text: &str) -> String {
    let plain_ascii =
        text.chars().all(|c| c.is_ascii_graphic() || c == ' ') && !text.contains("%s");
    if plain_ascii && !text.is_empty() {
        format!("input text {}", shell_quote(&text.replace(' ', "%s")))
    } else {
        let b64 = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
        format!("am broadcast -a ADB_INPUT_B64 --es msg {b64}")
    }
}

/// The tree `uiautomator dump /dev/tty` printed; `None` when it printed no
/// document (a screen uiautomator cannot dump, such as a secure window).
/// The parser skips the text around the document itself (the trailing
/// "UI hierchary dumped to" line, a stray closing tag before it). A NUL
/// byte is refused: uiautomator writes UTF-8 and replaces the characters
/// XML forbids, NUL among them, so such a dump is another encoding (UTF-16
/// puts a NUL beside every ASCII letter) that would read as no document.
fn ui_tree_of_dump(out: &[u8]) -> Result<Option<UiNode>, DeviceError> {
    if let Some(at) = out.iter().position(|&b| b == 0) {
        return Err(DeviceError::Protocol {
            operation: "uiautomator dump".into(),
            reason: format!(
                "a NUL byte at byte {at} of {}: not the UTF-8 XML uiautomator writes \
                 (UTF-16?)",
                out.len()
            ),
        });
    }
    let text = String::from_utf8_lossy(out);
    if !text.contains("<?xml") && !text.contains("<hierarchy") {
        return Ok(None);
    }
    parse_uiautomator_xml(&text)
        .map(Some)
        .map_err(|e| DeviceError::Protocol {
            operation: "uiautomator dump".into(),
            reason: e.to_string(),
        })
}

/// Decodes what `screencap -p` printed, refusing a size no screen has
/// before the pixels are decoded: a few hundred kilobytes of PNG can
/// claim gigabytes of them.
pub fn screenshot_of_png(png: &[u8]) -> Result<RgbaImage, DeviceError> {
    super::decode_screenshot(png, Some(image::ImageFormat::Png))
        .map(|image| image.to_rgba8())
        .map_err(|reason| DeviceError::Protocol {
            operation: "screencap -p".into(),
            reason,
        })
}

/// Reads `wm size`: an override size wins over the physical one.
pub fn parse_wm_size(text: &str) -> Option<Size> {
    let size_after = |label: &str| {
        text.lines().find_map(|l| {
            let (w, h) = l.trim().strip_prefix(label)?.trim().split_once('x')?;
            Some(Size::new(w.trim().parse().ok()?, h.trim().parse().ok()?))
        })
    };
    size_after("Override size:").or_else(|| size_after("Physical size:"))
}

impl Device for AdbDevice {
    fn name(&self) -> String {
        self.serial.clone()
    }

    fn screen_size(&mut self) -> Result<Size, DeviceError> {
        let out = self.run("wm size")?;
        let text = String::from_utf8_lossy(&out);
        let size = parse_wm_size(&text).ok_or_else(|| DeviceError::Protocol {
            operation: "wm size".into(),
            reason: format!("no size in {:?}", text.trim()),
        })?;
        super::check_screen("wm size", size.width, size.height)
    }

    fn screenshot(&mut self) -> Result<RgbaImage, DeviceError> {
        let png = self.run("screencap -p")?;
        screenshot_of_png(&png)
    }

    fn ui_tree(&mut self) -> Result<Option<UiNode>, DeviceError> {
        let out = self.run_within("uiautomator dump /dev/tty", MAX_UI_DUMP)?;
        ui_tree_of_dump(&out)
    }

    fn perform(&mut self, action: &DeviceAction) -> Result<(), DeviceError> {
        match action_command(action) {
            Some(command) => self.run(&command).map(|_| ()),
            None => {
                if let DeviceAction::Wait { ms } = action {
                    std::thread::sleep(Duration::from_millis(u64::from(*ms)));
                }
                Ok(())
            }
        }
    }

    fn setting(&mut self, namespace: &str, key: &str) -> Result<Option<String>, DeviceError> {
        let out = self.run(&format!(
            "settings get {} {}",
            shell_quote(namespace),
            shell_quote(key)
        ))?;
        let value = String::from_utf8_lossy(&out).trim().to_string();
        // Android prints the word `null` for a key that was never set.
        Ok((value != "null").then_some(value))
    }

    fn put_setting(&mut self, namespace: &str, key: &str, value: &str) -> Result<(), DeviceError> {
        self.run(&format!(
            "settings put {} {} {}",
            shell_quote(namespace),
            shell_quote(key),
            shell_quote(value)
        ))
        .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that takes the connection and never answers (as a wedged
    /// adb server does) fails the listing after its time limit instead of
    /// hanging `btl devices` and the opening of every device.
    #[test]
    fn a_server_that_never_answers_times_out() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let std::net::SocketAddr::V4(server) = listener.local_addr().unwrap() else {
            panic!("an IPv4 listener");
        };
        let limit = Duration::from_millis(300);
        let e = list_devices(server, limit).unwrap_err();
        assert!(
            matches!(&e, DeviceError::Timeout { operation, after } if operation == "adb devices" && *after == limit),
            "{e:?}"
        );
        let e = AdbDevice::open("127.0.0.1:5555", server, limit)
            .err()
            .unwrap();
        assert!(matches!(e, DeviceError::Timeout { .. }), "{e:?}");
        drop(listener);
    }

    /// An adb server that lists one device, `hostile0`, and answers every
    /// shell command with `answer`, given the command and its socket (and
    /// the `framebuffer:` service, given that name).
    fn fake_server(answer: fn(&str, &mut std::net::TcpStream)) -> SocketAddrV4 {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let std::net::SocketAddr::V4(server) = listener.local_addr().unwrap() else {
            panic!("an IPv4 listener");
        };
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                std::thread::spawn(move || {
                    loop {
                        let mut length = [0; 4];
                        if stream.read_exact(&mut length).is_err() {
                            return;
                        }
                        let length =
                            usize::from_str_radix(std::str::from_utf8(&length).unwrap(), 16)
                                .unwrap();
                        let mut request = vec![0; length];
                        stream.read_exact(&mut request).unwrap();
                        let request = String::from_utf8(request).unwrap();
                        let reply = |stream: &mut std::net::TcpStream, body: &str| {
                            let _ = write!(stream, "OKAY{:04x}{body}", body.len());
                        };
                        if request == "host:devices-l" {
                            return reply(&mut stream, "hostile0 device transport_id:1\n");
                        } else if request == "host:features" {
                            return reply(&mut stream, "");
                        } else if let Some(addr) = request.strip_prefix("host:connect:") {
                            let refused =
                                format!("failed to connect to {addr}: Connection refused");
                            return reply(&mut stream, &refused);
                        } else if request == "host:transport:hostile0" {
                            let _ = stream.write_all(b"OKAY");
                        } else if let Some(command) = request.strip_prefix("shell:") {
                            let _ = stream.write_all(b"OKAY");
                            return answer(command, &mut stream);
                        } else if request == "framebuffer:" {
                            let _ = stream.write_all(b"OKAY");
                            return answer(&request, &mut stream);
                        } else {
                            let _ = stream.write_all(b"FAIL0004nope");
                            return;
                        }
                    }
                });
            }
        });
        server
    }

    /// A device (or server) that prints without end fails the command at
    /// the output limit instead of filling the memory, and the next
    /// command is answered.
    #[test]
    fn endless_output_is_cut_at_the_limit() {
        use std::io::Write;
        let server = fake_server(|command, stream| {
            if command.starts_with("wm size") {
                let block = vec![b'A'; 1 << 16];
                while stream.write_all(&block).is_ok() {}
            } else {
                let _ = stream.write_all(b"ok\n__btl_rc=0\n");
            }
        });
        let mut device = AdbDevice::open("hostile0", server, Duration::from_secs(20)).unwrap();
        let e = device.shell_within("wm size", 1 << 20).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unexpected reply to wm size: the command printed more than 1048576 bytes"
        );
        let answered = device.shell_within("echo ok", 1 << 20).unwrap();
        assert_eq!(
            (answered.stdout.as_slice(), answered.exit_code),
            (&b"ok\n"[..], 0)
        );
    }

    /// A `framebuffer:` header that claims 4 GiB of pixels for a 1x1
    /// screen is refused before anything is allocated for them; so is a
    /// header of an unknown version.
    #[test]
    fn a_framebuffer_header_is_checked_before_its_pixels_are_read() {
        use std::io::Write;
        let server = fake_server(|_, stream| {
            let fields: [u32; 14] = [2, 32, 1, u32::MAX, 1, 1, 0, 8, 16, 8, 8, 8, 24, 8];
            let header: Vec<u8> = fields.iter().flat_map(|f| f.to_le_bytes()).collect();
            let _ = stream.write_all(&header);
        });
        let mut device = AdbDevice::open("hostile0", server, Duration::from_secs(20)).unwrap();
        let e = device.framebuffer().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unexpected reply to framebuffer: the header says 4294967295 bytes of pixels, where \
             1x1 at 32 bits a pixel is 4"
        );

        let server = fake_server(|_, stream| {
            let _ = stream.write_all(&7u32.to_le_bytes());
        });
        let mut device = AdbDevice::open("hostile0", server, Duration::from_secs(20)).unwrap();
        assert_eq!(
            device.framebuffer().unwrap_err().to_string(),
            "unexpected reply to framebuffer: header version 7 is neither 1 nor 2, the two adb has"
        );
    }

    /// A device that stops sending halfway through its pixels, and a
    /// server that refuses the device, are named as such.
    #[test]
    fn a_framebuffer_cut_short_or_refused_is_named() {
        use std::io::Write;
        let server = fake_server(|_, stream| {
            let fields: [u32; 14] = [2, 32, 1, 16, 2, 2, 0, 8, 16, 8, 8, 8, 24, 8];
            let header: Vec<u8> = fields.iter().flat_map(|f| f.to_le_bytes()).collect();
            let _ = stream.write_all(&[&header[..], &[0; 10]].concat());
        });
        let mut device = AdbDevice::open("hostile0", server, Duration::from_secs(20)).unwrap();
        assert_eq!(
            device.framebuffer().unwrap_err().to_string(),
            "unexpected reply to framebuffer: the server closed the connection before its \
             framebuffer's pixels"
        );
        let mut device = AdbDevice {
            serial: "gone0".into(),
            ..device
        };
        assert_eq!(
            device.framebuffer().unwrap_err().to_string(),
            "unexpected reply to framebuffer: the server refused: nope"
        );
    }

    /// A TCP serial the server does not list is connected first; the
    /// server's `OKAY` with words of failure is a failure, in its words.
    #[test]
    fn a_refused_adb_connect_is_said_in_the_server_s_words() {
        let server = fake_server(|_, _| {});
        let e = AdbDevice::open("127.0.0.1:1", server, Duration::from_secs(20))
            .err()
            .unwrap();
        assert!(
            matches!(&e, DeviceError::Disconnected { operation, reason }
                if operation == "adb connect"
                    && reason == "failed to connect to 127.0.0.1:1: Connection refused"),
            "{e:?}"
        );
    }

    /// A server that sends a byte at a time, each within the socket's
    /// timeout, is given up on at the connection's deadline: twice the
    /// call's limit from its start, however long the reply still is.
    #[test]
    fn a_trickling_server_is_given_up_on_at_the_deadline() {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let std::net::SocketAddr::V4(server) = listener.local_addr().unwrap() else {
            panic!("an IPv4 listener");
        };
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            while stream.write_all(b"x").is_ok() {
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let limit = Duration::from_millis(150);
        let started = Instant::now();
        let mut connection = Connection::open(server, limit).unwrap();
        let mut pixels = vec![0; 1 << 20];
        let e = connection
            .read_all(&mut pixels, "framebuffer's pixels")
            .unwrap_err();
        let took = started.elapsed();
        match e {
            HostError::Io(e) => assert_eq!(
                e.to_string(),
                "the server had not sent its framebuffer's pixels by the deadline"
            ),
            _ => panic!("a time-out"),
        }
        assert!(took >= 2 * limit, "{took:?}");
    }

    /// What is not an adb server, or one that hangs up, is named as such.
    #[test]
    fn replies_that_are_not_an_adb_server_s_are_named() {
        use std::io::{Read, Write};
        let serve = |reply: &'static [u8]| {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let std::net::SocketAddr::V4(server) = listener.local_addr().unwrap() else {
                panic!("an IPv4 listener");
            };
            std::thread::spawn(move || {
                let (mut stream, _) = listener.accept().unwrap();
                let mut request = [0; 18];
                stream.read_exact(&mut request).unwrap();
                assert_eq!(&request, b"000ehost:devices-l");
                stream.write_all(reply).unwrap();
            });
            server
        };
        let cases: [(&[u8], &str); 4] = [
            (
                b"HTTP/1.1 400 Bad Request\r\n",
                "unexpected reply to adb devices: the status \"HTTP\" is neither OKAY nor FAIL \
                 (is it an adb server?)",
            ),
            (
                b"FAIL0010device not found",
                "unexpected reply to adb devices: the server refused: device not found",
            ),
            (
                b"OKAY00",
                "unexpected reply to adb devices: the server closed the connection before its \
                 reply's length",
            ),
            (
                b"OKAYzzzz",
                "unexpected reply to adb devices: \"zzzz\" is no length of four hex digits",
            ),
        ];
        for (reply, expected) in cases {
            let e = list_devices(serve(reply), Duration::from_secs(10)).unwrap_err();
            assert_eq!(e.to_string(), expected);
        }
        let listed = list_devices(
            serve(b"OKAY0027emulator-5554\tdevice\nlonely\n\nx offline\n"),
            Duration::from_secs(10),
        )
        .unwrap();
        let serials: Vec<_> = listed.iter().map(|d| d.serial.as_str()).collect();
        assert_eq!(serials, ["emulator-5554", "x"]);
    }

    /// As `adb devices` does, a listing from this machine starts the adb
    /// server where none runs (Debian's adb, on a free port of its own).
    #[test]
    fn a_local_server_that_is_not_running_is_started() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, port);
        let listed = list_devices(server, Duration::from_secs(30));
        let _ = std::process::Command::new("adb")
            .args(["-P", &port.to_string(), "kill-server"])
            .output();
        assert!(listed.is_ok(), "{listed:?}");
    }

    #[test]
    fn device_lines_are_read_as_adb_prints_them() {
        let line = |serial: &str, state: &str, product: &str, model: &str, device: &str| {
            Some(ListedDevice {
                serial: serial.into(),
                state: state.into(),
                product: product.into(),
                model: model.into(),
                device: device.into(),
            })
        };
        let cases = [
            (
                "emulator-5554          device product:sdk_gphone64_x86_64 \
                 model:sdk_gphone64_x86_64 device:emu64xa transport_id:1",
                line(
                    "emulator-5554",
                    "device",
                    "sdk_gphone64_x86_64",
                    "sdk_gphone64_x86_64",
                    "emu64xa",
                ),
            ),
            // An older server's line, without a transport id.
            (
                "emulator-5556 offline product:sdk model:sdk device:emu",
                line("emulator-5556", "offline", "sdk", "sdk", "emu"),
            ),
            (
                "0123456789ABCDEF       no permissions (missing udev rules? user is in the \
                 plugdev group); see [http://developer.android.com/tools/device.html] \
                 usb:1-1 transport_id:3",
                line(
                    "0123456789ABCDEF",
                    "no permissions (missing udev rules? user is in the plugdev group); see \
                     [http://developer.android.com/tools/device.html]",
                    "",
                    "",
                    "",
                ),
            ),
            (
                "192.168.1.5:5555\tunauthorized usb:2-1 transport_id:9",
                line("192.168.1.5:5555", "unauthorized", "", "", ""),
            ),
            // AOSP's adb writes this for a device with an empty serial.
            (
                "(no serial number)     device usb:1-1 transport_id:4",
                line("(no serial number)", "device", "", "", ""),
            ),
            ("lonely", None),
            ("no permissions (x); see [y]", None),
            ("", None),
            ("   ", None),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_device_line(text), expected, "{text:?}");
        }
    }

    /// What `screencap -p` sent that is no screenshot is refused as its
    /// reply (the decoding itself is `device::decode_screenshot`'s).
    #[test]
    fn a_screencap_that_is_no_screenshot_is_refused_as_its_reply() {
        let e = screenshot_of_png(b"\x89PNG but no more").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("unexpected reply to screencap -p: not an image (16 bytes): "),
            "{e}"
        );
    }

    #[test]
    fn exit_code_is_split_off_stdout() {
        let r = split_exit_code(b"hi\n__btl_rc=0\n".to_vec(), vec![]).unwrap();
        assert_eq!((r.stdout.as_slice(), r.exit_code), (&b"hi\n"[..], 0));
        let r = split_exit_code(b"no newline__btl_rc=127\n".to_vec(), b"err".to_vec()).unwrap();
        assert_eq!(
            (r.stdout.as_slice(), r.exit_code),
            (&b"no newline"[..], 127)
        );
        let r = split_exit_code(b"__btl_rc=fake __btl_rc=1\n".to_vec(), vec![]).unwrap();
        assert_eq!(
            (r.stdout.as_slice(), r.exit_code),
            (&b"__btl_rc=fake "[..], 1)
        );
        assert!(split_exit_code(b"cut off".to_vec(), vec![]).is_none());
    }

    /// What `uiautomator dump /dev/tty` prints: the document and its
    /// trailer line. No document is no tree; a closing tag before the
    /// document (the end of a cut-off earlier dump) is skipped.
    #[test]
    fn a_dump_is_read_from_what_uiautomator_printed() {
        let doc = r#"<?xml version='1.0' ?><hierarchy rotation="0"><node text="OK" bounds="[0,0][10,20]" /></hierarchy>"#;
        for printed in [
            format!("{doc}UI hierchary dumped to: /dev/tty\n"),
            format!("</hierarchy>\n{doc}"),
        ] {
            let tree = ui_tree_of_dump(printed.as_bytes()).unwrap().unwrap();
            assert_eq!((tree.text.as_str(), tree.bounds), ("OK", [0, 0, 10, 20]));
        }
        assert_eq!(
            ui_tree_of_dump(b"ERROR: null root node returned by UiTestAutomationBridge.\n")
                .unwrap(),
            None
        );
        let cut = ui_tree_of_dump(
            b"</hierarchy>\n<?xml version='1.0' ?><hierarchy><node bounds=\"[0,0][1,1]\"",
        );
        assert!(matches!(cut, Err(DeviceError::Protocol { .. })), "{cut:?}");
        // The same document in UTF-16 (little-endian, with its mark).
        let utf16: Vec<u8> = [0xFF, 0xFE]
            .into_iter()
            .chain(doc.encode_utf16().flat_map(u16::to_le_bytes))
            .collect();
        let e = ui_tree_of_dump(&utf16).unwrap_err().to_string();
        assert!(
            e.contains("a NUL byte at byte 3 of 198: not the UTF-8 XML uiautomator writes"),
            "{e}"
        );
    }

    #[test]
    fn actions_become_android_input_commands() {
        let p = DevicePoint { x: 10, y: 20 };
        let q = DevicePoint { x: 30, y: 40 };
        let cases = [
            (DeviceAction::Tap { at: p }, "input tap 10 20"),
            (
                DeviceAction::LongPress { at: p },
                "input swipe 10 20 10 20 800",
            ),
            (
                DeviceAction::Swipe {
                    from: p,
                    to: q,
                    duration_ms: 300,
                },
                "input swipe 10 20 30 40 300",
            ),
            (DeviceAction::Back, "input keyevent KEYCODE_BACK"),
            (DeviceAction::Home, "input keyevent KEYCODE_HOME"),
            (
                DeviceAction::Type {
                    text: "it's a test".into(),
                },
                r"input text 'it'\''s%sa%stest'",
            ),
            // "héllo" in UTF-8, base64-encoded by hand: 68 c3 a9 6c 6c 6f -> aMOpbGxv.
            (
                DeviceAction::Type {
                    text: "héllo".into(),
                },
                "am broadcast -a ADB_INPUT_B64 --es msg aMOpbGxv",
            ),
        ];
        for (action, command) in cases {
            assert_eq!(action_command(&action).as_deref(), Some(command));
        }
        assert_eq!(action_command(&DeviceAction::Wait { ms: 5 }), None);
    }

    #[test]
    fn wm_size_prefers_the_override() {
        assert_eq!(
            parse_wm_size("Physical size: 1080x2400\n"),
            Some(Size::new(1080, 2400))
        );
        assert_eq!(
            parse_wm_size("Physical size: 1440x3120\r\nOverride size: 1080x2340\r\n"),
            Some(Size::new(1080, 2340))
        );
        assert_eq!(parse_wm_size("garbage"), None);
    }
}
