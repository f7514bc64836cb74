//! Where a training step's time goes: libtorch's profiler (Kineto) over a
//! stretch of steps, as `torch.profiler` records it in Python.
//!
//! A run with `run.profile_steps = [first, last]` records those steps and
//! writes, in `OUTPUT_DIR/profile/`, `trace.json` (Chrome's trace format:
//! open it in Perfetto or chrome://tracing), `events.tsv` (one line per
//! event) and `summary.txt`: per step, how many operators, kernels and
//! runtime calls ran, how long the GPU computed against the wall clock, and
//! the costliest of each. A step whose GPU time is a small part of its wall
//! time is bound by the host: launches, copies and synchronisations.
//!
//! tch 0.26 does not bind the profiler, so it is driven through a small C++
//! shim (`csrc/profiler.cpp`, built by `build.rs` against libtorch's headers).

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_int};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use tch::Device;

use crate::error::{Error, Result};

unsafe extern "C" {
    fn btl_profiler_error() -> *const c_char;
    fn btl_profiler_start(cuda: bool) -> c_int;
    fn btl_profiler_stop(trace_path: *const c_char, events_path: *const c_char) -> c_int;
}

pub const TRACE_FILE: &str = "trace.json";
pub const EVENTS_FILE: &str = "events.tsv";
pub const SUMMARY_FILE: &str = "summary.txt";

fn check(status: c_int, doing: &str) -> Result<()> {
    if status == 0 {
        return Ok(());
    }
    // SAFETY: the shim returns its thread's last message, NUL-terminated,
    // valid until its next failure on this thread.
    let why = unsafe { CStr::from_ptr(btl_profiler_error()) }.to_string_lossy();
    Err(Error::Input(format!(
        "libtorch's profiler could not {doing}: {why}"
    )))
}

fn c_path(path: &Path) -> Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::Input(format!("{}: a path with a NUL byte", path.display())))
}

/// A running recording; [`Recording::stop`] writes it out.
#[must_use = "a recording is written only by stop()"]
pub struct Recording {
    device: Device,
}

/// Starts recording the operators this thread runs, and on CUDA the GPU's
/// kernels, copies and the runtime calls that launch them.
pub fn start(device: Device) -> Result<Recording> {
    if let Device::Cuda(index) = device {
        tch::Cuda::synchronize(index as i64);
    }
    // SAFETY: a plain value; the shim catches every C++ exception.
    check(
        unsafe { btl_profiler_start(matches!(device, Device::Cuda(_))) },
        "start",
    )?;
    Ok(Recording { device })
}

impl Recording {
    /// Stops recording and writes the trace and the event list into `dir`
    /// (created if missing); returns the events.
    pub fn stop(self, dir: &Path) -> Result<Vec<Event>> {
        if let Device::Cuda(index) = self.device {
            // The kernels still queued belong to the recorded steps.
            tch::Cuda::synchronize(index as i64);
        }
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            path: dir.to_owned(),
            source,
        })?;
        let events_path = dir.join(EVENTS_FILE);
        let trace = c_path(&dir.join(TRACE_FILE))?;
        let events = c_path(&events_path)?;
        // SAFETY: both are valid NUL-terminated strings that outlive the call.
        check(
            unsafe { btl_profiler_stop(trace.as_ptr(), events.as_ptr()) },
            "stop and write its results",
        )?;
        let text = std::fs::read_to_string(&events_path).map_err(|source| Error::Io {
            path: events_path.clone(),
            source,
        })?;
        parse_events(&text).map_err(|e| Error::Input(format!("{}: {e}", events_path.display())))
    }
}

/// What an event is, as the summary groups them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A libtorch operator on the host (`aten::mm`); operators nest, so
    /// their times overlap.
    Operator,
    /// A kernel computing on the GPU.
    Kernel,
    /// A copy to, from or on the GPU.
    Memcpy,
    Memset,
    /// A call into the CUDA runtime or driver on the host
    /// (`cudaLaunchKernel`, `cudaStreamSynchronize`).
    Runtime,
    /// The GPU waiting on the host, or the host on the GPU.
    Sync,
    Other,
}

impl Kind {
    fn parse(word: &str) -> Option<Self> {
        Some(match word {
            "op" => Self::Operator,
            "kernel" => Self::Kernel,
            "memcpy" => Self::Memcpy,
            "memset" => Self::Memset,
            "runtime" => Self::Runtime,
            "sync" => Self::Sync,
            "other" => Self::Other,
            _ => return None,
        })
    }

    fn heading(self) -> &'static str {
        match self {
            Self::Operator => "operators (inclusive: they nest)",
            Self::Kernel => "GPU kernels",
            Self::Memcpy => "GPU copies",
            Self::Memset => "GPU memsets",
            Self::Runtime => "CUDA runtime calls",
            Self::Sync => "synchronisations",
            Self::Other => "other events",
        }
    }
}

/// One recorded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub kind: Kind,
    pub name: String,
    pub nanos: u64,
}

/// Reads the shim's event list: `kind<TAB>name<TAB>nanoseconds` per line.
pub fn parse_events(text: &str) -> std::result::Result<Vec<Event>, String> {
    text.lines()
        .enumerate()
        .map(|(index, line)| {
            let at = || format!("line {}", index + 1);
            let mut fields = line.split('\t');
            let (Some(kind), Some(name), Some(nanos), None) =
                (fields.next(), fields.next(), fields.next(), fields.next())
            else {
                return Err(format!("{}: not three tab-separated fields", at()));
            };
            let kind =
                Kind::parse(kind).ok_or_else(|| format!("{}: unknown kind {kind:?}", at()))?;
            let nanos = nanos
                .parse()
                .map_err(|_| format!("{}: duration {nanos:?} is not a whole number", at()))?;
            Ok(Event {
                kind,
                name: name.to_owned(),
                nanos,
            })
        })
        .collect()
}

/// Calls and time of one name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Total {
    pub name: String,
    pub calls: u64,
    pub nanos: u64,
}

/// Every kind's names, costliest first (ties by name, so the order is stable).
pub fn totals(events: &[Event]) -> Vec<(Kind, Vec<Total>)> {
    let mut by_kind: HashMap<Kind, HashMap<&str, (u64, u64)>> = HashMap::new();
    for e in events {
        let entry = by_kind
            .entry(e.kind)
            .or_default()
            .entry(&e.name)
            .or_default();
        entry.0 += 1;
        entry.1 += e.nanos;
    }
    let mut kinds: Vec<(Kind, Vec<Total>)> = by_kind
        .into_iter()
        .map(|(kind, names)| {
            let mut list: Vec<Total> = names
                .into_iter()
                .map(|(name, (calls, nanos))| Total {
                    name: name.to_owned(),
                    calls,
                    nanos,
                })
                .collect();
            list.sort_by(|a, b| b.nanos.cmp(&a.nanos).then_with(|| a.name.cmp(&b.name)));
            (kind, list)
        })
        .collect();
    kinds.sort_by_key(|(kind, _)| *kind);
    kinds
}

/// The summary of `steps` recorded steps that took `wall_seconds` in all:
/// per-step counts and times of each kind, the GPU's share of the wall
/// clock, and the `top` costliest names of each kind.
pub fn summary(events: &[Event], steps: u64, wall_seconds: f64, top: usize) -> String {
    let steps = steps.max(1);
    let per_step_ms = |nanos: u64| nanos as f64 / 1e6 / steps as f64;
    let kinds = totals(events);
    let mut out = String::new();
    let wall_ms = wall_seconds * 1e3 / steps as f64;
    let _ = writeln!(
        out,
        "{steps} step(s) recorded, {wall_ms:.1} ms of wall clock per step"
    );
    let _ = writeln!(out, "per step:");
    for (kind, list) in &kinds {
        let calls: u64 = list.iter().map(|t| t.calls).sum();
        let nanos: u64 = list.iter().map(|t| t.nanos).sum();
        let _ = write!(
            out,
            "  {:<36} {:>9.0} events {:>10.2} ms",
            kind.heading(),
            calls as f64 / steps as f64,
            per_step_ms(nanos)
        );
        if matches!(kind, Kind::Kernel | Kind::Memcpy | Kind::Memset) && wall_ms > 0.0 {
            let _ = write!(
                out,
                " ({:.0}% of the wall clock)",
                100.0 * per_step_ms(nanos) / wall_ms
            );
        }
        out.push('\n');
    }
    for (kind, list) in &kinds {
        let _ = writeln!(out, "\ncostliest {}, per step:", kind.heading());
        for t in list.iter().take(top) {
            let mut name = t.name.clone();
            if name.chars().count() > 90 {
                name = name.chars().take(89).chain(['…']).collect();
            }
            let _ = writeln!(
                out,
                "  {:>10.3} ms {:>9.1} calls  {name}",
                per_step_ms(t.nanos),
                t.calls as f64 / steps as f64
            );
        }
    }
    out
}

/// The directory a run's profile is written to.
pub fn dir_of(output_dir: &Path) -> PathBuf {
    output_dir.join("profile")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: Kind, name: &str, nanos: u64) -> Event {
        Event {
            kind,
            name: name.to_owned(),
            nanos,
        }
    }

    #[test]
    fn the_event_list_reads_back_and_names_a_bad_line() {
        let text = "op\taten::mm\t1500\nkernel\tvoid gemm<float>(int, int)\t20\n";
        assert_eq!(
            parse_events(text).unwrap(),
            vec![
                event(Kind::Operator, "aten::mm", 1500),
                event(Kind::Kernel, "void gemm<float>(int, int)", 20)
            ]
        );
        let e = parse_events("op\taten::mm\t1\nop\taten::mm\n").unwrap_err();
        assert_eq!(e, "line 2: not three tab-separated fields");
        let e = parse_events("op\taten::mm\t-4\n").unwrap_err();
        assert!(e.starts_with("line 1: duration \"-4\""), "{e}");
        let e = parse_events("gpu\tx\t4\n").unwrap_err();
        assert!(e.contains("unknown kind \"gpu\""), "{e}");
    }

    #[test]
    fn totals_add_up_per_name_costliest_first() {
        let events = [
            event(Kind::Operator, "aten::add", 5),
            event(Kind::Kernel, "k1", 7),
            event(Kind::Operator, "aten::mm", 4),
            event(Kind::Operator, "aten::mm", 4),
            event(Kind::Operator, "aten::add", 2),
        ];
        let kinds = totals(&events);
        assert_eq!(kinds.len(), 2);
        assert_eq!(kinds[0].0, Kind::Operator);
        // mm: 2 calls, 8 ns; add: 2 calls, 7 ns.
        let names: Vec<_> = kinds[0]
            .1
            .iter()
            .map(|t| (t.name.as_str(), t.calls, t.nanos))
            .collect();
        assert_eq!(names, [("aten::mm", 2, 8), ("aten::add", 2, 7)]);
        assert_eq!(kinds[1].0, Kind::Kernel);
    }

    #[test]
    fn the_summary_gives_per_step_figures_and_the_gpu_share() {
        // Two steps of 10 ms: 4 kernels of 1.5 ms = 3 ms of GPU per step, 30%.
        let mut events = vec![event(Kind::Runtime, "cudaLaunchKernel", 10_000); 4];
        events.extend(vec![event(Kind::Kernel, "gemm", 1_500_000); 4]);
        let text = summary(&events, 2, 0.020, 5);
        assert!(
            text.starts_with("2 step(s) recorded, 10.0 ms of wall clock per step"),
            "{text}"
        );
        let kernels = text.lines().find(|l| l.contains("GPU kernels")).unwrap();
        assert!(kernels.contains(" 2 events"), "{kernels}");
        assert!(
            kernels.contains("3.00 ms (30% of the wall clock)"),
            "{kernels}"
        );
        assert!(text.contains("2.0 calls  cudaLaunchKernel"), "{text}");
    }

    /// The shim against the real libtorch: a recorded matrix product shows
    /// up as its operator, as many times as it ran.
    #[test]
    fn a_recording_on_the_cpu_lists_the_operators_that_ran() {
        let dir = tempfile::tempdir().unwrap();
        let a = tch::Tensor::ones([8, 8], (tch::Kind::Float, Device::Cpu));
        let recording = start(Device::Cpu).unwrap();
        for _ in 0..3 {
            let _ = a.mm(&a);
        }
        let events = recording.stop(dir.path()).unwrap();
        let mm = events
            .iter()
            .filter(|e| e.kind == Kind::Operator && e.name == "aten::mm")
            .count();
        assert_eq!(mm, 3, "{events:?}");
        let trace = std::fs::read_to_string(dir.path().join(TRACE_FILE)).unwrap();
        assert!(
            trace.contains("\"aten::mm\""),
            "the Chrome trace names the operator"
        );
    }
}
