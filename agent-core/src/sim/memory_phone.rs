//! [`MemoryPhone`]: an [`AdbBackend`] that is storage and a shell only, no
//! screens: an in-memory file system, the input streamed to its commands,
//! and shell commands answered by a function the caller gives. The ADB
//! transport's tests serve it, and so can anyone testing an ADB client
//! against [`super::adbd`] without the virtual phone's apps.

use super::backend::{AdbBackend, DeviceIdentity, DirEntry, FileStat, Framebuffer, ShellOutput};
use super::vfs::Vfs;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// How a [`MemoryPhone`] answers a shell command line.
pub type Shell = dyn Fn(&str) -> ShellOutput + Send + Sync;

pub struct MemoryPhone {
    fs: Mutex<Vfs>,
    inputs: Mutex<Vec<Vec<u8>>>,
    shell: Box<Shell>,
    framebuffer: Framebuffer,
}

impl MemoryPhone {
    /// A phone with an empty file system that answers every shell command
    /// with `shell` and every `framebuffer:` request with `framebuffer`.
    pub fn new(
        framebuffer: Framebuffer,
        shell: impl Fn(&str) -> ShellOutput + Send + Sync + 'static,
    ) -> Self {
        Self {
            fs: Mutex::new(Vfs::default()),
            inputs: Mutex::new(Vec::new()),
            shell: Box::new(shell),
            framebuffer,
        }
    }

    /// What hosts streamed to commands so far (`adb install`'s APKs), in
    /// order.
    pub fn inputs(&self) -> Vec<Vec<u8>> {
        self.inputs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The file system, to put files on the phone or read them back.
    pub fn fs(&self) -> MutexGuard<'_, Vfs> {
        self.fs.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl AdbBackend for MemoryPhone {
    fn identity(&self) -> DeviceIdentity {
        DeviceIdentity {
            product_name: "vphone".into(),
            model: "VirtualPhone".into(),
            device: "vphone".into(),
        }
    }

    fn shell(&self, command: &str) -> ShellOutput {
        (self.shell)(command)
    }

    fn stat(&self, path: &str) -> Option<FileStat> {
        self.fs().stat(path)
    }

    fn list(&self, path: &str) -> Option<Vec<DirEntry>> {
        self.fs().list(path)
    }

    fn read_file(&self, path: &str) -> Result<Vec<u8>, String> {
        self.fs().read(path)
    }

    fn write_file(&self, path: &str, mode: u32, mtime: u32, data: Vec<u8>) -> Result<(), String> {
        self.fs().write(path, data, mode, mtime)
    }

    fn framebuffer(&self) -> Framebuffer {
        self.framebuffer.clone()
    }

    /// Keeps the input and answers the command as [`AdbBackend::shell`].
    fn shell_input(&self, command: &str, input: Vec<u8>) -> ShellOutput {
        self.inputs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(input);
        (self.shell)(command)
    }
}
