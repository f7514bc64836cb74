//! Atomic replacement of output files and directories.
//!
//! A reader (or a crash) sees either the old output or the complete new one,
//! never a half-written file (for a directory, see [`write_dir`] on the
//! moment between its two renames): everything is written under a temporary name in
//! the same directory (so the final rename stays on one filesystem), synced to
//! disk, then renamed over the target, and the directory entry is synced too.
//!
//! A killed writer leaves its staging entry (`.btl-partial-*`, as large as
//! the export it was making) behind. Each staging entry is locked while
//! its writer lives, and the next output written beside one removes those
//! no process holds. Staging, locks, the sweep and the modes outputs are
//! made with are agent-core's ([`agent_core::atomic`]), shared with its
//! trajectories and quantizations.
//!
//! Several outputs that belong together (a text model and its projector,
//! a dataset and its images) cannot replace their namesakes in one step:
//! [`write_entries`] journals the swap as a `.btl-swap-*` directory, which
//! a killed writer leaves for the next write or run in that directory to
//! finish (its swaps take turns through a lock on that directory).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use agent_core::atomic;

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_owned(),
        source,
    }
}

/// The directory an output goes into (`.` for a bare file name).
fn parent_of(path: &Path) -> PathBuf {
    atomic::parent_dir(path).to_owned()
}

pub(crate) use atomic::{resolved, writes_over};

/// Makes a rename durable (see [`atomic::sync_dir`]).
fn sync_dir(dir: &Path) -> Result<()> {
    atomic::sync_dir(dir).map_err(io_error(dir))
}

/// Syncs the files under `dir`, at every depth, then each directory after
/// its entries: syncing a directory makes its entries durable, not the
/// contents of the files they name.
fn sync_tree(dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(io_error(dir))? {
        let entry = entry.map_err(io_error(dir))?;
        let path = entry.path();
        if entry.file_type().map_err(io_error(&path))?.is_dir() {
            sync_tree(&path)?;
        } else {
            File::open(&path)
                .and_then(|f| f.sync_all())
                .map_err(io_error(&path))?;
        }
    }
    sync_dir(dir)
}

/// The name every staging entry starts with, as agent-core's.
const PARTIAL: &str = atomic::STAGING_PREFIX;

/// Locks the staging entry `path` (a file or a directory) for as long as
/// the returned handle is open: [`sweep`] leaves it alone meanwhile (see
/// [`atomic::hold`] for file systems that cannot lock).
pub(crate) fn hold(path: &Path) -> Result<File> {
    let file = File::open(path).map_err(io_error(path))?;
    atomic::hold(&file).map_err(io_error(path))?;
    Ok(file)
}

/// What every directory moved aside by [`replace_dir`] is named with,
/// followed by the name it was moved from and a `.` (`.btl-old-NAME.XXXXXX`).
const OLD: &str = ".btl-old-";

/// What a [`write_entries`] staging directory is renamed to once all its
/// entries are made, followed by its random suffix: the mark of a swap
/// under way, which whoever finds it carries through.
const SWAP: &str = ".btl-swap-";

/// Carries through the swaps that writers killed midway left in `dir`
/// (see [`write_entries`]), removes the staging entries killed writers
/// left, and deals with the directories a writer killed between
/// [`replace_dir`]'s two renames left aside (see [`put_back_abandoned`]).
/// The swaps go first: the directories their writers moved aside are
/// only known to be replaced once the swaps are done.
pub(crate) fn sweep(dir: &Path) {
    // Best effort: a swap that cannot be finished stays, and the next
    // write_entries into `dir` refuses to start another over it.
    let _ = finish_abandoned_swaps(dir);
    atomic::remove_abandoned(dir, PARTIAL);
    put_back_abandoned(dir);
}

/// Waits for, and takes, the lock that makes the swaps into `dir` take
/// turns: a flock of the directory itself (no lock file is left among the
/// outputs), held only while a swap is made or finished, so waited for.
/// Where the file system cannot lock, swaps go on unlocked, as staging
/// entries do ([`atomic::hold`]).
fn lock_swaps(dir: &Path) -> Result<File> {
    let file = File::open(dir).map_err(io_error(dir))?;
    let _ = file.lock();
    Ok(file)
}

/// The swaps in `dir` (their writer holds [`lock_swaps`]'s lock while it
/// makes one, so under that lock any found was left by a writer killed or
/// failed midway).
fn swaps_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(SWAP))
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
        .map(|entry| entry.path())
        .collect()
}

/// Carries through the swaps writers killed or failed midway left in
/// `dir`; an error names the first that could not be finished (it stays).
fn finish_abandoned_swaps(dir: &Path) -> Result<()> {
    if swaps_in(dir).is_empty() {
        return Ok(());
    }
    let _turn = lock_swaps(dir)?;
    carry_through_all(dir)
}

/// Carries through every swap in `dir`, the caller holding its turn
/// ([`lock_swaps`]); an error names the first that could not be finished.
fn carry_through_all(dir: &Path) -> Result<()> {
    swaps_in(dir)
        .iter()
        .try_for_each(|swap| carry_through(dir, swap))
}

/// A directory moved aside and left there for [`atomic::ABANDONED_AFTER`]
/// is the previous output of a write that was killed between its two
/// renames: where nothing took its name, it is the only copy, and is put
/// back; where the new output did, it is removed, as that write would have.
/// One moved aside before names were kept (`.btl-old-XXXXXX`) stays.
fn put_back_abandoned(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(name) = file_name
            .to_str()
            .and_then(|n| n.strip_prefix(OLD))
            .and_then(|n| n.rsplit_once('.'))
            .map(|(name, _)| name)
            .filter(|name| !name.is_empty())
        else {
            continue;
        };
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_dir() || !atomic::unchanged_for_long(&meta) {
            continue;
        }
        let target = dir.join(name);
        let _ = match std::fs::symlink_metadata(&target) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::rename(entry.path(), &target).and_then(|()| atomic::sync_dir(dir))
            }
            _ => std::fs::remove_dir_all(entry.path()),
        };
    }
}

/// Writes `path` through `fill`, replacing any previous file only once the new
/// content is complete and on disk. On error the previous file is untouched.
pub(crate) fn write_file(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<&File>) -> Result<()>,
) -> Result<()> {
    atomic::write_with(path, |file, staged| {
        let mut writer = BufWriter::new(file);
        fill(&mut writer)?;
        writer.flush().map_err(io_error(staged))
    })
}

/// Creates directory `path` through `fill` (which writes files and
/// directories into the directory it is given), replacing a previous
/// directory of that name only once the new one is complete and synced,
/// every file of every level. The old directory is moved aside before the
/// new one takes its name, and put back if that rename fails; a crash
/// between the two renames leaves it beside `path` as `.btl-old-NAME.*`,
/// whole, and the next write beside it (or run in that directory) puts it
/// back.
pub(crate) fn write_dir(path: &Path, fill: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let parent = parent_of(path);
    sweep(&parent);
    let staging = atomic::staging_dir(&parent, PARTIAL).map_err(io_error(&parent))?;
    let _held = hold(staging.path())?;
    fill(staging.path())?;
    sync_tree(staging.path())?;
    replace_dir(&staging.keep(), path)
}

/// Writes several outputs into `dir` through `fill` (which writes files
/// and directories into the directory it is given) and moves them into
/// place only once every one is complete and synced, each replacing its
/// namesake in `dir` (a directory as [`write_dir`] replaces one): when
/// `fill` fails, `dir` keeps the previous outputs, all of them.
///
/// The moves are one rename each, so they cannot be one step; they are
/// journalled instead. Once every output is made, the staging directory is
/// renamed to `.btl-swap-*` in one step, and from then on the swap is
/// carried through by whoever finds it: this writer, or, where it was
/// killed or a move failed, the next write or `btl-train` run in `dir`
/// (its [`sweep`]), before anything else there. A crash midway thus leaves
/// some outputs new and the others old, each whole, until then; a reader
/// of `dir` meanwhile (llama.cpp, ms-swift) sees that mix, as it would see
/// any output of a write that never reported success. Swaps into one
/// directory take turns ([`lock_swaps`]), and one that cannot be finished
/// stops the next write before it starts another. An output that could
/// not replace its namesake (a file where a directory is, or the other way
/// round) is refused before anything moves.
pub(crate) fn write_entries(dir: &Path, fill: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    sweep(dir);
    let staging = atomic::staging_dir(dir, PARTIAL).map_err(io_error(dir))?;
    let _held = hold(staging.path())?;
    fill(staging.path())?;
    sync_tree(staging.path())?;
    check_replaceable(staging.path(), dir)?;
    let _turn = lock_swaps(dir)?;
    // One left since the sweep (by a writer killed meanwhile) goes first:
    // this one's outputs are the newer.
    let unfinished = |e: Error| {
        Error::Input(format!(
            "{}: an earlier write's outputs were left half put in place and cannot be \
             finished ({e}); nothing of this write was moved",
            dir.display()
        ))
    };
    carry_through_all(dir).map_err(unfinished)?;
    // Named after the staging directory, whose random suffix no other
    // entry in `dir` has.
    let suffix = staging
        .path()
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix(PARTIAL))
        .unwrap_or_default();
    let swap = dir.join(format!("{SWAP}{suffix}"));
    std::fs::rename(staging.path(), &swap).map_err(io_error(&swap))?;
    // The staging directory is the swap now: dropping it must not remove it.
    let _ = staging.keep();
    // From here on the outputs are committed: what stops them midway is
    // finished by the next write or run in `dir`, and the error says so.
    sync_dir(dir)
        .and_then(|()| carry_through(dir, &swap))
        .map_err(|e| {
            Error::Input(format!(
                "{}: the new outputs are partly in place ({e}); the next write or btl-train \
                 run in this directory finishes putting them there",
                dir.display()
            ))
        })
}

/// Refuses the outputs in `staging` that could not take the place of
/// their namesakes in `dir`: a file where a directory is, a directory
/// where something else is.
fn check_replaceable(staging: &Path, dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(staging).map_err(io_error(staging))? {
        let entry = entry.map_err(io_error(staging))?;
        let new_is_dir = entry.file_type().map_err(io_error(&entry.path()))?.is_dir();
        replaceable(&dir.join(entry.file_name()), new_is_dir)?;
    }
    Ok(())
}

/// Whether `to` is there to be replaced, by a directory where
/// `new_is_dir`; refuses what rename(2) could not replace.
fn replaceable(to: &Path, new_is_dir: bool) -> Result<bool> {
    let Ok(there) = to.symlink_metadata() else {
        return Ok(false);
    };
    if new_is_dir == there.is_dir() {
        return Ok(true);
    }
    let (new, old) = if new_is_dir {
        ("a directory", "is no directory")
    } else {
        ("a file", "is a directory")
    };
    Err(Error::Input(format!(
        "{}: it {old}, which {new} written there cannot replace; move it away or write \
         elsewhere",
        to.display()
    )))
}

/// Moves every entry of the swap directory `swap` in place of its
/// namesake in `dir` (a directory's namesake moved aside first, and
/// removed once all are in place), then removes `swap`, empty. Each step
/// leaves a state it goes on from, so a crash or an error midway leaves
/// the rest to the next [`sweep`].
fn carry_through(dir: &Path, swap: &Path) -> Result<()> {
    let mut asides = Vec::new();
    for entry in std::fs::read_dir(swap).map_err(io_error(swap))? {
        let entry = entry.map_err(io_error(swap))?;
        let (from, to) = (entry.path(), dir.join(entry.file_name()));
        let is_dir = entry.file_type().map_err(io_error(&from))?.is_dir();
        // Checked again: what is at `to` may have changed since the swap
        // was journalled.
        let aside_first = replaceable(&to, is_dir)? && is_dir;
        asides.extend(rename_over(&from, &to, aside_first)?);
    }
    sync_dir(dir)?;
    std::fs::remove_dir(swap).map_err(io_error(swap))?;
    sync_dir(dir)?;
    // The swap is done; an old output that cannot be removed now is a
    // later sweep's to remove (its name is taken), not this write's error.
    for aside in asides {
        let _ = std::fs::remove_dir_all(&aside);
    }
    Ok(())
}

/// Moves the directory `path` aside, beside it, under a name that says
/// where it came from (`.btl-old-NAME.XXXXXX`), and returns that name.
fn move_aside(path: &Path) -> Result<PathBuf> {
    let parent = parent_of(path);
    let name = path
        .file_name()
        .map_or_else(|| "output".to_owned(), |n| n.to_string_lossy().into_owned());
    let aside = tempfile::Builder::new()
        .prefix(&format!("{OLD}{name}."))
        .tempdir_in(&parent)
        .map_err(io_error(&parent))?
        .keep();
    // Dated now, before it is moved, so that its age says how long ago it
    // was moved (not when it was written) from the moment it is aside, and
    // a sweep leaves it to this writer meanwhile.
    let _ = File::open(path).and_then(|d| d.set_modified(std::time::SystemTime::now()));
    // rename(2) replaces an empty directory, which `aside` is.
    std::fs::rename(path, &aside).map_err(io_error(path))?;
    Ok(aside)
}

/// Renames `from` to `to`, having moved `to` aside first where
/// `aside_first` ([`move_aside`]), and returns where it went; a failed
/// rename puts it back.
fn rename_over(from: &Path, to: &Path, aside_first: bool) -> Result<Option<PathBuf>> {
    let aside = if aside_first {
        Some(move_aside(to)?)
    } else {
        None
    };
    if let Err(source) = std::fs::rename(from, to) {
        if let Some(aside) = &aside {
            // Best effort: the error below is what the caller must see.
            let _ = std::fs::rename(aside, to);
        }
        return Err(Error::Io {
            path: to.to_owned(),
            source,
        });
    }
    Ok(aside)
}

/// Puts the complete, synced directory `staged` (in `path`'s parent) in
/// `path`'s place, as [`write_dir`] does with what it made.
pub(crate) fn replace_dir(staged: &Path, path: &Path) -> Result<()> {
    let parent = parent_of(path);
    let old = rename_over(staged, path, path.exists()).inspect_err(|_| {
        let _ = std::fs::remove_dir_all(staged);
    })?;
    sync_dir(&parent)?;
    if let Some(aside) = old {
        std::fs::remove_dir_all(&aside).map_err(io_error(&aside))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::io::{BufWriter, Write};

    use super::{hold, write_dir, write_entries, write_file};
    use crate::error::{Error, Result};
    use agent_core::atomic::ABANDONED_AFTER;
    use std::os::unix::fs::OpenOptionsExt;

    /// A writer killed between moving the previous output aside and
    /// putting the new one in its place left the only copy aside: the next
    /// write beside it puts it back. One whose new output did take its
    /// place is removed; one moved aside a moment ago is left to its writer.
    #[test]
    fn an_output_left_aside_by_a_killed_writer_is_put_back() {
        let dir = tempfile::tempdir().unwrap();
        let aside = |name: &str| {
            let path = dir.path().join(name);
            std::fs::create_dir(&path).unwrap();
            std::fs::write(path.join("model.safetensors"), name).unwrap();
            path
        };
        let only_copy = aside(".btl-old-checkpoint-000250.x1Yz");
        let replaced = aside(".btl-old-checkpoint-000500.a2Bc");
        std::fs::create_dir(dir.path().join("checkpoint-000500")).unwrap();
        let in_flight = aside(".btl-old-checkpoint-000750.q3Rs");
        for path in [&only_copy, &replaced] {
            age(path);
        }
        write_dir(&dir.path().join("checkpoint-001000"), |d| {
            std::fs::write(d.join("a"), "1").unwrap();
            Ok(())
        })
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("checkpoint-000250/model.safetensors"))
                .unwrap(),
            ".btl-old-checkpoint-000250.x1Yz"
        );
        assert!(!only_copy.exists() && !replaced.exists());
        assert!(dir.path().join("checkpoint-000500").is_dir());
        assert!(in_flight.join("model.safetensors").is_file());
        // What replace_dir moves aside is named so that it finds its way
        // back: a kill right after the move is a put-back away from whole.
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("x"), "old").unwrap();
        let moved = super::move_aside(&out).unwrap();
        assert!(!out.exists());
        age(&moved);
        super::sweep(dir.path());
        assert_eq!(std::fs::read_to_string(out.join("x")).unwrap(), "old");
        assert!(!moved.exists());
    }

    /// The names in `dir`, sorted.
    fn names_in(dir: &std::path::Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Dates `path`'s last change back past [`ABANDONED_AFTER`].
    fn age(path: &std::path::Path) {
        let then =
            std::time::SystemTime::now() - ABANDONED_AFTER - std::time::Duration::from_secs(5);
        File::open(path).unwrap().set_modified(then).unwrap();
    }

    /// What killed writers left (a staging directory, a temporary file) is
    /// removed by the next directory written beside it; a staging entry a
    /// live writer holds, one just made, and a directory moved aside
    /// (possibly the only copy of an output) stay.
    #[test]
    fn a_killed_writer_s_staging_is_swept_and_a_live_one_s_kept() {
        let dir = tempfile::tempdir().unwrap();
        let entry = |name: &str, is_dir: bool| {
            let path = dir.path().join(name);
            if is_dir {
                std::fs::create_dir(&path).unwrap();
                std::fs::write(path.join("model.safetensors"), "weights").unwrap();
            } else {
                std::fs::write(&path, "half a file").unwrap();
            }
            path
        };
        let (dead_dir, dead_file) = (
            entry(".btl-partial-a", true),
            entry(".btl-partial-b", false),
        );
        let (live, fresh) = (
            entry(".btl-partial-c", true),
            entry(".btl-partial-d", false),
        );
        let (aside, writing) = (entry(".btl-old-e", true), entry(".btl-partial-g", false));
        for path in [&dead_dir, &dead_file, &live, &aside, &writing] {
            age(path);
        }
        // A pipe of that name is not opened (the open would wait for a
        // writer), nor removed.
        let pipe = dir.path().join(".btl-partial-h");
        let made = std::process::Command::new("mkfifo")
            .arg(&pipe)
            .status()
            .unwrap();
        assert!(made.success());
        // Opened without waiting for a writer, only to date it back.
        let then =
            std::time::SystemTime::now() - ABANDONED_AFTER - std::time::Duration::from_secs(5);
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&pipe)
            .and_then(|f| f.set_modified(then))
            .unwrap();
        let _writers = [hold(&live).unwrap(), hold(&writing).unwrap()];
        write_dir(&dir.path().join("out"), |d| {
            std::fs::write(d.join("a"), "1").unwrap();
            Ok(())
        })
        .unwrap();
        assert!(!dead_dir.exists() && !dead_file.exists());
        assert!(live.join("model.safetensors").exists() && fresh.exists() && aside.exists());
        assert!(writing.exists() && pipe.exists());
        // write_entries sweeps the directory it writes into.
        std::fs::remove_file(&fresh).unwrap();
        let dead = entry(".btl-partial-f", false);
        age(&dead);
        write_entries(dir.path(), |d| {
            std::fs::write(d.join("b"), "2").unwrap();
            Ok(())
        })
        .unwrap();
        assert!(!dead.exists());
        assert!(live.exists());
    }

    fn put(w: &mut BufWriter<&File>, bytes: &[u8]) -> Result<()> {
        w.write_all(bytes).unwrap();
        Ok(())
    }

    #[test]
    fn a_failed_write_keeps_the_previous_file_and_leaves_no_partial() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        write_file(&path, |w| put(w, b"old")).unwrap();
        let result = write_file(&path, |w| {
            put(w, b"half")?;
            Err(Error::Input("stopped".into()))
        });
        assert!(result.is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        write_file(&path, |w| put(w, b"new")).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
    }

    #[test]
    fn a_directory_is_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("adapter");
        write_dir(&out, |d| {
            std::fs::write(d.join("a"), "1").unwrap();
            std::fs::write(d.join("stale"), "x").unwrap();
            Ok(())
        })
        .unwrap();
        let failed = write_dir(&out, |d| {
            std::fs::write(d.join("a"), "half").unwrap();
            Err(Error::Input("stopped".into()))
        });
        assert!(failed.is_err());
        assert_eq!(std::fs::read_to_string(out.join("a")).unwrap(), "1");
        write_dir(&out, |d| {
            std::fs::write(d.join("a"), "2").unwrap();
            Ok(())
        })
        .unwrap();
        assert_eq!(std::fs::read_to_string(out.join("a")).unwrap(), "2");
        assert!(!out.join("stale").exists());
        // Nothing but the output is left in the parent directory.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn several_outputs_are_all_made_before_any_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("export");
        let write = |model: &str, fail: bool| {
            write_entries(&out, |d| {
                std::fs::create_dir(d.join("hf")).unwrap();
                std::fs::write(d.join("hf").join("config.json"), model).unwrap();
                std::fs::write(d.join("model.gguf"), model).unwrap();
                if fail {
                    return Err(Error::Input("the projector does not fit".into()));
                }
                std::fs::write(d.join("mmproj.gguf"), model).unwrap();
                Ok(())
            })
        };
        write("1", false).unwrap();
        std::fs::write(out.join("kept"), "x").unwrap();
        assert!(write("2", true).is_err());
        let read = |p: &str| std::fs::read_to_string(out.join(p)).unwrap();
        assert_eq!(
            (
                read("hf/config.json"),
                read("model.gguf"),
                read("mmproj.gguf")
            ),
            ("1".into(), "1".into(), "1".into())
        );
        write("3", false).unwrap();
        assert_eq!(
            (
                read("hf/config.json"),
                read("model.gguf"),
                read("mmproj.gguf")
            ),
            ("3".into(), "3".into(), "3".into())
        );
        // What the outputs do not name stays; no staging is left behind.
        assert_eq!(names_in(&out), ["hf", "kept", "mmproj.gguf", "model.gguf"]);
    }

    /// Writers killed while they put their outputs in place: one after
    /// `hf/` went in (its old one aside) with the GGUFs still to move, and
    /// one between moving `hf/` aside and moving its own in. The next write
    /// in the directory finishes both before its own, so the text model and
    /// its projector are never left from two exports.
    #[test]
    fn a_swap_a_killed_writer_left_midway_is_carried_through() {
        let dir = tempfile::tempdir().unwrap();
        let put = |out: &std::path::Path, entries: &[(&str, &str)]| {
            for (path, text) in entries {
                let path = out.join(path);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, text).unwrap();
            }
        };
        let read = |out: &std::path::Path, p: &str| std::fs::read_to_string(out.join(p)).unwrap();

        let out = dir.path().join("after-hf");
        put(
            &out,
            &[
                ("hf/config.json", "2"),
                (".btl-old-hf.k1Ll/config.json", "1"),
                ("model.gguf", "1"),
                ("mmproj.gguf", "1"),
                (".btl-swap-k1Ll/model.gguf", "2"),
                (".btl-swap-k1Ll/mmproj.gguf", "2"),
            ],
        );
        age(&out.join(".btl-old-hf.k1Ll"));
        write_entries(&out, |d| {
            std::fs::write(d.join("notes.txt"), "x").unwrap();
            Ok(())
        })
        .unwrap();
        assert_eq!(
            ["hf/config.json", "model.gguf", "mmproj.gguf", "notes.txt"].map(|p| read(&out, p)),
            ["2", "2", "2", "x"]
        );
        assert_eq!(
            names_in(&out),
            ["hf", "mmproj.gguf", "model.gguf", "notes.txt"]
        );

        // Killed between the two renames of hf/: only the aside holds the
        // old one, and the swap the new one. Put back first, the old one
        // would then be replaced again; either way the new one ends there.
        let out = dir.path().join("between");
        put(
            &out,
            &[
                (".btl-old-hf.z9Yx/config.json", "1"),
                ("model.gguf", "1"),
                (".btl-swap-z9Yx/hf/config.json", "2"),
                (".btl-swap-z9Yx/model.gguf", "2"),
            ],
        );
        age(&out.join(".btl-old-hf.z9Yx"));
        super::sweep(&out);
        assert_eq!(
            ["hf/config.json", "model.gguf"].map(|p| read(&out, p)),
            ["2", "2"]
        );
        assert_eq!(names_in(&out), ["hf", "model.gguf"]);
    }

    /// A swap left that cannot be finished (its directory output's
    /// namesake became a file since) stops the next write before it moves
    /// anything: its outputs would otherwise be replaced by the older ones
    /// once the swap could go on.
    #[test]
    fn a_swap_that_cannot_be_finished_stops_the_next_write() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        std::fs::write(out.join("hf"), "a file now").unwrap();
        std::fs::write(out.join("model.gguf"), "1").unwrap();
        std::fs::create_dir_all(out.join(".btl-swap-w8Vu/hf")).unwrap();
        std::fs::write(out.join(".btl-swap-w8Vu/model.gguf"), "2").unwrap();
        let e = write_entries(out, |d| {
            std::fs::write(d.join("model.gguf"), "3").unwrap();
            Ok(())
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("an earlier write's outputs were left half put in place")
                && e.contains("hf: it is no directory"),
            "{e}"
        );
        // The new write moved nothing, and no directory was moved aside for
        // nothing (the swap's GGUF went in or not, by the order it listed).
        assert_ne!(
            std::fs::read_to_string(out.join("model.gguf")).unwrap(),
            "3"
        );
        assert!(out.join(".btl-swap-w8Vu/hf").is_dir());
        let names = names_in(out);
        assert!(
            !names.iter().any(|n| n.starts_with(".btl-old-")),
            "{names:?}"
        );
    }

    /// An output that cannot take its namesake's place is refused before
    /// any output moves, not after some have.
    #[test]
    fn an_output_that_cannot_replace_its_namesake_is_refused_before_any_moves() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        std::fs::write(out.join("model.gguf"), "1").unwrap();
        std::fs::create_dir(out.join("mmproj.gguf")).unwrap();
        std::fs::write(out.join("hf"), "a file").unwrap();
        let write = |names: &[&str], dir_name: Option<&str>| {
            write_entries(out, |d| {
                for name in names {
                    std::fs::write(d.join(name), "2").unwrap();
                }
                if let Some(name) = dir_name {
                    std::fs::create_dir(d.join(name)).unwrap();
                }
                Ok(())
            })
            .unwrap_err()
            .to_string()
        };
        let e = write(&["model.gguf", "mmproj.gguf"], None);
        assert!(
            e.contains("mmproj.gguf: it is a directory, which a file written there cannot replace"),
            "{e}"
        );
        let e = write(&["model.gguf"], Some("hf"));
        assert!(
            e.contains("hf: it is no directory, which a directory written there cannot replace"),
            "{e}"
        );
        assert_eq!(
            std::fs::read_to_string(out.join("model.gguf")).unwrap(),
            "1"
        );
        // Nothing is left to carry through later either.
        assert_eq!(names_in(out), ["hf", "mmproj.gguf", "model.gguf"]);
    }
}
