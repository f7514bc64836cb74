//! From raw model text to a typed [`BtlOutput`].
//!
//! There is one parser. It accepts the canonical form and every deviation the
//! spec (§2) allows, and records each deviation it had to forgive as a
//! [`Tolerance`]. Strict mode is the same parse with no tolerance allowed: the
//! first one becomes the error. So the two modes can never disagree about what
//! a well-formed answer means, and a tolerant parse says exactly how far the
//! text was from canonical.
//!
//! Nothing is guessed: when the structure is ambiguous (several actions, text
//! between the tags, an unknown function) the parse fails with a
//! [`ParseError`] naming the part, the byte offset in the raw text and why.

use super::action::{Action, BBox, BtlOutput, Link, Point, Roi};
use super::pyliteral;
use quick_xml::events::Event;
use serde_json::{Map, Value};
use std::fmt;

/// Which part of the answer a tolerance or an error concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Part {
    /// Text around and between the three tagged parts.
    Envelope,
    Blink,
    Think,
    Link,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Envelope => "envelope",
            Self::Blink => "blink",
            Self::Think => "think",
            Self::Link => "link",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParseMode {
    /// Only the canonical form.
    Strict,
    /// The canonical form and the deviations of spec §2, each reported.
    #[default]
    Tolerant,
}

/// A deviation from the canonical form that the tolerant parse forgave.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToleranceKind {
    /// Whitespace before `<blink>` or after `</link>`.
    SurroundingWhitespace,
    /// Other text before `<blink>` or after `</link>`.
    SurroundingText,
    /// Whitespace between two tagged parts other than one line break.
    SeparatorWhitespace,
    /// A JSON body with no code fence.
    MissingFence,
    /// A code fence whose info string is not `json`.
    OtherFence { info: String },
    /// A `json` code fence with other whitespace than `` ```json\n…\n``` ``.
    FenceWhitespace,
    /// An opening code fence with no closing one.
    UnclosedFence,
    /// A Python literal (single quotes, `True`, tuples) instead of JSON.
    PythonLiteral,
    /// `position` written for `point_2d`.
    PositionAlias,
    /// The paper's XML blink dialect (`<element><bbox>…</bbox>…`).
    XmlBlink,
    /// An empty blink written as `None` or left empty instead of `[]`.
    EmptyBlinkWritten,
    /// A region with no `label`.
    MissingLabel,
    /// A bare action object instead of a list of one.
    LinkNotInList,
    /// A link item with an `Action` but no `Plan`.
    MissingPlan,
    /// A swipe direction not in lower case.
    DirectionCase,
    /// A key the object does not have in the canonical form; it is ignored.
    ExtraKey { key: String },
}

impl fmt::Display for ToleranceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::SurroundingWhitespace => f.write_str("whitespace around the answer"),
            Self::SurroundingText => f.write_str("text around the answer"),
            Self::SeparatorWhitespace => {
                f.write_str("whitespace between parts is not one line break")
            }
            Self::MissingFence => f.write_str("no ```json code fence"),
            Self::OtherFence { info } => {
                write!(f, "code fence labelled '{info}' instead of 'json'")
            }
            Self::FenceWhitespace => {
                f.write_str("code fence whitespace differs from ```json\\n...\\n```")
            }
            Self::UnclosedFence => f.write_str("code fence is not closed"),
            Self::PythonLiteral => f.write_str("Python literal instead of JSON"),
            Self::PositionAlias => f.write_str("'position' used for 'point_2d'"),
            Self::XmlBlink => f.write_str("XML blink dialect"),
            Self::EmptyBlinkWritten => {
                f.write_str("empty blink written as None or nothing instead of []")
            }
            Self::MissingLabel => f.write_str("region without a label"),
            Self::LinkNotInList => f.write_str("action object not wrapped in a list"),
            Self::MissingPlan => f.write_str("action without a Plan"),
            Self::DirectionCase => f.write_str("swipe direction not in lower case"),
            Self::ExtraKey { key } => write!(f, "unexpected key '{key}' ignored"),
        }
    }
}

/// One forgiven deviation and where it was.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tolerance {
    pub part: Part,
    /// Byte offset into the raw text.
    pub offset: usize,
    #[serde(flatten)]
    pub kind: ToleranceKind,
}

/// Why a parse failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseErrorKind {
    /// A required tag never appears.
    MissingTag(&'static str),
    /// An opening tag without its closing tag.
    UnclosedTag(&'static str),
    /// Something other than whitespace where a tag must follow.
    UnexpectedText { expected: &'static str },
    /// The body is neither JSON nor a Python literal.
    Syntax(String),
    /// Well-formed data of the wrong shape (wrong types, missing keys).
    Shape(String),
    /// The link holds no action.
    EmptyLink,
    /// The link holds several actions; which one to run would be a guess.
    SeveralActions(usize),
    /// Another `<link>` stands outside the answer (a second answer after
    /// it, or one before it); which one to run would be a guess too.
    AnotherLink,
    /// Strict mode met a deviation the tolerant mode would forgive.
    NotCanonical(ToleranceKind),
}

impl fmt::Display for ParseErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MissingTag(tag) => write!(f, "missing {tag}"),
            Self::UnclosedTag(tag) => write!(f, "{tag} is never closed"),
            Self::UnexpectedText { expected } => write!(f, "expected {expected}, found other text"),
            Self::Syntax(msg) => write!(f, "not JSON: {msg}"),
            Self::Shape(msg) => f.write_str(msg),
            Self::EmptyLink => f.write_str("the link list holds no action"),
            Self::SeveralActions(n) => {
                write!(f, "the link list holds {n} actions, expected exactly one")
            }
            Self::AnotherLink => f.write_str(
                "another <link> stands outside the answer; which to run would be a guess",
            ),
            Self::NotCanonical(t) => write!(f, "not canonical (strict mode): {t}"),
        }
    }
}

/// A rejected answer: which part, where, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{part} at byte {offset}: {kind}")]
pub struct ParseError {
    pub part: Part,
    /// Byte offset into the raw text.
    pub offset: usize,
    pub kind: ParseErrorKind,
}

/// A successful parse and the deviations it forgave (empty for canonical text).
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub output: BtlOutput,
    pub tolerances: Vec<Tolerance>,
    /// The `<link>` body as the answer wrote it, read as JSON (or as a
    /// Python literal) but not yet forgiven: a swipe direction keeps its
    /// case, `position` and extra keys stay. What the released link rule
    /// judges (the `btl` metrics preset).
    pub link_written: Value,
}

/// Parses a raw model answer.
pub fn parse(text: &str, mode: ParseMode) -> Result<Parsed, ParseError> {
    let mut cx = Cx {
        text,
        tolerances: Vec::new(),
    };
    let (output, link_written) = cx.answer()?;
    cx.check_mode(mode)?;
    Ok(Parsed {
        output,
        tolerances: cx.tolerances,
        link_written,
    })
}

/// Parses a `<link>` body on its own (the `solution` strings of training
/// samples have this form).
pub fn parse_link_json(json: &str, mode: ParseMode) -> Result<(Link, Vec<Tolerance>), ParseError> {
    let mut cx = Cx {
        text: json,
        tolerances: Vec::new(),
    };
    let value = cx.json_or_python(json, 0, Part::Link)?;
    let link = cx.link_value(value, 0)?;
    cx.check_mode(mode)?;
    Ok((link, cx.tolerances))
}

struct Cx<'a> {
    text: &'a str,
    tolerances: Vec<Tolerance>,
}

/// A slice of the raw text and its byte offset in it.
#[derive(Clone, Copy)]
struct Span<'a> {
    text: &'a str,
    start: usize,
}

fn error(part: Part, offset: usize, kind: ParseErrorKind) -> ParseError {
    ParseError { part, offset, kind }
}

fn shape(part: Part, offset: usize, msg: impl Into<String>) -> ParseError {
    error(part, offset, ParseErrorKind::Shape(msg.into()))
}

impl<'a> Cx<'a> {
    /// In strict mode, the first forgiven deviation is the error.
    fn check_mode(&self, mode: ParseMode) -> Result<(), ParseError> {
        match (mode, self.tolerances.first()) {
            (ParseMode::Strict, Some(t)) => Err(ParseError {
                part: t.part,
                offset: t.offset,
                kind: ParseErrorKind::NotCanonical(t.kind.clone()),
            }),
            _ => Ok(()),
        }
    }

    fn tolerate(&mut self, part: Part, offset: usize, kind: ToleranceKind) {
        self.tolerances.push(Tolerance { part, offset, kind });
    }

    fn answer(&mut self) -> Result<(BtlOutput, Value), ParseError> {
        let text = self.text;
        let blink_open = text.find("<blink>").ok_or(error(
            Part::Blink,
            0,
            ParseErrorKind::MissingTag("<blink>"),
        ))?;
        self.surrounding(&text[..blink_open], 0);
        let blink = self.tagged(blink_open, "<blink>", "</blink>", Part::Blink)?;
        let think_open =
            self.next_tag(blink.start + blink.text.len() + 8, "<think>", Part::Think)?;
        let think = self.tagged(think_open, "<think>", "</think>", Part::Think)?;
        let link_open = self.next_tag(think.start + think.text.len() + 8, "<link>", Part::Link)?;
        let link = self.tagged(link_open, "<link>", "</link>", Part::Link)?;
        let end = link.start + link.text.len() + "</link>".len();
        self.surrounding(&text[end..], end);
        let another = text[..blink_open]
            .find("<link>")
            .or_else(|| text[end..].find("<link>").map(|at| end + at));
        if let Some(at) = another {
            return Err(error(Part::Envelope, at, ParseErrorKind::AnotherLink));
        }

        let blink = self.blink(blink)?;
        let (link, written) = self.link(link)?;
        Ok((
            BtlOutput {
                blink,
                think: think.text.to_string(),
                link,
            },
            written,
        ))
    }

    fn surrounding(&mut self, outside: &str, offset: usize) {
        if !outside.is_empty() {
            let kind = if outside.trim().is_empty() {
                ToleranceKind::SurroundingWhitespace
            } else {
                ToleranceKind::SurroundingText
            };
            self.tolerate(Part::Envelope, offset, kind);
        }
    }

    /// The body between `open` (which starts at `at`) and the first `close`.
    fn tagged(
        &self,
        at: usize,
        open: &'static str,
        close: &'static str,
        part: Part,
    ) -> Result<Span<'a>, ParseError> {
        let start = at + open.len();
        let len = self.text[start..].find(close).ok_or(error(
            part,
            at,
            ParseErrorKind::UnclosedTag(open),
        ))?;
        Ok(Span {
            text: &self.text[start..start + len],
            start,
        })
    }

    /// Finds `tag` after `from`, with only whitespace before it.
    fn next_tag(
        &mut self,
        from: usize,
        tag: &'static str,
        part: Part,
    ) -> Result<usize, ParseError> {
        let rest = &self.text[from..];
        let gap = rest.len() - rest.trim_start().len();
        if !rest[gap..].starts_with(tag) {
            let kind = if rest.contains(tag) {
                ParseErrorKind::UnexpectedText { expected: tag }
            } else {
                ParseErrorKind::MissingTag(tag)
            };
            return Err(error(part, from + gap, kind));
        }
        if &rest[..gap] != "\n" {
            self.tolerate(Part::Envelope, from, ToleranceKind::SeparatorWhitespace);
        }
        Ok(from + gap)
    }

    /// Strips the code fence around a JSON body, noting any deviation from
    /// `` ```json\n…\n``` ``.
    fn unfence(&mut self, body: Span<'a>, part: Part) -> Span<'a> {
        const OPEN: &str = "```json\n";
        const CLOSE: &str = "\n```";
        let t = body.text;
        if t.len() >= OPEN.len() + CLOSE.len() && t.starts_with(OPEN) && t.ends_with(CLOSE) {
            return Span {
                text: &t[OPEN.len()..t.len() - CLOSE.len()],
                start: body.start + OPEN.len(),
            };
        }
        let lead = t.len() - t.trim_start().len();
        let trimmed = t.trim();
        let Some(after_ticks) = trimmed.strip_prefix("```") else {
            self.tolerate(part, body.start, ToleranceKind::MissingFence);
            return body;
        };
        let info_len = after_ticks
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(after_ticks.len());
        let info = &after_ticks[..info_len];
        let kind = if info == "json" {
            ToleranceKind::FenceWhitespace
        } else {
            ToleranceKind::OtherFence {
                info: info.to_string(),
            }
        };
        self.tolerate(part, body.start + lead, kind);
        let inner = &after_ticks[info_len..];
        let inner = match inner.strip_suffix("```") {
            Some(inner) => inner,
            None => {
                self.tolerate(part, body.start + lead, ToleranceKind::UnclosedFence);
                inner
            }
        };
        Span {
            text: inner,
            start: body.start + lead + 3 + info_len,
        }
    }

    fn json_or_python(
        &mut self,
        text: &str,
        start: usize,
        part: Part,
    ) -> Result<Value, ParseError> {
        match serde_json::from_str::<Value>(text) {
            Ok(v) => Ok(v),
            Err(json_err) => match pyliteral::parse(text) {
                Ok(v) => {
                    self.tolerate(part, start, ToleranceKind::PythonLiteral);
                    Ok(v)
                }
                Err(_) => Err(error(
                    part,
                    start + offset_of(text, json_err.line(), json_err.column()),
                    ParseErrorKind::Syntax(json_err.to_string()),
                )),
            },
        }
    }

    fn blink(&mut self, body: Span<'a>) -> Result<Vec<Roi>, ParseError> {
        if matches!(body.text.trim(), "" | "None") {
            self.tolerate(Part::Blink, body.start, ToleranceKind::EmptyBlinkWritten);
            return Ok(Vec::new());
        }
        let content = self.unfence(body, Part::Blink);
        let inner = content.text.trim();
        let inner_start = content.start + (content.text.len() - content.text.trim_start().len());
        if matches!(inner, "" | "None") {
            self.tolerate(Part::Blink, inner_start, ToleranceKind::EmptyBlinkWritten);
            return Ok(Vec::new());
        }
        if inner.starts_with('<') {
            self.tolerate(Part::Blink, inner_start, ToleranceKind::XmlBlink);
            return xml_blink(inner, inner_start);
        }
        let value = self.json_or_python(content.text, content.start, Part::Blink)?;
        let Value::Array(items) = value else {
            return Err(shape(
                Part::Blink,
                inner_start,
                "blink must be a JSON list of regions",
            ));
        };
        items
            .into_iter()
            .enumerate()
            .map(|(i, item)| self.roi(item, i, inner_start))
            .collect()
    }

    fn roi(&mut self, item: Value, index: usize, offset: usize) -> Result<Roi, ParseError> {
        let Value::Object(mut map) = item else {
            return Err(shape(
                Part::Blink,
                offset,
                format!("region {index} is not an object"),
            ));
        };
        let bbox = map.remove("bbox_2d").ok_or_else(|| {
            shape(
                Part::Blink,
                offset,
                format!("region {index} has no \"bbox_2d\""),
            )
        })?;
        let bbox: BBox = serde_json::from_value(bbox)
            .map_err(|e| shape(Part::Blink, offset, format!("region {index}: {e}")))?;
        let label = match map.remove("label") {
            Some(Value::String(s)) => s,
            Some(_) => {
                return Err(shape(
                    Part::Blink,
                    offset,
                    format!("region {index}: \"label\" is not a string"),
                ));
            }
            None => {
                self.tolerate(Part::Blink, offset, ToleranceKind::MissingLabel);
                String::new()
            }
        };
        self.extra_keys(Part::Blink, offset, map.keys());
        Ok(Roi { bbox, label })
    }

    fn extra_keys<'k>(
        &mut self,
        part: Part,
        offset: usize,
        keys: impl Iterator<Item = &'k String>,
    ) {
        for key in keys {
            self.tolerate(part, offset, ToleranceKind::ExtraKey { key: key.clone() });
        }
    }

    /// The link and its body as written.
    fn link(&mut self, body: Span<'a>) -> Result<(Link, Value), ParseError> {
        let content = self.unfence(body, Part::Link);
        let start = content.start + (content.text.len() - content.text.trim_start().len());
        let value = self.json_or_python(content.text, content.start, Part::Link)?;
        Ok((self.link_value(value.clone(), start)?, value))
    }

    fn link_value(&mut self, value: Value, offset: usize) -> Result<Link, ParseError> {
        let item = match value {
            Value::Array(mut items) => match items.len() {
                1 => items.remove(0),
                0 => return Err(error(Part::Link, offset, ParseErrorKind::EmptyLink)),
                n => return Err(error(Part::Link, offset, ParseErrorKind::SeveralActions(n))),
            },
            obj @ Value::Object(_) => {
                self.tolerate(Part::Link, offset, ToleranceKind::LinkNotInList);
                obj
            }
            _ => {
                return Err(shape(
                    Part::Link,
                    offset,
                    "link must be a JSON list holding one action",
                ));
            }
        };
        let Value::Object(mut item) = item else {
            return Err(shape(Part::Link, offset, "the link item is not an object"));
        };
        let Some(action) = item.remove("Action") else {
            return match self.point_field(&mut item, offset)? {
                Some(point) => {
                    self.extra_keys(Part::Link, offset, item.keys());
                    Ok(Link::Point(point))
                }
                None => Err(shape(
                    Part::Link,
                    offset,
                    "the link item needs \"Plan\" and \"Action\", or \"point_2d\"",
                )),
            };
        };
        let plan = match item.remove("Plan") {
            Some(Value::String(s)) => s,
            Some(_) => return Err(shape(Part::Link, offset, "\"Plan\" is not a string")),
            None => {
                self.tolerate(Part::Link, offset, ToleranceKind::MissingPlan);
                String::new()
            }
        };
        self.extra_keys(Part::Link, offset, item.keys());
        let Value::Object(mut action) = action else {
            return Err(shape(Part::Link, offset, "\"Action\" is not an object"));
        };
        if let Some(point) = self.point_field(&mut action, offset)? {
            action.insert(
                "point_2d".into(),
                serde_json::to_value(point).unwrap_or(Value::Null),
            );
        }
        let is_swipe = action.get("function").and_then(Value::as_str) == Some("Swipe");
        if let Some(Value::String(dir)) = action.get_mut("direction").filter(|_| is_swipe) {
            let lower = dir.to_lowercase();
            if lower != *dir && matches!(lower.as_str(), "up" | "down" | "left" | "right") {
                *dir = lower;
                self.tolerate(Part::Link, offset, ToleranceKind::DirectionCase);
            }
        }
        let keys: Vec<String> = action.keys().cloned().collect();
        let action: Action = serde_json::from_value(Value::Object(action))
            .map_err(|e| shape(Part::Link, offset, format!("action: {e}")))?;
        let used = serde_json::to_value(&action).unwrap_or(Value::Null);
        self.extra_keys(
            Part::Link,
            offset,
            keys.iter().filter(|k| used.get(k.as_str()).is_none()),
        );
        Ok(Link::Action { plan, action })
    }

    /// Takes `point_2d` (or its alias `position`) out of an object.
    fn point_field(
        &mut self,
        map: &mut Map<String, Value>,
        offset: usize,
    ) -> Result<Option<Point>, ParseError> {
        let value = match (map.remove("point_2d"), map.remove("position")) {
            (Some(v), _) => v,
            (None, Some(v)) => {
                self.tolerate(Part::Link, offset, ToleranceKind::PositionAlias);
                v
            }
            (None, None) => return Ok(None),
        };
        serde_json::from_value(value)
            .map(Some)
            .map_err(|e| shape(Part::Link, offset, format!("point_2d: {e}")))
    }
}

/// Byte offset of serde_json's 1-based line and column in `text`.
fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let line_start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    (line_start + column.saturating_sub(1)).min(text.len())
}

/// The paper's blink dialect:
/// `<element><id>1</id><bbox>[x0, y0, x1, y1]</bbox><caption>static</caption></element>…`.
/// The caption becomes the label; ids are not needed (document order is
/// kept). Anything that is not a sequence of such elements is an error.
fn xml_blink(text: &str, start: usize) -> Result<Vec<Roi>, ParseError> {
    let mut reader = quick_xml::Reader::from_str(text);
    let mut rois = Vec::new();
    // The open element's text per field, and the field being read.
    let mut element: Option<(String, String)> = None;
    let mut field: Option<String> = None;
    let xml_error = |pos: u64, msg: String| {
        shape(
            Part::Blink,
            start + pos as usize,
            format!("XML blink: {msg}"),
        )
    };
    fn append(element: &mut Option<(String, String)>, field: &Option<String>, piece: &str) {
        if let (Some((bbox, caption)), Some(f)) = (element.as_mut(), field.as_deref()) {
            match f {
                "bbox" => bbox.push_str(piece),
                "caption" => caption.push_str(piece),
                _ => {}
            }
        }
    }
    loop {
        let pos = reader.buffer_position();
        match reader.read_event() {
            Err(e) => return Err(xml_error(pos, e.to_string())),
            Ok(Event::Eof) => break,
            Ok(Event::Start(tag)) => {
                let name = tag.name().as_ref().to_string();
                match (name.as_str(), element.is_some()) {
                    ("element", false) => element = Some((String::new(), String::new())),
                    ("element", true) => {
                        return Err(xml_error(pos, "<element> inside <element>".into()));
                    }
                    (_, false) => {
                        return Err(xml_error(pos, format!("<{name}> outside an <element>")));
                    }
                    (_, true) => field = Some(name),
                }
            }
            Ok(Event::Text(t)) => append(&mut element, &field, &t.xml10_content()),
            Ok(Event::GeneralRef(r)) => {
                let resolved = match r.resolve_char_ref() {
                    Ok(Some(c)) => c.to_string(),
                    _ => quick_xml::escape::resolve_predefined_entity(&r.xml10_content())
                        .map(str::to_string)
                        .ok_or_else(|| {
                            xml_error(pos, format!("unknown entity &{};", r.xml10_content()))
                        })?,
                };
                append(&mut element, &field, &resolved);
            }
            Ok(Event::End(tag)) => {
                if tag.name().as_ref() == "element" {
                    let Some((bbox, caption)) = element.take() else {
                        return Err(xml_error(pos, "</element> without <element>".into()));
                    };
                    let bbox = serde_json::from_str(bbox.trim()).map_err(|e| {
                        xml_error(pos, format!("bbox of element {}: {e}", rois.len()))
                    })?;
                    rois.push(Roi {
                        bbox,
                        label: caption.trim().to_string(),
                    });
                }
                field = None;
            }
            Ok(_) => {}
        }
    }
    if element.is_some() {
        return Err(xml_error(
            text.len() as u64,
            "an <element> is never closed".into(),
        ));
    }
    Ok(rois)
}
