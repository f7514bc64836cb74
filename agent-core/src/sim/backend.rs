//! The seam between the ADB transport and the phone behind it.
//!
//! [`super::adbd`] speaks the device side of the ADB wire protocol and knows
//! nothing about phones; it turns each service request into a call on an
//! [`AdbBackend`]. The virtual phone implements the trait, and so does
//! [`super::memory_phone::MemoryPhone`], a file system with a given shell.
//! Calls are synchronous and short: the transport runs them off its I/O
//! tasks.

/// What a shell command produced.
///
/// Output is written through [`ShellOutput::out`] and [`ShellOutput::err`],
/// which also remember the order of the writes: the plain (non-v2) shell
/// service sends both streams down one connection in that order
/// ([`ShellOutput::interleaved`]), as a device's shell writes them to one
/// socket.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShellOutput {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit_code: u8,
    /// Consecutive writes to one stream: which stream and how many bytes.
    order: Vec<(Stream, usize)>,
}

/// A command's output stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl ShellOutput {
    pub fn ok(stdout: impl Into<Vec<u8>>) -> Self {
        let mut out = Self::default();
        out.out(stdout.into());
        out
    }

    pub fn fail(exit_code: u8, stderr: impl Into<Vec<u8>>) -> Self {
        let mut out = Self::default();
        out.err(stderr.into());
        out.exit_code = exit_code;
        out
    }

    /// No output, only an exit status.
    pub fn status(exit_code: u8) -> Self {
        Self {
            exit_code,
            ..Self::default()
        }
    }

    /// Writes to standard output.
    pub fn out(&mut self, bytes: impl AsRef<[u8]>) {
        self.write(Stream::Stdout, bytes.as_ref());
    }

    /// Writes to standard error.
    pub fn err(&mut self, bytes: impl AsRef<[u8]>) {
        self.write(Stream::Stderr, bytes.as_ref());
    }

    pub fn write(&mut self, stream: Stream, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        match stream {
            Stream::Stdout => self.stdout.extend_from_slice(bytes),
            Stream::Stderr => self.stderr.extend_from_slice(bytes),
        }
        match self.order.last_mut() {
            Some((last, len)) if *last == stream => *len += bytes.len(),
            _ => self.order.push((stream, bytes.len())),
        }
    }

    /// The writes in order, each with its stream.
    pub fn writes(&self) -> impl Iterator<Item = (Stream, &[u8])> {
        let (mut out, mut err) = (0, 0);
        self.order.iter().map(move |&(stream, len)| {
            let (data, at) = match stream {
                Stream::Stdout => (&self.stdout, &mut out),
                Stream::Stderr => (&self.stderr, &mut err),
            };
            let piece = &data[*at..*at + len];
            *at += len;
            (stream, piece)
        })
    }

    /// Both streams as one, in the order they were written.
    pub fn interleaved(&self) -> Vec<u8> {
        let mut all = Vec::with_capacity(self.stdout.len() + self.stderr.len());
        for (_, piece) in self.writes() {
            all.extend_from_slice(piece);
        }
        all
    }
}

/// `stat` of a path, as the sync protocol reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    /// Unix mode bits including the file type (`0o100644`, `0o040755`).
    pub mode: u32,
    pub size: u32,
    pub mtime: u32,
}

impl FileStat {
    pub fn is_dir(&self) -> bool {
        self.mode & 0o170000 == 0o040000
    }
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub stat: FileStat,
}

/// The screen as `framebuffer:` sends it: RGBA8888, row-major.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Framebuffer {
    pub width: u32,
    pub height: u32,
    pub rgba: Vec<u8>,
}

/// Identity the device announces in its CNXN banner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceIdentity {
    pub product_name: String,
    pub model: String,
    pub device: String,
}

/// Everything the ADB services need from a device.
pub trait AdbBackend: Send + Sync + 'static {
    fn identity(&self) -> DeviceIdentity;

    /// Runs one command line as Android's `sh -c` would: the text arrives as
    /// the host sent it (`exec:` arguments are shell-quoted by adb).
    fn shell(&self, command: &str) -> ShellOutput;

    fn stat(&self, path: &str) -> Option<FileStat>;

    /// Entries of a directory, `None` if it is not one.
    fn list(&self, path: &str) -> Option<Vec<DirEntry>>;

    fn read_file(&self, path: &str) -> Result<Vec<u8>, String>;

    fn write_file(&self, path: &str, mode: u32, mtime: u32, data: Vec<u8>) -> Result<(), String>;

    fn framebuffer(&self) -> Framebuffer;

    /// Runs a command that reads `input` on its standard input: the bytes
    /// a host streams after a command that announces their size, as `adb
    /// install` does (`exec:cmd package 'install' -S N`, then the APK).
    fn shell_input(&self, command: &str, input: Vec<u8>) -> ShellOutput;
}
