//! Where two JSON values differ, leaf by leaf: how a refusal names the
//! settings of a recorded run that differ from this one's. Pure.

use serde_json::Value;

/// Each leaf where `there` and `here` differ, by its dotted path under
/// `root` (`a.c`, or `task.params.title` under `task`), with both values;
/// a field one side lacks is null on that side. Objects are walked key by
/// key in sorted order; any other values (arrays included) are leaves.
pub fn differing_leaves<'a>(
    root: &str,
    there: &'a Value,
    here: &'a Value,
) -> Vec<(String, &'a Value, &'a Value)> {
    let mut out = Vec::new();
    walk(root, there, here, &mut out);
    out
}

/// Each leaf where a recorded run (`there`) and this one (`here`) differ,
/// in the words a refusal uses: `seed: 0 there, 50 here`.
pub fn there_and_here(root: &str, there: &Value, here: &Value) -> Vec<String> {
    differing_leaves(root, there, here)
        .into_iter()
        .map(|(path, a, b)| one_there_and_here(&path, a, b))
        .collect()
}

/// One leaf of [`there_and_here`], under the name `label`.
pub fn one_there_and_here(label: &str, there: &Value, here: &Value) -> String {
    format!("{label}: {there} there, {here} here")
}

fn walk<'a>(
    path: &str,
    there: &'a Value,
    here: &'a Value,
    out: &mut Vec<(String, &'a Value, &'a Value)>,
) {
    match (there, here) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let at = match path {
                    "" => key.clone(),
                    _ => format!("{path}.{key}"),
                };
                let get = |fields: &'a serde_json::Map<String, Value>| {
                    fields.get(key).unwrap_or(&Value::Null)
                };
                walk(&at, get(a), get(b), out);
            }
        }
        (a, b) if a != b => out.push((path.to_owned(), a, b)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Nested fields by their dotted path, a field one side lacks as null,
    /// arrays as whole leaves, equal leaves left out.
    #[test]
    fn each_differing_leaf_is_named_by_its_path() {
        let there = json!({"seed": 0, "a": {"b": [1], "c": "x", "d": [1, 2]}, "gone": 1});
        let here = json!({"seed": 50, "a": {"b": [1], "c": "y", "d": [2, 1]}});
        let named: Vec<String> = differing_leaves("", &there, &here)
            .into_iter()
            .map(|(path, a, b)| format!("{path}: {a} / {b}"))
            .collect();
        assert_eq!(
            named,
            [
                "a.c: \"x\" / \"y\"",
                "a.d: [1,2] / [2,1]",
                "gone: 1 / null",
                "seed: 0 / 50"
            ]
        );
    }

    /// Each differing leaf is worded with the recorded value first.
    #[test]
    fn differences_read_as_there_and_here() {
        let there = json!({"seed": 0, "a": {"c": "x"}});
        let here = json!({"seed": 50, "a": {"c": "x"}});
        assert_eq!(
            there_and_here("", &there, &here),
            ["seed: 0 there, 50 here"]
        );
    }

    #[test]
    fn a_root_prefixes_every_path_and_equal_values_have_none() {
        let (a, b) = (
            json!({"name": "x", "params": {"n": 1}}),
            json!({"name": "x", "params": {"n": 2}}),
        );
        let paths: Vec<String> = differing_leaves("task", &a, &b)
            .into_iter()
            .map(|(path, ..)| path)
            .collect();
        assert_eq!(paths, ["task.params.n"]);
        assert!(differing_leaves("", &a, &a).is_empty());
        // Leaves that are not objects are compared whole at the root.
        assert_eq!(differing_leaves("x", &json!(1), &json!(2)).len(), 1);
    }
}
