//! [`VirtualPhone`]: the phone model, its file system and its shell behind
//! one lock, usable in-process and as an [`AdbBackend`] for the ADB server.
//!
//! One lock for everything keeps each shell command atomic with respect to
//! the screen, as on a real device where `input tap` and `screencap` do not
//! interleave halfway.

use super::backend::{AdbBackend, DeviceIdentity, DirEntry, FileStat, Framebuffer, ShellOutput};
use super::packages::Packages;
use super::phone::{Phone, PhoneConfig};
use super::shell::{self, ShellEnv};
use super::vfs::Vfs;
use std::sync::{Mutex, MutexGuard};

struct Inner {
    phone: Phone,
    fs: Vfs,
    packages: Packages,
}

/// A virtual phone shared between the ADB server and in-process users.
pub struct VirtualPhone {
    inner: Mutex<Inner>,
}

impl VirtualPhone {
    pub fn new(config: PhoneConfig) -> Self {
        Self {
            inner: Mutex::new(Inner {
                phone: Phone::new(config),
                fs: Vfs::default(),
                packages: Packages::default(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the phone half-updated
        // in a way later calls care about more than a lost phone would.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `f` on the phone model with the lock held.
    pub fn with_phone<R>(&self, f: impl FnOnce(&mut Phone) -> R) -> R {
        f(&mut self.lock().phone)
    }

    /// Runs a shell command line.
    pub fn shell(&self, line: &str) -> ShellOutput {
        self.shell_input(line, &[])
    }

    /// Runs a shell command line with `input` on its standard input.
    pub fn shell_input(&self, line: &str, input: &[u8]) -> ShellOutput {
        let inner = &mut *self.lock();
        shell::run_with_input(
            line,
            input,
            &mut ShellEnv {
                phone: &mut inner.phone,
                fs: &mut inner.fs,
                packages: &mut inner.packages,
            },
        )
    }
}

impl AdbBackend for VirtualPhone {
    fn identity(&self) -> DeviceIdentity {
        let props = |key: &str| self.with_phone(|p| p.getprop(key)).unwrap_or_default();
        DeviceIdentity {
            product_name: props("ro.product.name"),
            model: props("ro.product.model"),
            device: props("ro.product.device"),
        }
    }

    fn shell(&self, command: &str) -> ShellOutput {
        VirtualPhone::shell(self, command)
    }

    fn stat(&self, path: &str) -> Option<FileStat> {
        self.lock().fs.stat(path)
    }

    fn list(&self, path: &str) -> Option<Vec<DirEntry>> {
        self.lock().fs.list(path)
    }

    fn read_file(&self, path: &str) -> Result<Vec<u8>, String> {
        self.lock().fs.read(path)
    }

    fn write_file(&self, path: &str, mode: u32, mtime: u32, data: Vec<u8>) -> Result<(), String> {
        self.lock().fs.write(path, data, mode, mtime)
    }

    fn framebuffer(&self) -> Framebuffer {
        let image = self.with_phone(|p| p.render());
        Framebuffer {
            width: image.width(),
            height: image.height(),
            rgba: image.into_raw(),
        }
    }

    fn shell_input(&self, command: &str, input: Vec<u8>) -> ShellOutput {
        VirtualPhone::shell_input(self, command, &input)
    }
}
