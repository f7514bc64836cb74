//! Debian's `adb` installing APKs made by Android's own tools on the
//! virtual phone (`btl sim serve`): `adb install` (streamed), `adb
//! install-multiple` (a session), `pm` over `adb shell`, and the refusals a
//! device gives. The APKs are tests/data/apk's (scripts/make-apk-fixtures).

use crate::util::{AdbServer, ServedPhone};

const PKG: &str = "com.example.btlcheck";

fn apk(name: &str) -> String {
    format!("{}/../tests/data/apk/{name}", env!("CARGO_MANIFEST_DIR"))
}

struct Rig {
    adb: AdbServer,
    phone: ServedPhone,
}

impl Rig {
    fn new() -> Rig {
        let phone = ServedPhone::start(&[]);
        let adb = AdbServer::start();
        let out = adb.adb(["connect", &phone.serial]);
        assert!(out.status.success(), "{out:?}");
        Rig { adb, phone }
    }

    /// `adb -s SERIAL ARGS…`: (status, stdout, stderr).
    fn adb(&self, args: &[&str]) -> (Option<i32>, String, String) {
        let out = self
            .adb
            .adb(["-s", self.phone.serial.as_str()].iter().chain(args));
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn shell(&self, line: &str) -> (Option<i32>, String, String) {
        self.adb(&["shell", line])
    }
}

#[test]
fn adb_install_records_the_package_and_uninstall_removes_it() {
    let rig = Rig::new();
    let (status, out, err) = rig.adb(&["install", &apk("signed-v2.apk")]);
    assert_eq!(status, Some(0), "{out}{err}");
    assert!(out.ends_with("Success\n"), "{out}");

    let (_, listed, _) = rig.shell("pm list packages -3");
    assert_eq!(listed, format!("package:{PKG}\n"));
    let (status, path, _) = rig.shell(&format!("pm path {PKG}"));
    assert_eq!(status, Some(0));
    let path = path.trim().strip_prefix("package:").expect("package: line");
    assert!(
        path.starts_with("/data/app/~~") && path.ends_with("/base.apk"),
        "{path}"
    );

    // The installed APK is the file that was sent.
    let dir = tempfile::tempdir().unwrap();
    let pulled = dir.path().join("base.apk");
    let (status, ..) = rig.adb(&["pull", path, pulled.to_str().unwrap()]);
    assert_eq!(status, Some(0));
    assert_eq!(
        std::fs::read(&pulled).unwrap(),
        std::fs::read(apk("signed-v2.apk")).unwrap()
    );

    // An older version needs -d (pm's own words for the refusal).
    let (status, out, err) = rig.adb(&["install", &apk("signed-v2-older.apk")]);
    assert_ne!(status, Some(0));
    // adb prints pm's failure on stderr: "adb: failed to install …: Failure […]".
    assert!(
        err.contains(
            "Failure [INSTALL_FAILED_VERSION_DOWNGRADE: Downgrade detected: Update version code 2 \
             is older than current 3]"
        ),
        "{out}{err}"
    );
    let (status, out, err) = rig.adb(&["install", "-d", &apk("signed-v2-older.apk")]);
    assert_eq!(status, Some(0), "{out}{err}");
    let (_, listed, _) = rig.shell("pm list packages --show-versioncode example");
    assert_eq!(listed, format!("package:{PKG} versionCode:2\n"));

    let (status, out, _) = rig.adb(&["uninstall", PKG]);
    assert_eq!((status, out.as_str()), (Some(0), "Success\n"));
    assert_eq!(
        rig.shell(&format!("pm path {PKG}")),
        (Some(1), String::new(), String::new())
    );
    let (status, out, _) = rig.shell(&format!("pm uninstall {PKG}"));
    assert_eq!(
        (status, out.as_str()),
        (Some(1), "Failure [DELETE_FAILED_INTERNAL_ERROR]\n")
    );
}

#[test]
fn adb_install_multiple_goes_through_a_session() {
    let rig = Rig::new();
    let (status, out, err) = rig.adb(&["install-multiple", &apk("signed-v1.apk")]);
    assert_eq!(status, Some(0), "{out}{err}");
    assert!(out.ends_with("Success\n"), "{out}");
    let (_, listed, _) = rig.shell("pm list packages -3");
    assert_eq!(listed, "package:com.example.btlcheck.v1\n");
}

#[test]
fn pm_install_from_the_phone_and_its_refusals() {
    let rig = Rig::new();
    let (status, ..) = rig.adb(&["push", &apk("signed-v2.apk"), "/data/local/tmp/app.apk"]);
    assert_eq!(status, Some(0));
    assert_eq!(
        rig.shell("pm install -r -t -g /data/local/tmp/app.apk"),
        (Some(0), "Success\n".into(), String::new())
    );

    // The phone runs no code from an APK: its activity is as good as absent.
    let (_, _, err) = rig.shell(&format!("am start -n {PKG}/.MainActivity"));
    assert!(
        err.contains(&format!(
            "Error: Activity class {{{PKG}/{PKG}.MainActivity}} does not exist."
        )),
        "{err}"
    );

    // Unsigned: refused when the session commits, on stdout, status 1.
    let (status, ..) = rig.adb(&["push", &apk("unsigned.apk"), "/data/local/tmp/u.apk"]);
    assert_eq!(status, Some(0));
    let (status, out, _) = rig.shell("pm install /data/local/tmp/u.apk");
    assert_eq!(status, Some(1));
    assert!(
        out.starts_with("Failure [INSTALL_PARSE_FAILED_NO_CERTIFICATES: Package /data/app/vmdl")
            && out.ends_with(".tmp/base.apk has no certificates at entry AndroidManifest.xml]\n"),
        "{out}"
    );

    // Not an APK: the parse before staging throws.
    rig.shell("echo hello > /data/local/tmp/text.apk");
    let (status, _, err) = rig.shell("pm install /data/local/tmp/text.apk");
    assert_eq!(status, Some(255));
    assert!(
        err.contains(
            "java.lang.IllegalArgumentException: Error: Failed to parse APK file: \
             /data/local/tmp/text.apk: Failed to parse /data/local/tmp/text.apk"
        ),
        "{err}"
    );

    // A missing file, as ShellCommand and pm word it.
    let (status, _, err) = rig.shell("pm install /sdcard/missing.apk");
    assert_eq!(status, Some(255));
    assert!(
        err.starts_with(
            "Error: Unable to open file: /sdcard/missing.apk\n\
             Consider using a file under /data/local/tmp/\n\
             Error: Can't open file: /sdcard/missing.apk\n\n\
             Exception occurred while executing 'install':\n"
        ),
        "{err}"
    );

    // Never a usage text of another command.
    let (_, out, err) = rig.shell("pm clear com.example.nothing");
    assert_eq!((out.as_str(), err.as_str()), ("", "Failed\n"));
}

#[test]
fn wm_overrides_and_rotation_change_the_screen() {
    let rig = Rig::new();
    assert_eq!(rig.shell("wm size").1, "Physical size: 1080x2400\n");
    rig.shell("wm size 720x1600; wm density 320");
    assert_eq!(
        rig.shell("wm size").1,
        "Physical size: 1080x2400\nOverride size: 720x1600\n"
    );
    assert_eq!(
        rig.shell("wm density").1,
        "Physical density: 420\nOverride density: 320\n"
    );
    let png = |rig: &Rig| {
        let out = rig
            .adb
            .adb(["-s", &rig.phone.serial, "exec-out", "screencap", "-p"]);
        let image = image::load_from_memory(&out.stdout).expect("a PNG");
        (image.width(), image.height())
    };
    assert_eq!(png(&rig), (720, 1600));
    assert_eq!(rig.shell("wm size bad").2, "Error: bad size bad\n");

    rig.shell("wm size reset; wm density reset");
    rig.shell("settings put system user_rotation 1");
    assert_eq!(
        png(&rig),
        (2400, 1080),
        "accelerometer_rotation is 0 by default"
    );
    // Android 14 shows the turn in the touch viewport only; an
    // orientation-aware touch screen keeps InputDeviceOrientation 0.
    let (_, input, _) = rig.shell("dumpsys input | grep -e Orientation -e orientation=");
    let lines: Vec<&str> = input.lines().map(str::trim).collect();
    assert_eq!(lines.len(), 2, "{input}");
    assert!(
        lines[0].contains("orientation=1, logicalFrame=[0, 0, 2400, 1080]"),
        "{input}"
    );
    assert_eq!(lines[1], "InputDeviceOrientation: 0");
    let (_, bounds, _) = rig.shell("dumpsys input | grep DisplayBounds");
    assert_eq!(bounds.trim(), "DisplayBounds: 1080x2400");
    let (_, display, _) = rig.shell("dumpsys window | grep mRotation");
    assert!(display.trim().starts_with("mRotation=1 "), "{display}");
    rig.shell("settings put system accelerometer_rotation 1");
    assert_eq!(
        png(&rig),
        (1080, 2400),
        "no sensor: upright with auto-rotate"
    );
}
