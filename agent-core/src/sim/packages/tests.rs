use super::*;
use crate::sim::apk::tests::fixture;

const PKG: &str = "com.example.btlcheck";

#[test]
fn an_installed_apk_lands_under_data_app_and_is_recorded() {
    let (mut packages, mut fs) = (Packages::default(), Vfs::default());
    let apk = fixture("signed-v2.apk");
    let installed = packages.install(&mut fs, &[], apk.clone(), InstallFlags::default());
    assert_eq!(installed.as_deref(), Ok(PKG));
    let path = &packages.get(PKG).unwrap().path;
    // /data/app/~~<22 base64 chars>==/<package>-<22 base64 chars>==/base.apk
    let parts: Vec<&str> = path.split('/').collect();
    assert_eq!(parts[..3], ["", "data", "app"]);
    assert!(parts[3].starts_with("~~") && parts[3].ends_with("==") && parts[3].len() == 26);
    let dir = parts[4].strip_prefix(&format!("{PKG}-")).unwrap();
    assert!(dir.ends_with("==") && dir.len() == 24, "{dir}");
    assert_eq!(parts[5], "base.apk");
    assert_eq!(fs.read(path), Ok(apk));
    assert_eq!(packages.iter().count(), 1);
}

#[test]
fn reinstalling_replaces_and_a_downgrade_needs_the_flag() {
    let (mut packages, mut fs) = (Packages::default(), Vfs::default());
    let flags = InstallFlags::default();
    packages
        .install(&mut fs, &[], fixture("signed-v2.apk"), flags)
        .unwrap();
    let first = packages.get(PKG).unwrap().path.clone();
    packages
        .install(&mut fs, &[], fixture("signed-v2.apk"), flags)
        .unwrap();
    let second = packages.get(PKG).unwrap().path.clone();
    assert_ne!(first, second, "a new install gets a new directory");
    assert!(fs.stat(&first).is_none(), "the old APK is gone");

    assert_eq!(
        packages.install(&mut fs, &[], fixture("signed-v2-older.apk"), flags),
        Err(
            "INSTALL_FAILED_VERSION_DOWNGRADE: Downgrade detected: Update version code 2 is \
             older than current 3"
                .into()
        )
    );
    assert_eq!(packages.get(PKG).unwrap().manifest.version_code, 3);
    let downgrade = InstallFlags {
        allow_downgrade: true,
        ..InstallFlags::default()
    };
    packages
        .install(&mut fs, &[], fixture("signed-v2-older.apk"), downgrade)
        .unwrap();
    assert_eq!(packages.get(PKG).unwrap().manifest.version_code, 2);
}

#[test]
fn a_system_package_cannot_be_replaced() {
    let (mut packages, mut fs) = (Packages::default(), Vfs::default());
    let result = packages.install(
        &mut fs,
        &[PKG.to_string()],
        fixture("signed-v2.apk"),
        InstallFlags::default(),
    );
    assert!(
        result
            .unwrap_err()
            .starts_with("INSTALL_FAILED_UPDATE_INCOMPATIBLE: Package com.example.btlcheck ")
    );
    assert!(packages.get(PKG).is_none());
}

#[test]
fn refused_apks_leave_nothing_behind() {
    let (mut packages, mut fs) = (Packages::default(), Vfs::default());
    let result = packages.install(
        &mut fs,
        &[],
        fixture("unsigned.apk"),
        InstallFlags::default(),
    );
    assert!(
        result
            .unwrap_err()
            .starts_with("INSTALL_PARSE_FAILED_NO_CERTIFICATES: ")
    );
    assert_eq!(packages.iter().count(), 0);
    assert!(
        fs.list("/data/app")
            .is_none_or(|entries| entries.is_empty())
    );
}

#[test]
fn uninstall_removes_the_apk() {
    let (mut packages, mut fs) = (Packages::default(), Vfs::default());
    packages
        .install(
            &mut fs,
            &[],
            fixture("signed-v1.apk"),
            InstallFlags::default(),
        )
        .unwrap();
    let path = packages
        .get("com.example.btlcheck.v1")
        .unwrap()
        .path
        .clone();
    assert!(packages.uninstall(&mut fs, "com.example.btlcheck.v1"));
    assert!(fs.stat(&path).is_none());
    assert!(!packages.uninstall(&mut fs, "com.example.btlcheck.v1"));
}

#[test]
fn a_session_installs_its_base_apk_on_commit() {
    let (mut packages, mut fs) = (Packages::default(), Vfs::default());
    let id = packages.create_session(InstallFlags::default()).unwrap();
    let other = packages.create_session(InstallFlags::default()).unwrap();
    assert_ne!(id, other);
    packages
        .write_session(&mut fs, id, "base", fixture("signed-v2.apk"))
        .unwrap();
    // A split written after the base is not installed in its place, though
    // its name sorts first.
    packages
        .write_session(&mut fs, id, "arm64", b"not an apk".to_vec())
        .unwrap();
    assert!(
        packages.get(PKG).is_none(),
        "nothing installed before commit"
    );
    assert_eq!(
        packages.commit_session(&mut fs, &[], id).as_deref(),
        Ok(PKG)
    );
    assert!(packages.get(PKG).is_some());
    assert_eq!(
        packages.commit_session(&mut fs, &[], id),
        Err(format!("Error: Failed to open session {id}"))
    );
    assert_eq!(
        packages.commit_session(&mut fs, &[], other),
        Err("INSTALL_FAILED_INVALID_APK: No packages staged".into())
    );
    assert_eq!(
        packages.write_session(&mut fs, other, "base", vec![]),
        Err(SessionError::Unknown(other))
    );
    let third = packages.create_session(InstallFlags::default()).unwrap();
    assert_eq!(packages.abandon_session(&mut fs, third), Ok(()));
    assert_eq!(
        packages.abandon_session(&mut fs, third),
        Err(SessionError::Unknown(third))
    );
}

/// A session's APKs take storage until it ends, as staged files on a
/// phone's data partition do: written past what is left they are refused,
/// a file cannot take their room, and abandoning gives it back. A name
/// written again replaces its bytes rather than adding to them.
#[test]
fn a_session_holds_its_bytes_in_storage_until_it_ends() {
    let (mut packages, mut fs) = (Packages::default(), Vfs::default());
    let id = packages.create_session(InstallFlags::default()).unwrap();
    let half = crate::sim::vfs::CAPACITY / 2;
    // Zeroed pages: the gigabyte is never touched.
    packages
        .write_session(&mut fs, id, "a", vec![0; half])
        .unwrap();
    packages
        .write_session(&mut fs, id, "a", vec![0; half])
        .unwrap();
    assert_eq!(fs.free(), crate::sim::vfs::CAPACITY - half);
    packages
        .write_session(&mut fs, id, "b", vec![0; half - 10])
        .unwrap();
    assert_eq!(fs.free(), 10);
    assert_eq!(
        packages.write_session(&mut fs, id, "c", vec![0; 11]),
        Err(SessionError::NoSpace)
    );
    assert!(fs.write("/sdcard/f", vec![0; 11], 0o644, 0).is_err());
    assert_eq!(fs.free(), 10);
    packages.abandon_session(&mut fs, id).unwrap();
    assert_eq!(fs.free(), crate::sim::vfs::CAPACITY);
}

/// At most 1,024 sessions are open at once, as PackageInstallerService
/// allows the shell; ending one makes room for another.
#[test]
fn no_more_than_1024_sessions_are_open() {
    let (mut packages, mut fs) = (Packages::default(), Vfs::default());
    let ids: Vec<u32> = (0..1024)
        .map(|_| packages.create_session(InstallFlags::default()).unwrap())
        .collect();
    assert_eq!(
        packages.create_session(InstallFlags::default()),
        Err(SessionError::TooMany)
    );
    packages.abandon_session(&mut fs, ids[0]).unwrap();
    assert!(packages.create_session(InstallFlags::default()).is_ok());
}

/// An update that does not fit, even in the old version's place, is
/// refused and the old version stays installed, as on a full phone; one
/// that fits in the old version's place replaces it.
#[test]
fn an_update_that_does_not_fit_keeps_the_old_version() {
    let (mut packages, mut fs) = (Packages::default(), Vfs::default());
    let flags = InstallFlags::default();
    let apk = fixture("signed-v2.apk");
    packages.install(&mut fs, &[], apk.clone(), flags).unwrap();
    let old = packages.get(PKG).unwrap().path.clone();
    // Zeroed pages: the gigabyte is never touched.
    let filler = crate::sim::vfs::CAPACITY - apk.len() - 1;
    fs.write("/sdcard/filler", vec![0; filler], 0o644, 0)
        .unwrap();
    assert_eq!(fs.free(), 1);
    let mut bigger = apk.clone();
    bigger.extend_from_slice(&[0; 2]);
    let err = packages
        .install_read(&mut fs, &[], bigger, crate::sim::apk::read(&apk), flags)
        .unwrap_err();
    assert_eq!(
        err,
        format!(
            "INSTALL_FAILED_INSUFFICIENT_STORAGE: {} bytes do not fit in the {} left",
            apk.len() + 2,
            apk.len() + 1
        )
    );
    assert_eq!(packages.get(PKG).unwrap().path, old);
    assert_eq!(fs.read(&old), Ok(apk.clone()));
    packages.install(&mut fs, &[], apk.clone(), flags).unwrap();
    assert_ne!(packages.get(PKG).unwrap().path, old);
}
