//! The shell against a default phone: outputs as Android's tools print them.

use crate::sim::phone::PhoneConfig;

use crate::device::ui::parse_uiautomator_xml;
use crate::sim::backend::AdbBackend;
use crate::sim::virtual_phone::VirtualPhone;

fn phone() -> VirtualPhone {
    VirtualPhone::new(PhoneConfig {
        width: 1080,
        height: 2400,
        density: 420,
        seed: 1,
    })
}

fn stdout(phone: &VirtualPhone, line: &str) -> String {
    let out = phone.shell(line);
    assert_eq!(
        out.exit_code,
        0,
        "{line}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn basic_tools_answer_like_android() {
    let p = phone();
    assert_eq!(stdout(&p, "wm size"), "Physical size: 1080x2400\n");
    assert_eq!(stdout(&p, "wm density"), "Physical density: 420\n");
    assert_eq!(stdout(&p, "echo hi  there"), "hi there\n");
    assert_eq!(stdout(&p, "echo -n hi"), "hi");
    assert!(
        stdout(&p, "pm list packages")
            .lines()
            .all(|l| l.starts_with("package:"))
    );
    assert!(!stdout(&p, "getprop ro.product.model").trim().is_empty());
    assert!(stdout(&p, "getprop").starts_with('['));
}

#[test]
fn unknown_commands_fail_with_127() {
    let out = phone().shell("frobnicate --now");
    assert_eq!(out.exit_code, 127);
    assert_eq!(
        out.stderr,
        b"/system/bin/sh: frobnicate: inaccessible or not found\n"
    );
}

#[test]
fn status_lists_and_redirections() {
    let p = phone();
    assert_eq!(stdout(&p, "false; echo rc=$?"), "rc=1\n");
    assert_eq!(stdout(&p, "false || echo fallback"), "fallback\n");
    assert_eq!(stdout(&p, "true && echo then"), "then\n");
    assert_eq!(
        stdout(
            &p,
            "echo saved > /sdcard/a.txt; echo more >> /sdcard/a.txt; cat /sdcard/a.txt"
        ),
        "saved\nmore\n"
    );
    assert_eq!(stdout(&p, "nosuch 2>/dev/null; echo rc=$?"), "rc=127\n");
    let merged = p.shell("nosuch 2>&1");
    assert!(String::from_utf8_lossy(&merged.stdout).contains("inaccessible or not found"));
    let syntax = p.shell("echo $(ls)");
    assert_eq!(syntax.exit_code, 2);
    assert!(String::from_utf8_lossy(&syntax.stderr).contains("command substitution"));
}

#[test]
fn screencap_png_and_raw() {
    let p = phone();
    let png = p.shell("screencap -p").stdout;
    let image = image::load_from_memory(&png).unwrap();
    assert_eq!((image.width(), image.height()), (1080, 2400));
    let raw = p.shell("screencap").stdout;
    let header: Vec<u32> = raw[..16]
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(header, [1080, 2400, 1, 0]);
    assert_eq!(raw.len(), 16 + 1080 * 2400 * 4);
    assert_eq!(stdout(&p, "screencap -p /sdcard/s.png"), "");
    assert_eq!(p.shell("cat /sdcard/s.png").stdout, png);
}

#[test]
fn uiautomator_dump_to_file_and_tty() {
    let p = phone();
    assert_eq!(
        stdout(&p, "uiautomator dump"),
        "UI hierchary dumped to: /sdcard/window_dump.xml\n"
    );
    let xml = stdout(&p, "cat /sdcard/window_dump.xml");
    assert!(parse_uiautomator_xml(&xml).is_ok());
    let tty = stdout(&p, "uiautomator dump /dev/tty");
    let (xml_part, tail) = tty.split_at(tty.rfind("UI hierchary").unwrap());
    assert_eq!(tail, "UI hierchary dumped to: /dev/tty\n");
    assert_eq!(xml_part, xml);
}

#[test]
fn apps_start_and_focus_is_reported() {
    let p = phone();
    assert!(stdout(&p, "pm list packages").contains("package:com.btl.notes\n"));
    assert_eq!(
        stdout(&p, "monkey -p com.btl.notes 1"),
        "Events injected: 1\n"
    );
    assert!(
        stdout(&p, "dumpsys window").contains("mCurrentFocus=Window{7e1d2a0 u0 com.btl.notes/")
    );
    assert!(
        stdout(&p, "am start -n com.btl.settings/.MainActivity")
            .starts_with("Starting: Intent { cmp=com.btl.settings/.MainActivity }")
    );
    assert!(stdout(&p, "dumpsys window").contains("u0 com.btl.settings/"));
    // Monkey.java: no launcher activity of an allowed package prints one
    // line on stdout and exits with -4.
    let missing = p.shell("monkey -p com.nope 1");
    assert_eq!(missing.exit_code, 252);
    assert_eq!(
        String::from_utf8(missing.stdout).unwrap(),
        "** No activities found to run, monkey aborted.\n"
    );
    assert!(missing.stderr.is_empty());
}

#[test]
fn settings_round_trip() {
    let p = phone();
    assert_eq!(
        stdout(
            &p,
            "settings put global btl_test 7; settings get global btl_test"
        ),
        "7\n"
    );
    assert_eq!(stdout(&p, "settings get global no_such_key"), "null\n");
}

#[test]
fn bad_arguments_are_usage_errors_not_panics() {
    let p = phone();
    for line in [
        "input tap x y",
        "input swipe 1 2",
        "input",
        "input keyevent NOPE",
        "wm",
        "am start",
        "uiautomator",
        "settings get",
        "screencap -p /sdcard",
    ] {
        let out = p.shell(line);
        assert_ne!(out.exit_code, 0, "{line}");
        assert!(!out.stderr.is_empty(), "{line}");
    }
    let out = p.shell("am broadcast -a ADB_INPUT_B64 --es msg !!!");
    assert_ne!(out.exit_code, 0);
}

#[test]
fn pipes_feed_each_command_the_output_before_it() {
    let p = phone();
    assert_eq!(
        stdout(&p, "dumpsys window | grep mCurrentFocus | wc -l"),
        "1\n"
    );
    assert_eq!(stdout(&p, "seq 1 5 | tail -n 2 | head -1"), "4\n");
    assert_eq!(
        stdout(&p, "wm size | sed 's/.*: //' | tr x ' '"),
        "1080 2400\n"
    );
    assert_eq!(stdout(&p, "echo a:b:c | cut -d: -f2"), "b\n");
    // The status is the last command's; `!` negates it.
    assert_eq!(stdout(&p, "echo x | grep -q y; echo $?"), "1\n");
    assert_eq!(stdout(&p, "! echo x | grep -q y; echo $?"), "0\n");
}

#[test]
fn sh_c_runs_a_script_in_a_child_shell() {
    let p = phone();
    assert_eq!(stdout(&p, "sh -c 'echo a; echo b'"), "a\nb\n");
    assert_eq!(
        stdout(&p, "/system/bin/sh -c 'exit 3'; echo rc=$?"),
        "rc=3\n"
    );
    assert_eq!(stdout(&p, "echo 'echo from stdin' | sh"), "from stdin\n");
    // `exit` ends the whole line; the child's variables stay in the child.
    assert_eq!(
        stdout(&p, "A=1; sh -c 'A=2'; echo $A; exit 0; echo never"),
        "1\n"
    );
}

#[test]
fn both_streams_keep_the_order_of_their_writes() {
    let p = phone();
    let out = p.shell("echo one; echo two >&2; nosuch; echo three; echo X4EXIT:$?");
    assert_eq!(
        String::from_utf8(out.interleaved()).unwrap(),
        "one\ntwo\n/system/bin/sh: nosuch: inaccessible or not found\nthree\nX4EXIT:0\n"
    );
    assert_eq!(out.stdout, b"one\nthree\nX4EXIT:0\n");
    let out = p.shell("ls /nosuch /sdcard/Download 2>&1 >/dev/null");
    assert_eq!(out.stdout, b"ls: /nosuch: No such file or directory\n");
}

/// A sed that stops on a line keeps what it wrote before it: toybox
/// writes each line as it goes, then fails with its message and status 1.
#[test]
fn a_failing_sed_keeps_the_lines_it_wrote() {
    let p = phone();
    let out = p.shell(r"printf 'a\nbc\nd\n' | sed 's/c/\1/'; echo rc=$?");
    assert_eq!(
        String::from_utf8(out.interleaved()).unwrap(),
        "a\nsed: no s//\\1/\nrc=1\n"
    );
}

#[test]
fn commands_are_found_by_name_and_by_path() {
    let p = phone();
    assert_eq!(stdout(&p, "/system/bin/echo hi"), "hi\n");
    assert_eq!(
        stdout(&p, "which screencap md5sum"),
        "/system/bin/screencap\n/system/bin/md5sum\n"
    );
    let png = p.shell("/system/bin/screencap -p").stdout;
    assert!(png.starts_with(b"\x89PNG"));
    let missing = p.shell("/system/bin/frobnicate");
    assert_eq!(missing.exit_code, 127);
    stdout(&p, "echo 'echo hi' > /data/local/tmp/run.sh");
    let refused = p.shell("/data/local/tmp/run.sh");
    assert_eq!(refused.exit_code, 126);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("Permission denied"));
}

#[test]
fn files_variables_and_the_working_directory() {
    let p = phone();
    assert_eq!(
        stdout(
            &p,
            "cd /data/local/tmp && printf 'abc' > f && cp f g && mv g h && ls && cat h"
        ),
        "f\nh\nabc"
    );
    // md5("abc") and sha1("abc") from RFC 1321 and FIPS 180-1.
    assert_eq!(
        stdout(&p, "md5sum /data/local/tmp/f"),
        "900150983cd24fb0d6963f7d28e17f72  /data/local/tmp/f\n"
    );
    assert_eq!(
        stdout(&p, "printf abc | sha1sum"),
        "a9993e364706816aba3e25717850c26c9cd0d89d  -\n"
    );
    assert_eq!(
        stdout(&p, "stat -c '%s %a %n' /data/local/tmp/f"),
        "3 666 /data/local/tmp/f\n"
    );
    assert_eq!(stdout(&p, "X=5; echo ${X}0 $X"), "50 5\n");
    assert_eq!(stdout(&p, "false; X=1; echo $?"), "0\n");
    assert_eq!(stdout(&p, "echo $TMPDIR"), "/data/local/tmp\n");
    let bad = p.shell("echo x > /nosuch/dir/f");
    assert_eq!(bad.exit_code, 1);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("can't create /nosuch/dir/f"));
    assert_eq!(stdout(&p, "cat < /data/local/tmp/f | wc -c"), "3\n");
}

#[test]
fn system_tools_answer_like_toybox() {
    let p = phone();
    assert_eq!(stdout(&p, "whoami"), "shell\n");
    assert!(stdout(&p, "id").starts_with("uid=2000(shell) gid=2000(shell)"));
    let secs: u64 = stdout(&p, "date +%s").trim().parse().unwrap();
    assert_eq!(secs, p.with_phone(|phone| phone.now_ms()) / 1000);
    let ps = stdout(&p, "ps -A");
    assert!(ps.starts_with("USER "), "{ps}");
    assert!(ps.contains(" system_server\n"));
    let pid = stdout(&p, "pidof system_server");
    assert!(ps.contains(&format!(" {} ", pid.trim())), "{ps}");
    assert_eq!(p.shell("pidof nosuch").exit_code, 1);
    // Without -A only the shell's own; -p picks by id.
    let own = stdout(&p, "ps");
    assert_eq!(own.lines().count(), 2, "{own}");
    assert!(own.ends_with(" sh\n"), "{own}");
    let one = stdout(&p, &format!("ps -p {}", pid.trim()));
    assert_eq!(one.lines().count(), 2, "{one}");
    assert!(one.ends_with(" system_server\n"), "{one}");
    assert_eq!(p.shell("ps -x").exit_code, 1);
    stdout(&p, "setprop debug.btl.x 7");
    assert_eq!(stdout(&p, "getprop debug.btl.x"), "7\n");
}

/// The lines client libraries parse for the top activity and the rotation.
#[test]
fn dumpsys_reports_the_resumed_activity_and_the_rotation() {
    let p = phone();
    let top = stdout(&p, "dumpsys activity top | grep ACTIVITY");
    let focus = p.with_phone(|phone| phone.focused_window());
    let package = focus.split('/').next().unwrap();
    let pid = stdout(&p, &format!("pidof {package}"));
    assert_eq!(
        top,
        format!("  ACTIVITY {focus} 7e1d2a0 pid={}\n", pid.trim())
    );
    assert!(stdout(&p, "dumpsys activity activities").contains(&format!(
        "mResumedActivity: ActivityRecord{{3f9b1c2 u0 {focus} t12}}"
    )));
    assert!(stdout(&p, "dumpsys display").contains(", orientation=0, "));
}

/// docs/virtual-phone.md names every tool the shell has, so the page
/// cannot fall behind the list.
#[test]
fn the_docs_name_every_tool() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/virtual-phone.md");
    let docs = std::fs::read_to_string(path).unwrap();
    let named: std::collections::BTreeSet<&str> = docs
        .split('`')
        .skip(1)
        .step_by(2)
        .flat_map(|code| code.split(|c: char| c.is_whitespace() || c == '|' || c == '/'))
        .collect();
    let missing: Vec<&&str> = super::commands::TOOLS
        .iter()
        .filter(|tool| !named.contains(**tool))
        .collect();
    assert!(missing.is_empty(), "{path} does not name {missing:?}");
}

/// Why a line stopped, each bound named with its size: 256 MiB written,
/// 1 GiB of files read, 4096 commands.
const OVER_WRITTEN: &str = "over the virtual phone's bound for one line: 268435456 bytes written";
const OVER_READ: &str =
    "over the virtual phone's bound for one line: 1073741824 bytes of files read";
const OVER_READ_TO_WRITE: &str = "over the virtual phone's bound for one line: 268435456 bytes \
     written (a tool reads no more than its line may still write)";
const OVER_COMMANDS: &str = "over the virtual phone's bound for one line: 4096 commands";

/// A line of many commands each within the text tools' budget fails once
/// their output together passes the line's (256 MiB = 268,435,456 bytes:
/// sixteen fields of 16,000,000 fit, the seventeenth does not), whether
/// the commands follow each other, share a pipe or run in `sh -c`; and a
/// redirection past the phone's storage fails as on a full phone, its
/// file left empty.
#[test]
fn a_line_and_the_storage_have_their_bounds() {
    let p = phone();
    let field = "printf '%16000000s' x";
    let over = format!("/system/bin/sh: {OVER_WRITTEN}\n");
    let sixteen = vec![field; 16].join("; ");
    for line in [
        format!("{sixteen}; {field}; echo never"),
        format!("{sixteen}; {field} | wc -c; echo never"),
        format!("sh -c \"{sixteen}; {field}\"; echo never"),
    ] {
        let out = p.shell(&line);
        assert_eq!(String::from_utf8_lossy(&out.stderr), over, "{line}");
        assert_eq!(out.stdout.len(), 16 * 16_000_000, "{line}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("never"));
    }
    // A script that runs itself four times at each of 16 levels would run
    // 4^16 shells; the line stops at 4096 commands. Each `sh` counts when
    // it ends: the i-th innermost one (refused, 16 deep) brings the count to
    // i + i/4 + i/16 + … (the enclosing ones it completes). After i = 3072
    // that is 3072 + 768 + 192 + 48 + 12 + 3 = 4095; the 3073rd is the
    // 4096th command, and the 3074th, the 4097th, ends the line.
    p.shell("echo 'sh /sdcard/s; sh /sdcard/s; sh /sdcard/s; sh /sdcard/s' > /sdcard/s");
    let out = p.shell("sh /sdcard/s; echo never");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.ends_with(&format!("/system/bin/sh: {OVER_COMMANDS}\n")),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("nested more than 16 deep").count(),
        3074,
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("never"));
    // `cat` of a file again and again stops before reading more than the
    // line may still write: 17 times 16,000,000 bytes would be.
    p.shell("printf '%16000000s' x > /sdcard/big");
    let out = p.shell(&format!("cat{}", " /sdcard/big".repeat(17)));
    assert_eq!(out.stdout.len(), 16 * 16_000_000);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("cat: /sdcard/big: {OVER_READ_TO_WRITE}\n")
    );
    // Nearly full (zeroed pages: the gigabyte is never touched).
    assert_eq!(stdout(&p, "rm /sdcard/big /sdcard/s; echo $?"), "0\n");
    let full = crate::sim::vfs::CAPACITY - 10;
    p.write_file("/sdcard/big", 0o644, 0, vec![0; full])
        .unwrap();
    let out = p.shell("printf '%20s' x > /sdcard/f; echo $?");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "/system/bin/sh: can't create /sdcard/f: No space left on device\n"
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1\n");
    // `>` empties its file when it opens it, before the command runs.
    assert_eq!(stdout(&p, "cat /sdcard/f"), "");
    assert_eq!(stdout(&p, "printf '%10s' x > /sdcard/f; echo $?"), "0\n");
}

/// `cat` of a file as large as the largest push (256 MiB) prints it whole:
/// the line's own words are not charged against what it may write.
#[test]
fn the_largest_push_can_be_read_back_whole() {
    let p = phone();
    let size = crate::sim::shell::LINE_OUTPUT;
    p.write_file("/sdcard/big", 0o644, 0, vec![0; size])
        .unwrap();
    let out = p.shell("cat /sdcard/big");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert_eq!(out.stdout.len(), size);
}

/// What a line writes counts wherever it goes, `/dev/null` and files too,
/// and what it reads counts whoever reads it: otherwise 4096 commands of
/// 16 MB each, or a 600 MB file read again and again, would hold the phone
/// for a minute. (600 MiB = 629,145,600 bytes: one read fits the line's
/// 1 GiB, two do not.)
#[test]
fn writes_and_reads_anywhere_count_against_the_line() {
    let p = phone();
    let over = format!("/system/bin/sh: {OVER_WRITTEN}\n");
    let field = "printf '%16000000s' x";
    for sink in ["/dev/null", "/sdcard/f"] {
        let line = format!(
            "{}; echo never",
            vec![format!("{field} > {sink}"); 17].join("; ")
        );
        let out = p.shell(&line);
        assert_eq!(String::from_utf8_lossy(&out.stderr), over, "{sink}");
        assert_eq!(out.stdout, b"", "{sink}");
    }
    // The refused seventeenth write does not reach its file: sixteen
    // appends of 16,000,000 bytes are there, not seventeen.
    let appends = vec![format!("{field} >> /sdcard/g"); 17].join("; ");
    p.shell(&appends);
    assert_eq!(stdout(&p, "wc -c < /sdcard/g; rm /sdcard/g"), "256000000\n");
    p.write_file("/sdcard/big", 0o644, 0, vec![0; 600 << 20])
        .unwrap();
    let out = p.shell("wc -c < /sdcard/big; wc -c < /sdcard/big; echo never");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "629145600\n");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("/system/bin/sh: {OVER_READ}\n")
    );
    // A tool may read no more than the line may still write (its output
    // grows with what it reads); a refused read ends the line.
    let out = p.shell("wc -c /sdcard/big; echo never");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("wc: /sdcard/big: {OVER_READ_TO_WRITE}\n")
    );
    assert_eq!(out.stdout, b"");
    // A copy reads its source and writes nothing: five of 200 MiB fit in
    // the line's 1 GiB of reading, the sixth does not.
    p.write_file("/sdcard/s", 0o644, 0, vec![0; 200 << 20])
        .unwrap();
    let copy = "cp /sdcard/s /sdcard/s";
    let out = p.shell(&format!("{}; echo never", [copy; 6].join("; ")));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("cp: {OVER_READ}\n")
    );
    assert_eq!(out.stdout, b"");
    assert_eq!(stdout(&p, &[copy; 5].join("; ")), "");
}

/// `touch` moves an existing file's time and keeps its data; a missing
/// file is created empty.
#[test]
fn touch_keeps_what_a_file_holds() {
    let p = phone();
    p.write_file("/sdcard/f", 0o600, 1, b"data".to_vec())
        .unwrap();
    assert_eq!(
        stdout(&p, "touch /sdcard/f /sdcard/g; cat /sdcard/f /sdcard/g"),
        "data"
    );
    let f = p.stat("/sdcard/f").unwrap();
    assert_eq!((f.mode, f.size), (0o100600, 4));
    assert_ne!(f.mtime, 1);
    assert_eq!(p.stat("/sdcard/g").unwrap().size, 0);
}

/// Expanding a variable counts against what the line may write before it
/// is made: `A=$A$A` doubles A, so after `A=x` (the line's own text, not
/// counted) and k doublings the line has spent 2 + 4 + … + 2^k =
/// 2^(k+1) - 2 bytes, and `echo done` 5 more (its output). After 26
/// doublings that fits in 256 MiB = 2^28 bytes; after 27, 2^28 - 2 + 5
/// does not (forty doublings would ask for a terabyte).
#[test]
fn a_variable_cannot_outgrow_the_line() {
    let p = phone();
    let doublings = |k: usize| format!("A=x;{}", " A=$A$A;".repeat(k));
    let out = p.shell(&format!("{} echo never", doublings(40)));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("/system/bin/sh: {OVER_WRITTEN}\n")
    );
    assert_eq!(out.stdout, b"");
    let out = p.shell(&format!("{} echo done", doublings(27)));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("/system/bin/sh: {OVER_WRITTEN}\n")
    );
    let out = p.shell(&format!("{} echo done", doublings(26)));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
    assert_eq!(
        stdout(&p, &format!("{} echo $A | wc -c", doublings(20))),
        "1048577\n"
    );
}

/// Paths the kernel would refuse as too long fail as it words it, so a
/// line of `a/a/…` cannot nest the tree half a million deep.
#[test]
fn directories_nest_no_deeper_than_a_path_reaches() {
    let p = phone();
    let deep = format!("/sdcard{}", "/a".repeat(3000));
    let out = p.shell(&format!("mkdir -p {deep}; echo $?"));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("mkdir: {deep}: File name too long\n")
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1\n");
    assert_eq!(
        stdout(&p, "ls /sdcard/a 2>&1; echo $?"),
        "ls: /sdcard/a: No such file or directory\n1\n"
    );
}

/// pm's install sessions fail as PackageInstallerService fails them: the
/// 1,025th open session, and staged bytes past the storage left (a session
/// holds its bytes until it ends), each thrown with its exception's class.
#[test]
fn install_sessions_are_bounded_as_on_a_phone() {
    let p = phone();
    let created = |line: &str| -> u32 {
        let out = stdout(&p, line);
        let id = out
            .strip_prefix("Success: created install session [")
            .and_then(|rest| rest.strip_suffix("]\n"))
            .unwrap_or_else(|| panic!("{out}"));
        id.parse().unwrap()
    };
    let first = created("pm install-create");
    for _ in 1..1024 {
        created("pm install-create");
    }
    // What pm prints for a command that threw, and its status.
    let throws = |line: &str, command: &str, thrown: &str| {
        let out = p.shell(line);
        assert_eq!(out.exit_code, 255, "{line}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!("\nException occurred while executing '{command}':\n{thrown}\n")
        );
    };
    throws(
        "pm install-create",
        "install-create",
        "java.lang.IllegalStateException: Too many active sessions for UID 2000",
    );
    assert_eq!(
        stdout(&p, &format!("pm install-abandon {first}")),
        "Success\n"
    );
    let id = created("pm install-create");
    // 20 bytes left; a 25-byte write does not fit, a 20-byte one does and
    // leaves no room for a file.
    let full = crate::sim::vfs::CAPACITY - 20;
    p.write_file("/data/local/tmp/big", 0o644, 0, vec![0; full])
        .unwrap();
    throws(
        &format!("printf '%25s' x | pm install-write -S 25 {id} base -"),
        "install-write",
        "java.io.IOException: write failed: ENOSPC (No space left on device)",
    );
    assert_eq!(
        stdout(
            &p,
            &format!("printf '%20s' x | pm install-write -S 20 {id} base -")
        ),
        "Success: streamed 20 bytes\n"
    );
    let out = p.shell("echo x > /data/local/tmp/f");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("No space left on device"),
        "{out:?}"
    );
    assert_eq!(stdout(&p, &format!("pm install-abandon {id}")), "Success\n");
    assert_eq!(
        stdout(&p, "echo x > /data/local/tmp/f; cat /data/local/tmp/f"),
        "x\n"
    );
}
