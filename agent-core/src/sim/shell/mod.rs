//! The virtual phone's shell: runs command lines as Android's `sh` and its
//! tools (`input`, `screencap`, `uiautomator`, `am`, `settings`, …) would,
//! against the phone and its file system.
//!
//! Outputs mimic the real tools closely enough that clients written for real
//! devices parse them (`Physical size: 1080x2400`, `UI hierchary dumped to:`
//! with Android's own spelling, `mCurrentFocus=Window{…}`). Unknown commands
//! fail as on a device: `…: inaccessible or not found`, exit 127.

mod commands;
pub mod syntax;

use super::backend::ShellOutput;
use super::phone::Phone;
use super::vfs::Vfs;
use syntax::{Join, Redirect, expand};

/// What a command runs against.
pub struct ShellEnv<'a> {
    pub phone: &'a mut Phone,
    pub fs: &'a mut Vfs,
}

/// Runs one command line and returns what it wrote and its exit status.
pub fn run(line: &str, env: &mut ShellEnv) -> ShellOutput {
    let list = match syntax::parse(line) {
        Ok(list) => list,
        Err(e) => return ShellOutput::fail(2, format!("/system/bin/sh: {e}\n")),
    };
    let mut out = ShellOutput::default();
    for (join, command) in list {
        let run_it = match join {
            Join::Always => true,
            Join::IfOk => out.exit_code == 0,
            Join::IfFailed => out.exit_code != 0,
        };
        if !run_it {
            continue;
        }
        let argv: Vec<String> = command
            .words
            .iter()
            .map(|w| expand(w, out.exit_code))
            .collect();
        let mut result = commands::run(&argv, env);
        redirect(&mut result, &command.redirects, out.exit_code, env.fs);
        out.stdout.extend_from_slice(&result.stdout);
        out.stderr.extend_from_slice(&result.stderr);
        out.exit_code = result.exit_code;
    }
    out
}

/// Applies redirections in order, as `sh` does.
fn redirect(result: &mut ShellOutput, redirects: &[Redirect], last_status: u8, fs: &mut Vfs) {
    for r in redirects {
        match r {
            Redirect::StderrToStdout => {
                let err = std::mem::take(&mut result.stderr);
                result.stdout.extend_from_slice(&err);
            }
            Redirect::File {
                stderr,
                append,
                path,
            } => {
                let path = expand(path, last_status);
                let data = std::mem::take(if *stderr {
                    &mut result.stderr
                } else {
                    &mut result.stdout
                });
                match path.as_str() {
                    "/dev/null" => {}
                    "/dev/tty" | "/dev/stdout" => result.stdout.extend_from_slice(&data),
                    "/dev/stderr" => result.stderr.extend_from_slice(&data),
                    _ => {
                        let mut contents = if *append {
                            fs.read(&path).unwrap_or_default()
                        } else {
                            Vec::new()
                        };
                        contents.extend_from_slice(&data);
                        if let Err(e) = fs.write(&path, contents, 0o644, 0) {
                            result
                                .stderr
                                .extend_from_slice(format!("/system/bin/sh: {e}\n").as_bytes());
                            result.exit_code = 1;
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
