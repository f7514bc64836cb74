use super::*;

/// APKs built by Debian's aapt and signed by apksigner (v2) and jarsigner
/// (v1); see scripts/make-apk-fixtures. The expected manifests are what
/// `aapt dump badging` prints for them.
/// An APK of tests/data/apk (built by scripts/make-apk-fixtures).
pub(crate) fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/../tests/data/apk/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn reads_the_manifest_of_a_v2_signed_apk() {
    assert_eq!(
        read(&fixture("signed-v2.apk")),
        Ok(Manifest {
            package: "com.example.btlcheck".into(),
            version_code: 3,
            version_name: Some("1.2".into()),
        })
    );
}

#[test]
fn reads_the_manifest_of_a_v1_signed_apk() {
    assert_eq!(
        read(&fixture("signed-v1.apk")),
        Ok(Manifest {
            package: "com.example.btlcheck.v1".into(),
            version_code: 7,
            version_name: Some("seven".into()),
        })
    );
}

#[test]
fn refuses_an_unsigned_apk_naming_its_package() {
    assert_eq!(
        read(&fixture("unsigned.apk")),
        Err(ApkError::NoCertificates)
    );
    assert_eq!(
        ApkError::NoCertificates.status("/data/app/vmdl7.tmp/base.apk"),
        "INSTALL_PARSE_FAILED_NO_CERTIFICATES: Package /data/app/vmdl7.tmp/base.apk has no \
         certificates at entry AndroidManifest.xml"
    );
}

#[test]
fn refuses_what_is_not_an_apk() {
    assert_eq!(read(b""), Err(ApkError::NotZip));
    assert_eq!(read(b"not a zip at all"), Err(ApkError::NotZip));
    let empty_zip = [b"PK\x05\x06".as_slice(), &[0; 18]].concat();
    assert_eq!(read(&empty_zip), Err(ApkError::NoManifest));
    assert_eq!(
        ApkError::NotZip.status("/data/app/vmdl7.tmp/base.apk"),
        "INSTALL_PARSE_FAILED_NOT_APK: Failed to parse /data/app/vmdl7.tmp/base.apk"
    );
}

/// Every cut of a real manifest fails cleanly, and none panics.
#[test]
fn truncated_manifests_are_refused() {
    let apk = fixture("signed-v2.apk");
    let mut zip = zip::ZipArchive::new(Cursor::new(&apk[..])).unwrap();
    let mut xml = Vec::new();
    zip.by_name("AndroidManifest.xml")
        .unwrap()
        .read_to_end(&mut xml)
        .unwrap();
    assert_eq!(
        parse_manifest(&xml).unwrap().package,
        "com.example.btlcheck"
    );
    for len in 0..xml.len() {
        let mut cut = xml[..len].to_vec();
        // The document's own size field still claims the whole file.
        if len >= 8 {
            cut[4..8].copy_from_slice(&(len as u32).to_le_bytes());
        }
        let _ = parse_manifest(&cut);
    }
    assert!(parse_manifest(&xml[..xml.len() / 2]).is_err());
}

fn u16le(v: u16) -> [u8; 2] {
    v.to_le_bytes()
}

fn u32le(v: u32) -> [u8; 4] {
    v.to_le_bytes()
}

/// `<manifest package="com.example.hand"/>` with a UTF-8 string pool (as
/// aapt2 writes), laid out by hand from ResourceTypes.h.
fn hand_made_utf8_manifest(package: &str) -> Vec<u8> {
    manifest_with_attributes(package, 1, 20)
}

/// The hand-made manifest with its package attribute `count` times, the
/// attributes declared `size` bytes each.
fn manifest_with_attributes(package: &str, count: u16, size: u16) -> Vec<u8> {
    let strings = ["manifest", "package", package];
    let mut pool_bytes = Vec::new();
    let mut offsets = Vec::new();
    for s in strings {
        offsets.push(pool_bytes.len() as u32);
        pool_bytes.extend([s.len() as u8, s.len() as u8]);
        pool_bytes.extend(s.as_bytes());
        pool_bytes.push(0);
    }
    while pool_bytes.len() % 4 != 0 {
        pool_bytes.push(0);
    }
    let strings_start = 28 + 4 * strings.len() as u32;
    let pool_size = strings_start + pool_bytes.len() as u32;
    let mut pool = Vec::new();
    pool.extend(u16le(0x0001));
    pool.extend(u16le(28));
    pool.extend(u32le(pool_size));
    pool.extend(u32le(strings.len() as u32));
    pool.extend(u32le(0)); // styles
    pool.extend(u32le(0x100)); // UTF8_FLAG
    pool.extend(u32le(strings_start));
    pool.extend(u32le(0));
    for o in offsets {
        pool.extend(u32le(o));
    }
    pool.extend(pool_bytes);

    let mut element = Vec::new();
    element.extend(u16le(0x0102));
    element.extend(u16le(16));
    element.extend(u32le(16 + 20 + 20 * u32::from(count)));
    element.extend(u32le(1)); // line
    element.extend(u32le(u32::MAX)); // comment
    element.extend(u32le(u32::MAX)); // namespace
    element.extend(u32le(0)); // "manifest"
    element.extend(u16le(20)); // attributeStart
    element.extend(u16le(size)); // attributeSize
    element.extend(u16le(count)); // attributeCount
    element.extend([0; 6]); // id, class, style indices
    for _ in 0..count {
        element.extend(u32le(u32::MAX)); // namespace
        element.extend(u32le(1)); // "package"
        element.extend(u32le(2)); // raw value
        element.extend(u16le(8));
        element.push(0);
        element.push(0x03); // TYPE_STRING
        element.extend(u32le(2));
    }

    let mut xml = Vec::new();
    xml.extend(u16le(0x0003));
    xml.extend(u16le(8));
    xml.extend(u32le((8 + pool.len() + element.len()) as u32));
    xml.extend(pool);
    xml.extend(element);
    xml
}

#[test]
fn reads_a_utf8_string_pool() {
    assert_eq!(
        parse_manifest(&hand_made_utf8_manifest("com.example.hand")),
        Ok(Manifest {
            package: "com.example.hand".into(),
            version_code: 0,
            version_name: None,
        })
    );
}

/// Attributes that overlap (fewer than ResXMLTree_attribute's 20 bytes
/// each) or repeat are refused: either way thousands of them could have
/// one long string decoded again and again.
#[test]
fn refuses_overlapping_and_repeated_attributes() {
    assert_eq!(
        parse_manifest(&manifest_with_attributes("com.example.hand", 1, 0)),
        Err(ApkError::Malformed(
            "<manifest>'s attributes are 0 bytes each, less than 20".into()
        ))
    );
    assert_eq!(
        parse_manifest(&manifest_with_attributes("com.example.hand", 2, 20)),
        Err(ApkError::Malformed("<manifest> has package twice".into()))
    );
}

#[test]
fn refuses_an_invalid_package_name() {
    assert_eq!(
        parse_manifest(&hand_made_utf8_manifest("nodots")),
        Err(ApkError::BadPackageName("nodots".into()))
    );
    assert_eq!(
        ApkError::BadPackageName("nodots".into()).status("x"),
        "INSTALL_PARSE_FAILED_BAD_PACKAGE_NAME: Invalid manifest package: nodots"
    );
}

#[test]
fn package_names_follow_androids_rule() {
    for good in ["com.example", "a.b", "com.Example_1.x9"] {
        assert!(valid_package_name(good), "{good}");
    }
    for bad in [
        "",
        "com",
        "com.",
        ".com",
        "com..x",
        "1com.x",
        "com.1x",
        "com.ex-ample",
        "com.é.x",
    ] {
        assert!(!valid_package_name(bad), "{bad}");
    }
}
