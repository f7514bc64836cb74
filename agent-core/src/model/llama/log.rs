//! Where llama.cpp's, ggml's and mtmd's log lines go. btl silences them
//! unless [`super::LOG_ENV`] asks for them, but reads two things out of
//! them first: the error lines that are llama.cpp's only account of why a
//! file was refused ([`llama_errors`]), and the two lines mtmd's helper
//! writes around each image encoding, which time the vision encoder
//! ([`timing_encoder`]).

use llama_cpp_sys_2 as sys;
use std::cell::RefCell;
use std::ffi::{CStr, c_char, c_void};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Sets the sinks, once per process (with the backend's initialisation):
/// llama.cpp's own log to stderr when `to_stderr`, else only its error
/// lines kept; mtmd's always through [`mtmd_log`].
pub(super) fn install(to_stderr: bool) {
    LOG_TO_STDERR.store(to_stderr, Ordering::Relaxed);
    if to_stderr {
        // SAFETY: `to_terminal` matches ggml_log_callback, ignores its null
        // user data and never unwinds.
        unsafe { sys::llama_log_set(Some(to_terminal), std::ptr::null_mut()) };
    } else {
        llama_cpp_2::send_logs_to_tracing(
            llama_cpp_2::LogOptions::default().with_logs_enabled(false),
        );
        // llama.cpp's and ggml's own sink: their reasons for refusing a
        // file exist only as log lines.
        // SAFETY: `keep_errors` matches ggml_log_callback, ignores its null
        // user data and never unwinds.
        unsafe { sys::llama_log_set(Some(keep_errors), std::ptr::null_mut()) };
    }
    // SAFETY: `mtmd_log` matches ggml_log_callback, ignores its null user
    // data and never unwinds.
    unsafe { sys::mtmd_helper_log_set(Some(mtmd_log), std::ptr::null_mut()) };
}

/// Whether llama.cpp's log goes to stderr ([`LOG_ENV`]); set once, by
/// [`install`].
static LOG_TO_STDERR: AtomicBool = AtomicBool::new(false);

/// Whether llama.cpp's log goes to stderr, where it says why a call failed
/// rather than to [`llama_errors`].
pub(super) fn to_stderr() -> bool {
    LOG_TO_STDERR.load(Ordering::Relaxed)
}

thread_local! {
    /// Error lines llama.cpp logs on this thread while [`llama_errors`]
    /// runs; `None` outside such a call.
    static LOGGED_ERRORS: RefCell<Option<String>> = const { RefCell::new(None) };
    /// The vision encoder's time on this thread while [`timing_encoder`]
    /// runs; `None` outside such a call.
    static ENCODER_CLOCK: RefCell<Option<EncoderClock>> = const { RefCell::new(None) };
}

/// Times the vision encoder inside mtmd's prompt evaluation. The helper
/// encodes an image and decodes its embeddings in one call, and llama-cpp-2
/// wraps neither half on its own; the only sign of where one ends is the
/// helper's log, which announces each encoding right before and right
/// after it runs. Those two lines start and stop this clock.
#[derive(Debug, Default)]
struct EncoderClock {
    running: Option<Instant>,
    total: Duration,
}

impl EncoderClock {
    fn observe(&mut self, line: &[u8], now: Instant) {
        let line = line.trim_ascii_end();
        if line.starts_with(b"encoding ") && line.ends_with(b" slice...") {
            self.running = Some(now);
        } else if line.windows(18).any(|w| w == b" slice encoded in ")
            && let Some(started) = self.running.take()
        {
            self.total += now.saturating_duration_since(started);
        }
    }
}

/// mtmd's log sink: feeds the [`EncoderClock`] of a [`timing_encoder`] call
/// on this thread, then writes the line to stderr if llama.cpp's log is
/// wanted there, or keeps it like llama.cpp's own error lines.
unsafe extern "C" fn mtmd_log(level: sys::ggml_log_level, text: *const c_char, user: *mut c_void) {
    if text.is_null() {
        return;
    }
    // SAFETY: mtmd passes a NUL-terminated string that outlives the call.
    let line = unsafe { CStr::from_ptr(text) }.to_bytes();
    if level == sys::GGML_LOG_LEVEL_INFO {
        let now = Instant::now();
        // try_*: see keep_errors.
        let _ = ENCODER_CLOCK.try_with(|clock| {
            if let Ok(mut clock) = clock.try_borrow_mut()
                && let Some(clock) = clock.as_mut()
            {
                clock.observe(line, now);
            }
        });
    }
    if LOG_TO_STDERR.load(Ordering::Relaxed) {
        write_to_terminal(line);
    } else {
        // SAFETY: the arguments are mtmd's, as keep_errors expects them.
        unsafe { keep_errors(level, text, user) };
    }
}

/// Runs `f` and returns how long the vision encoder ran meanwhile on this
/// thread (see [`EncoderClock`]).
pub(super) fn timing_encoder<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    ENCODER_CLOCK.with(|clock| *clock.borrow_mut() = Some(EncoderClock::default()));
    let out = f();
    let clock = ENCODER_CLOCK.with(|clock| clock.borrow_mut().take());
    (out, clock.unwrap_or_default().total)
}

/// llama.cpp's log sink under [`super::LOG_ENV`]: every line to stderr.
unsafe extern "C" fn to_terminal(_: sys::ggml_log_level, text: *const c_char, _: *mut c_void) {
    if !text.is_null() {
        // SAFETY: llama.cpp passes a NUL-terminated string that outlives the call.
        write_to_terminal(unsafe { CStr::from_ptr(text) }.to_bytes());
    }
}

/// A log line on stderr with its control characters escaped: a model's
/// metadata (its name, say) is in the log.
fn write_to_terminal(line: &[u8]) {
    let shown = crate::terminal::printable(&String::from_utf8_lossy(line));
    let _ = std::io::stderr().write_all(shown.as_bytes());
}

/// llama.cpp's log sink: keeps the error lines of a [`llama_errors`] call
/// on its own thread (models load on many threads at once in tests) and
/// drops everything else, as btl always has.
unsafe extern "C" fn keep_errors(level: sys::ggml_log_level, text: *const c_char, _: *mut c_void) {
    if level != sys::GGML_LOG_LEVEL_ERROR || text.is_null() {
        return;
    }
    // SAFETY: llama.cpp passes a NUL-terminated string that outlives the call.
    let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
    // try_*: a log call during thread teardown or re-entrantly must not
    // panic across the C boundary; such a line is simply not kept.
    let _ = LOGGED_ERRORS.try_with(|errors| {
        if let Ok(mut errors) = errors.try_borrow_mut()
            && let Some(errors) = errors.as_mut()
        {
            errors.push_str(&text);
        }
    });
}

/// Runs `f` and returns what llama.cpp logged as errors meanwhile, tidied
/// by [`tidy_errors`].
pub(in crate::model) fn llama_errors<T>(f: impl FnOnce() -> T) -> (T, String) {
    LOGGED_ERRORS.with(|errors| *errors.borrow_mut() = Some(String::new()));
    let out = f();
    let logged = LOGGED_ERRORS.with(|errors| errors.borrow_mut().take());
    (out, tidy_errors(&logged.unwrap_or_default()))
}

/// llama.cpp's error lines as one sentence: each line without the
/// `function_name: ` it starts with, joined by "; ".
fn tidy_errors(log: &str) -> String {
    log.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(|line| match line.split_once(": ") {
            Some((func, rest))
                if !func.is_empty()
                    && func
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') =>
            {
                rest
            }
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tidy_errors_keeps_llama_cpps_reasons_without_function_names() {
        let log = "llama_adapter_lora_init_from_file_ptr: failed to apply lora adapter: \
                   tensor 'blk.0.attn_q.weight' has incorrect shape (hint: maybe wrong base model?)\n";
        assert_eq!(
            tidy_errors(log),
            "failed to apply lora adapter: tensor 'blk.0.attn_q.weight' has incorrect shape (hint: maybe wrong base model?)"
        );
        assert_eq!(
            tidy_errors(
                "gguf_init_from_file_impl: failed to read tensor data\n\nllama_x: second\n"
            ),
            "failed to read tensor data; second"
        );
        // Only a leading lower-case identifier is a function name.
        assert_eq!(tidy_errors("Tensor X: bad shape"), "Tensor X: bad shape");
        assert_eq!(tidy_errors("no colon here\n"), "no colon here");
        assert_eq!(tidy_errors(""), "");
    }

    /// The two lines mtmd's helper logs around each encoding, as
    /// tools/mtmd/mtmd-helper.cpp writes them.
    #[test]
    fn the_encoder_clock_runs_between_mtmds_two_lines() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut clock = EncoderClock::default();
        clock.observe(b"image slice encoded in 3 ms\n", t0);
        assert_eq!(clock.total, Duration::ZERO, "an end without a start");
        clock.observe(b"encoding image slice...\n", t0);
        clock.observe(
            b"decoding image batch 1/1, n_tokens_batch = 128\n",
            t0 + ms(2),
        );
        clock.observe(b"image slice encoded in 5 ms\n", t0 + ms(5));
        clock.observe(b"image decoded (batch 1/1) in 9 ms\n", t0 + ms(14));
        assert_eq!(clock.total, ms(5));
        clock.observe(b"encoding audio slice...", t0 + ms(20));
        clock.observe(b"audio slice encoded in 1 ms", t0 + ms(21));
        clock.observe(b"audio slice encoded in 1 ms", t0 + ms(30));
        assert_eq!(clock.total, ms(6));
    }
}
