//! The commands of the virtual phone's shell, one function per tool, each
//! answering with the output format of its Android counterpart.

use super::ShellEnv;
use crate::device::ui::to_uiautomator_xml;
use crate::sim::backend::ShellOutput;
use crate::sim::phone::Key;
use base64::Engine;
use std::io::Cursor;

/// Where `uiautomator dump` writes when no path is given, as on Android.
const DEFAULT_DUMP_PATH: &str = "/sdcard/window_dump.xml";

/// Android's pixel format code for RGBA_8888 in raw `screencap` output.
const PIXEL_FORMAT_RGBA_8888: u32 = 1;

pub fn run(argv: &[String], env: &mut ShellEnv) -> ShellOutput {
    let Some((name, args)) = argv.split_first() else {
        return ShellOutput::default();
    };
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match name.as_str() {
        "echo" => echo(&args),
        "true" => ShellOutput::default(),
        "false" => ShellOutput::fail(1, ""),
        "sleep" => ShellOutput::default(),
        "ls" => ls(&args, env),
        "cat" => cat(&args, env),
        "rm" => rm(&args, env),
        "mkdir" => mkdir(&args, env),
        "screencap" => screencap(&args, env),
        "wm" => wm(&args, env),
        "input" => input(&args, env),
        "uiautomator" => uiautomator(&args, env),
        "am" => am(&args, env),
        "monkey" => monkey(&args, env),
        "dumpsys" => dumpsys(&args, env),
        "settings" => settings(&args, env),
        "getprop" => getprop(&args, env),
        "pm" => pm(&args, env),
        other => ShellOutput::fail(
            127,
            format!("/system/bin/sh: {other}: inaccessible or not found\n"),
        ),
    }
}

fn usage(tool: &str, text: &str) -> ShellOutput {
    ShellOutput::fail(1, format!("{tool}: {text}\n"))
}

fn echo(args: &[&str]) -> ShellOutput {
    let (newline, words) = match args.first() {
        Some(&"-n") => (false, &args[1..]),
        _ => (true, args),
    };
    let mut text = words.join(" ");
    if newline {
        text.push('\n');
    }
    ShellOutput::ok(text)
}

fn ls(args: &[&str], env: &mut ShellEnv) -> ShellOutput {
    let paths: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut out = ShellOutput::default();
    for path in if paths.is_empty() { vec!["/"] } else { paths } {
        match (env.fs.list(path), env.fs.stat(path)) {
            (Some(entries), _) => {
                for e in entries {
                    out.stdout
                        .extend_from_slice(format!("{}\n", e.name).as_bytes());
                }
            }
            (None, Some(_)) => out.stdout.extend_from_slice(format!("{path}\n").as_bytes()),
            (None, None) => {
                out.stderr.extend_from_slice(
                    format!("ls: {path}: No such file or directory\n").as_bytes(),
                );
                out.exit_code = 1;
            }
        }
    }
    out
}

fn cat(args: &[&str], env: &mut ShellEnv) -> ShellOutput {
    let mut out = ShellOutput::default();
    for path in args {
        match env.fs.read(path) {
            Ok(data) => out.stdout.extend_from_slice(&data),
            Err(e) => {
                out.stderr
                    .extend_from_slice(format!("cat: {e}\n").as_bytes());
                out.exit_code = 1;
            }
        }
    }
    out
}

fn rm(args: &[&str], env: &mut ShellEnv) -> ShellOutput {
    let force = args.iter().any(|a| a.starts_with('-') && a.contains('f'));
    let mut out = ShellOutput::default();
    for path in args.iter().filter(|a| !a.starts_with('-')) {
        if let Err(e) = env.fs.remove(path)
            && !force
        {
            out.stderr
                .extend_from_slice(format!("rm: {e}\n").as_bytes());
            out.exit_code = 1;
        }
    }
    out
}

fn mkdir(args: &[&str], env: &mut ShellEnv) -> ShellOutput {
    for path in args.iter().filter(|a| !a.starts_with('-')) {
        if !env.fs.mkdir_all(path) {
            return usage("mkdir", &format!("'{path}': Not a directory"));
        }
    }
    ShellOutput::default()
}

fn screencap(args: &[&str], env: &mut ShellEnv) -> ShellOutput {
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
        Some(path) => match env.fs.write(path, bytes, 0o644, 0) {
            Ok(()) => ShellOutput::default(),
            Err(e) => usage("screencap", &e),
        },
        None => ShellOutput::ok(bytes),
    }
}

fn wm(args: &[&str], env: &mut ShellEnv) -> ShellOutput {
    match args.first() {
        Some(&"size") => {
            let (w, h) = env.phone.size();
            ShellOutput::ok(format!("Physical size: {w}x{h}\n"))
        }
        Some(&"density") => ShellOutput::ok(format!("Physical density: {}\n", env.phone.density())),
        _ => usage("wm", "usage: wm [size|density]"),
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

fn uiautomator(args: &[&str], env: &mut ShellEnv) -> ShellOutput {
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
    match env.fs.write(path, xml.into_bytes(), 0o644, 0) {
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
            match env.phone.start_app(package, activity) {
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
        Some(&"force-stop") => ShellOutput::default(),
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
        Err(_) => ShellOutput::fail(
            252,
            format!("** No activities found to run, monkey aborted.\n{package}: not installed\n"),
        ),
    }
}

fn dumpsys(args: &[&str], env: &mut ShellEnv) -> ShellOutput {
    match args.first() {
        Some(&"window") => {
            let focus = env.phone.focused_window();
            let package = focus.split('/').next().unwrap_or_default().to_string();
            ShellOutput::ok(format!(
                "WINDOW MANAGER WINDOWS (dumpsys window windows)\n  mCurrentFocus=Window{{7e1d2a0 u0 {focus}}}\n  mFocusedApp=ActivityRecord{{3f9b1c2 u0 {focus} t12}}\n  mFocusedWindow package={package}\n"
            ))
        }
        Some(other) => ShellOutput::ok(format!("Can't find service: {other}\n")),
        None => usage("dumpsys", "usage: dumpsys SERVICE"),
    }
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

fn pm(args: &[&str], env: &mut ShellEnv) -> ShellOutput {
    match args {
        ["list", "packages", rest @ ..] => {
            let filter = rest
                .iter()
                .find(|a| !a.starts_with('-'))
                .copied()
                .unwrap_or("");
            let lines: String = env
                .phone
                .installed_packages()
                .into_iter()
                .filter(|p| p.contains(filter))
                .map(|p| format!("package:{p}\n"))
                .collect();
            ShellOutput::ok(lines)
        }
        _ => usage("pm", "usage: pm list packages [FILTER]"),
    }
}
