//! The phone's package manager for packages installed over ADB: what `pm
//! install` (or a streamed `adb install`) records, where the APK lands, and
//! the install sessions `adb install-multiple` drives. The phone's own apps
//! are the system image's; they are listed by [`super::phone::Phone`].

use super::apk::{self, ApkError, Manifest};
use super::vfs::Vfs;
use base64::Engine;
use std::collections::BTreeMap;

/// An installed package: its manifest and where its APK is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    pub manifest: Manifest,
    /// `/data/app/~~…==/PACKAGE-…==/base.apk`, as Android 11 and later lay
    /// installed APKs out.
    pub path: String,
}

/// How `pm install` was asked to install.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InstallFlags {
    /// `-d`: a lower version code may replace the installed one.
    pub allow_downgrade: bool,
    /// `-R`: refuse to replace an installed package (pm replaces by
    /// default).
    pub keep_existing: bool,
}

#[derive(Debug, Default)]
struct Session {
    flags: InstallFlags,
    /// Split name → when it was written (a count) and its APK bytes.
    apks: BTreeMap<String, (u64, Vec<u8>)>,
    writes: u64,
}

impl Session {
    fn bytes(&self) -> usize {
        self.apks.values().map(|(_, apk)| apk.len()).sum()
    }
}

/// The most install sessions open at once, as PackageInstallerService
/// allows an installer holding INSTALL_PACKAGES (the shell does).
pub const MAX_ACTIVE_SESSIONS: usize = 1024;

/// Why a session request failed, in the words pm's exception carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionError {
    /// No open session has the id.
    Unknown(u32),
    /// [`MAX_ACTIVE_SESSIONS`] are open.
    TooMany,
    /// The staged APKs would not fit in the storage left.
    NoSpace,
}

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unknown(id) => write!(f, "Error: Failed to open session {id}"),
            // The shell's uid.
            Self::TooMany => f.write_str("Too many active sessions for UID 2000"),
            // libcore's words for a write that failed with ENOSPC.
            Self::NoSpace => f.write_str("write failed: ENOSPC (No space left on device)"),
        }
    }
}

/// Packages installed since boot, and install sessions not yet committed.
#[derive(Debug, Default)]
pub struct Packages {
    installed: BTreeMap<String, Installed>,
    sessions: BTreeMap<u32, Session>,
    /// Counts installs and sessions, so paths and session ids are
    /// deterministic for a phone's history.
    serial: u32,
}

/// Session ids look like a device's (large, not small counters) and stay
/// deterministic.
const FIRST_SESSION: u32 = 1_086_000_001;

impl Packages {
    /// Installs an APK's bytes, replacing an installed version of the same
    /// package (pm always replaces). `system` lists the system image's
    /// packages, which an APK signed by anyone else cannot update.
    /// The error is pm's status message, `INSTALL_…: reason`.
    pub fn install(
        &mut self,
        fs: &mut Vfs,
        system: &[String],
        apk: Vec<u8>,
        flags: InstallFlags,
    ) -> Result<String, String> {
        let read = apk::read(&apk);
        self.install_read(fs, system, apk, read, flags)
    }

    /// [`Packages::install`] of an APK whose reading, `read`, was done
    /// already.
    pub fn install_read(
        &mut self,
        fs: &mut Vfs,
        system: &[String],
        apk: Vec<u8>,
        read: Result<Manifest, ApkError>,
        flags: InstallFlags,
    ) -> Result<String, String> {
        self.serial += 1;
        // Where the installer stages the APK while it checks it; its
        // messages name that file.
        let staged = format!("/data/app/vmdl{}.tmp/base.apk", FIRST_SESSION + self.serial);
        let manifest = read.map_err(|e| e.status(&staged))?;
        let package = manifest.package.clone();
        if system.contains(&package) {
            return Err(format!(
                "INSTALL_FAILED_UPDATE_INCOMPATIBLE: Package {package} signatures do not match \
                 previously installed version; ignoring!"
            ));
        }
        if flags.keep_existing && self.installed.contains_key(&package) {
            return Err(format!(
                "INSTALL_FAILED_ALREADY_EXISTS: Attempt to re-install {package} without first \
                 uninstalling."
            ));
        }
        if let Some(old) = self.installed.get(&package)
            && manifest.version_code < old.manifest.version_code
            && !flags.allow_downgrade
        {
            return Err(format!(
                "INSTALL_FAILED_VERSION_DOWNGRADE: Downgrade detected: Update version code {} \
                 is older than current {}",
                manifest.version_code, old.manifest.version_code
            ));
        }
        // The old version stays installed unless the new one fits in its
        // place, as on a phone.
        let old_size = self
            .installed
            .get(&package)
            .and_then(|old| fs.stat(&old.path))
            .map_or(0, |st| st.size as usize);
        let room = fs.free() + old_size;
        if apk.len() > room {
            return Err(format!(
                "INSTALL_FAILED_INSUFFICIENT_STORAGE: {} bytes do not fit in the {room} left",
                apk.len(),
            ));
        }
        if let Some(old) = self.installed.remove(&package) {
            let _ = fs.remove(parent(&old.path));
        }
        let path = format!(
            "/data/app/~~{}/{package}-{}/base.apk",
            token(&[b"dir", package.as_bytes()], self.serial),
            token(&[b"pkg", package.as_bytes()], self.serial),
        );
        fs.write(&path, apk, 0o644, 0)
            .map_err(|e| format!("INSTALL_FAILED_INSUFFICIENT_STORAGE: {e}"))?;
        self.installed
            .insert(package.clone(), Installed { manifest, path });
        Ok(package)
    }

    /// Removes a package and its APK; false if it was not installed.
    pub fn uninstall(&mut self, fs: &mut Vfs, package: &str) -> bool {
        match self.installed.remove(package) {
            Some(old) => {
                let _ = fs.remove(parent(&old.path));
                true
            }
            None => false,
        }
    }

    pub fn get(&self, package: &str) -> Option<&Installed> {
        self.installed.get(package)
    }

    /// Installed packages by name.
    pub fn iter(&self) -> impl Iterator<Item = &Installed> {
        self.installed.values()
    }

    /// `pm install-create`: a new session's id.
    pub fn create_session(&mut self, flags: InstallFlags) -> Result<u32, SessionError> {
        if self.sessions.len() >= MAX_ACTIVE_SESSIONS {
            return Err(SessionError::TooMany);
        }
        self.serial += 1;
        let id = FIRST_SESSION + self.serial;
        self.sessions.insert(
            id,
            Session {
                flags,
                ..Session::default()
            },
        );
        Ok(id)
    }

    /// `pm install-write`: adds (or replaces) one named APK of a session,
    /// if it fits in `fs`'s storage: a phone stages it on its data
    /// partition, so it takes room from files and installs until the
    /// session ends.
    pub fn write_session(
        &mut self,
        fs: &mut Vfs,
        id: u32,
        name: &str,
        apk: Vec<u8>,
    ) -> Result<(), SessionError> {
        let session = self
            .sessions
            .get_mut(&id)
            .ok_or(SessionError::Unknown(id))?;
        let replaced = session.apks.get(name).map_or(0, |(_, old)| old.len());
        if apk.len() > fs.free() + replaced {
            return Err(SessionError::NoSpace);
        }
        fs.release(replaced);
        fs.hold(apk.len()).map_err(|_| SessionError::NoSpace)?;
        session.writes += 1;
        session.apks.insert(name.to_string(), (session.writes, apk));
        Ok(())
    }

    /// `pm install-commit`: installs the session's base APK. A session
    /// with several APKs is a split install; the phone takes the first
    /// written (a name written again counts as written then) as the base
    /// and keeps no splits, as it runs no code from any of them.
    pub fn commit_session(
        &mut self,
        fs: &mut Vfs,
        system: &[String],
        id: u32,
    ) -> Result<String, String> {
        let session = self.close(fs, id).map_err(|e| e.to_string())?;
        let Some((_, base)) = session
            .apks
            .into_values()
            .min_by_key(|(written, _)| *written)
        else {
            return Err("INSTALL_FAILED_INVALID_APK: No packages staged".into());
        };
        self.install(fs, system, base, session.flags)
    }

    /// `pm install-abandon`.
    pub fn abandon_session(&mut self, fs: &mut Vfs, id: u32) -> Result<(), SessionError> {
        self.close(fs, id).map(drop)
    }

    /// Ends session `id`, giving its staged bytes back to `fs`.
    fn close(&mut self, fs: &mut Vfs, id: u32) -> Result<Session, SessionError> {
        let session = self.sessions.remove(&id).ok_or(SessionError::Unknown(id))?;
        fs.release(session.bytes());
        Ok(session)
    }
}

/// The directory of an installed APK, which uninstalling removes.
fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or(path, |(dir, _)| dir)
}

/// A path component like the random ones Android puts in `/data/app`:
/// 16 bytes, URL-safe base64 with its padding.
fn token(parts: &[&[u8]], serial: u32) -> String {
    let serial = serial.to_le_bytes();
    let salt: [&[u8]; 2] = [b"salt", &serial];
    let a = crate::hash::fnv1a(&[parts, &[&serial]].concat());
    let b = crate::hash::fnv1a(&[parts, &salt].concat());
    let bytes = [a.to_le_bytes(), b.to_le_bytes()].concat();
    base64::engine::general_purpose::URL_SAFE.encode(bytes)
}

#[cfg(test)]
mod tests;
