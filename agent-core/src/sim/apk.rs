//! What the package manager reads of an APK before it installs one: the
//! zip's `AndroidManifest.xml` in Android's binary XML (package name and
//! version), and whether the file carries a signature at all.
//!
//! The phone runs no code from an APK, so nothing beyond the manifest is
//! read, and signatures are looked for but not verified: an unsigned APK is
//! refused as a device refuses it, a signed one is taken as valid.

use std::io::{Cursor, Read};

/// The manifest facts `pm` records for an installed package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub package: String,
    pub version_code: i64,
    pub version_name: Option<String>,
}

/// Why an APK cannot be installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApkError {
    NotZip,
    NoManifest,
    /// The manifest is not binary XML pm can read, or has no package.
    Malformed(String),
    BadPackageName(String),
    /// Neither a v1 (JAR) signature nor an APK Signing Block.
    NoCertificates,
}

impl ApkError {
    /// The status message the package installer gives for the APK staged
    /// at `path`: the `INSTALL_*` code, then the parser's words.
    pub fn status(&self, path: &str) -> String {
        format!("{}: {}", self.code(), self.message(path))
    }

    /// The installer's `INSTALL_*` code for this failure.
    pub fn code(&self) -> &'static str {
        match self {
            ApkError::NotZip => "INSTALL_PARSE_FAILED_NOT_APK",
            ApkError::NoManifest => "INSTALL_PARSE_FAILED_UNEXPECTED_EXCEPTION",
            ApkError::Malformed(_) => "INSTALL_PARSE_FAILED_MANIFEST_MALFORMED",
            ApkError::BadPackageName(_) => "INSTALL_PARSE_FAILED_BAD_PACKAGE_NAME",
            ApkError::NoCertificates => "INSTALL_PARSE_FAILED_NO_CERTIFICATES",
        }
    }

    /// The parser's words for the APK at `path` (ApkLiteParseUtils,
    /// ApkSignatureVerifier).
    pub fn message(&self, path: &str) -> String {
        match self {
            ApkError::NotZip | ApkError::NoManifest => format!("Failed to parse {path}"),
            ApkError::Malformed(why) => why.clone(),
            ApkError::BadPackageName(name) => format!("Invalid manifest package: {name}"),
            ApkError::NoCertificates => {
                format!("Package {path} has no certificates at entry AndroidManifest.xml")
            }
        }
    }

    /// Whether the lightweight parse that `pm install PATH` runs before
    /// it stages the file already fails (signatures are checked later,
    /// when the session commits).
    pub fn fails_lite_parse(&self) -> bool {
        !matches!(self, ApkError::NoCertificates)
    }
}

/// Reads an APK's manifest and checks that it is signed.
pub fn read(apk: &[u8]) -> Result<Manifest, ApkError> {
    let mut zip = zip::ZipArchive::new(Cursor::new(apk)).map_err(|_| ApkError::NotZip)?;
    let xml = {
        let mut entry = zip
            .by_name("AndroidManifest.xml")
            .map_err(|_| ApkError::NoManifest)?;
        let mut xml = Vec::new();
        entry
            .by_ref()
            .take(MAX_MANIFEST_BYTES)
            .read_to_end(&mut xml)
            .map_err(|_| ApkError::NotZip)?;
        xml
    };
    let manifest = parse_manifest(&xml)?;
    let names: Vec<&str> = zip.file_names().collect();
    if !has_jar_signature(&names) && !has_signing_block(apk) {
        return Err(ApkError::NoCertificates);
    }
    Ok(manifest)
}

/// A manifest larger than this is not one pm would read either; the bound
/// keeps a zip bomb from filling memory.
const MAX_MANIFEST_BYTES: u64 = 8 << 20;

/// A v1 signature: a signature file and its signature block under META-INF.
fn has_jar_signature(names: &[&str]) -> bool {
    let meta = |suffixes: &[&str]| {
        names.iter().any(|n| {
            let upper = n.to_ascii_uppercase();
            upper.starts_with("META-INF/") && suffixes.iter().any(|s| upper.ends_with(s))
        })
    };
    meta(&[".SF"]) && meta(&[".RSA", ".DSA", ".EC"])
}

/// The APK Signing Block (v2 and later) ends with this magic right before
/// the zip's central directory.
const SIGNING_BLOCK_MAGIC: &[u8; 16] = b"APK Sig Block 42";

fn has_signing_block(apk: &[u8]) -> bool {
    central_directory_offset(apk)
        .and_then(|cd| cd.checked_sub(SIGNING_BLOCK_MAGIC.len()).map(|at| (at, cd)))
        .is_some_and(|(at, cd)| apk.get(at..cd) == Some(&SIGNING_BLOCK_MAGIC[..]))
}

/// Where the central directory starts, from the end-of-central-directory
/// record (searched for over the largest comment a zip may carry).
fn central_directory_offset(apk: &[u8]) -> Option<usize> {
    const EOCD: &[u8] = b"PK\x05\x06";
    const EOCD_LEN: usize = 22;
    let earliest = apk.len().saturating_sub(EOCD_LEN + u16::MAX as usize);
    let last = apk.len().checked_sub(EOCD_LEN)?;
    let eocd = (earliest..=last)
        .rev()
        .find(|&at| apk[at..].starts_with(EOCD))?;
    let offset = u32::from_le_bytes(apk[eocd + 16..eocd + 20].try_into().ok()?);
    Some(offset as usize)
}

// Chunk types of Android's binary XML (ResourceTypes.h).
const RES_XML_TYPE: u16 = 0x0003;
const RES_STRING_POOL_TYPE: u16 = 0x0001;
const RES_XML_RESOURCE_MAP_TYPE: u16 = 0x0180;
const RES_XML_START_ELEMENT_TYPE: u16 = 0x0102;
const UTF8_FLAG: u32 = 1 << 8;
const NO_INDEX: u32 = u32::MAX;
/// sizeof(ResXMLTree_attribute).
const ATTRIBUTE_SIZE: usize = 20;

// Res_value data types and the framework's attribute ids that pm reads.
const TYPE_STRING: u8 = 0x03;
const TYPE_INT_DEC: u8 = 0x10;
const TYPE_INT_HEX: u8 = 0x11;
const ATTR_VERSION_CODE: u32 = 0x0101_021b;
const ATTR_VERSION_NAME: u32 = 0x0101_021c;

/// A little-endian reader over a byte slice that fails with where it ran
/// out instead of panicking.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u16(&self, at: usize) -> Result<u16, String> {
        self.0
            .get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .ok_or_else(|| format!("binary XML cut off at byte {at}"))
    }

    fn u32(&self, at: usize) -> Result<u32, String> {
        self.0
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| format!("binary XML cut off at byte {at}"))
    }

    fn u8(&self, at: usize) -> Result<u8, String> {
        self.0
            .get(at)
            .copied()
            .ok_or_else(|| format!("binary XML cut off at byte {at}"))
    }
}

/// Reads the `<manifest>` element of a binary XML document: its `package`
/// and the framework's `versionCode` and `versionName` attributes.
pub fn parse_manifest(xml: &[u8]) -> Result<Manifest, ApkError> {
    let data = Bytes(xml);
    if data.u16(0)? != RES_XML_TYPE {
        return Err(ApkError::Malformed("No start tag found".into()));
    }
    let header = usize::from(data.u16(2)?);
    let mut strings: Option<StringPool> = None;
    let mut resource_ids: Vec<u32> = Vec::new();
    let mut at = header;
    while at < xml.len() {
        let kind = data.u16(at)?;
        let chunk_header = usize::from(data.u16(at + 2)?);
        let size = data.u32(at + 4)? as usize;
        if size < 8 || chunk_header > size || at + size > xml.len() {
            return Err(format!("binary XML chunk at byte {at} has a bad size {size}").into());
        }
        let chunk = &xml[at..at + size];
        match kind {
            RES_STRING_POOL_TYPE => strings = Some(StringPool::read(chunk)?),
            RES_XML_RESOURCE_MAP_TYPE => {
                resource_ids = chunk[chunk_header..]
                    .chunks_exact(4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
            }
            RES_XML_START_ELEMENT_TYPE => {
                let strings = strings
                    .as_ref()
                    .ok_or("binary XML has an element before its string pool".to_string())?;
                return manifest_element(chunk, chunk_header, strings, &resource_ids);
            }
            _ => {}
        }
        at += size;
    }
    Err(ApkError::Malformed("No start tag found".into()))
}

/// What the binary XML reader reports (a cut-off or inconsistent
/// document) makes the manifest malformed.
impl From<String> for ApkError {
    fn from(why: String) -> Self {
        ApkError::Malformed(why)
    }
}

/// Refuses an attribute found before: each is decoded once, and a
/// repeated one is refused, as the framework's parser refuses duplicates.
fn once<T>(slot: &Option<T>, what: &str) -> Result<(), String> {
    match slot {
        Some(_) => Err(format!("<manifest> has {what} twice")),
        None => Ok(()),
    }
}

/// The first element, which must be `<manifest>`.
fn manifest_element(
    chunk: &[u8],
    header: usize,
    strings: &StringPool,
    resource_ids: &[u32],
) -> Result<Manifest, ApkError> {
    let node = Bytes(chunk);
    let name = strings.get(node.u32(header + 4)?)?;
    if name != "manifest" {
        return Err(ApkError::Malformed("No <manifest> tag".into()));
    }
    let attribute_start = usize::from(node.u16(header + 8)?);
    let attribute_size = usize::from(node.u16(header + 10)?);
    let count = usize::from(node.u16(header + 12)?);
    // ResXMLTree_attribute's size: smaller ones overlap, so thousands of
    // attributes could name one long string and have it decoded each time.
    if attribute_size < ATTRIBUTE_SIZE {
        return Err(ApkError::Malformed(format!(
            "<manifest>'s attributes are {attribute_size} bytes each, less than {ATTRIBUTE_SIZE}"
        )));
    }
    let mut package = None;
    let mut version_code = None;
    let mut version_name = None;
    for i in 0..count {
        let at = header + attribute_start + i * attribute_size;
        let name_index = node.u32(at + 4)?;
        let raw = node.u32(at + 8)?;
        let data_type = node.u8(at + 15)?;
        let value = node.u32(at + 16)?;
        let id = resource_ids.get(name_index as usize).copied();
        let string = || match (raw, data_type) {
            (NO_INDEX, TYPE_STRING) => strings.get(value),
            (NO_INDEX, _) => Err(format!(
                "attribute {} is not a string",
                strings.get(name_index)?
            )),
            (raw, _) => strings.get(raw),
        };
        // The framework's attributes are known by resource id (names may
        // be stripped); `package` has no namespace and no id.
        match id {
            Some(ATTR_VERSION_CODE) => {
                once(&version_code, "android:versionCode")?;
                version_code = Some(match data_type {
                    TYPE_INT_DEC | TYPE_INT_HEX => i64::from(value),
                    _ => string()?
                        .parse()
                        .map_err(|_| "android:versionCode is not an integer".to_string())?,
                });
            }
            Some(ATTR_VERSION_NAME) => {
                once(&version_name, "android:versionName")?;
                version_name = Some(string()?);
            }
            _ if id.is_none_or(|id| id == 0) && strings.is(name_index, "package")? => {
                once(&package, "package")?;
                package = Some(string()?);
            }
            _ => {}
        }
    }
    let version_code = version_code.unwrap_or(0);
    let package = package.ok_or("<manifest> has no package attribute".to_string())?;
    if !valid_package_name(&package) {
        return Err(ApkError::BadPackageName(package));
    }
    Ok(Manifest {
        package,
        version_code,
        version_name,
    })
}

/// Android's rule for a package name: two or more dot-separated segments,
/// each a letter followed by letters, digits or underscores.
pub fn valid_package_name(name: &str) -> bool {
    let segments: Vec<&str> = name.split('.').collect();
    segments.len() >= 2
        && segments.iter().all(|s| {
            let mut chars = s.chars();
            chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

/// A binary XML string pool, UTF-8 or UTF-16.
struct StringPool<'a> {
    chunk: &'a [u8],
    count: u32,
    utf8: bool,
    strings_start: usize,
    header: usize,
}

impl<'a> StringPool<'a> {
    fn read(chunk: &'a [u8]) -> Result<Self, String> {
        let data = Bytes(chunk);
        Ok(StringPool {
            chunk,
            header: usize::from(data.u16(2)?),
            count: data.u32(8)?,
            utf8: data.u32(16)? & UTF8_FLAG != 0,
            strings_start: data.u32(20)? as usize,
        })
    }

    /// Where string `index`'s text starts, and its length in its encoding's
    /// units (bytes of UTF-8, or UTF-16 code units).
    fn locate(&self, index: u32) -> Result<(usize, usize), String> {
        if index >= self.count {
            return Err(format!("string index {index} is outside the pool"));
        }
        let data = Bytes(self.chunk);
        let at = self.strings_start + data.u32(self.header + 4 * index as usize)? as usize;
        if self.utf8 {
            // UTF-16 length, then UTF-8 length, each in one or two bytes.
            let (_, at) = utf8_length(&data, at)?;
            let (len, at) = utf8_length(&data, at)?;
            Ok((at, len))
        } else {
            let first = data.u16(at)?;
            Ok(if first & 0x8000 != 0 {
                let low = data.u16(at + 2)?;
                (
                    at + 4,
                    ((usize::from(first) & 0x7fff) << 16) | usize::from(low),
                )
            } else {
                (at + 2, usize::from(first))
            })
        }
    }

    /// Whether string `index` is `ascii`, read only when its length is.
    fn is(&self, index: u32, ascii: &str) -> Result<bool, String> {
        let (_, len) = self.locate(index)?;
        Ok(len == ascii.len() && self.get(index)? == ascii)
    }

    fn get(&self, index: u32) -> Result<String, String> {
        let data = Bytes(self.chunk);
        let (at, len) = self.locate(index)?;
        if self.utf8 {
            let bytes = self
                .chunk
                .get(at..at + len)
                .ok_or_else(|| format!("string {index} runs past its pool"))?;
            String::from_utf8(bytes.to_vec()).map_err(|_| format!("string {index} is not UTF-8"))
        } else {
            let units = (0..len)
                .map(|i| data.u16(at + 2 * i))
                .collect::<Result<Vec<u16>, String>>()?;
            String::from_utf16(&units).map_err(|_| format!("string {index} is not UTF-16"))
        }
    }
}

fn utf8_length(data: &Bytes, at: usize) -> Result<(usize, usize), String> {
    let first = data.u8(at)?;
    if first & 0x80 != 0 {
        let second = data.u8(at + 1)?;
        Ok((
            ((usize::from(first) & 0x7f) << 8) | usize::from(second),
            at + 2,
        ))
    } else {
        Ok((usize::from(first), at + 1))
    }
}

#[cfg(test)]
pub(crate) mod tests;
