//! The app's JNI bridge in a real JVM: compiles the app's Android-free Java
//! classes and the host harness (`android-app/host-test`) with `javac`,
//! loads this crate's `libbtl_android.so` (built with feature `host-sim`)
//! through `System.loadLibrary`, and runs whole episodes on the virtual
//! phone under `-Xcheck:jni`. The harness checks each episode from the
//! Java side; this test checks the run as a whole, that the JVM reported no
//! JNI misuse, and that every trajectory reads back with agent-core.

use agent_core::agent::trajectory::read_trajectory;
use std::path::{Path, PathBuf};
use std::process::Command;

fn app_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The directory cargo put `libbtl_android.so` in: the `deps/` directory
/// of the test binary, where a test build leaves the cdylib (a plain
/// `cargo build` also copies it one level up).
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary has a path");
    let deps = exe
        .parent()
        .expect("the test binary sits in target/<profile>/deps");
    [Some(deps), deps.parent()]
        .into_iter()
        .flatten()
        .find(|dir| dir.join("libbtl_android.so").is_file())
        .unwrap_or_else(|| {
            panic!(
                "{} has no libbtl_android.so; the cdylib is built with the test",
                deps.display()
            )
        })
        .to_path_buf()
}

fn java_sources(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a readable directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "java"))
        .collect();
    files.sort();
    files
}

fn tool(name: &str) -> Command {
    let probe = Command::new(name).arg("-version").output();
    assert!(
        probe.is_ok(),
        "`{name}` is not installed; scripts/test installs a JDK (default-jdk-headless)"
    );
    Command::new(name)
}

#[test]
fn episodes_run_across_the_jni_boundary_without_jni_warnings() {
    let work = tempfile::tempdir().unwrap();
    let classes = work.path().join("classes");
    let app = app_dir();
    let mut sources = java_sources(&app.join("app/src/main/java/com/btl/agent/core"));
    sources.extend(java_sources(&app.join("host-test/java/com/btl/agent/host")));
    let javac = tool("javac")
        .args(["-Xlint:all", "-Werror", "-d"])
        .arg(&classes)
        .args(&sources)
        .output()
        .unwrap();
    assert!(
        javac.status.success(),
        "javac failed:\n{}",
        String::from_utf8_lossy(&javac.stderr)
    );

    let episodes = work.path().join("episodes");
    let run = tool("java")
        .arg("-Xcheck:jni")
        .arg(format!("-Djava.library.path={}", library_dir().display()))
        .arg("-cp")
        .arg(&classes)
        .arg("com.btl.agent.host.EpisodeHarness")
        .arg(&episodes)
        // The harness panics in Rust on purpose; its backtrace is noise.
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success() && stdout.contains("ALL PASSED"),
        "the harness failed ({}):\n{stdout}\n{stderr}",
        run.status
    );
    // HotSpot's -Xcheck:jni reports misuse (pending exceptions, leaked or
    // overflowing local references, wrong types) as "WARNING" lines.
    for line in stdout.lines().chain(stderr.lines()) {
        assert!(
            !line.contains("WARNING") && !line.contains("FATAL ERROR"),
            "the JVM reported JNI misuse: {line}\n{stdout}\n{stderr}"
        );
    }

    let results: Vec<(&str, serde_json::Value)> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("RESULT "))
        .map(|l| {
            let (scenario, json) = l.split_once(' ').expect("RESULT <scenario> <json>");
            (scenario, serde_json::from_str(json).expect("outcome JSON"))
        })
        .collect();
    let names: Vec<&str> = results.iter().map(|(s, _)| *s).collect();
    assert_eq!(
        names,
        [
            "oracle",
            "confirm-allow",
            "confirm-decline",
            "unicode",
            "cancel",
            "device-exception",
            "resume",
            "misuse-4"
        ]
    );
    for (scenario, result) in &results {
        let dir = PathBuf::from(result["trajectory"].as_str().expect("a trajectory path"));
        let trajectory = read_trajectory(&dir).unwrap_or_else(|e| panic!("{scenario}: {e}"));
        let outcome = trajectory
            .episode
            .outcome
            .unwrap_or_else(|| panic!("{scenario}: episode.json has no outcome"));
        assert_eq!(
            serde_json::to_value(&outcome).unwrap(),
            result["outcome"],
            "{scenario}: the returned outcome is the recorded one"
        );
        assert_eq!(trajectory.steps.len() as u32, outcome.steps, "{scenario}");
        assert!(trajectory.truncated_tail.is_none(), "{scenario}");
        for step in &trajectory.steps {
            assert!(dir.join(&step.screenshot).is_file(), "{scenario}");
            let xml = step
                .ui_tree
                .as_ref()
                .expect("the Java device sends a UI tree");
            assert!(dir.join(xml).is_file(), "{scenario}");
        }
    }
    let resumed = read_trajectory(&episodes.join("resume")).unwrap();
    let failed_at = resumed.episode.resumed_at_steps.as_slice();
    assert!(
        matches!(failed_at, [n] if *n >= 1 && (*n as usize) < resumed.steps.len()),
        "one resumption, after the recorded steps and before the last: {failed_at:?} of {}",
        resumed.steps.len()
    );
    let oracle = read_trajectory(&episodes.join("oracle")).unwrap();
    assert_eq!(
        oracle.episode.device,
        "virtual phone through the app's JNI bridge"
    );
    assert_eq!(oracle.episode.policy, "oracle of note_create");
    assert!(
        oracle.steps.len() >= 3,
        "note_create takes several steps: {}",
        oracle.steps.len()
    );
}
