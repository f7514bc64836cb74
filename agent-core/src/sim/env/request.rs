//! The requests of `btl sim env`'s line protocol, read from one line each
//! (pure: bytes in, a request or the reason it is refused out).

use crate::protocol::Profile;
use crate::sim::tasks::Split;
use serde::Deserialize;
use serde_json::Value;

/// Longest request line accepted; an answer is a few hundred bytes.
pub const MAX_LINE: usize = 1 << 20;

/// A request and the `id` its response echoes.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// Whatever JSON value the client sent as `id`; `null` without one.
    pub id: Value,
    pub request: Request,
}

/// What a line asks for.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Starts an episode in environment `env` (a new one when it is absent
    /// or not yet open), ending the one it was playing.
    Reset(Reset),
    /// Answers the environment's current observation.
    Step { env: EnvId, answer: String },
    /// Ends the environment and its episode.
    Close { env: EnvId },
}

/// `reset`'s fields.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reset {
    #[serde(default)]
    pub env: Option<EnvId>,
    /// A suite template or injection variant (`btl sim tasks`).
    pub task: String,
    /// The instance: with `split`, instance `seed` of that split; without,
    /// the plain suite's seed.
    #[serde(default)]
    pub seed: u64,
    #[serde(default)]
    pub split: Option<Split>,
    /// `btl-extended` by default: without Finish an episode never ends
    /// on the model's word, as on a phone.
    #[serde(default = "extended")]
    pub profile: Profile,
    /// The model frame's `max_pixels`; the agent's default without it.
    #[serde(default)]
    pub max_pixels: Option<u64>,
    /// The task's own step budget without it.
    #[serde(default)]
    pub max_steps: Option<u32>,
    /// How observations carry the screenshot.
    #[serde(default)]
    pub image: ImageMode,
    /// Observations also carry the oracle's answer (for distillation and
    /// relabelling clients; an RL client leaves it off).
    #[serde(default)]
    pub teacher: bool,
}

fn extended() -> Profile {
    Profile::BtlExtended
}

/// How an observation carries its screenshot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageMode {
    /// The path of a PNG file the server wrote.
    #[default]
    Path,
    /// The PNG's bytes, base64-encoded, in the line itself.
    Base64,
}

/// An environment's name: a string, or a number taken as its decimal
/// string. It names a directory, so it is kept to a safe alphabet.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EnvId(pub String);

impl<'de> Deserialize<'de> for EnvId {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Name(String),
            Number(u64),
        }
        let name = match Raw::deserialize(de).map_err(|_| {
            serde::de::Error::custom("env must be a string or a non-negative integer")
        })? {
            Raw::Name(name) => name,
            Raw::Number(n) => n.to_string(),
        };
        let safe = !name.is_empty()
            && name.len() <= 64
            && !name.starts_with('.')
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
        if !safe {
            return Err(serde::de::Error::custom(format!(
                "env {name:?} is not 1 to 64 letters, digits, '_', '-' or '.' (not starting with '.')"
            )));
        }
        Ok(Self(name))
    }
}

impl std::fmt::Display for EnvId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Reads one request line. `Err` carries the `id` when the line had a
/// readable one, so even a refusal can be matched to its request.
pub fn parse_line(line: &[u8]) -> Result<Envelope, (Value, String)> {
    let text = std::str::from_utf8(line).map_err(|e| {
        (
            Value::Null,
            format!("not UTF-8 at byte {}", e.valid_up_to()),
        )
    })?;
    let mut object = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(object)) => object,
        Ok(other) => {
            return Err((
                Value::Null,
                format!("a request is a JSON object, not {}", kind(&other)),
            ));
        }
        Err(e) => return Err((Value::Null, format!("not JSON: {e}"))),
    };
    // serde_json's `Value` keeps the last of two fields of one name:
    // `{"op": "step", "answer": "a", "answer": "b"}` would act on one
    // answer where the client may have meant the other.
    let Keys(keys) = serde_json::from_str(text).map_err(|e| (Value::Null, e.to_string()))?;
    let mut seen = std::collections::HashSet::new();
    let twice: Vec<&str> = keys
        .iter()
        .filter(|key| !seen.insert(key.as_str()))
        .map(String::as_str)
        .collect();
    if let Some(first) = twice.first() {
        // An id given twice is not known.
        let id = match twice.contains(&"id") {
            true => Value::Null,
            false => object.remove("id").unwrap_or(Value::Null),
        };
        return Err((id, format!("field `{first}` is given twice")));
    }
    let id = object.remove("id").unwrap_or(Value::Null);
    if !object.contains_key("op") {
        return Err((id, "missing field `op` (reset, step or close)".into()));
    }
    match Request::deserialize(Value::Object(object)) {
        Ok(request) => Ok(Envelope { id, request }),
        Err(e) => Err((id, e.to_string())),
    }
}

/// The field names of a JSON object, in order, repeats included.
struct Keys(Vec<String>);

impl<'de> Deserialize<'de> for Keys {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct Names;
        impl<'de> serde::de::Visitor<'de> for Names {
            type Value = Keys;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
                let mut keys = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    keys.push(key);
                }
                Ok(Keys(keys))
            }
        }
        de.deserialize_map(Names)
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn parse(line: &str) -> Result<Envelope, (Value, String)> {
        parse_line(line.as_bytes())
    }

    #[test]
    fn a_reset_takes_defaults_for_what_it_leaves_out() {
        let got = parse(r#"{"op": "reset", "task": "wifi_on"}"#).unwrap();
        assert_eq!(got.id, Value::Null);
        let Request::Reset(reset) = got.request else {
            panic!("not a reset: {got:?}");
        };
        assert_eq!(reset.env, None);
        assert_eq!(reset.seed, 0);
        assert_eq!(reset.split, None);
        assert_eq!(reset.profile, Profile::BtlExtended);
        assert_eq!((reset.max_pixels, reset.max_steps), (None, None));
        assert_eq!(reset.image, ImageMode::Path);
        assert!(!reset.teacher);
    }

    #[test]
    fn every_reset_field_is_read() {
        let got = parse(
            r#"{"id": [7], "op": "reset", "env": 3, "task": "alarm_set", "seed": 9,
                "split": "heldout", "profile": "btl-ui", "max_pixels": 50176,
                "max_steps": 4, "image": "base64", "teacher": true}"#,
        )
        .unwrap();
        assert_eq!(got.id, json!([7]));
        assert_eq!(
            got.request,
            Request::Reset(Reset {
                env: Some(EnvId("3".into())),
                task: "alarm_set".into(),
                seed: 9,
                split: Some(Split::Heldout),
                profile: Profile::BtlUi,
                max_pixels: Some(50176),
                max_steps: Some(4),
                image: ImageMode::Base64,
                teacher: true,
            })
        );
    }

    #[test]
    fn step_and_close_name_their_env() {
        assert_eq!(
            parse(r#"{"op": "step", "env": "a-1", "answer": "x", "id": 1}"#).unwrap(),
            Envelope {
                id: json!(1),
                request: Request::Step {
                    env: EnvId("a-1".into()),
                    answer: "x".into()
                }
            }
        );
        assert_eq!(
            parse(r#"{"op": "close", "env": 0}"#).unwrap().request,
            Request::Close {
                env: EnvId("0".into())
            }
        );
    }

    #[test]
    fn bad_lines_are_refused_with_the_reason_and_their_id() {
        let cases = [
            ("", "not JSON"),
            ("{", "not JSON"),
            ("[1]", "a JSON object, not an array"),
            (r#"{"id": 5}"#, "missing field `op`"),
            (r#"{"id": 5, "op": "jump"}"#, "unknown variant `jump`"),
            (r#"{"id": 5, "op": "reset"}"#, "missing field `task`"),
            (
                r#"{"id": 5, "op": "reset", "task": "t", "sed": 1}"#,
                "unknown field `sed`",
            ),
            (
                r#"{"id": 5, "op": "reset", "task": "t", "seed": -1}"#,
                "invalid value",
            ),
            (
                r#"{"id": 5, "op": "reset", "task": "t", "split": "test"}"#,
                "unknown variant `test`",
            ),
            (
                r#"{"id": 5, "op": "step", "env": 1}"#,
                "missing field `answer`",
            ),
            (
                r#"{"id": 5, "op": "step", "env": "../x", "answer": ""}"#,
                "is not 1 to 64 letters",
            ),
            (
                r#"{"id": 5, "op": "close", "env": -2}"#,
                "a string or a non-negative integer",
            ),
            (r#"{"id": 5, "op": "close", "env": ""}"#, "is not 1 to 64"),
            (
                r#"{"id": 5, "op": "step", "env": 1, "answer": "a", "answer": "b"}"#,
                "field `answer` is given twice",
            ),
            (
                r#"{"id": 5, "op": "close", "op": "step", "env": 1, "answer": "a"}"#,
                "field `op` is given twice",
            ),
        ];
        for (line, reason) in cases {
            let (id, message) = parse(line).unwrap_err();
            assert!(message.contains(reason), "{line}: {message}");
            if line.contains("\"id\"") {
                assert_eq!(id, json!(5), "{line}");
            }
        }
        let (id, message) = parse(r#"{"id": 5, "id": 6, "op": "close", "env": 1}"#).unwrap_err();
        assert_eq!(
            (id, message.as_str()),
            (Value::Null, "field `id` is given twice")
        );
        // The id is unknown when it is among the fields given twice, even
        // after another.
        let (id, message) =
            parse(r#"{"op": "close", "op": "step", "id": 5, "id": 6, "env": 1}"#).unwrap_err();
        assert_eq!(
            (id, message.as_str()),
            (Value::Null, "field `op` is given twice")
        );
        let (_, message) = parse_line(b"{\"op\": \"\xff\"}").unwrap_err();
        assert_eq!(message, "not UTF-8 at byte 8");
    }

    proptest! {
        #[test]
        fn no_line_makes_the_reader_panic(line in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse_line(&line);
        }

        /// A name is taken exactly when it is 1 to 64 of the safe
        /// characters and does not start with a dot (names near the
        /// alphabet and the length limit, and any text).
        #[test]
        fn env_names_are_kept_to_the_safe_alphabet(
            name in prop_oneof!["[A-Za-z0-9_.-]{0,70}", "[a-z./]{0,4}", "\\PC{0,80}"],
        ) {
            let safe = regex::Regex::new("^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}$").unwrap();
            let line = serde_json::to_string(&json!({"op": "close", "env": name})).unwrap();
            let taken = match parse(&line) {
                Ok(Envelope { request: Request::Close { env }, .. }) => {
                    prop_assert_eq!(&env.0, &name);
                    true
                }
                _ => false,
            };
            prop_assert_eq!(taken, safe.is_match(&name), "{:?}", name);
        }
    }
}
