//! Test harness: a fresh directory per test and a way to run `btl` in it.

use agent_core::device::adb_server::PrivateAdbServer;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The official example samples, copied from the BTL-UI release.
pub const NAVIGATION_SAMPLES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/data/btl-ui-examples/navigation_meta_format.json"
);
pub const GROUNDING_SAMPLES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/data/btl-ui-examples/grounding_meta_format.json"
);

/// A temporary working directory, removed when dropped.
pub struct Dir {
    tmp: tempfile::TempDir,
}

impl Dir {
    pub fn new() -> Self {
        Self {
            tmp: tempfile::tempdir().expect("create a temp dir"),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    /// Writes a file and returns its path.
    pub fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, contents).expect("write test file");
        path
    }

    /// Runs `btl` with `args` in this directory.
    pub fn btl<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        Command::new(env!("CARGO_BIN_EXE_btl"))
            .args(args)
            .current_dir(self.tmp.path())
            .output()
            .expect("run btl")
    }
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("utf-8 stdout")
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).expect("utf-8 stderr")
}

/// Writes completions JSONL, one `{"sample": 0, "completion": …}` per text.
pub fn completions_file(dir: &Dir, name: &str, texts: &[String]) -> PathBuf {
    let lines: Vec<String> = texts
        .iter()
        .map(|t| serde_json::json!({"sample": 0, "completion": t}).to_string())
        .collect();
    dir.write(name, &(lines.join("\n") + "\n"))
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// A canonical navigation answer with the given blink list and action JSON.
pub fn answer(blink: &str, action: &str) -> String {
    format!(
        "<blink>```json\n{blink}\n```</blink>\n<think> reasoning </think>\n<link>```json\n[{{\"Plan\": \"plan\", \"Action\": {action}}}]\n```</link>"
    )
}

/// A private adb server for one test (see `PrivateAdbServer`), failing the
/// test with a clear message when adb is missing.
pub struct AdbServer(PrivateAdbServer);

impl AdbServer {
    pub fn start() -> Self {
        Self(
            PrivateAdbServer::start()
                .expect("Debian's adb is required: run scripts/test, or apt-get install adb"),
        )
    }

    pub fn port(&self) -> u16 {
        self.0.port()
    }

    /// Runs `adb -P PORT args…` against this server.
    pub fn adb<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.0.adb(args).expect("run adb")
    }
}
