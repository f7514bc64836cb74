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

/// An in-memory file system rooted at `/`.
#[derive(Debug, Clone)]
pub struct Vfs {
    root: Node,
}

impl Default for Vfs {
    /// The directories an Android shell user finds: `/sdcard`, `/data/local/tmp`.
    fn default() -> Self {
        let mut fs = Self {
            root: Node::Dir(BTreeMap::new(), 0),
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

impl Vfs {
    fn node(&self, path: &str) -> Option<&Node> {
        components(path)
            .into_iter()
            .try_fold(&self.root, |node, name| match node {
                Node::Dir(children, _) => children.get(name),
                Node::File { .. } => None,
            })
    }

    fn dir_mut(&mut self, parts: &[&str]) -> Option<&mut BTreeMap<String, Node>> {
        let mut node = &mut self.root;
        for name in parts {
            node = match node {
                Node::Dir(children, _) => children.get_mut(*name)?,
                Node::File { .. } => return None,
            };
        }
        match node {
            Node::Dir(children, _) => Some(children),
            Node::File { .. } => None,
        }
    }

    /// Creates a directory and its parents (like `mkdir -p`).
    pub fn mkdir_all(&mut self, path: &str) -> bool {
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
        let parts = components(path);
        let Some((name, parents)) = parts.split_last() else {
            return Err(format!("{path}: is a directory"));
        };
        let parent = parents.join("/");
        if !self.mkdir_all(&parent) {
            return Err(format!("{path}: not a directory"));
        }
        let dir = self
            .dir_mut(parents)
            .ok_or_else(|| format!("{path}: not a directory"))?;
        if matches!(dir.get(*name), Some(Node::Dir(..))) {
            return Err(format!("{path}: is a directory"));
        }
        dir.insert(
            name.to_string(),
            Node::File {
                data,
                mode: FILE_TYPE | (mode & 0o7777),
                mtime,
            },
        );
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
        self.dir_mut(parents)
            .and_then(|dir| dir.remove(*name))
            .map(|_| ())
            .ok_or_else(|| format!("{path}: No such file or directory"))
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
