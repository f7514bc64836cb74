//! Crash-safe output files: a reader, or the next run after a crash or a
//! power cut, sees a file's previous content or its complete new one,
//! never half of it.
//!
//! Every writer stages its bytes under a name of its own in the target's
//! directory ([`staging_file`]), syncs them, renames the staging file over
//! the target and syncs the directory ([`sync_dir`]), so the rename itself
//! is on disk. A writer killed before its rename leaves the staging file
//! behind; each writer holds its own locked while it lives, and
//! [`remove_abandoned`] sweeps those no process holds. [`write`](fn@write)
//! does all of it for bytes already in memory; llama.cpp's quantizer and
//! host-trainer's exports fill a staging file or directory themselves.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tempfile::NamedTempFile;

/// The name staging entries start with (agent-core's files, host-trainer's
/// files and directories): [`remove_abandoned`] finds what killed writers
/// left by it.
pub const STAGING_PREFIX: &str = ".btl-partial-";

/// How long a staging entry is left alone whatever its lock says: a writer
/// locks its entry right after creating it, not at the same instant.
pub const ABANDONED_AFTER: Duration = Duration::from_secs(60);

/// An atomic write that failed, naming the file or directory at fault.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct WriteError {
    /// The target, its staging file or its directory.
    pub path: PathBuf,
    /// What the operating system reported.
    pub source: std::io::Error,
}

fn at(path: &Path) -> impl FnOnce(std::io::Error) -> WriteError + '_ {
    move |source| WriteError {
        path: path.to_path_buf(),
        source,
    }
}

/// The directory `path` goes into (`.` for a bare file name).
pub fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Writes `bytes` to `path` atomically (see [`write_with`]).
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    write_with(path, |mut file, staged| {
        file.write_all(bytes).map_err(at(staged))
    })
}

/// Writes `path` atomically through `fill`, which is given the staging
/// file and its path: a staging file in the same directory, fsync, rename,
/// fsync of the directory. What killed writes left in that directory is
/// removed first. When `fill` fails, `path` is as it was and the staging
/// file is removed.
pub fn write_with<E: From<WriteError>>(
    path: &Path,
    fill: impl FnOnce(&File, &Path) -> Result<(), E>,
) -> Result<(), E> {
    remove_abandoned(parent_dir(path), STAGING_PREFIX);
    replace_with(path, fill)
}

/// Writes `bytes` to `path` atomically as [`write`](fn@write) does, but leaves the
/// directory unswept: for the many files of one directory, whose writer
/// sweeps it once when it takes it (or made it, with nothing to sweep),
/// rather than once per file.
pub fn write_unswept(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    replace_with(path, |mut file: &File, staged: &Path| {
        file.write_all(bytes).map_err(at(staged))
    })
}

/// [`write_with`] without the sweep.
fn replace_with<E: From<WriteError>>(
    path: &Path,
    fill: impl FnOnce(&File, &Path) -> Result<(), E>,
) -> Result<(), E> {
    let dir = parent_dir(path);
    let staged = staging_file(dir, STAGING_PREFIX).map_err(at(dir))?;
    fill(staged.as_file(), staged.path())?;
    staged.as_file().sync_all().map_err(at(path))?;
    staged.persist(path).map_err(|e| at(path)(e.error))?;
    Ok(sync_dir(dir).map_err(at(dir))?)
}

/// A new staging file in `dir` named `prefix` and a random suffix, made as
/// `File::create` makes a file (0666 less the umask, not a temporary
/// file's private 0600: outputs are read by other tools and users, and
/// pushed to phones) and held locked until it is persisted or dropped, so
/// that [`remove_abandoned`] leaves it alone.
pub fn staging_file(dir: &Path, prefix: &str) -> std::io::Result<NamedTempFile> {
    let file = staging(prefix, 0o666).tempfile_in(dir)?;
    hold(file.as_file())?;
    Ok(file)
}

/// A new staging directory in `dir` named `prefix` and a random suffix,
/// made as `create_dir` makes one (0777 less the umask, not a temporary
/// directory's private 0700), for outputs made of several files. It is not
/// locked: its writer opens it and [`hold`]s it.
pub fn staging_dir(dir: &Path, prefix: &str) -> std::io::Result<tempfile::TempDir> {
    staging(prefix, 0o777).tempdir_in(dir)
}

/// A builder of staging entries named `prefix…`, made with `mode` (less
/// the umask) where modes exist.
fn staging(prefix: &str, mode: u32) -> tempfile::Builder<'_, 'static> {
    let mut builder = tempfile::Builder::new();
    builder.prefix(prefix);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(mode));
    }
    #[cfg(not(unix))]
    let _ = mode;
    builder
}

/// Locks `entry` (a staging file, or a staging directory opened as a
/// file) for as long as it stays open. Where it cannot be locked for any
/// reason but another holder (a file system or a platform without `flock`,
/// a device that refuses it), the write goes on unlocked rather than not at
/// all: a sweep there cannot lock the entry either, and so leaves it alone
/// too.
pub fn hold(entry: &File) -> std::io::Result<()> {
    match try_lock(entry) {
        Err(std::fs::TryLockError::WouldBlock) => Err(std::io::Error::new(
            std::io::ErrorKind::WouldBlock,
            "this new staging entry is locked already (by another process, or another open of it)",
        )),
        Ok(()) | Err(std::fs::TryLockError::Error(_)) => Ok(()),
    }
}

/// An exclusive `flock` of `file` without waiting, as
/// [`File::try_lock`] takes it.
#[cfg(not(target_os = "android"))]
pub fn try_lock(file: &File) -> Result<(), std::fs::TryLockError> {
    file.try_lock()
}

/// An exclusive `flock` of `file` without waiting. The standard library
/// reports Unsupported for file locks on Android (before Rust 1.98),
/// though bionic has `flock` and the app's storage takes it.
#[cfg(target_os = "android")]
pub fn try_lock(file: &File) -> Result<(), std::fs::TryLockError> {
    use std::os::fd::AsRawFd;
    // SAFETY: the descriptor is open for as long as `file` is borrowed.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    match e.kind() {
        std::io::ErrorKind::WouldBlock => Err(std::fs::TryLockError::WouldBlock),
        _ => Err(std::fs::TryLockError::Error(e)),
    }
}

/// Whether the entry of `meta` has not changed for [`ABANDONED_AFTER`]
/// (false where its time cannot be read, or lies in the future).
pub fn unchanged_for_long(meta: &std::fs::Metadata) -> bool {
    meta.modified()
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age >= ABANDONED_AFTER)
}

/// Removes what killed writers left in `dir`: the plain files and
/// directories named `prefix…` that no process holds locked and that have
/// not changed for [`ABANDONED_AFTER`]. Best effort: what cannot be read,
/// locked or removed stays, so where the file system cannot lock nothing is
/// removed. Links, pipes (whose open would block) and devices of such a
/// name are left.
pub fn remove_abandoned(dir: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(prefix) {
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        if !(meta.is_dir() || meta.is_file()) {
            continue;
        }
        let path = entry.path();
        if unchanged_for_long(&meta) && File::open(&path).is_ok_and(|f| try_lock(&f).is_ok()) {
            let _ = if meta.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
        }
    }
}

/// Makes the entries of `dir` durable (a rename into it, a new file): on
/// Linux a new directory entry is only on disk once the directory itself
/// is synced.
#[cfg(unix)]
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir).and_then(|d| d.sync_all())
}

/// Elsewhere a directory cannot be opened as a file; the rename is as
/// durable as the platform makes it.
#[cfg(not(unix))]
pub fn sync_dir(_: &Path) -> std::io::Result<()> {
    Ok(())
}

/// Whether writing `out` would destroy `input`: `out` is `input` itself,
/// lies inside the directory `input` (at any depth, through directories
/// still to be made), or is a directory (replaced whole) that holds
/// `input`. Links and `..` are resolved.
pub fn writes_over(out: &Path, input: &Path) -> bool {
    let (Some(written), Ok(read)) = (resolved(out), input.canonicalize()) else {
        return false;
    };
    written == read
        || (read.is_dir() && written.starts_with(&read))
        || (written.is_dir() && read.starts_with(&written))
}

/// `path` with links and `..` resolved, for a file that may not exist yet,
/// nor the directories above it: its deepest existing ancestor resolved,
/// and the rest as written. What is still to be made holds no links, so a
/// `..` there steps back to the directory above, as the made path would.
pub fn resolved(path: &Path) -> Option<PathBuf> {
    use std::path::Component;
    if path.as_os_str().is_empty() {
        return None;
    }
    let parts: Vec<Component> = path.components().collect();
    (0..=parts.len()).rev().find_map(|exists| {
        let ancestor: PathBuf = parts[..exists].iter().collect();
        let ancestor = match ancestor.as_os_str().is_empty() {
            true => PathBuf::from("."),
            false => ancestor,
        };
        let mut real = ancestor.canonicalize().ok()?;
        for part in &parts[exists..] {
            match part {
                Component::ParentDir => {
                    real.pop();
                }
                Component::CurDir => {}
                made => real.push(made),
            }
        }
        Some(real)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write killed before its rename leaves a staging file; the next
    /// write into that directory removes it once it is [`ABANDONED_AFTER`]
    /// old and no writer holds it (an unswept write leaves it). One just
    /// made and one a live writer holds stay, and so does every other file.
    #[test]
    fn writes_sweep_what_killed_writes_left() {
        let dir = tempfile::tempdir().unwrap();
        let then = std::time::SystemTime::now() - ABANDONED_AFTER - Duration::from_secs(5);
        let staged = |name: &str, aged: bool| {
            let path = dir.path().join(name);
            let file = File::create(&path).unwrap();
            if aged {
                file.set_modified(then).unwrap();
            }
            (path, file)
        };
        let (dead, _) = staged(".btl-partial-dead", true);
        let (fresh, _) = staged(".btl-partial-fresh", false);
        let (held, held_file) = staged(".btl-partial-held", true);
        held_file.lock().unwrap();
        let (other, _) = staged("step-0001.png", true);
        write_unswept(&dir.path().join("steps.jsonl"), b"").unwrap();
        assert!(dead.exists());
        write(&dir.path().join("episode.json"), b"{}").unwrap();
        assert!(!dead.exists());
        assert!(fresh.exists() && held.exists() && other.exists());
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 5, "{names:?}");
    }

    /// A staging file is locked from its making: another open of it cannot
    /// take the lock, so no sweep removes it, however old it looks.
    #[test]
    fn a_staging_file_is_held_from_its_making() {
        let dir = tempfile::tempdir().unwrap();
        let staged = staging_file(dir.path(), STAGING_PREFIX).unwrap();
        let then = std::time::SystemTime::now() - ABANDONED_AFTER - Duration::from_secs(5);
        staged.as_file().set_modified(then).unwrap();
        let other = File::open(staged.path()).unwrap();
        assert!(matches!(
            try_lock(&other),
            Err(std::fs::TryLockError::WouldBlock)
        ));
        remove_abandoned(dir.path(), STAGING_PREFIX);
        assert!(staged.path().exists());
    }

    /// A written file's mode is the one File::create gives beside it, not
    /// a temporary file's private 0600.
    #[cfg(unix)]
    #[test]
    fn writes_make_files_as_file_create_does() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let mode = |name: &str| {
            let meta = std::fs::metadata(dir.path().join(name)).unwrap();
            meta.permissions().mode() & 0o777
        };
        File::create(dir.path().join("plain")).unwrap();
        write(&dir.path().join("written"), b"{}").unwrap();
        assert_eq!(mode("written"), mode("plain"));
        assert_ne!(
            mode("plain"),
            0o600,
            "the umask makes this test unable to fail"
        );
    }

    /// A staging directory's mode is the one create_dir gives beside it.
    #[cfg(unix)]
    #[test]
    fn staging_directories_are_made_as_create_dir_does() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        std::fs::create_dir(dir.path().join("plain")).unwrap();
        let staged = staging_dir(dir.path(), STAGING_PREFIX).unwrap();
        assert_eq!(mode(staged.path()), mode(&dir.path().join("plain")));
        assert_ne!(
            mode(staged.path()),
            0o700,
            "the umask makes this test unable to fail"
        );
    }

    /// A failed write names what it could not do and leaves the directory
    /// as it was.
    #[test]
    fn a_write_into_a_missing_directory_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("gone");
        let e = write(&missing.join("episode.json"), b"{}").unwrap_err();
        assert_eq!(e.path, missing);
        assert_eq!(e.source.kind(), std::io::ErrorKind::NotFound);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// An output below an input directory is found at any depth of
    /// directories still to be made, with `..` among them; a link to a
    /// directory is followed.
    #[cfg(unix)]
    #[test]
    fn an_output_is_placed_through_directories_still_to_be_made() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let input = root.join("episodes");
        std::fs::create_dir(&input).unwrap();
        std::os::unix::fs::symlink(&input, root.join("link")).unwrap();
        for (out, expected) in [
            ("episodes/new/sub/s.json", "episodes/new/sub/s.json"),
            ("link/new/s.json", "episodes/new/s.json"),
            ("new/../episodes/s.json", "episodes/s.json"),
            ("new/sub/../../s.json", "s.json"),
            ("episodes", "episodes"),
        ] {
            assert_eq!(
                resolved(&root.join(out)),
                Some(root.join(expected)),
                "{out}"
            );
        }
        assert!(writes_over(&root.join("episodes/new/sub/s.json"), &input));
        assert!(writes_over(&root.join("link/new/s.json"), &input));
        assert!(!writes_over(&root.join("new/sub/../../s.json"), &input));
        assert!(!writes_over(&root.join("other/s.json"), &input));
        // A dangling link is the entry a rename replaces; no path, no file.
        std::os::unix::fs::symlink(root.join("gone"), root.join("dangling")).unwrap();
        assert_eq!(
            resolved(&root.join("dangling")),
            Some(root.join("dangling"))
        );
        assert_eq!(resolved(std::path::Path::new("")), None);
    }
}
