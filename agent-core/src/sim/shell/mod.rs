//! The virtual phone's shell: runs command lines as Android's `sh` (mksh)
//! and its tools (toybox, `input`, `screencap`, `uiautomator`, `am`, `pm`,
//! `dumpsys`, …) would, against the phone and its file system.
//!
//! Outputs mimic the real tools closely enough that clients written for real
//! devices parse them (`Physical size: 1080x2400`, `UI hierchary dumped to:`
//! with Android's own spelling, `mCurrentFocus=Window{…}`). Unknown commands
//! fail as on a device: `…: inaccessible or not found`, exit 127. Both output
//! streams keep the order of their writes ([`ShellOutput::interleaved`]).

mod commands;
mod pm;
pub mod syntax;
mod text;

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

use super::backend::{ShellOutput, Stream};
use super::packages::Packages;
use super::phone::Phone;
use super::vfs::Vfs;
use syntax::{Command, Join, Pipeline, Target, Word, expand, substituted_len};

/// What a command runs against.
pub struct ShellEnv<'a> {
    pub phone: &'a mut Phone,
    pub fs: &'a mut Vfs,
    pub packages: &'a mut Packages,
}

/// Runs one command line, as `adb shell LINE` has the device's `sh` run it.
pub fn run(line: &str, env: &mut ShellEnv) -> ShellOutput {
    run_with_input(line, &[], env)
}

/// Runs a command line with `input` as its standard input, as `exec:`
/// commands that the host streams data to (`cmd package install -S N`) get.
pub fn run_with_input(line: &str, input: &[u8], env: &mut ShellEnv) -> ShellOutput {
    Shell::new().script(line, input, env)
}

/// How deep `sh -c` may nest before the shell refuses (a device would run
/// out of processes; this keeps a hostile line from exhausting the stack).
const MAX_NESTING: usize = 16;

/// The most bytes the commands of one command line write together, pipes,
/// redirections (`/dev/null` too) and `sh` included: a phone streams what a
/// line prints, the virtual one holds it in the host's memory and the
/// phone's lock. As large as the largest push, so `exec-out cat` of any
/// pushed file still works.
pub const LINE_OUTPUT: usize = 256 << 20;

/// The most bytes of files the commands of one command line read together
/// (a tool's file operands, `<`, `sh FILE`, `cp`, `pm install FILE`): all
/// the phone's storage holds, so a line can read every file once, but not
/// search a large file thousands of times over.
pub const LINE_READ: usize = super::vfs::CAPACITY;

/// The most commands one command line runs, `sh` scripts included: a
/// script that runs itself several times over (`sh f; sh f` in `f`) would
/// otherwise run billions of them while holding the phone.
pub const LINE_COMMANDS: usize = 4096;

/// What one command line may still do.
#[derive(Debug, Clone, Copy)]
struct Budget {
    written: usize,
    read: usize,
    commands: usize,
}

/// Which of a command line's bounds it went past.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    Written,
    Read,
    /// A tool's read, bounded by what the line may still write: its
    /// output grows with what it reads.
    ReadToWrite,
    Commands,
}

impl Bound {
    /// Why the line stopped early, after the shell's or a tool's name.
    fn message(self) -> String {
        let what = match self {
            Bound::Written => format!("{LINE_OUTPUT} bytes written"),
            Bound::Read => format!("{LINE_READ} bytes of files read"),
            Bound::ReadToWrite => format!(
                "{LINE_OUTPUT} bytes written (a tool reads no more than its line may still write)"
            ),
            Bound::Commands => format!("{LINE_COMMANDS} commands"),
        };
        format!("over the virtual phone's bound for one line: {what}")
    }
}

/// The shell's state while it runs a line: variables, the working directory
/// (`$PWD`), the last status and whether `exit` ran.
#[derive(Clone)]
struct Shell {
    /// Shared values: a pipeline's every part and every child shell start
    /// with a copy of the variables, which must not copy a long value.
    vars: BTreeMap<String, Rc<str>>,
    status: u8,
    exited: bool,
    depth: usize,
    /// What the line's commands may still do, shared with its subshells
    /// and child shells; the bound one went past, which ends the line.
    left: Rc<Cell<Result<Budget, Bound>>>,
}

impl Shell {
    fn new() -> Self {
        let vars = [
            (
                "PATH",
                "/product/bin:/apex/com.android.runtime/bin:/apex/com.android.art/bin:\
                 /system_ext/bin:/system/bin:/system/xbin:/odm/bin:/vendor/bin:/vendor/xbin",
            ),
            ("HOME", "/"),
            ("PWD", "/"),
            ("SHELL", "/bin/sh"),
            ("TMPDIR", "/data/local/tmp"),
            ("ANDROID_DATA", "/data"),
            ("ANDROID_ROOT", "/system"),
            ("EXTERNAL_STORAGE", "/sdcard"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), Rc::from(v)))
        .collect();
        Self {
            vars,
            status: 0,
            exited: false,
            depth: 0,
            left: Rc::new(Cell::new(Ok(Budget {
                written: LINE_OUTPUT,
                read: LINE_READ,
                commands: LINE_COMMANDS,
            }))),
        }
    }

    fn script(&mut self, text: &str, stdin: &[u8], env: &mut ShellEnv) -> ShellOutput {
        let list = match syntax::parse(text) {
            Ok(list) => list,
            Err(e) => {
                self.status = 2;
                return ShellOutput::fail(2, format!("/system/bin/sh: {e}\n"));
            }
        };
        let mut out = ShellOutput::default();
        for (join, pipeline) in &list {
            if self.exited || self.left.get().is_err() {
                break;
            }
            let run_it = match join {
                Join::Always => true,
                Join::IfOk => self.status == 0,
                Join::IfFailed => self.status != 0,
            };
            if run_it {
                let result = self.pipeline(pipeline, stdin, env);
                append(&mut out, &result);
            }
        }
        out.exit_code = self.status;
        out
    }

    /// Runs the commands one after the other, each reading the output of
    /// the one before; the status is the last one's.
    fn pipeline(&mut self, pipeline: &Pipeline, stdin: &[u8], env: &mut ShellEnv) -> ShellOutput {
        let mut out = ShellOutput::default();
        let mut input = stdin.to_vec();
        let last = pipeline.commands.len().saturating_sub(1);
        let mut status = 0;
        for (i, command) in pipeline.commands.iter().enumerate() {
            if self.left.get().is_err() {
                break;
            }
            // Each part of a longer pipeline runs in a subshell: its `exit`
            // and assignments end with it.
            let result = if last > 0 {
                self.clone().command(command, &input, env)
            } else {
                self.command(command, &input, env)
            };
            status = result.exit_code;
            if i == last {
                append(&mut out, &result);
            } else {
                out.err(&result.stderr);
                input = result.stdout;
            }
        }
        self.status = match pipeline.negated {
            true => u8::from(status == 0),
            false => status,
        };
        out.exit_code = self.status;
        out
    }

    fn var(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(|value| &**value)
    }

    /// `words` expanded, what their parameters add charged against what
    /// the line may still write before they are made (`A=$A$A` doubles a
    /// variable at every assignment); `None` once the line may not, which
    /// ends it. The line's own text is not charged: it is bounded by the
    /// line, and `cat FILE` of the largest push must still fit.
    fn expand(&self, words: &[&Word]) -> Option<Vec<String>> {
        let length = words
            .iter()
            .map(|word| substituted_len(word, self.status, |name| self.var(name)))
            .fold(0, usize::saturating_add);
        let spent = Budget {
            written: length,
            read: 0,
            commands: 0,
        };
        self.spend(spent).then(|| {
            words
                .iter()
                .map(|word| expand(word, self.status, |name| self.var(name)))
                .collect()
        })
    }

    /// A redirection's word expanded, as [`Self::expand`]; the message
    /// ending the line when it may not be.
    fn expand_one(&self, word: &Word) -> Result<String, String> {
        self.expand(&[word])
            .and_then(|mut words| words.pop())
            .ok_or_else(|| self.over_bounds())
    }

    /// A path as the command means it: relative ones from `$PWD`.
    fn path(&self, path: &str) -> String {
        absolute(self.var("PWD").unwrap_or("/"), path)
    }

    /// Spends `budget` of what the line may still do; false (and the line
    /// ends) once it is spent.
    #[must_use]
    fn spend(&self, spent: Budget) -> bool {
        let left = self.left.get().and_then(|left| {
            Ok(Budget {
                written: left
                    .written
                    .checked_sub(spent.written)
                    .ok_or(Bound::Written)?,
                read: left.read.checked_sub(spent.read).ok_or(Bound::Read)?,
                commands: left
                    .commands
                    .checked_sub(spent.commands)
                    .ok_or(Bound::Commands)?,
            })
        });
        self.left.set(left);
        left.is_ok()
    }

    /// Why the line ended early: the bound it went past.
    fn over_bounds(&self) -> String {
        let passed = self.left.get().err();
        debug_assert!(passed.is_some(), "asked why a line within its bounds ended");
        passed.unwrap_or(Bound::Written).message()
    }

    /// Spends `bytes` of file reading.
    #[must_use]
    fn spend_read(&self, bytes: usize) -> bool {
        self.spend(Budget {
            written: 0,
            read: bytes,
            commands: 0,
        })
    }

    fn command(&mut self, command: &Command, stdin: &[u8], env: &mut ShellEnv) -> ShellOutput {
        let words: Vec<&Word> = command.words.iter().collect();
        let values: Vec<&Word> = command.assignments.iter().map(|(_, v)| v).collect();
        let (Some(argv), Some(values)) = (self.expand(&words), self.expand(&values)) else {
            return ShellOutput::fail(1, format!("/system/bin/sh: {}\n", self.over_bounds()));
        };
        let assignments = command
            .assignments
            .iter()
            .zip(values)
            .map(|((name, _), value)| (name.clone(), Rc::from(value)))
            .collect();
        // A child shell's writes were charged command by command as it ran;
        // it counts as a command itself, or a script running itself at
        // every level would count none.
        let child = argv
            .first()
            .is_some_and(|w| matches!(w.as_str(), "sh" | "/system/bin/sh" | "/bin/sh"));
        let (out, written) = self.uncharged_command(command, argv, assignments, child, stdin, env);
        let spent = Budget {
            written: if child { 0 } else { written },
            read: 0,
            commands: 1,
        };
        // A command (a child shell, a read) that went past the bounds as it
        // ran said so itself.
        if self.left.get().is_err() || self.spend(spent) {
            return out;
        }
        let message = format!("/system/bin/sh: {}\n", self.over_bounds());
        if child {
            // What it printed was charged and stands.
            let mut out = out;
            out.err(message);
            out.exit_code = 1;
            return out;
        }
        ShellOutput::fail(1, message)
    }

    /// Runs the command `argv` names, with `assignments` and the command's
    /// redirections; also gives the bytes it wrote, wherever they went.
    /// Its writes to files are made only where the line may still write
    /// them, unless a `child` shell charged them as it ran.
    fn uncharged_command(
        &mut self,
        command: &Command,
        argv: Vec<String>,
        assignments: Vec<(String, Rc<str>)>,
        child: bool,
        stdin: &[u8],
        env: &mut ShellEnv,
    ) -> (ShellOutput, usize) {
        let mut io = match self.open(command, stdin, env) {
            Ok(io) => io,
            Err(message) => {
                self.status = 1;
                return (
                    ShellOutput::fail(1, format!("/system/bin/sh: {message}\n")),
                    0,
                );
            }
        };
        let raw = if argv.is_empty() {
            // Assignments alone succeed (there is no command substitution
            // whose status they could take).
            self.vars.extend(assignments);
            ShellOutput::default()
        } else {
            self.builtin(&argv, &io.input, env).unwrap_or_else(|| {
                let pwd = self.var("PWD").unwrap_or("/").to_owned();
                // A tool's output grows with what it reads, so it may read
                // no more than the line may still write either: `cat f f …`
                // of a large file stops before building it all.
                let (may_read, bound) = match self.left.get() {
                    Ok(l) if l.read <= l.written => (l.read, Bound::Read),
                    Ok(l) => (l.written, Bound::ReadToWrite),
                    Err(bound) => (0, bound),
                };
                let call = commands::Call {
                    stdin: &io.input,
                    pwd: &pwd,
                    read_left: Cell::new(Some(may_read)),
                    over: bound,
                };
                let out = commands::run(&argv, &call, env);
                match call.read_left.get() {
                    // Within what the line still had, so it cannot end it.
                    Some(left) => {
                        let _ = self.spend_read(may_read - left);
                    }
                    None => self.left.set(Err(bound)),
                }
                out
            })
        };
        let mut out = ShellOutput::status(raw.exit_code);
        let mut written = 0;
        for (stream, bytes) in raw.writes() {
            written += bytes.len();
            let place = match stream {
                Stream::Stdout => io.places[1],
                Stream::Stderr => io.places[2],
            };
            match place {
                Place::Stdout => out.out(bytes),
                Place::Stderr => out.err(bytes),
                Place::File(i) => io.files[i].data.extend_from_slice(bytes),
                Place::Null => {}
            }
        }
        let may_write = child || self.left.get().is_ok_and(|left| written <= left.written);
        for file in io.files.into_iter().filter(|_| may_write) {
            // `>` emptied the file when it opened it.
            if let Err(e) = env.fs.append(&file.path, &file.data, 0o666, 0) {
                out.err(format!("/system/bin/sh: can't create {e}\n"));
                out.exit_code = 1;
            }
        }
        self.status = out.exit_code;
        (out, written)
    }

    /// Applies the command's redirections in order.
    fn open(&self, command: &Command, stdin: &[u8], env: &mut ShellEnv) -> Result<Io, String> {
        let mut io = Io {
            input: stdin.to_vec(),
            places: [Place::Null, Place::Stdout, Place::Stderr],
            files: Vec::new(),
        };
        for redirect in &command.redirects {
            let fd = usize::from(redirect.fd);
            match &redirect.target {
                Target::Read(word) => {
                    let path = self.path(&self.expand_one(word)?);
                    let size = env.fs.stat(&path).map_or(0, |st| st.size as usize);
                    if !self.spend_read(size) {
                        return Err(self.over_bounds());
                    }
                    io.input = env
                        .fs
                        .read(&path)
                        .map_err(|_| format!("can't open {path}: No such file or directory"))?;
                }
                Target::Dup(from) => io.places[fd] = io.places[usize::from(*from)],
                Target::Write { path, append } => {
                    let written = self.expand_one(path)?;
                    io.places[fd] = match written.as_str() {
                        "/dev/null" => Place::Null,
                        "/dev/stdout" | "/dev/tty" => Place::Stdout,
                        "/dev/stderr" => Place::Stderr,
                        _ => {
                            let path = self.path(&written);
                            writable(env.fs, &path)?;
                            // `>` empties the file when it opens, before the
                            // command runs.
                            if !append {
                                env.fs
                                    .write(&path, Vec::new(), 0o666, 0)
                                    .map_err(|e| format!("can't create {e}"))?;
                            }
                            io.files.push(OpenFile {
                                path,
                                data: Vec::new(),
                            });
                            Place::File(io.files.len() - 1)
                        }
                    };
                }
            }
        }
        Ok(io)
    }

    /// The commands the shell runs itself; `None` for the others.
    fn builtin(
        &mut self,
        argv: &[String],
        stdin: &[u8],
        env: &mut ShellEnv,
    ) -> Option<ShellOutput> {
        let args: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
        Some(match argv[0].as_str() {
            "exit" => {
                self.exited = true;
                let code = args.first().map_or(Some(self.status), |a| {
                    a.parse::<i64>().ok().map(|n| n.rem_euclid(256) as u8)
                });
                match code {
                    Some(code) => ShellOutput::status(code),
                    None => ShellOutput::fail(
                        2,
                        format!("/system/bin/sh: exit: {}: bad number\n", args[0]),
                    ),
                }
            }
            "cd" => {
                let target = self.path(args.first().copied().unwrap_or("/"));
                match env.fs.stat(&target) {
                    Some(stat) if stat.is_dir() => {
                        self.vars.insert("PWD".into(), Rc::from(target));
                        ShellOutput::default()
                    }
                    Some(_) => ShellOutput::fail(
                        2,
                        format!("/system/bin/sh: cd: {target}: Not a directory\n"),
                    ),
                    None => ShellOutput::fail(
                        2,
                        format!("/system/bin/sh: cd: {target}: No such file or directory\n"),
                    ),
                }
            }
            "pwd" => ShellOutput::ok(format!("{}\n", self.path("."))),
            "export" => {
                for arg in args {
                    if let Some((name, value)) = arg.split_once('=') {
                        self.vars.insert(name.to_owned(), Rc::from(value));
                    }
                }
                ShellOutput::default()
            }
            "unset" => {
                for name in args {
                    self.vars.remove(name);
                }
                ShellOutput::default()
            }
            "sh" | "/system/bin/sh" | "/bin/sh" => self.sh(&args, stdin, env),
            _ => return None,
        })
    }

    /// `sh -c SCRIPT`, or `sh` reading its script from standard input, in a
    /// child shell with this one's variables.
    fn sh(&self, args: &[&str], stdin: &[u8], env: &mut ShellEnv) -> ShellOutput {
        if self.depth >= MAX_NESTING {
            return ShellOutput::fail(
                2,
                format!("/system/bin/sh: sh nested more than {MAX_NESTING} deep\n"),
            );
        }
        let mut child = Shell {
            status: 0,
            exited: false,
            depth: self.depth + 1,
            ..self.clone()
        };
        match args {
            ["-c", script, ..] => child.script(script, stdin, env),
            ["-c"] => ShellOutput::fail(2, "/system/bin/sh: -c: option requires an argument\n"),
            [] => {
                let script = String::from_utf8_lossy(stdin).into_owned();
                child.script(&script, &[], env)
            }
            [file, ..] => {
                let path = self.path(file);
                let size = env.fs.stat(&path).map_or(0, |st| st.size as usize);
                if !self.spend_read(size) {
                    return ShellOutput::fail(
                        2,
                        format!("/system/bin/sh: {}\n", self.over_bounds()),
                    );
                }
                match env.fs.read(&path) {
                    Ok(bytes) => {
                        let script = String::from_utf8_lossy(&bytes).into_owned();
                        child.script(&script, stdin, env)
                    }
                    Err(_) => ShellOutput::fail(
                        127,
                        format!("/system/bin/sh: {file}: No such file or directory\n"),
                    ),
                }
            }
        }
    }
}

/// Where one of a command's output descriptors goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Stdout,
    Stderr,
    File(usize),
    Null,
}

/// A command's input and where its outputs go.
struct Io {
    input: Vec<u8>,
    /// Descriptors 0, 1 and 2.
    places: [Place; 3],
    files: Vec<OpenFile>,
}

struct OpenFile {
    path: String,
    data: Vec<u8>,
}

/// Appends `more`'s writes, in order, and takes its status.
fn append(out: &mut ShellOutput, more: &ShellOutput) {
    for (stream, bytes) in more.writes() {
        out.write(stream, bytes);
    }
    out.exit_code = more.exit_code;
}

/// A redirection may create a file only inside an existing directory.
fn writable(fs: &Vfs, path: &str) -> Result<(), String> {
    let parent = match path.rsplit_once('/') {
        Some(("", _)) | None => "/",
        Some((parent, _)) => parent,
    };
    match (fs.stat(parent), fs.stat(path)) {
        (_, Some(stat)) if stat.is_dir() => Err(format!("can't create {path}: Is a directory")),
        (Some(stat), _) if stat.is_dir() => Ok(()),
        _ => Err(format!("can't create {path}: No such file or directory")),
    }
}

/// `path` from directory `pwd`, with `.` and `..` resolved.
pub(crate) fn absolute(pwd: &str, path: &str) -> String {
    let joined = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("{pwd}/{path}")
    };
    format!("/{}", super::vfs::components(&joined).join("/"))
}

#[cfg(test)]
mod tests;
