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

use super::{Device, DeviceAction, DeviceError, LONG_PRESS_MS};
use crate::device::ui::{UiNode, parse_uiautomator_xml};
use crate::protocol::{DevicePoint, Size};
use adb_client::ADBDeviceExt;
use adb_client::server::{ADBServer, DeviceState};
use adb_client::server_device::ADBServerDevice;
use base64::Engine;
use image::RgbaImage;
use std::net::SocketAddrV4;
use std::sync::mpsc;
use std::time::Duration;

/// Port of a default adb server.
pub const DEFAULT_SERVER_PORT: u16 = 5037;
/// Time limit of one device call unless configured otherwise: generous for a
/// full-resolution screenshot over a slow USB link, short enough that a dead
/// device is noticed.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15);

const RC_MARKER: &str = "__btl_rc=";

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
                        ADBServer::new(server)
                            .connect_device(addr)
                            .map_err(|e| disconnected("adb connect", e))
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
        let line = format!("{command}; echo {RC_MARKER}$?");
        let op = command.to_string();
        let (stdout, stderr) = self.call(command, move |device| {
            let (mut out, mut err) = (Vec::new(), Vec::new());
            device
                .shell_command(&line, Some(&mut out), Some(&mut err))
                .map_err(|e| disconnected(&op, e))?;
            Ok((out, err))
        })?;
        split_exit_code(stdout, stderr).ok_or_else(|| DeviceError::Protocol {
            operation: command.into(),
            reason: "the command's exit code never arrived (the connection may have dropped)"
                .into(),
        })
    }

    /// The screen through the `framebuffer:` service (raw RGBA, no PNG
    /// encoding on the device); the alternative to `screencap -p`.
    pub fn framebuffer(&mut self) -> Result<RgbaImage, DeviceError> {
        self.call("framebuffer", |device| {
            device
                .framebuffer_inner()
                .map_err(|e| disconnected("framebuffer", e))
        })
    }

    /// Runs a command that must succeed; returns its stdout.
    pub fn run(&mut self, command: &str) -> Result<Vec<u8>, DeviceError> {
        let r = self.shell(command)?;
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
/// `timeout` for its answer.
pub fn list_devices(
    server: SocketAddrV4,
    timeout: Duration,
) -> Result<Vec<ListedDevice>, DeviceError> {
    let devices = within("adb devices", timeout, move || {
        ADBServer::new(server)
            .devices_long()
            .map_err(|e| disconnected("adb devices", e))
    })?;
    Ok(devices
        .into_iter()
        .map(|d| ListedDevice {
            serial: d.identifier,
            state: match d.state {
                DeviceState::Device => "device".to_string(),
                other => other.to_string(),
            },
            product: d.product,
            model: d.model,
            device: d.device,
        })
        .collect())
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
/// "UI hierchary dumped to" line, a stray closing tag before it).
fn ui_tree_of_dump(out: &[u8]) -> Result<Option<UiNode>, DeviceError> {
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
        parse_wm_size(&text).ok_or_else(|| DeviceError::Protocol {
            operation: "wm size".into(),
            reason: format!("no size in {:?}", text.trim()),
        })
    }

    fn screenshot(&mut self) -> Result<RgbaImage, DeviceError> {
        let png = self.run("screencap -p")?;
        image::load_from_memory_with_format(&png, image::ImageFormat::Png)
            .map(|img| img.to_rgba8())
            .map_err(|e| DeviceError::Protocol {
                operation: "screencap -p".into(),
                reason: format!("not a PNG ({} bytes): {e}", png.len()),
            })
    }

    fn ui_tree(&mut self) -> Result<Option<UiNode>, DeviceError> {
        let out = self.run("uiautomator dump /dev/tty")?;
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
