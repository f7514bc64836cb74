//! The services a host can OPEN, and what each sends back.
//!
//! A service name is parsed once, when the stream is opened, so an unknown
//! name is refused with `CLSE(0, host id)` before any stream exists. Each
//! accepted service then runs as its own task over a [`Stream`], calling the
//! synchronous [`AdbBackend`] through [`blocking`] so no I/O task ever waits
//! on the phone.
//!
//! Deliberate differences from a real adbd:
//! - `exec:` sends stdout only (adbd merges stderr in), so binary output such
//!   as `screencap -p` is never polluted by a warning.
//! - An empty command (an interactive PTY shell) is refused: the virtual
//!   phone has no terminal.

use super::fault::Faults;
use super::shell_v2;
use super::stream::Stream;
use super::sync;
use crate::sim::backend::{AdbBackend, Framebuffer};
use std::sync::Arc;

/// Largest streamed input accepted; like sync uploads, the APK is held in
/// memory, so anything bigger is a runaway host.
const MAX_INPUT_BYTES: u64 = 256 * 1024 * 1024;

/// What every service needs from the device.
#[derive(Clone)]
pub(super) struct Context {
    pub(super) backend: Arc<dyn AdbBackend>,
    pub(super) faults: Faults,
}

/// How a shell command's output goes back to the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Output {
    /// `shell:`: stdout then stderr, raw; no exit code.
    Raw,
    /// `shell,v2,…:`: shell protocol packets ending with the exit code.
    V2,
    /// `exec:`: stdout and stderr on one stream as written, raw and
    /// binary-safe (adbd gives a command without the shell protocol one
    /// socket for both).
    Exec,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Service {
    Shell {
        command: String,
        output: Output,
    },
    /// `exec:cmd package 'install' … -S SIZE` (or `'install-write'`): the
    /// command reads SIZE bytes of APK that the host streams.
    Streamed {
        command: String,
        size: u64,
    },
    Sync,
    Framebuffer,
}

impl Service {
    /// Parses an OPEN payload (trailing NULs already stripped); `None` for a
    /// service this device does not offer.
    pub(super) fn parse(name: &str) -> Option<Service> {
        let shell = |command: &str, output| {
            (!command.is_empty()).then(|| Service::Shell {
                command: command.to_string(),
                output,
            })
        };
        if let Some(command) = name.strip_prefix("shell:") {
            return shell(command, Output::Raw);
        }
        if let Some(rest) = name.strip_prefix("shell,") {
            // Options (`v2`, `raw`, `pty`, `TERM=…`) never contain ':'.
            let (options, command) = rest.split_once(':')?;
            let v2 = options.split(',').any(|option| option == "v2");
            return shell(command, if v2 { Output::V2 } else { Output::Raw });
        }
        if let Some(command) = name.strip_prefix("exec:") {
            return match streamed_input_size(command) {
                Some(size) => Some(Service::Streamed {
                    command: command.to_string(),
                    size,
                }),
                None => shell(command, Output::Exec),
            };
        }
        match name {
            "sync:" => Some(Service::Sync),
            "framebuffer:" => Some(Service::Framebuffer),
            _ => None,
        }
    }

    pub(super) async fn serve(self, stream: Stream, context: Context) {
        match self {
            Service::Shell { command, output } => shell(stream, context, command, output).await,
            Service::Streamed { command, size } => {
                streamed(stream, context.backend, command, size).await
            }
            Service::Sync => sync::serve(stream, context.backend).await,
            Service::Framebuffer => framebuffer(stream, context.backend).await,
        }
    }
}

/// The APK size of a streamed install (`cmd package 'install' [opts] -S N`
/// or `'install-write' -S N SESSION NAME -`, as adb quotes them), or `None`
/// for any other command.
fn streamed_input_size(command: &str) -> Option<u64> {
    let words: Vec<&str> = command
        .split_whitespace()
        .map(|word| word.trim_matches('\''))
        .collect();
    let verb = match words.as_slice() {
        ["cmd", "package", verb, ..] | ["pm", verb, ..] => *verb,
        _ => return None,
    };
    if !matches!(verb, "install" | "install-write") {
        return None;
    }
    let flag = words.iter().rposition(|&word| word == "-S")?;
    words.get(flag + 1)?.parse().ok()
}

/// Runs a backend call on tokio's blocking pool; `None` if it panicked.
pub(super) async fn blocking<T: Send + 'static>(
    call: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    tokio::task::spawn_blocking(call).await.ok()
}

async fn shell(mut stream: Stream, context: Context, command: String, output: Output) {
    if context.faults.trip(&command) {
        return stream.drop_connection().await;
    }
    let backend = context.backend;
    let call = blocking(move || backend.shell(&command));
    tokio::pin!(call);
    // The phone's commands take no input: whatever the host sends meanwhile
    // (stdin, close-stdin, window size) is acknowledged and dropped, and a
    // host that closes the stream stops the wait.
    let result = loop {
        tokio::select! {
            biased;
            result = &mut call => break result,
            input = stream.read() => {
                if input.is_none() {
                    return;
                }
            }
        }
    };
    let Some(result) = result else {
        return stream.close().await;
    };
    let bytes = match output {
        Output::Raw => result.interleaved(),
        Output::V2 => shell_v2::encode_output(&result),
        Output::Exec => result.interleaved(),
    };
    if stream.write(&bytes).await.is_ok() {
        stream.close().await;
    }
}

/// Reads exactly `size` bytes that the host streams, then runs the command
/// with them on its standard input and answers with its output.
async fn streamed(mut stream: Stream, backend: Arc<dyn AdbBackend>, command: String, size: u64) {
    let reply = if size > MAX_INPUT_BYTES {
        format!("Failure [INSTALL_FAILED_INSUFFICIENT_STORAGE: {size} bytes]\n").into_bytes()
    } else {
        // `size` ≤ MAX_INPUT_BYTES fits a usize. The buffer grows as bytes
        // arrive rather than trusting the announced size up front.
        let size = size as usize;
        let mut input = Vec::new();
        while input.len() < size {
            let Some(bytes) = stream.read().await else {
                return;
            };
            // A host that sends more than announced: the rest is not APK.
            let take = bytes.len().min(size - input.len());
            input.extend_from_slice(&bytes[..take]);
        }
        match blocking(move || backend.shell_input(&command, input)).await {
            Some(output) => output.interleaved(),
            None => b"Failure [device error]\n".to_vec(),
        }
    };
    if stream.write(&reply).await.is_ok() {
        stream.close().await;
    }
}

/// The `framebuffer:` v2 header: 14 little-endian u32s.
pub(super) fn framebuffer_header(screen: &Framebuffer) -> [u8; 56] {
    let fields: [u32; 14] = [
        2,  // version
        32, // bits per pixel
        // screencap's colour space: 0 unknown, 1 sRGB, 2 Display P3. The
        // phone renders sRGB, and clients that read a 0 here as the size
        // (an older header had none) only cope with a real device's 1.
        1,
        screen.rgba.len() as u32, // size of the pixel data that follows
        screen.width,
        screen.height,
        0,  // red offset
        8,  // red length
        16, // blue offset
        8,  // blue length
        8,  // green offset
        8,  // green length
        24, // alpha offset
        8,  // alpha length
    ];
    let mut header = [0u8; 56];
    for (slot, field) in header.chunks_exact_mut(4).zip(fields) {
        slot.copy_from_slice(&field.to_le_bytes());
    }
    header
}

/// Header then RGBA8888 pixels; the header is in the first WRTE because
/// every WRTE carries at least 4096 bytes (see `MIN_HOST_MAXDATA`).
async fn framebuffer(mut stream: Stream, backend: Arc<dyn AdbBackend>) {
    let Some(screen) = blocking(move || backend.framebuffer()).await else {
        return stream.close().await;
    };
    let bytes = [&framebuffer_header(&screen)[..], &screen.rgba].concat();
    if stream.write(&bytes).await.is_ok() {
        stream.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(command: &str, output: Output) -> Option<Service> {
        Some(Service::Shell {
            command: command.into(),
            output,
        })
    }

    #[test]
    fn parse_shell_forms() {
        assert_eq!(
            Service::parse("shell:echo hi"),
            shell("echo hi", Output::Raw)
        );
        assert_eq!(
            Service::parse("shell,v2,TERM=xterm-256color,raw:echo a:b"),
            shell("echo a:b", Output::V2)
        );
        assert_eq!(Service::parse("shell,v2:ls"), shell("ls", Output::V2));
        assert_eq!(Service::parse("shell,raw:ls"), shell("ls", Output::Raw));
        assert_eq!(Service::parse("shell:"), None, "interactive shell");
        assert_eq!(Service::parse("shell,v2,pty:"), None);
        assert_eq!(Service::parse("shell,v2"), None);
    }

    #[test]
    fn parse_exec_and_streamed_install() {
        let streamed = |command: &str, size| {
            Some(Service::Streamed {
                command: command.into(),
                size,
            })
        };
        assert_eq!(
            Service::parse("exec:screencap '-p'"),
            shell("screencap '-p'", Output::Exec)
        );
        // adb 29.
        assert_eq!(
            Service::parse("exec:cmd package 'install' -S 1234"),
            streamed("cmd package 'install' -S 1234", 1234)
        );
        // adb 29 with options, and adb_client with a user.
        assert_eq!(
            Service::parse("exec:cmd package 'install' '-r' '-g' -S 7"),
            streamed("cmd package 'install' '-r' '-g' -S 7", 7)
        );
        assert_eq!(
            Service::parse("exec:cmd package 'install' --user 0 -S 9"),
            streamed("cmd package 'install' --user 0 -S 9", 9)
        );
        // adb install-multiple: one split of a session.
        assert_eq!(
            Service::parse("exec:cmd package 'install-write' -S 5 1086000002 'base' -"),
            streamed("cmd package 'install-write' -S 5 1086000002 'base' -", 5)
        );
        // Not a streamed install: an ordinary command.
        assert_eq!(
            Service::parse("exec:cmd package 'list' 'packages'"),
            shell("cmd package 'list' 'packages'", Output::Exec)
        );
        assert_eq!(Service::parse("exec:"), None);
    }

    #[test]
    fn parse_other_services() {
        assert_eq!(Service::parse("sync:"), Some(Service::Sync));
        assert_eq!(Service::parse("framebuffer:"), Some(Service::Framebuffer));
        for refused in [
            "reboot:",
            "root:",
            "remount:",
            "tcpip:5555",
            "jdwp:1",
            "",
            "sync",
        ] {
            assert_eq!(Service::parse(refused), None, "{refused:?}");
        }
    }

    #[test]
    fn framebuffer_header_v2() {
        let screen = Framebuffer {
            width: 2,
            height: 1,
            rgba: vec![0; 8],
        };
        #[rustfmt::skip]
        let expected = [
            0x02, 0x00, 0x00, 0x00,  // version 2
            0x20, 0x00, 0x00, 0x00,  // bpp 32
            0x01, 0x00, 0x00, 0x00,  // color space: sRGB
            0x08, 0x00, 0x00, 0x00,  // size: 2 * 1 * 4
            0x02, 0x00, 0x00, 0x00,  // width
            0x01, 0x00, 0x00, 0x00,  // height
            0x00, 0x00, 0x00, 0x00,  // red offset
            0x08, 0x00, 0x00, 0x00,  // red length
            0x10, 0x00, 0x00, 0x00,  // blue offset
            0x08, 0x00, 0x00, 0x00,  // blue length
            0x08, 0x00, 0x00, 0x00,  // green offset
            0x08, 0x00, 0x00, 0x00,  // green length
            0x18, 0x00, 0x00, 0x00,  // alpha offset
            0x08, 0x00, 0x00, 0x00,  // alpha length
        ];
        assert_eq!(framebuffer_header(&screen), expected);
    }
}
