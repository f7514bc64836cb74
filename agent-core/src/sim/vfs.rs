//! The virtual phone's file system: an in-memory tree of directories and
//! files with Unix modes and mtimes, enough for `adb push/pull/ls`,
//! `uiautomator dump` and `screencap` to a file.

use super::backend::{DirEntry, FileStat};
use std::collections::BTreeMap;

const DIR_MODE: u32 = 0o040771;
const FILE_TYPE: u32 = 0o100000;

#[derive(Debug, Clone)]
enum Node {
    Dir(BTreeMap<String, Node>, u32),
    File {
        data: Vec<u8>,
        mode: u32,
        mtime: u32,
    },
}

/// The bytes of file data one phone's storage holds. A phone's storage is
/// finite, and the virtual phone's is the host's memory, so pushes and
/// writes past it fail as a full phone's do ("No space left on device").
/// It holds the largest install (256 MiB) several times over.
pub const CAPACITY: usize = 1 << 30;

/// The longest path the phone takes, in bytes as resolved (Linux's
/// PATH_MAX less its terminating NUL), and the longest name in one
/// (NAME_MAX). It also bounds how deep the tree grows: the tree is walked
/// and dropped recursively, and `mkdir -p` of a megabyte of `a/a/…` would
/// otherwise nest half a million directories.
const PATH_MAX: usize = 4095;
const NAME_MAX: usize = 255;

/// An in-memory file system rooted at `/`.
#[derive(Debug, Clone)]
pub struct Vfs {
    root: Node,
    /// Bytes of file data held, at most [`CAPACITY`].
    used: usize,
}

impl Default for Vfs {
    /// The directories an Android shell user finds: `/sdcard`, `/data/local/tmp`.
    fn default() -> Self {
        let mut fs = Self {
            root: Node::Dir(BTreeMap::new(), 0),
            used: 0,
        };
        for dir in [
            "/sdcard",
            "/sdcard/Download",
            "/sdcard/Pictures",
            "/data/local/tmp",
            "/system/bin",
        ] {
            fs.mkdir_all(dir);
        }
        fs
    }
}

/// Path components of an absolute or relative path; `.` and empty parts
/// are skipped and `..` climbs.
pub(crate) fn components(path: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            p => out.push(p),
        }
    }
    out
}

/// Refuses a path longer than the phone takes (4095 bytes, a name 255),
/// as the kernel does (ENAMETOOLONG).
pub fn check_length(path: &str) -> Result<(), String> {
    let parts = components(path);
    let length: usize = parts.iter().map(|part| part.len() + 1).sum();
    if length > PATH_MAX || parts.iter().any(|part| part.len() > NAME_MAX) {
        return Err(format!("{path}: File name too long"));
    }
    Ok(())
}

impl Vfs {
    fn node(&self, path: &str) -> Option<&Node> {
        components(path)
            .into_iter()
            .try_fold(&self.root, |node, name| match node {
                Node::Dir(children, _) => children.get(name),
                Node::File { .. } => None,
            })
    }

    fn node_mut(&mut self, parts: &[&str]) -> Option<&mut Node> {
        parts
            .iter()
            .try_fold(&mut self.root, |node, name| match node {
                Node::Dir(children, _) => children.get_mut(*name),
                Node::File { .. } => None,
            })
    }

    fn dir_mut(&mut self, parts: &[&str]) -> Option<&mut BTreeMap<String, Node>> {
        match self.node_mut(parts)? {
            Node::Dir(children, _) => Some(children),
            Node::File { .. } => None,
        }
    }

    /// Creates a directory and its parents (like `mkdir -p`); false where a
    /// file stands in the way or the path is too long ([`check_length`]).
    pub fn mkdir_all(&mut self, path: &str) -> bool {
        if check_length(path).is_err() {
            return false;
        }
        let mut node = &mut self.root;
        for name in components(path) {
            let Node::Dir(children, _) = node else {
                return false;
            };
            node = children
                .entry(name.to_string())
                .or_insert_with(|| Node::Dir(BTreeMap::new(), 0));
        }
        matches!(node, Node::Dir(..))
    }

    /// Writes a file, creating missing parent directories as `adb push` does.
    pub fn write(
        &mut self,
        path: &str,
        data: Vec<u8>,
        mode: u32,
        mtime: u32,
    ) -> Result<(), String> {
        check_length(path)?;
        let parts = components(path);
        let Some((name, parents)) = parts.split_last() else {
            return Err(format!("{path}: is a directory"));
        };
        let parent = parents.join("/");
        if !self.mkdir_all(&parent) {
            return Err(format!("{path}: not a directory"));
        }
        let used = self.used;
        let dir = self
            .dir_mut(parents)
            .ok_or_else(|| format!("{path}: not a directory"))?;
        let replaced = match dir.get(*name) {
            Some(Node::Dir(..)) => return Err(format!("{path}: is a directory")),
            Some(node) => data_bytes(node),
            None => 0,
        };
        let used = used - replaced + data.len();
        if used > CAPACITY {
            return Err(format!("{path}: No space left on device"));
        }
        dir.insert(
            name.to_string(),
            Node::File {
                data,
                mode: FILE_TYPE | (mode & 0o7777),
                mtime,
            },
        );
        self.used = used;
        Ok(())
    }

    /// Adds `data` to the end of the file at `path`, creating it as
    /// [`Self::write`] does when it is missing. The file grows in place:
    /// `>>` onto a large file costs what it adds, not the file again.
    pub fn append(&mut self, path: &str, data: &[u8], mode: u32, mtime: u32) -> Result<(), String> {
        let used = self.used;
        let parts = components(path);
        let Some(Node::File {
            data: held,
            mtime: stamp,
            ..
        }) = self.node_mut(&parts)
        else {
            return self.write(path, data.to_vec(), mode, mtime);
        };
        if used + data.len() > CAPACITY {
            return Err(format!("{path}: No space left on device"));
        }
        held.extend_from_slice(data);
        *stamp = mtime;
        self.used = used + data.len();
        Ok(())
    }

    /// Sets the modification time of the file or directory at `path`;
    /// false when nothing is there.
    pub fn set_mtime(&mut self, path: &str, mtime: u32) -> bool {
        match self.node_mut(&components(path)) {
            Some(Node::File { mtime: stamp, .. }) => {
                *stamp = mtime;
                true
            }
            Some(Node::Dir(_, stamp)) => {
                *stamp = mtime;
                true
            }
            None => false,
        }
    }

    /// Bytes of file data that still fit.
    pub fn free(&self) -> usize {
        CAPACITY - self.used
    }

    /// Takes `bytes` of storage for data kept outside the tree (an install
    /// session's staged APKs, which a phone keeps on its data partition),
    /// if they fit.
    pub fn hold(&mut self, bytes: usize) -> Result<(), String> {
        if bytes > self.free() {
            return Err("No space left on device".into());
        }
        self.used += bytes;
        Ok(())
    }

    /// Gives back `bytes` that [`Self::hold`] took.
    pub fn release(&mut self, bytes: usize) {
        self.used -= bytes;
    }

    /// Moves the file `from` to `to`, replacing a file there and creating
    /// missing parent directories as [`Self::write`] does. No data is
    /// copied, so a full phone still moves files, as rename(2) does.
    pub fn rename(&mut self, from: &str, to: &str) -> Result<(), String> {
        match self.node(from) {
            Some(Node::File { .. }) => {}
            Some(Node::Dir(..)) => return Err(format!("{from}: is a directory")),
            None => return Err(format!("{from}: No such file or directory")),
        }
        if components(from) == components(to) {
            return Ok(());
        }
        check_length(to)?;
        let parts = components(to);
        let Some((name, parents)) = parts.split_last() else {
            return Err(format!("{to}: is a directory"));
        };
        if !self.mkdir_all(&parents.join("/")) {
            return Err(format!("{to}: not a directory"));
        }
        if matches!(self.node(to), Some(Node::Dir(..))) {
            return Err(format!("{to}: is a directory"));
        }
        let from_parts = components(from);
        let (from_name, from_parents) = from_parts
            .split_last()
            .ok_or_else(|| format!("{from}: is a directory"))?;
        let node = self
            .dir_mut(from_parents)
            .and_then(|dir| dir.remove(*from_name))
            .ok_or_else(|| format!("{from}: No such file or directory"))?;
        let replaced = self
            .dir_mut(parents)
            .and_then(|dir| dir.insert((*name).to_string(), node));
        self.used -= replaced.as_ref().map_or(0, data_bytes);
        Ok(())
    }

    pub fn read(&self, path: &str) -> Result<Vec<u8>, String> {
        match self.node(path) {
            Some(Node::File { data, .. }) => Ok(data.clone()),
            Some(Node::Dir(..)) => Err(format!("{path}: is a directory")),
            None => Err(format!("{path}: No such file or directory")),
        }
    }

    pub fn remove(&mut self, path: &str) -> Result<(), String> {
        let parts = components(path);
        let Some((name, parents)) = parts.split_last() else {
            return Err(format!("{path}: cannot remove the root"));
        };
        let removed = self
            .dir_mut(parents)
            .and_then(|dir| dir.remove(*name))
            .ok_or_else(|| format!("{path}: No such file or directory"))?;
        self.used -= data_bytes(&removed);
        Ok(())
    }

    pub fn stat(&self, path: &str) -> Option<FileStat> {
        self.node(path).map(stat_of)
    }

    pub fn list(&self, path: &str) -> Option<Vec<DirEntry>> {
        match self.node(path)? {
            Node::Dir(children, _) => Some(
                children
                    .iter()
                    .map(|(name, node)| DirEntry {
                        name: name.clone(),
                        stat: stat_of(node),
                    })
                    .collect(),
            ),
            Node::File { .. } => None,
        }
    }
}

/// The bytes of file data `node` holds, its subtree's for a directory.
fn data_bytes(node: &Node) -> usize {
    match node {
        Node::Dir(children, _) => children.values().map(data_bytes).sum(),
        Node::File { data, .. } => data.len(),
    }
}

fn stat_of(node: &Node) -> FileStat {
    match node {
        Node::Dir(_, mtime) => FileStat {
            mode: DIR_MODE,
            size: 4096,
            mtime: *mtime,
        },
        Node::File { data, mode, mtime } => FileStat {
            mode: *mode,
            size: u32::try_from(data.len()).unwrap_or(u32::MAX),
            mtime: *mtime,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes past the capacity fail as on a full phone; replacing a file
    /// counts only the difference, and removing a directory frees its
    /// files. (Zeroed buffers: the gigabyte is never touched.)
    #[test]
    fn a_full_phone_refuses_more_data() {
        let mut fs = Vfs::default();
        let half = CAPACITY / 2;
        fs.write("/sdcard/a/one", vec![0; half], 0o644, 0).unwrap();
        fs.write("/data/local/tmp/two", vec![0; half], 0o644, 0)
            .unwrap();
        assert_eq!(
            fs.write("/sdcard/three", vec![1], 0o644, 0),
            Err("/sdcard/three: No space left on device".into())
        );
        assert_eq!(fs.stat("/sdcard/three"), None);
        fs.write("/data/local/tmp/two", vec![0; half - 1], 0o644, 0)
            .unwrap();
        fs.write("/sdcard/three", vec![1], 0o644, 0).unwrap();
        assert!(fs.write("/sdcard/four", vec![1], 0o644, 0).is_err());
        fs.remove("/sdcard/a").unwrap();
        fs.write("/sdcard/four", vec![0; half - 1], 0o644, 0)
            .unwrap();
        // half - 1 (two) + 1 (three) + half - 1 (four).
        assert_eq!(fs.free(), 1);
        // A move copies nothing: it works on a full phone, and the file it
        // replaces frees its bytes.
        fs.rename("/sdcard/four", "/sdcard/moved/here").unwrap();
        assert_eq!(fs.stat("/sdcard/four"), None);
        let size = fs.stat("/sdcard/moved/here").map(|s| s.size as usize);
        assert_eq!(size, Some(half - 1));
        fs.rename("/sdcard/three", "/sdcard/moved/here").unwrap();
        assert_eq!(fs.free(), 1 + half - 1);
        assert!(fs.rename("/sdcard/moved/here", "/sdcard").is_err());
        assert!(fs.rename("/sdcard/none", "/sdcard/x").is_err());
    }

    /// An append grows the file in place, keeps its mode and counts only
    /// what it adds against the capacity; a missing file is created.
    #[test]
    fn an_append_adds_to_the_end() {
        let mut fs = Vfs::default();
        fs.write("/sdcard/log", b"ab".to_vec(), 0o600, 1).unwrap();
        fs.append("/sdcard/log", b"cd", 0o666, 5).unwrap();
        assert_eq!(fs.read("/sdcard/log").unwrap(), b"abcd");
        let st = fs.stat("/sdcard/log").unwrap();
        assert_eq!((st.mode, st.size, st.mtime), (0o100600, 4, 5));
        fs.append("/sdcard/new", b"x", 0o644, 2).unwrap();
        assert_eq!(fs.read("/sdcard/new").unwrap(), b"x");
        assert_eq!(fs.free(), CAPACITY - 5);
        let rest = fs.free();
        fs.write("/sdcard/big", vec![0; rest - 1], 0o644, 0)
            .unwrap();
        assert_eq!(
            fs.append("/sdcard/log", b"ef", 0o644, 0),
            Err("/sdcard/log: No space left on device".into())
        );
        assert_eq!(fs.read("/sdcard/log").unwrap(), b"abcd");
        fs.append("/sdcard/log", b"e", 0o644, 0).unwrap();
        assert_eq!(fs.free(), 0);
        assert!(fs.append("/sdcard", b"x", 0o644, 0).is_err());
        assert!(fs.append("/sdcard/log/x", b"x", 0o644, 0).is_err());
        assert!(fs.set_mtime("/sdcard/log", 9));
        assert_eq!(fs.stat("/sdcard/log").unwrap().mtime, 9);
        assert!(fs.set_mtime("/sdcard", 9));
        assert!(!fs.set_mtime("/sdcard/none", 9));
    }

    /// A resolved path of 4095 bytes is taken, one of 4096 is not, nor a
    /// name of 256: `/a` 2047 times is 4094 bytes, 2048 times 4096.
    #[test]
    fn paths_longer_than_the_kernel_takes_are_refused() {
        let mut fs = Vfs::default();
        let deep = |n: usize| "/a".repeat(n);
        let longest = format!("{}/bc", deep(2046));
        assert_eq!(longest.len(), 4095);
        fs.write(&longest, b"x".to_vec(), 0o644, 0).unwrap();
        let too_long = format!("{}/bcd", deep(2046));
        let refused = Err(format!("{too_long}: File name too long"));
        assert_eq!(fs.write(&too_long, vec![], 0o644, 0), refused);
        assert_eq!(fs.rename(&longest, &too_long), refused);
        assert!(fs.mkdir_all(&deep(2047)));
        assert!(!fs.mkdir_all(&deep(2048)));
        // Only the resolved path counts.
        let relative = format!("/sdcard/{}{}", "b/../".repeat(3000), "c".repeat(255));
        fs.write(&relative, vec![], 0o644, 0).unwrap();
        assert!(fs.stat(&format!("/sdcard/{}", "c".repeat(255))).is_some());
        let name = format!("/sdcard/{}", "n".repeat(256));
        assert_eq!(
            fs.write(&name, vec![], 0o644, 0),
            Err(format!("{name}: File name too long"))
        );
    }

    #[test]
    fn write_read_list_remove() {
        let mut fs = Vfs::default();
        fs.write("/sdcard/a/b.txt", b"hi".to_vec(), 0o644, 7)
            .unwrap();
        assert_eq!(fs.read("/sdcard/a/b.txt").unwrap(), b"hi");
        assert_eq!(fs.read("/sdcard/./a/../a/b.txt").unwrap(), b"hi");
        let st = fs.stat("/sdcard/a/b.txt").unwrap();
        assert_eq!((st.mode, st.size, st.mtime), (0o100644, 2, 7));
        assert!(fs.stat("/sdcard/a/").unwrap().is_dir());
        let names: Vec<_> = fs
            .list("/sdcard")
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["Download", "Pictures", "a"]);
        assert!(fs.write("/sdcard/a/b.txt/c", vec![], 0o644, 0).is_err());
        assert!(fs.write("/sdcard", vec![], 0o644, 0).is_err());
        fs.remove("/sdcard/a/b.txt").unwrap();
        assert!(
            fs.read("/sdcard/a/b.txt")
                .unwrap_err()
                .contains("No such file")
        );
        assert!(fs.list("/nope").is_none());
    }
}
