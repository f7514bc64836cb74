//! From a typed [`BtlOutput`] to the canonical text, exactly as the released
//! BTL-UI data writes it (Python `json.dumps` separators, `` ```json `` fences,
//! one line break between parts).

use super::action::{BtlOutput, Point, Roi};
use serde::Serialize;
use std::io;
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RenderError {
    #[error("the think text contains </think>, which would end the part early")]
    ThinkClosesEarly,
    #[error("a coordinate in the {0} part is not a finite number")]
    NonFinite(&'static str),
}

/// Renders the canonical form. `parse(render(x)) == x` for every output this
/// accepts.
pub fn render(output: &BtlOutput) -> Result<String, RenderError> {
    if output.think.contains("</think>") {
        return Err(RenderError::ThinkClosesEarly);
    }
    if !output.blink.iter().all(roi_is_finite) {
        return Err(RenderError::NonFinite("blink"));
    }
    if !output.link.point().is_none_or(point_is_finite) {
        return Err(RenderError::NonFinite("link"));
    }
    let blink = to_python_json(&output.blink);
    let link = output.link.to_json();
    Ok(format!(
        "<blink>```json\n{blink}\n```</blink>\n<think>{think}</think>\n<link>```json\n{link}\n```</link>",
        think = output.think
    ))
}

fn point_is_finite(p: Point) -> bool {
    p.x.is_finite() && p.y.is_finite()
}

fn roi_is_finite(r: &Roi) -> bool {
    [r.bbox.x1, r.bbox.y1, r.bbox.x2, r.bbox.y2]
        .iter()
        .all(|v| v.is_finite())
}

/// JSON with Python's default `json.dumps` separators (`", "` and `": "`).
/// A `</` inside a string is written `<\/` (valid JSON for the same string)
/// so a label or plan cannot close its tag early.
pub fn to_python_json<T: Serialize + ?Sized>(value: &T) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PythonFormatter);
    // Our types serialize infallibly into memory (string keys, finite numbers
    // checked by the caller), so an error here would be a bug in them.
    value
        .serialize(&mut ser)
        .expect("BTL values always serialize to JSON");
    String::from_utf8(out)
        .expect("serde_json writes UTF-8")
        .replace("</", "<\\/")
}

struct PythonFormatter;

impl serde_json::ser::Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
}
