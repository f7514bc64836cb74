//! The commands of the virtual phone's shell, one function per tool, each
//! answering with the output format of its Android counterpart.

use super::{ShellEnv, pm, text};
use crate::device::ui::to_uiautomator_xml;
use crate::sim::backend::ShellOutput;
use crate::sim::phone::Key;
use base64::Engine;
use std::cell::Cell;
use std::io::Cursor;

/// Where `uiautomator dump` writes when no path is given, as on Android.
const DEFAULT_DUMP_PATH: &str = "/sdcard/window_dump.xml";

/// Android's pixel format code for RGBA_8888 in raw `screencap` output.
const PIXEL_FORMAT_RGBA_8888: u32 = 1;

/// The tools on the phone's `PATH`, as `which` finds them in /system/bin.
pub(super) const TOOLS: &[&str] = &[
    "am",
    "basename",
    "cat",
    "cmd",
    "cp",
    "cut",
    "date",
    "dirname",
    "dumpsys",
    "echo",
    "false",
    "getprop",
    "grep",
    "head",
    "id",
    "input",
    "ls",
    "md5sum",
    "mkdir",
    "monkey",
    "mv",
    "pidof",
    "pm",
    "printf",
    "ps",
    "rm",
    "screencap",
    "sed",
    "seq",
    "setprop",
    "settings",
    "sh",
    "sha1sum",
    "sleep",
    "stat",
    "tail",
    "touch",
    "tr",
    "true",
    "uiautomator",
    "wc",
    "which",
    "whoami",
    "wm",
];

/// The directories a command may be named from (`/system/bin/ls`).
const BIN_DIRS: &[&str] = &["/system/bin/", "/bin/", "/system/xbin/", "/vendor/bin/"];

/// What one command runs with besides its arguments.
pub struct Call<'a> {
    pub stdin: &'a [u8],
    /// The shell's working directory, for relative paths.
    pub pwd: &'a str,
    /// Bytes of files the command may still read; `None` once it was
    /// refused a read, which ends the line.
    pub read_left: Cell<Option<usize>>,
    /// Why a refused read ends the line: the bound it went past.
    pub over: super::Bound,
}

impl Call<'_> {
    pub(super) fn path(&self, path: &str) -> String {
        super::absolute(self.pwd, path)
    }

    /// Counts reading the file at `path` (absolute) against what the
    /// command may still read; the message ending the line when it may not.
    pub(super) fn may_read(&self, path: &str, env: &ShellEnv) -> Result<(), String> {
        let size = env.fs.stat(path).map_or(0, |st| st.size as usize);
        let left = self.read_left.get().and_then(|left| left.checked_sub(size));
        self.read_left.set(left);
        left.map(drop).ok_or_else(|| self.over.message())
    }
}

pub fn run(argv: &[String], call: &Call, env: &mut ShellEnv) -> ShellOutput {
    let Some((name, args)) = argv.split_first() else {
        return ShellOutput::default();
    };
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let Some(tool) = lookup(name) else {
        return not_runnable(name, call, env);
    };
    match tool {
        "echo" => echo(&args),
        "true" => ShellOutput::default(),
        "false" => ShellOutput::fail(1, ""),
        "sleep" => ShellOutput::default(),
        "ls" => ls(&args, call, env),
        "cat" => cat(&args, call, env),
        "rm" => rm(&args, call, env),
        "mkdir" => mkdir(&args, call, env),
        "mv" | "cp" => copy(tool, &args, call, env),
        "touch" => touch(&args, call, env),
        "stat" => stat(&args, call, env),
        "md5sum" | "sha1sum" => digest(tool, &args, call, env),
        "grep" => grep(&args, call, env),
        "sed" => sed(&args, call, env),
        "cut" | "tr" => filter(tool, &args, call, env),
        "head" | "tail" => head_tail(tool, &args, call, env),
        "wc" => wc(&args, call, env),
        "printf" => printf(&args),
        "seq" => match text::seq(&args) {
            Ok(out) => ShellOutput::ok(out),
            Err(e) => usage("seq", &e),
        },
        "basename" => match args.first() {
            Some(path) => {
                let trimmed = path.trim_end_matches('/');
                let base = trimmed.rsplit('/').next().unwrap_or(trimmed);
                let base = match args.get(1) {
                    Some(suffix) if base.len() > suffix.len() => {
                        base.strip_suffix(suffix).unwrap_or(base)
                    }
                    _ => base,
                };
                ShellOutput::ok(format!("{}\n", if base.is_empty() { "/" } else { base }))
            }
            None => usage("basename", "usage: basename PATH [SUFFIX]"),
        },
        "dirname" => match args.first() {
            Some(path) => {
                let trimmed = path.trim_end_matches('/');
                let dir = match trimmed.rsplit_once('/') {
                    Some(("", _)) => "/",
                    Some((dir, _)) => dir,
                    None => ".",
                };
                ShellOutput::ok(format!("{dir}\n"))
            }
            None => usage("dirname", "usage: dirname PATH"),
        },
        "id" => ShellOutput::ok(
            "uid=2000(shell) gid=2000(shell) groups=2000(shell),1004(input),1007(log),\
             1011(adb),1015(sdcard_rw),1028(sdcard_r),3001(net_bt_admin),3002(net_bt),\
             3003(inet),3006(net_bw_stats) context=u:r:shell:s0\n",
        ),
        "whoami" => ShellOutput::ok("shell\n"),
        "which" => which(&args),
        "date" => date(&args, env),
        "ps" => ps(&args, env),
        "pidof" => pidof(&args, env),
        "setprop" => match args.as_slice() {
            [key, value] => match env.phone.setprop(key, value) {
                Ok(()) => ShellOutput::default(),
                Err(_) => ShellOutput::fail(
                    1,
                    format!(
                        "Failed to set property '{key}' to '{value}'.\nSee dmesg for error reason.\n"
                    ),
                ),
            },
            _ => usage("setprop", "usage: setprop NAME VALUE"),
        },
        "screencap" => screencap(&args, call, env),
        "wm" => wm(&args, env),
        "input" => input(&args, env),
        "uiautomator" => uiautomator(&args, call, env),
        "am" => am(&args, env),
        "monkey" => monkey(&args, env),
        "dumpsys" => dumpsys(&args, env),
        "settings" => settings(&args, env),
        "getprop" => getprop(&args, env),
        "pm" => pm::pm(&args, call, env),
        "cmd" => cmd(&args, call, env),
        other => unreachable!("{other} is in TOOLS without a body"),
    }
}

/// The tool a command names: a bare name on the `PATH`, or a path into one
/// of the bin directories.
fn lookup(name: &str) -> Option<&'static str> {
    let base = if name.contains('/') {
        BIN_DIRS.iter().find_map(|dir| name.strip_prefix(dir))?
    } else {
        name
    };
    TOOLS.iter().find(|t| **t == base).copied()
}

/// What sh says of a command that names no tool: 126 for a file that
/// exists (the phone runs no code it was given), 127 otherwise.
fn not_runnable(name: &str, call: &Call, env: &ShellEnv) -> ShellOutput {
    if name.contains('/') && env.fs.stat(&call.path(name)).is_some() {
        return ShellOutput::fail(
            126,
            format!("/system/bin/sh: {name}: can't execute: Permission denied\n"),
        );
    }
    ShellOutput::fail(
        127,
        format!("/system/bin/sh: {name}: inaccessible or not found\n"),
    )
}

fn usage(tool: &str, text: &str) -> ShellOutput {
    ShellOutput::fail(1, format!("{tool}: {text}\n"))
}

/// `echo [-neE] ARG...` as mksh's: `-e` turns on backslash escapes.
fn echo(args: &[&str]) -> ShellOutput {
    let (mut newline, mut escapes) = (true, false);
    let mut words = args;
    while let Some((first, rest)) = words.split_first() {
        let flags = match first.strip_prefix('-') {
            Some(f) if !f.is_empty() && f.chars().all(|c| "neE".contains(c)) => f,
            _ => break,
        };
        for c in flags.chars() {
            match c {
                'n' => newline = false,
                'e' => escapes = true,
                _ => escapes = false,
            }
        }
        words = rest;
    }
    let mut text = words.join(" ");
    if escapes {
        let (escaped, _) = text::printf("%b", &[&text]);
        text = String::from_utf8_lossy(&escaped).into_owned();
    }
    if newline {
        text.push('\n');
    }
    ShellOutput::ok(text)
}

/// The inputs of a filter: the named files (`-` is standard input), or
/// standard input when none is named. Unreadable files are reported on
/// `out` and skipped.
fn inputs(
    tool: &str,
    files: &[&str],
    call: &Call,
    env: &ShellEnv,
    out: &mut ShellOutput,
) -> Vec<(String, Vec<u8>)> {
    if files.is_empty() {
        return vec![("(standard input)".to_owned(), call.stdin.to_vec())];
    }
    files
        .iter()
        .filter_map(|&file| Some((file.to_owned(), read_input(tool, file, call, env, out)?)))
        .map(|(file, data)| match file.as_str() {
            "-" => ("(standard input)".to_owned(), data),
            _ => (file, data),
        })
        .collect()
}

/// One input of a tool: a file (`-`: standard input); an unreadable one is
/// reported on `out` as toybox words it.
fn read_input(
    tool: &str,
    file: &str,
    call: &Call,
    env: &ShellEnv,
    out: &mut ShellOutput,
) -> Option<Vec<u8>> {
    if file == "-" {
        return Some(call.stdin.to_vec());
    }
    if let Err(over) = call.may_read(&call.path(file), env) {
        out.err(format!("{tool}: {file}: {over}\n"));
        out.exit_code = 1;
        return None;
    }
    match env.fs.read(&call.path(file)) {
        Ok(data) => Some(data),
        Err(e) => {
            let why = e.rsplit(": ").next().unwrap_or(&e);
            out.err(format!("{tool}: {file}: {why}\n"));
            out.exit_code = 1;
            None
        }
    }
}

fn ls(args: &[&str], call: &Call, env: &mut ShellEnv) -> ShellOutput {
    let paths: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut out = ShellOutput::default();
    for path in if paths.is_empty() { vec!["."] } else { paths } {
        let full = call.path(path);
        match (env.fs.list(&full), env.fs.stat(&full)) {
            (Some(entries), _) => {
                for e in entries {
                    out.out(format!("{}\n", e.name));
                }
            }
            (None, Some(_)) => out.out(format!("{path}\n")),
            (None, None) => {
                out.err(format!("ls: {path}: No such file or directory\n"));
                out.exit_code = 1;
            }
        }
    }
    out
}

fn cat(args: &[&str], call: &Call, env: &mut ShellEnv) -> ShellOutput {
    let mut out = ShellOutput::default();
    let files: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| *a == "-" || !a.starts_with('-'))
        .collect();
    if files.is_empty() {
        out.out(call.stdin);
        return out;
    }
    for file in files {
        // Each file's bytes go out before the next file's error, as cat
        // writes them.
        if let Some(data) = read_input("cat", file, call, env, &mut out) {
            out.out(data);
        }
    }
    out
}

fn rm(args: &[&str], call: &Call, env: &mut ShellEnv) -> ShellOutput {
    let force = args.iter().any(|a| a.starts_with('-') && a.contains('f'));
    let mut out = ShellOutput::default();
    for path in args.iter().filter(|a| !a.starts_with('-')) {
        if let Err(e) = env.fs.remove(&call.path(path))
            && !force
        {
            let why = e.rsplit(": ").next().unwrap_or(&e).to_owned();
            out.err(format!("rm: {path}: {why}\n"));
            out.exit_code = 1;
        }
    }
    out
}

fn mkdir(args: &[&str], call: &Call, env: &mut ShellEnv) -> ShellOutput {
    for path in args.iter().filter(|a| !a.starts_with('-')) {
        if let Err(e) = crate::sim::vfs::check_length(&call.path(path)) {
            return usage("mkdir", &e);
        }
        if !env.fs.mkdir_all(&call.path(path)) {
            return usage("mkdir", &format!("'{path}': Not a directory"));
        }
    }
    ShellOutput::default()
}

/// `cp SRC... DEST` and `mv SRC... DEST` for files (a directory DEST
/// takes each source by name).
fn copy(tool: &str, args: &[&str], call: &Call, env: &mut ShellEnv) -> ShellOutput {
    let operands: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| !a.starts_with('-'))
        .collect();
    let Some((dest, sources)) = operands.split_last().filter(|(_, s)| !s.is_empty()) else {
        return usage(tool, &format!("usage: {tool} SOURCE... DEST"));
    };
    let dest_full = call.path(dest);
    let into_dir = env.fs.stat(&dest_full).is_some_and(|s| s.is_dir());
    if sources.len() > 1 && !into_dir {
        return usage(tool, &format!("'{dest}' is not a directory"));
    }
    let mut out = ShellOutput::default();
    for source in sources {
        let from = call.path(source);
        let stat = match env.fs.stat(&from) {
            Some(s) if s.is_dir() => {
                out.err(format!("{tool}: '{source}' is a directory (not copied)\n"));
                out.exit_code = 1;
                continue;
            }
            Some(s) => s,
            None => {
                out.err(format!("{tool}: {source}: No such file or directory\n"));
                out.exit_code = 1;
                continue;
            }
        };
        let to = if into_dir {
            let name = from.rsplit('/').next().unwrap_or(&from);
            format!("{}/{name}", dest_full.trim_end_matches('/'))
        } else {
            dest_full.clone()
        };
        // A move renames; only a copy reads the data.
        let moved = if tool == "mv" {
            env.fs.rename(&from, &to)
        } else {
            call.may_read(&from, env)
                .and_then(|()| env.fs.read(&from))
                .and_then(|data| env.fs.write(&to, data, stat.mode, stat.mtime))
        };
        if let Err(e) = moved {
            out.err(format!("{tool}: {e}\n"));
            out.exit_code = 1;
        }
    }
    out
}

fn now_secs(env: &ShellEnv) -> u32 {
    u32::try_from(env.phone.now_ms() / 1000).unwrap_or(u32::MAX)
}

fn touch(args: &[&str], call: &Call, env: &mut ShellEnv) -> ShellOutput {
    let now = now_secs(env);
    for path in args.iter().filter(|a| !a.starts_with('-')) {
        let full = call.path(path);
        // An existing file or directory keeps its data; only its time moves.
        if env.fs.set_mtime(&full, now) {
            continue;
        }
        if let Err(e) = env.fs.write(&full, Vec::new(), 0o666, now) {
            return usage("touch", &e);
        }
    }
    ShellOutput::default()
}

/// `stat [-c FORMAT] FILE...`, toybox's format letters.
fn stat(args: &[&str], call: &Call, env: &mut ShellEnv) -> ShellOutput {
    let (opts, format) = match text::Opts::parse(args, "tLf", "c") {
        Ok(opts) => {
            let format = opts.value('c').map(str::to_owned);
            (opts, format)
        }
        Err(e) => return usage("stat", &e),
    };
    let mut out = ShellOutput::default();
    for file in &opts.operands {
        let Some(st) = env.fs.stat(&call.path(file)) else {
            out.err(format!("stat: '{file}': No such file or directory\n"));
            out.exit_code = 1;
            continue;
        };
        let kind = if st.is_dir() {
            "directory"
        } else if st.size == 0 {
            "regular empty file"
        } else {
            "regular file"
        };
        let perms = st.mode & 0o7777;
        let letters = mode_letters(st.mode);
        let time = |secs: u32| {
            chrono::DateTime::from_timestamp(i64::from(secs), 0)
                .map(|t| t.format("%Y-%m-%d %H:%M:%S.000000000 +0000").to_string())
                .unwrap_or_default()
        };
        let text = match &format {
            Some(format) => {
                let mut text = String::new();
                let mut chars = format.chars();
                while let Some(c) = chars.next() {
                    if c != '%' {
                        text.push(c);
                        continue;
                    }
                    match chars.next() {
                        Some('n') | Some('N') => text.push_str(file),
                        Some('s') => text.push_str(&st.size.to_string()),
                        Some('a') => text.push_str(&format!("{perms:o}")),
                        Some('A') => text.push_str(&letters),
                        Some('f') => text.push_str(&format!("{:x}", st.mode)),
                        Some('F') => text.push_str(kind),
                        Some('Y' | 'X' | 'Z') => text.push_str(&st.mtime.to_string()),
                        Some('y' | 'x' | 'z') => text.push_str(&time(st.mtime)),
                        Some('u' | 'g') => text.push_str("2000"),
                        Some('U' | 'G') => text.push_str("shell"),
                        Some('h') => text.push('1'),
                        Some('b') => text.push_str(&st.size.div_ceil(512).to_string()),
                        Some('B') => text.push_str("512"),
                        Some('%') => text.push('%'),
                        Some(other) => {
                            text.push('%');
                            text.push(other);
                        }
                        None => text.push('%'),
                    }
                }
                text.push('\n');
                text
            }
            None => format!(
                "  File: {file}\n  Size: {}\t Blocks: {}\t IO Blocks: 512\t{kind}\n\
                 Device: 0h/0d\t Inode: 0\t Links: 1\nAccess: ({perms:04o}/{letters})\t\
                 Uid: ( 2000/   shell)\t Gid: ( 2000/   shell)\nAccess: {}\nModify: {}\nChange: {}\n",
                st.size,
                st.size.div_ceil(512),
                time(st.mtime),
                time(st.mtime),
                time(st.mtime)
            ),
        };
        out.out(text);
    }
    if opts.operands.is_empty() {
        return usage("stat", "usage: stat [-c FORMAT] FILE...");
    }
    out
}

/// `ls -l`-style mode letters (`-rw-r--r--`).
fn mode_letters(mode: u32) -> String {
    let mut s = String::from(if mode & 0o170000 == 0o040000 {
        "d"
    } else {
        "-"
    });
    for shift in [6, 3, 0] {
        let bits = (mode >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    s
}

/// `md5sum`/`sha1sum [FILE...]`: `HEX  NAME` lines (`-` for standard input).
fn digest(tool: &str, args: &[&str], call: &Call, env: &mut ShellEnv) -> ShellOutput {
    use md5::Digest as _;
    let mut out = ShellOutput::default();
    let files: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| !a.starts_with('-') || *a == "-")
        .collect();
    for (name, data) in inputs(tool, &files, call, env, &mut out) {
        let hex: String = if tool == "md5sum" {
            md5::Md5::digest(&data)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        } else {
            sha1::Sha1::digest(&data)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        };
        let name = if name == "(standard input)" {
            "-"
        } else {
            &name
        };
        out.out(format!("{hex}  {name}\n"));
    }
    out
}

fn grep(args: &[&str], call: &Call, env: &mut ShellEnv) -> ShellOutput {
    let (grep, files) = match text::Grep::new(args) {
        Ok(parsed) => parsed,
        Err(e) => return ShellOutput::fail(2, format!("grep: {e}\n")),
    };
    let mut out = ShellOutput::default();
    let read = inputs("grep", &files, call, env, &mut out);
    let errors = out.exit_code != 0;
    let (text, found) = match grep.run(&read) {
        Ok(found) => found,
        Err(e) => {
            out.err(format!("grep: {e}\n"));
            out.exit_code = 2;
            return out;
        }
    };
    out.out(text);
    // grep: 0 if a line was selected, 1 if none, 2 on an error.
    out.exit_code = if errors {
        2
    } else if found {
        0
    } else {
        1
    };
    out
}

fn sed(args: &[&str], call: &Call, env: &mut ShellEnv) -> ShellOutput {
    let (sed, files) = match text::Sed::new(args) {
        Ok(parsed) => parsed,
        Err(e) => return usage("sed", &e),
    };
    let mut out = ShellOutput::default();
    let data: Vec<u8> = inputs("sed", &files, call, env, &mut out)
        .into_iter()
        .flat_map(|(_, d)| d)
        .collect();
    let mut text = Vec::new();
    let ran = sed.run(&data, &mut text);
    out.out(text);
    if let Err(e) = ran {
        out.err(format!("sed: {e}\n"));
        out.exit_code = 1;
    }
    out
}

/// `cut` and `tr`: standard input (and for `cut`, named files) filtered.
fn filter(tool: &str, args: &[&str], call: &Call, env: &mut ShellEnv) -> ShellOutput {
    let mut out = ShellOutput::default();
    let result = if tool == "cut" {
        let (plain, valued) = text::CUT_OPTIONS;
        match text::Opts::parse(args, plain, valued) {
            Ok(opts) => {
                let data: Vec<u8> = inputs(tool, &opts.operands, call, env, &mut out)
                    .into_iter()
                    .flat_map(|(_, d)| d)
                    .collect();
                text::cut(&opts, &data)
            }
            Err(e) => Err(e),
        }
    } else {
        text::tr(args, call.stdin)
    };
    match result {
        Ok(text) => out.out(text),
        Err(e) => return usage(tool, &e),
    }
    out
}

fn head_tail(tool: &str, args: &[&str], call: &Call, env: &mut ShellEnv) -> ShellOutput {
    let (span, files) = match text::span(args, tool == "tail") {
        Ok(parsed) => parsed,
        Err(e) => return usage(tool, &e),
    };
    let files: Vec<&str> = files.iter().map(String::as_str).collect();
    let mut out = ShellOutput::default();
    let read = inputs(tool, &files, call, env, &mut out);
    let titled = read.len() > 1;
    for (i, (name, data)) in read.iter().enumerate() {
        if titled {
            out.out(format!("{}==> {name} <==\n", if i > 0 { "\n" } else { "" }));
        }
        out.out(if tool == "head" {
            text::head(data, span)
        } else {
            text::tail(data, span)
        });
    }
    out
}

fn wc(args: &[&str], call: &Call, env: &mut ShellEnv) -> ShellOutput {
    let opts = match text::Opts::parse(args, "lwcm", "") {
        Ok(opts) => opts,
        Err(e) => return usage("wc", &e),
    };
    let show = [opts.has('l'), opts.has('w'), opts.has('c') || opts.has('m')];
    let mut out = ShellOutput::default();
    let named = !opts.operands.is_empty();
    let read = inputs("wc", &opts.operands, call, env, &mut out);
    let mut total = [0u64; 3];
    for (name, data) in &read {
        let counts = text::wc_counts(data);
        for (t, c) in total.iter_mut().zip(counts) {
            *t += c;
        }
        out.out(text::wc_line(counts, show, named.then_some(name.as_str())));
    }
    if read.len() > 1 {
        out.out(text::wc_line(total, show, Some("total")));
    }
    out
}

fn printf(args: &[&str]) -> ShellOutput {
    let Some((format, rest)) = args.split_first() else {
        return usage("printf", "usage: printf FORMAT [ARGUMENT...]");
    };
    let (text, error) = text::printf(format, rest);
    let mut out = ShellOutput::ok(text);
    if let Some(e) = error {
        out.err(format!("printf: {e}\n"));
        out.exit_code = 1;
    }
    out
}

fn which(args: &[&str]) -> ShellOutput {
    let mut out = ShellOutput::default();
    for name in args.iter().filter(|a| !a.starts_with('-')) {
        match lookup(name) {
            Some(tool) => out.out(format!("/system/bin/{tool}\n")),
            None => out.exit_code = 1,
        }
    }
    out
}

/// `date [+FORMAT]` on the phone's clock, in UTC.
fn date(args: &[&str], env: &mut ShellEnv) -> ShellOutput {
    let Some(now) = chrono::DateTime::from_timestamp(i64::from(now_secs(env)), 0) else {
        return usage("date", "the clock is out of range");
    };
    let format = match args.first() {
        Some(f) if f.starts_with('+') => &f[1..],
        Some(other) => {
            return usage(
                "date",
                &format!("setting the time ({other}) is not permitted"),
            );
        }
        None => "%a %b %e %H:%M:%S %Z %Y",
    };
    // chrono's names for what toybox calls %Z on a UTC clock.
    let format = format.replace("%Z", "UTC");
    ShellOutput::ok(format!("{}\n", now.format(&format)))
}

/// The phone's processes: the system's, and the apps that were started.
fn processes(env: &ShellEnv) -> Vec<(u32, &'static str, String)> {
    let mut list = vec![
        (1, "root", "init".to_owned()),
        (412, "root", "zygote64".to_owned()),
        (833, "system", "system_server".to_owned()),
        (1201, "u0_a120", "com.android.systemui".to_owned()),
    ];
    let focused = env.phone.focused_window();
    let package = focused.split('/').next().unwrap_or_default();
    if !package.is_empty() && !list.iter().any(|(_, _, n)| n == package) {
        list.push((pid_of(package), "u0_a150", package.to_owned()));
    }
    list.push((4242, "shell", "sh".to_owned()));
    list
}

/// A stable process id for an app, from its package name.
fn pid_of(package: &str) -> u32 {
    2000 + (crate::hash::fnv1a(&[package.as_bytes()]) % 20_000) as u32
}

/// toybox `ps`: without `-A` (or `-e`) only the shell's own processes, as
/// on Android 8 and later; `-p PID,…` picks processes by id.
fn ps(args: &[&str], env: &mut ShellEnv) -> ShellOutput {
    let mut all = false;
    let mut pids: Option<Vec<u32>> = None;
    let mut words = args.iter();
    while let Some(&word) = words.next() {
        match word {
            "-A" | "-e" => all = true,
            "-p" => {
                let Some(list) = words.next() else {
                    return usage("ps", "-p needs a PID list");
                };
                let parsed: Option<Vec<u32>> = list.split(',').map(|p| p.parse().ok()).collect();
                match parsed {
                    Some(list) => pids = Some(list),
                    None => return usage("ps", &format!("bad -p '{list}'")),
                }
            }
            other => return usage("ps", &format!("Unknown option '{other}'")),
        }
    }
    let shown = |pid: u32, name: &str| match &pids {
        Some(list) => list.contains(&pid),
        None => all || name == "sh",
    };
    let mut text = String::from(
        "USER            PID   PPID     VSZ    RSS WCHAN            ADDR S NAME                       \n",
    );
    for (pid, user, name) in processes(env) {
        if !shown(pid, &name) {
            continue;
        }
        let parent = if pid == 1 {
            0
        } else if name == "sh" {
            1
        } else {
            412
        };
        text.push_str(&format!(
            "{user:<12} {pid:>6} {parent:>6} {:>7} {:>6} 0                   0 S {name}\n",
            if pid == 1 { 10_852 } else { 1_234_567 },
            if pid == 1 { 2_048 } else { 98_304 },
        ));
    }
    ShellOutput::ok(text)
}

fn pidof(args: &[&str], env: &mut ShellEnv) -> ShellOutput {
    let procs = processes(env);
    let pids: Vec<String> = args
        .iter()
        .filter_map(|name| procs.iter().find(|(_, _, n)| n == name))
        .map(|(pid, _, _)| pid.to_string())
        .collect();
    if pids.is_empty() {
        return ShellOutput::fail(1, "");
    }
    ShellOutput::ok(format!("{}\n", pids.join(" ")))
}

fn screencap(args: &[&str], call: &Call, env: &mut ShellEnv) -> ShellOutput {
    let file = args.iter().find(|a| !a.starts_with('-'));
    // Like Android: -p forces PNG; a file name ending in .png implies it.
    let png = args.contains(&"-p") || file.is_some_and(|f| f.ends_with(".png"));
    let image = env.phone.render();
    let bytes = if png {
        let mut buf = Cursor::new(Vec::new());
        if let Err(e) = image.write_to(&mut buf, image::ImageFormat::Png) {
            return usage("screencap", &format!("cannot encode PNG: {e}"));
        }
        buf.into_inner()
    } else {
        let mut raw = Vec::with_capacity(16 + image.as_raw().len());
        for v in [image.width(), image.height(), PIXEL_FORMAT_RGBA_8888, 0] {
            raw.extend_from_slice(&v.to_le_bytes());
        }
        raw.extend_from_slice(image.as_raw());
        raw
    };
    match file {
        Some(path) => match env.fs.write(&call.path(path), bytes, 0o644, 0) {
            Ok(()) => ShellOutput::default(),
            Err(e) => usage("screencap", &e),
        },
        None => ShellOutput::ok(bytes),
    }
}

/// `wm size [WxH|reset]` and `wm density [N|reset]`, in
/// WindowManagerShellCommand's words: an override is printed below the
/// panel's value, bad arguments fail on stderr with status 255.
fn wm(args: &[&str], env: &mut ShellEnv) -> ShellOutput {
    let bad = |what: String| ShellOutput::fail(255, format!("Error: {what}\n"));
    match args {
        ["size"] => {
            let (w, h) = env.phone.physical_size();
            let mut text = format!("Physical size: {w}x{h}\n");
            if let Some((ow, oh)) = env.phone.size_override().filter(|o| *o != (w, h)) {
                text.push_str(&format!("Override size: {ow}x{oh}\n"));
            }
            ShellOutput::ok(text)
        }
        ["size", "reset"] => {
            env.phone.set_size_override(None);
            ShellOutput::default()
        }
        ["size", size] => {
            let Some((w, h)) = size
                .split_once('x')
                .filter(|(w, h)| !w.is_empty() && !h.is_empty())
            else {
                return bad(format!("bad size {size}"));
            };
            match (w.parse::<u32>(), h.parse::<u32>()) {
                (Ok(w), Ok(h)) => {
                    env.phone.set_size_override(Some((w, h)));
                    ShellOutput::default()
                }
                _ => bad(format!(
                    "bad number java.lang.NumberFormatException: For input string: \"{size}\""
                )),
            }
        }
        ["density"] => {
            let physical = env.phone.physical_density();
            let mut text = format!("Physical density: {physical}\n");
            if let Some(d) = env.phone.density_override().filter(|d| *d != physical) {
                text.push_str(&format!("Override density: {d}\n"));
            }
            ShellOutput::ok(text)
        }
        ["density", "reset"] => {
            env.phone.set_density_override(None);
            ShellOutput::default()
        }
        ["density", value] => match value.parse::<u32>() {
            Ok(d) if d >= 72 => {
                env.phone.set_density_override(Some(d));
                ShellOutput::default()
            }
            Ok(_) => bad("density must be >= 72".into()),
            Err(_) => bad(format!(
                "bad number java.lang.NumberFormatException: For input string: \"{value}\""
            )),
        },
        _ => usage("wm", "usage: wm [size [WxH|reset] | density [N|reset]]"),
    }
}

/// `cmd SERVICE ARGS…`: the services `pm`, `wm`, `am` and `settings` are
/// shells over.
fn cmd(args: &[&str], call: &Call, env: &mut ShellEnv) -> ShellOutput {
    match args.split_first() {
        Some((&"package", rest)) => pm::pm(rest, call, env),
        Some((&"window", rest)) => wm(rest, env),
        Some((&"activity", rest)) => am(rest, env),
        Some((&"settings", rest)) => settings(rest, env),
        Some((service, _)) => {
            ShellOutput::fail(20, format!("cmd: Can't find service: {service}\n"))
        }
        None => usage("cmd", "usage: cmd SERVICE [ARGS...]"),
    }
}

fn int(s: &str) -> Option<i32> {
    s.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .map(|v| v as i32)
}

fn input(args: &[&str], env: &mut ShellEnv) -> ShellOutput {
    // An optional input source (touchscreen, keyboard…) may come first.
    let args = match args.first() {
        Some(&("touchscreen" | "touchpad" | "keyboard" | "mouse" | "stylus")) => &args[1..],
        _ => args,
    };
    match args {
        ["tap", x, y] => match (int(x), int(y)) {
            (Some(x), Some(y)) => {
                env.phone.tap(x, y);
                ShellOutput::default()
            }
            _ => usage("input", "tap needs two numbers"),
        },
        ["swipe", x1, y1, x2, y2, rest @ ..] => {
            let duration = rest
                .first()
                .and_then(|d| d.parse::<u32>().ok())
                .unwrap_or(300);
            match (int(x1), int(y1), int(x2), int(y2)) {
                (Some(a), Some(b), Some(c), Some(d)) => {
                    env.phone.swipe(a, b, c, d, duration);
                    ShellOutput::default()
                }
                _ => usage("input", "swipe needs four numbers"),
            }
        }
        ["text", words @ ..] if !words.is_empty() => {
            env.phone.input_text(&words.join(" ").replace("%s", " "));
            ShellOutput::default()
        }
        ["keyevent", codes @ ..] if !codes.is_empty() => {
            for code in codes.iter().filter(|c| !c.starts_with("--")) {
                let key = match code.parse::<u32>() {
                    Ok(n) => Some(Key::from_keycode(n)),
                    Err(_) => Key::from_name(code),
                };
                match key {
                    Some(k) => env.phone.key(k),
                    None => return usage("input", &format!("unknown keycode {code}")),
                }
            }
            ShellOutput::default()
        }
        _ => usage(
            "input",
            "usage: input [tap X Y | swipe X1 Y1 X2 Y2 [MS] | text TEXT | keyevent KEY...]",
        ),
    }
}

fn uiautomator(args: &[&str], call: &Call, env: &mut ShellEnv) -> ShellOutput {
    if args.first() != Some(&"dump") {
        return usage(
            "uiautomator",
            "usage: uiautomator dump [--compressed] [FILE]",
        );
    }
    let path = args[1..]
        .iter()
        .find(|a| !a.starts_with("--"))
        .copied()
        .unwrap_or(DEFAULT_DUMP_PATH);
    let xml = to_uiautomator_xml(&env.phone.ui_tree());
    let done = format!("UI hierchary dumped to: {path}\n");
    if path == "/dev/tty" {
        return ShellOutput::ok(format!("{xml}{done}"));
    }
    match env.fs.write(&call.path(path), xml.into_bytes(), 0o644, 0) {
        Ok(()) => ShellOutput::ok(done),
        Err(e) => ShellOutput::fail(1, format!("ERROR: could not write {e}\n")),
    }
}

/// The value after `flag` in an argument list.
fn flag_value<'a>(args: &[&'a str], flag: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| *a == flag)
        .and_then(|i| args.get(i + 1))
        .copied()
}

fn am(args: &[&str], env: &mut ShellEnv) -> ShellOutput {
    match args.first() {
        Some(&"start") => {
            let Some(component) = flag_value(args, "-n") else {
                return usage("am", "start needs -n PACKAGE/ACTIVITY");
            };
            let (package, activity) = match component.split_once('/') {
                Some((p, a)) => (p, Some(a)),
                None => (component, None),
            };
            // An installed APK's code never runs here: its activities are
            // as absent as a missing one.
            let started = match env.packages.get(package) {
                Some(_) => Err(format!(
                    "Activity class {{{package}/{}}} does not exist.",
                    activity.map_or_else(
                        || package.to_string(),
                        |a| match a.strip_prefix('.') {
                            Some(short) => format!("{package}.{short}"),
                            None => a.to_string(),
                        }
                    )
                )),
                None => env.phone.start_app(package, activity),
            };
            match started {
                Ok(()) => ShellOutput::ok(format!("Starting: Intent {{ cmp={component} }}\n")),
                Err(e) => ShellOutput::fail(
                    1,
                    format!("Starting: Intent {{ cmp={component} }}\nError type 3\nError: {e}\n"),
                ),
            }
        }
        Some(&"broadcast") => {
            let action = flag_value(args, "-a").unwrap_or_default();
            let head =
                format!("Broadcasting: Intent {{ act={action} flg=0x400000 (has extras) }}\n");
            if action == "ADB_INPUT_B64" {
                let decoded = args
                    .windows(3)
                    .find(|w| w[0] == "--es" && w[1] == "msg")
                    .and_then(|w| base64::engine::general_purpose::STANDARD.decode(w[2]).ok())
                    .and_then(|bytes| String::from_utf8(bytes).ok());
                return match decoded {
                    Some(text) => {
                        env.phone.input_text(&text);
                        ShellOutput::ok(format!("{head}Broadcast completed: result=0\n"))
                    }
                    None => ShellOutput::fail(
                        1,
                        format!("{head}Error: msg is not valid base64 UTF-8\n"),
                    ),
                };
            }
            ShellOutput::ok(format!("{head}Broadcast completed: result=0\n"))
        }
        Some(&"force-stop") => match args.get(1) {
            Some(package) => {
                env.phone.force_stop(package);
                ShellOutput::default()
            }
            None => usage("am", "force-stop needs a PACKAGE"),
        },
        _ => usage(
            "am",
            "usage: am [start -n COMPONENT | broadcast -a ACTION ... | force-stop PKG]",
        ),
    }
}

fn monkey(args: &[&str], env: &mut ShellEnv) -> ShellOutput {
    let Some(package) = flag_value(args, "-p") else {
        return usage(
            "monkey",
            "only `monkey -p PACKAGE 1` (launch an app) is supported",
        );
    };
    match env.phone.start_app(package, None) {
        Ok(()) => ShellOutput::ok("Events injected: 1\n"),
        // AOSP's Monkey finds no launcher activity of an allowed package
        // (whether it is missing or has none) and says only this, on
        // stdout, exiting with -4.
        Err(_) => {
            let mut out = ShellOutput::status(252);
            out.out("** No activities found to run, monkey aborted.\n");
            out
        }
    }
}

fn dumpsys(args: &[&str], env: &mut ShellEnv) -> ShellOutput {
    let focus = env.phone.focused_window();
    let package = focus.split('/').next().unwrap_or_default().to_string();
    let pid = pid_of(&package);
    let (w, h) = env.phone.size();
    let rotation = env.phone.rotation();
    match args {
        ["window", ..] => ShellOutput::ok(format!(
            "WINDOW MANAGER DISPLAY CONTENTS (dumpsys window displays)\n{}\n\
             WINDOW MANAGER WINDOWS (dumpsys window windows)\n  mCurrentFocus=Window{{7e1d2a0 u0 {focus}}}\n  mFocusedApp=ActivityRecord{{3f9b1c2 u0 {focus} t12}}\n  mFocusedWindow package={package}\n",
            window_displays(env)
        )),
        ["input", ..] => ShellOutput::ok(input_dump((w, h), env.phone.upright_size(), rotation)),
        // What `dumpsys activity top` and `activities` print of the resumed
        // activity, in the lines clients search for.
        ["activity", "top", ..] => ShellOutput::ok(format!(
            "TASK {package} id=12 userId=0\n  ACTIVITY {focus} 7e1d2a0 pid={pid}\n"
        )),
        ["activity", "activities", ..] => ShellOutput::ok(format!(
            "ACTIVITY MANAGER ACTIVITIES (dumpsys activity activities)\n  \
             mResumedActivity: ActivityRecord{{3f9b1c2 u0 {focus} t12}}\n  \
             ResumedActivity: ActivityRecord{{3f9b1c2 u0 {focus} t12}}\n"
        )),
        // The display manager's viewport line, with the rotation as
        // `orientation=`.
        ["display", ..] => ShellOutput::ok(format!(
            "DISPLAY MANAGER (dumpsys display)\n  mViewports=[DisplayViewport{{type=INTERNAL, valid=true, \
             isActive=true, displayId=0, uniqueId='local:0', physicalPort=0, orientation={rotation}, \
             logicalFrame=Rect(0, 0 - {w}, {h}), physicalFrame=Rect(0, 0 - {w}, {h}), \
             deviceWidth={w}, deviceHeight={h}}}]\n"
        )),
        [other, ..] => ShellOutput::ok(format!("Can't find service: {other}\n")),
        [] => usage("dumpsys", "usage: dumpsys SERVICE"),
    }
}

/// The display lines of `dumpsys window displays` (DisplayContent and
/// DisplayRotation): sizes as `init=` (panel), `base=` (override) and
/// `cur=`, and the rotation as `mRotation=`.
fn window_displays(env: &ShellEnv) -> String {
    let (pw, ph) = env.phone.physical_size();
    let physical_dpi = env.phone.physical_density();
    let (w, h) = env.phone.size();
    let rotation = env.phone.rotation();
    let base = match (env.phone.size_override(), env.phone.density_override()) {
        (None, None) => String::new(),
        (size, density) => {
            let (bw, bh) = size.unwrap_or((pw, ph));
            format!(" base={bw}x{bh} {}dpi", density.unwrap_or(physical_dpi))
        }
    };
    let (short, long) = (w.min(h), w.max(h));
    let locked = if env.phone.rotation_locked() {
        "USER_ROTATION_LOCKED"
    } else {
        "USER_ROTATION_FREE"
    };
    format!(
        "  Display: mDisplayId=0 rootTasks=1\n    init={pw}x{ph} {physical_dpi}dpi{base} cur={w}x{h} \
         app={w}x{h} rng={short}x{short}-{long}x{long}\n  DisplayRotation\n    \
         mRotation={rotation} mDeferredRotationPauseCount=0\n    mUserRotationMode={locked} \
         mUserRotation=ROTATION_{}\n",
        rotation * 90
    )
}

/// The touch screen's part of `dumpsys input` as Android 14's InputReader
/// prints it. The rotation shows only in the viewport's `orientation=`:
/// an orientation-aware touch screen (the emulator's) reports
/// `InputDeviceOrientation: 0` at every rotation, and Android 12's
/// `SurfaceOrientation` line is gone, so clients that grep for it find
/// nothing here, as on a real Android 14 device.
fn input_dump((w, h): (u32, u32), (upright_w, upright_h): (u32, u32), rotation: u32) -> String {
    format!(
        "INPUT MANAGER (dumpsys input)\n\nInput Reader State (Nums of device: 1):\n  \
         Device 1: virtio_input_multi_touch_1\n    EventHub Devices: [ 1 ] \n    \
         IsExternal: false\n    Sources: TOUCHSCREEN\n    \
         Touch Input Mapper (mode - DIRECT):\n      Viewport INTERNAL: displayId=0, \
         uniqueId=local:0, port=0, orientation={rotation}, logicalFrame=[0, 0, {w}, {h}], \
         physicalFrame=[0, 0, {w}, {h}], deviceSize=[{w}, {h}], isActive=[1]\n      \
         DisplayBounds: {upright_w}x{upright_h}\n      \
         PhysicalFrameInRotatedDisplay: Rect{{0, 0, {w}, {h}}}\n      \
         InputDeviceOrientation: 0\n"
    )
}

fn settings(args: &[&str], env: &mut ShellEnv) -> ShellOutput {
    match args {
        ["get", ns, key] => {
            let value = env
                .phone
                .settings_get(ns, key)
                .unwrap_or_else(|| "null".into());
            ShellOutput::ok(format!("{value}\n"))
        }
        ["put", ns, key, value, ..] => {
            env.phone.settings_put(ns, key, value);
            ShellOutput::default()
        }
        _ => usage(
            "settings",
            "usage: settings [get NAMESPACE KEY | put NAMESPACE KEY VALUE]",
        ),
    }
}

fn getprop(args: &[&str], env: &mut ShellEnv) -> ShellOutput {
    match args.first() {
        Some(key) => ShellOutput::ok(format!("{}\n", env.phone.getprop(key).unwrap_or_default())),
        None => {
            let lines: String = env
                .phone
                .all_props()
                .into_iter()
                .map(|(k, v)| format!("[{k}]: [{v}]\n"))
                .collect();
            ShellOutput::ok(lines)
        }
    }
}
