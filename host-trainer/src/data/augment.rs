//! Typed-text augmentation: copies of the samples whose action types text,
//! with that text replaced by a random string of the same shape wherever
//! the goal, the action history and the answer name it as a whole.
//!
//! Why: the suite's typed values come from small pools (a few dozen names,
//! titles and queries) and a few hundred episodes, so a small model can
//! lower its loss by learning them by heart, and then types a remembered
//! value whatever the goal says (the first btl-mini typed "02" as the hour
//! of every alarm and "Priya Ortiz" as every new contact). Values it cannot
//! have seen leave copying from the goal as the only way to predict them.
//!
//! The screenshot is the original one, so text typed in earlier steps may
//! show the old value on it; the goal is what the answer must follow, and
//! the copies teach exactly that. A copy whose goal would name a held-out
//! value ([`names_heldout_value`]) is drawn again, so augmentation never
//! leaks the held-out split into training.

use super::{Error, Result};
use agent_core::hash::fnv1a;
use agent_core::protocol::prompt::task_words;
use agent_core::protocol::{Action, Link, ParseMode, parse_link_json};
use agent_core::sample::Sample;
use agent_core::sim::tasks::names_heldout_value;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::Path;

/// Where a prompt's screenshot goes.
const IMAGE_MARK: &str = "<image>";

/// Draws of a replacement before a sample is given up (a held-out value
/// can only come up by chance, so this is never reached in practice).
const DRAWS: usize = 64;

/// How many samples were copied and how many typing samples could not be.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct AugmentReport {
    /// Typing samples whose text the goal names (the ones copied).
    pub typed: usize,
    /// Typing samples left alone: the goal does not name their text.
    pub unnamed: usize,
    /// Copies made.
    pub copies: usize,
}

/// `copies` copies of every typing sample of `samples` whose goal names
/// its text, each with the text replaced by a random string of the same
/// shape ([`reshape`]); ids get a `/copy-N` suffix. Deterministic in
/// `seed` and the samples' ids. Other samples are not returned. `path`
/// (the samples' file) names the sample at fault in errors.
pub fn augment_typed(
    samples: &[Sample],
    copies: usize,
    seed: u64,
    path: &Path,
) -> Result<(Vec<Sample>, AugmentReport)> {
    let mut out = Vec::new();
    let mut report = AugmentReport::default();
    for (index, sample) in samples.iter().enumerate() {
        let name = sample
            .id
            .clone()
            .unwrap_or_else(|| format!("sample {index}"));
        let bad = |why: String| Error::Sample {
            path: path.to_path_buf(),
            index,
            reason: format!("{name}: {why}"),
        };
        let (link, _) = parse_link_json(&sample.solution, ParseMode::Strict)
            .map_err(|e| bad(format!("its solution is no canonical link: {e}")))?;
        let Link::Action {
            plan,
            action: Action::Type { text },
        } = link
        else {
            continue;
        };
        let (Some(goal), Some(value)) = (user_goal(sample), named_value(sample, &text)) else {
            report.unnamed += 1;
            continue;
        };
        report.typed += 1;
        // Keyed by the id, each sample draws its own copies whatever the
        // order of the file.
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ fnv1a(&[name.as_bytes()]));
        for copy in 0..copies {
            let Some(new) = (0..DRAWS)
                .map(|_| reshape(value, &mut rng))
                .find(|new| new != value && !names_heldout_value(&replace_whole(goal, value, new)))
            else {
                continue;
            };
            let mut augmented = sample.clone();
            augmented.id = Some(format!("{name}/copy-{copy}"));
            for message in &mut augmented.messages {
                message.content = with_value_replaced(&message.content, value, &new);
            }
            augmented.solution = Link::Action {
                plan: replace_whole(&plan, value, &new),
                action: Action::Type {
                    text: text.replace(value, &new),
                },
            }
            .to_json();
            out.push(augmented);
            report.copies += 1;
        }
    }
    Ok((out, report))
}

/// `content` with `value` replaced by `new` where the task's own words
/// name it ([`task_words`]): the goal (also where `btl-screen-text`
/// repeats it) and the Plans of the history. Not in the steps' numbers,
/// the listed screen's points, the image mark or the fixed text around
/// them, where a short value such as `7` or `35` also occurs. Content
/// without a goal stays.
fn with_value_replaced(content: &str, value: &str, new: &str) -> String {
    let Some(words) = task_words(content) else {
        return content.to_owned();
    };
    let mut out = String::with_capacity(content.len());
    let mut from = 0;
    for range in words.ranges() {
        out.push_str(&content[from..range.start]);
        out.push_str(&replace_whole(&content[range.clone()], value, new));
        from = range.end;
    }
    out.push_str(&content[from..]);
    out
}

/// `sample` without its screenshot: no image and no `<image>` mark in its
/// prompt, its `image_sizes` kept (they set the frame the answer's
/// coordinates are in). Such a sample costs a fraction of one with a
/// screenshot, so many random-value copies fit in a step beside the
/// screenshot samples.
pub fn without_screenshot(sample: &mut Sample) {
    sample.images.clear();
    for message in &mut sample.messages {
        message.content = message.content.replace(IMAGE_MARK, "");
    }
}

/// Every sample again without its screenshot, its id marked `/text`: for
/// prompts that list the screen (profile `btl-screen-text`) the text alone
/// holds what most steps need, at a fraction of a screenshot sample's cost,
/// so many screens fit in a step beside the samples with their image.
pub fn text_only_copies(samples: &[Sample]) -> Vec<Sample> {
    samples
        .iter()
        .map(|sample| {
            let mut copy = sample.clone();
            without_screenshot(&mut copy);
            copy.id = copy.id.map(|id| format!("{id}/text"));
            copy
        })
        .collect()
}

/// `text` trimmed, if the sample's goal names it (and it is not empty):
/// text a model can only write right by copying it from the goal. The goal
/// is the instruction of a navigation prompt as btl writes it
/// ([`task_words`]: every line of the goal, and a step's instruction after
/// it); a prompt without its instruction and history sections names
/// nothing.
pub(crate) fn named_value<'a>(sample: &Sample, text: &'a str) -> Option<&'a str> {
    let value = text.trim();
    let goal = user_goal(sample)?;
    (!value.is_empty() && whole_matches(goal, value).next().is_some()).then_some(value)
}

/// Where `value` stands in `text` as a whole: it continues no word or
/// number, at either end (a letter or digit of the value does not touch
/// one of the text). A fragment the oracle types to finish a field a model
/// began ("n" of "Mei Chen") is part of the goal's words, not a value it
/// names; replaced, it would rewrite every "n" of the prompt.
pub(crate) fn whole_matches<'a>(text: &'a str, value: &'a str) -> impl Iterator<Item = usize> + 'a {
    let joins = |a: Option<char>, b: Option<char>| {
        a.zip(b)
            .is_some_and(|(a, b)| a.is_alphanumeric() && b.is_alphanumeric())
    };
    text.match_indices(value)
        .map(|(at, _)| at)
        .filter(move |&at| {
            let end = at + value.len();
            !joins(text[..at].chars().next_back(), value.chars().next())
                && !joins(value.chars().next_back(), text[end..].chars().next())
        })
}

/// `text` with each whole occurrence of `value` ([`whole_matches`])
/// replaced by `new`.
fn replace_whole(text: &str, value: &str, new: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    for at in whole_matches(text, value) {
        out.push_str(&text[from..at]);
        out.push_str(new);
        from = at + value.len();
    }
    out.push_str(&text[from..]);
    out
}

/// The instruction of the sample's user prompt (its goal, and a step's
/// instruction after it), if it has one.
fn user_goal(sample: &Sample) -> Option<&str> {
    sample
        .messages
        .iter()
        .find_map(|m| Some(&m.content[task_words(&m.content)?.instruction]))
}

/// A random string shaped like `value`: each ASCII digit, upper- or
/// lower-case letter becomes a random one of its kind, other letters a
/// random letter of their script (Latin with accents, CJK), and everything
/// else (spaces, punctuation, `+`, `:`) stays, so a phone number stays a
/// phone number and a time a time, as far as the goal's sentence shows.
pub fn reshape(value: &str, rng: &mut ChaCha8Rng) -> String {
    const ACCENTED_LOWER: &[char] = &['á', 'é', 'í', 'ó', 'ú', 'ñ', 'ç', 'ø', 'å', 'ö', 'ü', 'ë'];
    const ACCENTED_UPPER: &[char] = &['Á', 'É', 'Í', 'Ó', 'Ú', 'Ñ', 'Ç', 'Ø', 'Å', 'Ö', 'Ü', 'Ë'];
    // Every code point of these ranges is a char (none is a surrogate).
    let from = |range: std::ops::RangeInclusive<char>, rng: &mut ChaCha8Rng| -> char {
        let (a, b) = (*range.start() as u32, *range.end() as u32);
        char::from_u32(rng.random_range(a..=b)).unwrap_or(*range.start())
    };
    value
        .chars()
        .map(|c| match c {
            '0'..='9' => from('0'..='9', rng),
            'a'..='z' => from('a'..='z', rng),
            'A'..='Z' => from('A'..='Z', rng),
            '\u{4e00}'..='\u{9fff}' => from('\u{4e00}'..='\u{9fff}', rng),
            c if c.is_lowercase() => ACCENTED_LOWER[rng.random_range(0..ACCENTED_LOWER.len())],
            c if c.is_uppercase() => ACCENTED_UPPER[rng.random_range(0..ACCENTED_UPPER.len())],
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_core::sample::Message;
    use proptest::prelude::*;

    fn typing(goal: &str, history: &str, plan: &str, text: &str) -> Sample {
        Sample {
            id: Some("contact_add-train-s3/step-0004".into()),
            images: vec!["img/step-0004.png".into()],
            image_sizes: vec![[1080, 2400]],
            max_pixels: 200_704,
            messages: vec![
                Message {
                    role: "system".into(),
                    content: "You are a GUI Agent. Action 8: Finish".into(),
                },
                Message {
                    role: "user".into(),
                    content: format!(
                        "## Action Space\nType 09\n\n## User Instruction\n{goal}\n\n## Action History\n{history}\n\n## Screenshots\n<image>"
                    ),
                },
            ],
            solution: Link::Action {
                plan: plan.to_owned(),
                action: Action::Type {
                    text: text.to_owned(),
                },
            }
            .to_json(),
            bbox: vec![],
            rois: vec![],
        }
    }

    fn typed_text(sample: &Sample) -> (String, String) {
        match parse_link_json(&sample.solution, ParseMode::Strict)
            .unwrap()
            .0
        {
            Link::Action {
                plan,
                action: Action::Type { text },
            } => (plan, text),
            other => panic!("not a typing link: {other:?}"),
        }
    }

    #[test]
    fn the_value_changes_in_the_goal_the_history_and_the_answer_only() {
        let sample = typing(
            "Set an alarm for 09:15.",
            "Step 1: Open the Clock app.\nStep 2: Type 09 as the hour.",
            "Type 09 as the hour.",
            "09",
        );
        let (copies, report) =
            augment_typed(std::slice::from_ref(&sample), 3, 7, Path::new("s.json")).unwrap();
        assert_eq!(
            report,
            AugmentReport {
                typed: 1,
                unnamed: 0,
                copies: 3
            }
        );
        for (i, copy) in copies.iter().enumerate() {
            assert_eq!(
                copy.id.as_deref(),
                Some(format!("contact_add-train-s3/step-0004/copy-{i}").as_str())
            );
            let (plan, text) = typed_text(copy);
            assert_eq!(text.len(), 2);
            assert!(text.chars().all(|c| c.is_ascii_digit()), "{text}");
            assert_ne!(text, "09");
            assert_eq!(plan, format!("Type {text} as the hour."));
            let user = &copy.messages[1].content;
            assert!(
                user.contains(&format!("Set an alarm for {text}:15.")),
                "{user}"
            );
            assert!(
                user.contains(&format!("Step 2: Type {text} as the hour.")),
                "{user}"
            );
            // The fixed text before the instruction and the system prompt stay.
            assert!(user.starts_with("## Action Space\nType 09\n"), "{user}");
            assert_eq!(copy.messages[0], sample.messages[0]);
            assert_eq!(copy.images, sample.images);
        }
    }

    /// A one-digit value stands in many places of a screen-text prompt;
    /// only the goal, its repeat and the Plans are the task's words.
    #[test]
    fn a_short_value_changes_in_the_tasks_words_only() {
        let mut sample = typing(
            "Set the timer to 3 minutes.",
            "Step 1: Tap \"Timer\".\nStep 2: Tap \"3\".\nStep 3: Tap \"OK\".",
            "Type 3 as the minutes.",
            "3",
        );
        let user = |goal: &str, key: &str| {
            format!(
                "## Action Space\nType 09\n\n## User Instruction\n{goal}\n\n## Action History\n\
                 Step 1: Tap \"Timer\".\nStep 2: Tap \"{key}\".\nStep 3: Tap \"OK\".\n\n\
                 ## Screen Elements\n- \"3\" [133, 313]\n\n## Screenshots\n<image>\n\n\
                 ## User Instruction\n{goal}"
            )
        };
        sample.messages[1].content = user("Set the timer to 3 minutes.", "3");
        let (copies, _) = augment_typed(&[sample], 2, 5, Path::new("s.json")).unwrap();
        assert_eq!(copies.len(), 2);
        for copy in &copies {
            let (plan, text) = typed_text(copy);
            assert!(text.len() == 1 && text != "3", "{text}");
            assert_eq!(plan, format!("Type {text} as the minutes."));
            assert_eq!(
                copy.messages[1].content,
                user(&format!("Set the timer to {text} minutes."), &text)
            );
        }
    }

    /// A fragment that finishes a name a model began is no value the goal
    /// names: no copy is made, rather than one with every "n" rewritten.
    /// A value the goal names whole is replaced only where it stands whole.
    #[test]
    fn only_whole_values_are_named_and_replaced() {
        let fragment = typing(
            "Add a contact named Mei Chen with phone number +33 6 12 34 05 12.",
            "Step 1: Type \"Mei Che\" in the name field.",
            "Type \"n\" at the end of the name field.",
            "n",
        );
        let (copies, report) = augment_typed(&[fragment], 2, 1, Path::new("s.json")).unwrap();
        assert!(copies.is_empty());
        assert_eq!(report.unnamed, 1);
        let hour = typing(
            "Set an alarm for 10:30 labelled \"Room 101\".",
            "",
            "Type 10 as the hour.",
            "10",
        );
        let (copies, _) = augment_typed(&[hour], 1, 1, Path::new("s.json")).unwrap();
        let (_, text) = typed_text(&copies[0]);
        let user = &copies[0].messages[1].content;
        assert!(
            user.contains(&format!(
                "Set an alarm for {text}:30 labelled \"Room 101\"."
            )),
            "{user}"
        );
    }

    #[test]
    fn a_copy_without_its_screenshot_keeps_the_rest() {
        let mut sample = typing("Set an alarm for 09:15.", "", "Type 09 as the hour.", "09");
        let before = sample.clone();
        without_screenshot(&mut sample);
        assert!(sample.images.is_empty());
        assert_eq!(sample.image_sizes, before.image_sizes);
        assert_eq!(
            sample.messages[1].content,
            before.messages[1].content.replace("<image>", "")
        );
        assert!(sample.messages[1].content.ends_with("## Screenshots\n"));
        assert_eq!(sample.solution, before.solution);
    }

    #[test]
    fn text_only_copies_are_the_samples_without_their_screenshots() {
        let mut named = typing("Set an alarm for 09:15.", "", "Type 09 as the hour.", "09");
        named.id = Some("alarm_set-train-s0/step-0002".into());
        let mut unnamed = typing("Set an alarm for 07:45.", "", "Type 07 as the hour.", "07");
        unnamed.id = None;
        let copies = text_only_copies(&[named.clone(), unnamed.clone()]);
        assert_eq!(copies.len(), 2);
        assert_eq!(
            copies[0].id.as_deref(),
            Some("alarm_set-train-s0/step-0002/text")
        );
        assert_eq!(copies[1].id, None);
        for (copy, sample) in copies.iter().zip([&named, &unnamed]) {
            assert!(copy.images.is_empty() && !sample.images.is_empty());
            assert!(!copy.messages[1].content.contains("<image>"));
            assert_eq!(copy.solution, sample.solution);
            assert_eq!(copy.image_sizes, sample.image_sizes);
        }
    }

    #[test]
    fn leading_spaces_of_the_typed_text_stay() {
        let sample = typing(
            "Add \"Ask Zoë\" at the end of the note titled \"Books\".",
            "",
            "Type \" Ask Zoë\" at the end of the note field.",
            " Ask Zoë",
        );
        let (copies, _) = augment_typed(&[sample], 1, 0, Path::new("s.json")).unwrap();
        let (plan, text) = typed_text(&copies[0]);
        assert!(text.starts_with(' ') && text.len() > 1, "{text:?}");
        assert!(plan.contains(&format!("\"{text}\"")), "{plan}");
        let user = &copies[0].messages[1].content;
        assert!(
            user.contains(&format!("Add \"{}\" at the end", text.trim())),
            "{user}"
        );
    }

    #[test]
    fn other_samples_and_text_the_goal_does_not_name_are_left_out() {
        let mut tap = typing("Open Notes.", "", "Open Notes.", "x");
        tap.solution =
            r#"[{"Plan": "Open Notes.", "Action": {"function": "Tap", "point_2d": [1, 2]}}]"#
                .into();
        let unnamed = typing("Search the web.", "", "Type \"cats\".", "cats");
        // A prompt btl did not write (no instruction and history sections)
        // names nothing, whatever its text holds.
        let mut foreign = typing("Search the web for cats.", "", "Type \"cats\".", "cats");
        foreign.messages[1].content = "Goal: Search the web for cats.\n<image>".into();
        let (copies, report) =
            augment_typed(&[tap, unnamed, foreign], 4, 0, Path::new("s.json")).unwrap();
        assert!(copies.is_empty());
        assert_eq!(
            report,
            AugmentReport {
                typed: 0,
                unnamed: 2,
                copies: 0
            }
        );
    }

    #[test]
    fn copies_never_name_a_held_out_value() {
        // Two-digit minutes draw ":35", a held-out time, one time in a
        // hundred: over many copies it must have been drawn and refused.
        let sample = typing(
            "Set an alarm for 06:15.",
            "",
            "Type 15 as the minutes.",
            "15",
        );
        let (copies, report) = augment_typed(&[sample], 1000, 1, Path::new("s.json")).unwrap();
        assert_eq!(report.copies, 1000);
        for copy in &copies {
            let user = &copy.messages[1].content;
            assert!(!names_heldout_value(user), "{user}");
        }
    }

    #[test]
    fn a_bad_solution_is_named() {
        let mut sample = typing("Type x.", "", "p", "x");
        sample.solution = "[{\"Plan\": ".into();
        let err = augment_typed(&[sample], 1, 0, Path::new("s.json"))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("s.json sample 0: contact_add-train-s3/step-0004: "),
            "{err}"
        );
    }

    proptest! {
        #[test]
        fn reshaping_keeps_the_shape(value in "\\PC{0,24}", seed in any::<u64>()) {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let new = reshape(&value, &mut rng);
            prop_assert_eq!(new.chars().count(), value.chars().count());
            for (a, b) in value.chars().zip(new.chars()) {
                prop_assert_eq!(a.is_ascii_digit(), b.is_ascii_digit());
                prop_assert_eq!(a.is_alphabetic(), b.is_alphabetic());
                prop_assert_eq!(a.is_uppercase(), b.is_uppercase());
                if !a.is_alphanumeric() {
                    prop_assert_eq!(a, b);
                }
            }
        }
    }
}
