//! `pm` (and `cmd package`): the package manager's shell command, answering
//! in the words of Android's PackageManagerShellCommand.

use super::ShellEnv;
use super::commands::Call;
use crate::sim::apk;
use crate::sim::backend::ShellOutput;
use crate::sim::packages::{InstallFlags, SessionError};

pub fn pm(args: &[&str], call: &Call, env: &mut ShellEnv) -> ShellOutput {
    let Some((verb, rest)) = args.split_first() else {
        return ShellOutput::fail(1, USAGE);
    };
    match *verb {
        "list" => match rest.split_first() {
            Some((&"packages", options)) => list_packages(options, env),
            _ => ShellOutput::fail(1, USAGE),
        },
        "path" => path(rest, env),
        "install" => install(rest, call, env),
        "install-create" => match install_options(rest) {
            Ok((flags, _, _)) => match env.packages.create_session(flags) {
                Ok(id) => ShellOutput::ok(format!("Success: created install session [{id}]\n")),
                Err(e) => session_exception("install-create", &e),
            },
            Err(out) => out,
        },
        "install-write" => install_write(rest, call, env),
        "install-commit" => match session_id(rest) {
            Ok(id) => {
                let system = env.phone.installed_packages();
                committed(env.packages.commit_session(env.fs, &system, id))
            }
            Err(out) => out,
        },
        "install-abandon" => match session_id(rest) {
            Ok(id) => match env.packages.abandon_session(env.fs, id) {
                Ok(()) => ShellOutput::ok("Success\n"),
                Err(SessionError::Unknown(id)) => {
                    exception("install-abandon", &format!("Failed to open session {id}"))
                }
                Err(e) => session_exception("install-abandon", &e),
            },
            Err(out) => out,
        },
        "uninstall" => uninstall(rest, env),
        "clear" => clear(rest, env),
        other => {
            let mut out = ShellOutput::ok(format!("Unknown command: {other}\n"));
            out.exit_code = 255;
            out
        }
    }
}

/// What `pm` prints for no or an incomplete command (the first lines of
/// its help).
const USAGE: &str = "Package manager (package) commands:\n  help\n    Print this help text.\n";

/// A command that threw, as ShellCommand reports it: on stderr after an
/// empty line, exit 255. The stack trace that follows on a device is left
/// out.
fn exception(command: &str, message: &str) -> ShellOutput {
    let mut out = ShellOutput::default();
    thrown(&mut out, command, message);
    out
}

fn thrown(out: &mut ShellOutput, command: &str, message: &str) {
    thrown_as(out, command, "java.lang.IllegalArgumentException", message);
}

fn thrown_as(out: &mut ShellOutput, command: &str, class: &str, message: &str) {
    out.err(format!(
        "\nException occurred while executing '{command}':\n{class}: {message}\n"
    ));
    out.exit_code = 255;
}

/// A session request that failed, thrown as PackageInstallerService
/// throws it.
fn session_exception(command: &str, e: &SessionError) -> ShellOutput {
    let class = match e {
        SessionError::Unknown(_) => "java.lang.IllegalArgumentException",
        SessionError::TooMany => "java.lang.IllegalStateException",
        SessionError::NoSpace => "java.io.IOException",
    };
    let mut out = ShellOutput::default();
    thrown_as(&mut out, command, class, &e.to_string());
    out
}

/// The package arguments of a command after its options (`--user 0` and
/// the like take a value).
fn operands<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        match *word {
            "--user" | "--versionCode" => {
                words.next();
            }
            w if w.starts_with('-') => {}
            w => out.push(w),
        }
    }
    out
}

fn list_packages(options: &[&str], env: &mut ShellEnv) -> ShellOutput {
    let has = |flag: char| {
        options
            .iter()
            .any(|o| o.starts_with('-') && !o.starts_with("--") && o.contains(flag))
    };
    let (third_party, system, paths) = (has('3'), has('s'), has('f'));
    let with_versions = options.contains(&"--show-versioncode");
    let filter = operands(options).first().copied().unwrap_or("");
    let mut rows: Vec<(String, String, i64)> = Vec::new();
    if !third_party {
        for package in env.phone.installed_packages() {
            let path = system_apk(&package);
            rows.push((package, path, 1));
        }
    }
    if !system {
        for installed in env.packages.iter() {
            let m = &installed.manifest;
            rows.push((m.package.clone(), installed.path.clone(), m.version_code));
        }
    }
    rows.sort();
    let mut out = String::new();
    for (package, path, version) in rows.iter().filter(|(p, ..)| p.contains(filter)) {
        out.push_str("package:");
        if paths {
            out.push_str(&format!("{path}="));
        }
        out.push_str(package);
        if with_versions {
            out.push_str(&format!(" versionCode:{version}"));
        }
        out.push('\n');
    }
    ShellOutput::ok(out)
}

/// Where a system image package's APK would be; the phone's own apps have
/// no APK file behind them.
fn system_apk(package: &str) -> String {
    let name = package.rsplit('.').next().unwrap_or(package);
    let mut chars = name.chars();
    let name: String = chars
        .next()
        .map(|c| c.to_ascii_uppercase())
        .into_iter()
        .chain(chars)
        .collect();
    format!("/system/priv-app/{name}/{name}.apk")
}

fn path(args: &[&str], env: &mut ShellEnv) -> ShellOutput {
    let Some(package) = operands(args).first().copied() else {
        return exception("path", "Argument expected after \"path\"");
    };
    if let Some(installed) = env.packages.get(package) {
        return ShellOutput::ok(format!("package:{}\n", installed.path));
    }
    if env.phone.installed_packages().iter().any(|p| p == package) {
        return ShellOutput::ok(format!("package:{}\n", system_apk(package)));
    }
    ShellOutput::fail(1, "")
}

/// The options `install` and `install-create` share, and the size given
/// with `-S` (the APK then comes on standard input).
type InstallOptions<'a> = (InstallFlags, Vec<&'a str>, Option<u64>);

fn install_options<'a>(args: &[&'a str]) -> Result<InstallOptions<'a>, ShellOutput> {
    let mut flags = InstallFlags::default();
    let mut size = None;
    let mut rest = Vec::new();
    let mut words = args.iter();
    while let Some(&word) = words.next() {
        match word {
            "-d" => flags.allow_downgrade = true,
            "-R" => flags.keep_existing = true,
            // Replacing is always on since Android 7; the rest are
            // permissions, test-only and placement flags the phone has no
            // use for.
            "-r"
            | "-t"
            | "-g"
            | "-f"
            | "-l"
            | "--dont-kill"
            | "--full"
            | "--instant"
            | "--force-queryable"
            | "--restrict-permissions"
            | "--skip-verification"
            | "--bypass-low-target-sdk-block" => {}
            "-i" | "--user" | "--install-location" | "--install-reason" | "--originating-uri"
            | "--referrer" | "--abi" | "-p" | "--pkg" => {
                if words.next().is_none() {
                    return Err(exception("install", &format!("Missing value for {word}")));
                }
            }
            "-S" => {
                let value = words.next().and_then(|v| v.parse::<u64>().ok());
                match value {
                    Some(v) => size = Some(v),
                    None => return Err(exception("install", "Invalid size for -S")),
                }
            }
            w if w.starts_with('-') && w != "-" => {
                return Err(exception("install", &format!("Unknown option {w}")));
            }
            w => rest.push(w),
        }
    }
    Ok((flags, rest, size))
}

/// The APK an `install` or `install-write` names: a file on the phone, or
/// `-S SIZE` bytes of standard input.
fn apk_bytes(
    command: &str,
    path: Option<&str>,
    size: Option<u64>,
    call: &Call,
    env: &ShellEnv,
) -> Result<Vec<u8>, ShellOutput> {
    match (path, size) {
        (Some(path), _) if path != "-" => {
            if let Err(over) = call.may_read(&call.path(path), env) {
                return Err(ShellOutput::fail(1, format!("Error: {over}\n")));
            }
            env.fs.read(&call.path(path)).map_err(|_| {
                // ShellCommand.openFileForSystem's words, then the install's.
                let mut out = ShellOutput::default();
                out.err(format!("Error: Unable to open file: {path}\n"));
                if !call.path(path).starts_with("/data/local/tmp/") {
                    out.err("Consider using a file under /data/local/tmp/\n");
                }
                out.err(format!("Error: Can't open file: {path}\n"));
                thrown(
                    &mut out,
                    command,
                    &format!("Error: Can't open file: {path}"),
                );
                out
            })
        }
        (_, Some(size)) => {
            let take = usize::try_from(size).unwrap_or(usize::MAX);
            if call.stdin.len() < take {
                return Err(ShellOutput::fail(
                    1,
                    format!(
                        "Failure [INSTALL_FAILED_INVALID_APK: Expected {size} bytes, got {}]\n",
                        call.stdin.len()
                    ),
                ));
            }
            Ok(call.stdin[..take].to_vec())
        }
        _ => {
            let mut out =
                ShellOutput::ok("Error: must either specify a package size or an APK file\n");
            out.exit_code = 1;
            Err(out)
        }
    }
}

fn install(args: &[&str], call: &Call, env: &mut ShellEnv) -> ShellOutput {
    let (flags, rest, size) = match install_options(args) {
        Ok(parsed) => parsed,
        Err(out) => return out,
    };
    let path = rest.first().copied().filter(|p| *p != "-");
    let apk = match apk_bytes("install", path, size, call, env) {
        Ok(apk) => apk,
        Err(out) => return out,
    };
    let read = apk::read(&apk);
    // Given a file, pm parses it before it stages it, and throws.
    if let Some(path) = path
        && let Err(e) = &read
        && e.fails_lite_parse()
    {
        return exception(
            "install",
            &format!(
                "Error: Failed to parse APK file: {path}: {}",
                e.message(path)
            ),
        );
    }
    let system = env.phone.installed_packages();
    committed(env.packages.install_read(env.fs, &system, apk, read, flags))
}

/// pm's last line for a commit: `Success`, or `Failure [message]` with
/// exit status 1, both on stdout.
fn committed(result: Result<String, String>) -> ShellOutput {
    match result {
        Ok(_) => ShellOutput::ok("Success\n"),
        Err(message) => {
            let mut out = ShellOutput::ok(format!("Failure [{message}]\n"));
            out.exit_code = 1;
            out
        }
    }
}

fn session_id(args: &[&str]) -> Result<u32, ShellOutput> {
    match operands(args).first() {
        Some(id) => id
            .parse()
            .map_err(|_| exception("install", &format!("Invalid session id: {id}"))),
        None => Err(exception("install", "Error: must specify a session ID")),
    }
}

/// `install-write [-S SIZE] SESSION NAME [PATH|-]`.
fn install_write(args: &[&str], call: &Call, env: &mut ShellEnv) -> ShellOutput {
    let (_, rest, size) = match install_options(args) {
        Ok(parsed) => parsed,
        Err(out) => return out,
    };
    let (Some(id), Some(name)) = (rest.first(), rest.get(1)) else {
        return exception(
            "install-write",
            "Error: must specify session ID and split name",
        );
    };
    let Ok(id) = id.parse::<u32>() else {
        return exception("install-write", &format!("Invalid session id: {id}"));
    };
    let apk = match apk_bytes("install-write", rest.get(2).copied(), size, call, env) {
        Ok(apk) => apk,
        Err(out) => return out,
    };
    let bytes = apk.len();
    match env.packages.write_session(env.fs, id, name, apk) {
        Ok(()) => ShellOutput::ok(format!("Success: streamed {bytes} bytes\n")),
        Err(e) => session_exception("install-write", &e),
    }
}

fn uninstall(args: &[&str], env: &mut ShellEnv) -> ShellOutput {
    let Some(package) = operands(args).first().copied() else {
        return exception("uninstall", "package name required");
    };
    if env.packages.uninstall(env.fs, package) {
        env.phone.force_stop(package);
        return ShellOutput::ok("Success\n");
    }
    let mut out = ShellOutput::ok("Failure [DELETE_FAILED_INTERNAL_ERROR]\n");
    out.exit_code = 1;
    out
}

fn clear(args: &[&str], env: &mut ShellEnv) -> ShellOutput {
    let Some(package) = operands(args).first().copied() else {
        return ShellOutput::fail(1, "Error: no package specified\n");
    };
    let known = env.packages.get(package).is_some()
        || env.phone.installed_packages().iter().any(|p| p == package);
    if known {
        env.phone.clear_data(package);
        ShellOutput::ok("Success\n")
    } else {
        ShellOutput::fail(1, "Failed\n")
    }
}
