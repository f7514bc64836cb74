//! The seam between the ADB transport and the phone behind it.
//!
//! [`super::adbd`] speaks the device side of the ADB wire protocol and knows
//! nothing about phones; it turns each service request into a call on an
//! [`AdbBackend`]. The virtual phone implements the trait, and so does
//! [`super::memory_phone::MemoryPhone`], a file system with a given shell.
//! Calls are synchronous and short: the transport runs them off its I/O
//! tasks.

/// What a shell command produced.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShellOutput {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit_code: u8,
}

impl ShellOutput {
    pub fn ok(stdout: impl Into<Vec<u8>>) -> Self {
        Self {
            stdout: stdout.into(),
            ..Self::default()
        }
    }

    pub fn fail(exit_code: u8, stderr: impl Into<Vec<u8>>) -> Self {
        Self {
            stderr: stderr.into(),
            exit_code,
            ..Self::default()
        }
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

    /// A streamed `adb install` payload (`exec:cmd package 'install' -S N`).
    fn install(&self, apk: Vec<u8>) -> Result<(), String>;
}
