//! Official-format sample files: a JSON list of samples (spec §6), read with
//! agent-core's reader and written atomically.
//!
//! Written files look like the official examples: the keys in agent-core's
//! order and a whole-pixel `bbox` as integers, as Python's `json.dumps`
//! writes the ints of the released data.

use super::{Error, Result, write_file};
use agent_core::sample::{Sample, parse_samples};
use serde_json::Value;
use std::path::Path;

/// Reads an official-format sample file; errors name the file and line.
pub fn load_samples(path: &Path) -> Result<Vec<Sample>> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_samples(&text).map_err(|e| Error::Samples {
        path: path.to_path_buf(),
        line: e.line,
        reason: e.reason,
    })
}

/// The text of a sample file (pretty-printed, one trailing line break).
pub fn samples_json(samples: &[Sample]) -> String {
    let values: Vec<Value> = samples.iter().map(sample_value).collect();
    let mut text = serde_json::to_string_pretty(&values)
        .expect("samples are JSON values with string keys and finite numbers");
    text.push('\n');
    text
}

/// Writes `samples` to `path` atomically (temporary file, sync, rename).
pub fn write_samples(path: &Path, samples: &[Sample]) -> Result<()> {
    write_file(path, samples_json(samples).as_bytes())
}

/// Rewrites the image paths of `samples`, relative to the sample file
/// `from`, for a sample file written at `to`: unchanged when both files are
/// in one directory, else the originals' absolute paths.
pub fn rebase_images(samples: &mut [Sample], from: &Path, to: &Path) {
    // A bare file name's parent is "", which `absolute` refuses: it is ".".
    let dir = |p: &Path| {
        let parent = p.parent().filter(|d| !d.as_os_str().is_empty());
        std::path::absolute(parent.unwrap_or(Path::new("."))).unwrap_or_default()
    };
    let (from, to) = (dir(from), dir(to));
    if from == to {
        return;
    }
    for image in samples.iter_mut().flat_map(|s| s.images.iter_mut()) {
        *image = from.join(&*image).display().to_string();
    }
}

/// The sample as JSON, with whole numbers of `bbox` written as integers.
pub(crate) fn sample_value(sample: &Sample) -> Value {
    let mut value =
        serde_json::to_value(sample).expect("a sample is JSON with string keys and finite numbers");
    if let Some(Value::Array(bbox)) = value.get_mut("bbox") {
        for v in bbox {
            if let Some(f) = v.as_f64()
                && f.fract() == 0.0
                && f.abs() < 9_007_199_254_740_992.0
            {
                *v = Value::from(f as i64);
            }
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::tests::NAVIGATION;

    #[test]
    fn the_official_example_reads_and_writes_back_to_the_same_values() {
        let samples = parse_samples(NAVIGATION).unwrap();
        let text = samples_json(&samples);
        let ours: Value = serde_json::from_str(&text).unwrap();
        let official: Value = serde_json::from_str(NAVIGATION).unwrap();
        assert_eq!(ours, official);
        assert!(text.contains("\"bbox\": [\n      614,"), "{text}");
        assert_eq!(parse_samples(&text).unwrap(), samples);
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        std::fs::write(&path, "[\n{\"images\": [],\n \"image_sizes\": 3}]").unwrap();
        let err = load_samples(&path).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{}:3: sample 0:", path.display())),
            "{err}"
        );
        let err = load_samples(&dir.path().join("missing.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing.json"), "{err}");
    }
}
