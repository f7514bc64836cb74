//! Test harness: a fresh directory per test and a way to run `btl` in it.

use agent_core::device::adb_server::PrivateAdbServer;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};

/// The official example samples, copied from the BTL-UI release.
pub const NAVIGATION_SAMPLES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/data/btl-ui-examples/navigation_meta_format.json"
);
pub const GROUNDING_SAMPLES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/data/btl-ui-examples/grounding_meta_format.json"
);

/// `--model`/`--mmproj` naming the tiny random fixture, for tests that need
/// an aimless model or the one the fixture's LoRA adapter was made for
/// (without them `btl` loads the trained default model).
pub const TINY_MODEL: [&str; 4] = ["--model", TINY_TEXT, "--mmproj", TINY_MMPROJ];

/// The tiny random Qwen2.5-VL fixture (scripts/make-tiny-model): its
/// directory, text GGUF and projector.
pub const TINY_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/tiny-qwen25vl");
pub const TINY_TEXT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/data/tiny-qwen25vl/tiny-qwen25vl-f16.gguf"
);
pub const TINY_MMPROJ: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/data/tiny-qwen25vl/mmproj-tiny-qwen25vl-f16.gguf"
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

/// A `btl sim serve` process, killed when dropped.
pub struct ServedPhone {
    child: Child,
    /// Kept open: the server exits when its stdout closes.
    _stdout: BufReader<ChildStdout>,
    pub serial: String,
}

impl ServedPhone {
    /// Starts `btl sim serve ARGS…` and reads the serial it prints.
    pub fn start(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_btl"))
            .args(["sim", "serve"])
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start btl sim serve");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut first = String::new();
        stdout.read_line(&mut first).expect("read the serial");
        let serial = first
            .trim()
            .strip_prefix("virtual phone listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .to_string();
        Self {
            child,
            _stdout: stdout,
            serial,
        }
    }
}

impl Drop for ServedPhone {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads a trajectory's JSON files.
pub fn episode_json(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("episode.json")).expect("episode.json"))
        .expect("valid episode.json")
}

pub fn steps_json(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("steps.jsonl"))
        .expect("steps.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("valid step line"))
        .collect()
}

/// Fast screen settling for the virtual phone, whose screen is stable as
/// soon as an action returns.
pub const FAST_SETTLE: [&str; 4] = ["--settle-poll-ms", "20", "--settle-timeout-ms", "200"];
