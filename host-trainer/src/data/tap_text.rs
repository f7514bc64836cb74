//! Tap-text samples: recorded screens with a goal that names a text on the
//! screen and an answer that taps it.
//!
//! Why: the templates a small model fails are those that must find a name,
//! title or photo on the screen (delete the contact "Oskar Sato" with
//! "Oskar Santos" one row above). An oracle episode shows that skill once or
//! twice among several steps that need none, and the training split has
//! only a few dozen names. Every recorded screen holds many texts the
//! finger can reach, each a free lesson in reading: `Tap "Oskar Sato".`,
//! answered by a tap on that row. These are referring-expression grounding
//! samples (as GUI agents are commonly pre-trained on) in the navigation
//! prompt, so what they teach is in the form the agent is asked in.
//!
//! # Which texts
//! A node's text is a target when it is one line of [`MIN_TEXT_CHARS`] to
//! [`MAX_TEXT_CHARS`] characters, appears on no other node of the screen
//! (an ambiguous goal has no single answer), lies wholly on the screen with
//! room for a finger, and its centre reaches a clickable element: the node
//! itself or an ancestor no bigger than a quarter of the screen (a dialog's
//! scrim holds its title but does nothing with a tap), which is also what
//! a tap there reaches (`sample::rois::target_element`, the rule the
//! samples' target box follows), not something drawn over it. Texts a held-out goal names are
//! left out, so these samples never teach a held-out value. Where the
//! prompt lists the screen (`btl-screen-text`), the text must also be the
//! whole label of exactly one listed line, and the answer taps that line's
//! point: the goal is then answered by reading the list alone.
//!
//! # Moved points
//! On real screens a model can answer from where a text usually sits
//! rather than from the list: btl-mini trained on tap-text found the quoted
//! line on 75% of held-out screens but on 1% of the same screens with their
//! points moved (docs/training.md, "A fifth run"). With
//! [`TapTextOptions::move_points`] every line's point is drawn anew at
//! random and the lines re-sorted by position, so only looking the quote
//! up in the list pays. Such samples have no screenshot, which the moved
//! points would contradict, and no regions, as no box is known.
//!
//! # Phrased goals
//! A task's goal names its target inside a sentence ("Could you delete the
//! contact Dmitri King?") while the Plan quotes it, so an agent must copy
//! the name from one into the other. With [`TapTextOptions::phrased`] the
//! goal is one of [`PHRASINGS`] in a training frame and the Plan stays the
//! quote.
//!
//! # Made-up texts
//! The training split's screens show a few dozen names, which a small model
//! recalls instead of copying: for a held-out name its Plan quotes a name it
//! has seen (docs/training.md, "A sixth run"). With
//! [`TapTextOptions::made_up`] every listed label of a moved lesson is a
//! random string of its shape ([`reshape`]), drawn anew for each sample, so
//! the quote can only be copied from the goal and found in the list, as the
//! typed-value copies teach for typed text.

use super::augment::{reshape, without_screenshot};
use super::trajectories::{EpisodeInput, EpisodeNames, ImageStage, episode_dirs, read_ui_tree};
use super::{Error, Result};
use agent_core::agent::trajectory::{Executed, StepRecord, read_trajectory};
use agent_core::device::DeviceAction;
use agent_core::device::ui::UiNode;
use agent_core::hash::fnv1a;
use agent_core::protocol::prompt::{ScreenElement, listed_screen, quoting_plan};
use agent_core::protocol::{Action, DevicePoint, Point, Profile, Prompt, Size, Task};
use agent_core::sample::Sample;
use agent_core::sample::rois::target_element;
use agent_core::sample::state::{StepContext, state_sample};
use agent_core::sim::tasks::{Split, names_heldout_value};
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Longest text taken as a target, in characters: longer ones are
/// paragraphs, not things a goal names.
pub const MAX_TEXT_CHARS: usize = 48;

/// Shortest text taken as a target, in characters: a single character is a
/// keyboard key or an index letter, which teaches no reading (keys were a
/// third of the targets on screens with the keyboard up).
pub const MIN_TEXT_CHARS: usize = 2;

/// Smallest width and height of a target's bounds, in screen pixels.
const MIN_SIDE: i32 = 8;

/// A clickable node covering more than 1/`BACKDROP_SHARE` of the screen is
/// a backdrop (a dialog's scrim that swallows taps), not something a text
/// inside it makes tappable.
const BACKDROP_SHARE: i64 = 4;

/// How tap-text samples are made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapTextOptions {
    /// Most samples per screen (fewer when the screen has fewer targets).
    pub per_screen: usize,
    /// Seed of the choice among a screen's targets (each screen draws from
    /// it and its id).
    pub seed: u64,
    /// Most ROIs per sample (λ), target included.
    pub lambda: usize,
    /// Redraw the listed points at random (see the module documentation);
    /// only for prompts that list the screen.
    pub move_points: bool,
    /// Put the goal as a task would (`Please open Dmitri King.`; see
    /// [`PHRASINGS`]) rather than as the answer's Plan.
    pub phrased: bool,
    /// Replace every listed label by a made-up one (see the module
    /// documentation); only with `move_points`.
    pub made_up: bool,
}

/// Goals of phrased tap-text samples, `{}` the text: the suite's goals
/// name what to act on with quotes (a note's title) or without (a
/// contact's name), inside a sentence, and an agent's Plan quotes it
/// (`Tap "Dmitri King".`). Each is then framed as a training goal is
/// ([`Split::phrase`]), never as a held-out one.
pub const PHRASINGS: [&str; 6] = [
    "Tap \"{}\".",
    "Open {}.",
    "Select the item {}.",
    "Find {} on the screen and tap it.",
    "Open the entry titled \"{}\".",
    "Go to {}.",
];

/// What a run made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TapTextReport {
    pub episodes: usize,
    /// Screens read (steps with a UI tree).
    pub screens: usize,
    /// Steps without a UI tree, which cannot say where a text is.
    pub without_tree: usize,
    pub samples: usize,
    /// Where the screenshots went.
    pub images_dir: PathBuf,
}

/// The texts of `ui` a goal can name and a tap can reach (see the module
/// documentation), in document order.
pub fn tap_targets(ui: &UiNode, screen: Size) -> Vec<&UiNode> {
    // Every node with the clickable node that holds it (itself or its
    // nearest clickable ancestor), in document order.
    let mut nodes: Vec<(&UiNode, Option<usize>)> = Vec::new();
    let mut stack: Vec<(&UiNode, Option<usize>)> = vec![(ui, None)];
    while let Some((node, clickable_above)) = stack.pop() {
        let here = nodes.len();
        let holder = if node.clickable {
            Some(here)
        } else {
            clickable_above
        };
        nodes.push((node, holder));
        stack.extend(node.children.iter().rev().map(|c| (c, holder)));
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (node, _) in &nodes {
        *seen.entry(node.text.trim()).or_default() += 1;
    }
    let (width, height) = (
        i32::try_from(screen.width).unwrap_or(i32::MAX),
        i32::try_from(screen.height).unwrap_or(i32::MAX),
    );
    nodes
        .iter()
        .filter(|(node, holder)| {
            let text = node.text.trim();
            let [x1, y1, x2, y2] = node.bounds;
            let Some(holder) = holder.map(|k| nodes[k].0) else {
                return false;
            };
            let (cx, cy) = node.center();
            !text.is_empty()
                && !text.contains('\n')
                && (MIN_TEXT_CHARS..=MAX_TEXT_CHARS).contains(&text.chars().count())
                && seen.get(text) == Some(&1)
                && x1 >= 0
                && y1 >= 0
                && x2 <= width
                && y2 <= height
                && i64::from(x2) - i64::from(x1) >= i64::from(MIN_SIDE)
                && i64::from(y2) - i64::from(y1) >= i64::from(MIN_SIDE)
                && holder.area().saturating_mul(BACKDROP_SHARE) <= i64::from(width) * i64::from(height)
                // The element a tap there reaches, as the samples' target
                // box is found: the holder, not something drawn over it.
                && u32::try_from(cx).ok().zip(u32::try_from(cy).ok()).is_some_and(|(x, y)| {
                    target_element(ui, DevicePoint { x, y }, screen)
                        .is_some_and(|t| std::ptr::eq(t, holder))
                })
        })
        .map(|(node, _)| *node)
        .collect()
}

/// The answer's Plan of a tap-text sample, and its goal unless phrased.
pub fn tap_goal(text: &str) -> String {
    quoting_plan("Tap", text)
}

/// Up to `options.per_screen` tap-text samples of one recorded screen
/// (pure): `step`'s screenshot with `ui`, its system prompt and action
/// space, a goal naming one of [`tap_targets`] and no history; the answer
/// taps the target's centre, rounded to whole model-frame pixels, or the
/// point of its line where the prompt lists the screen (see the module
/// documentation). `cx` is the step's context; each sample's id is its id
/// with `/tap-N`.
pub fn screen_samples(
    step: &StepRecord,
    ui: &UiNode,
    cx: &StepContext,
    options: &TapTextOptions,
) -> Result<Vec<Sample>, String> {
    let profile = Profile::of_user_prompt(&step.prompt.user)
        .ok_or("its prompt is no navigation prompt (no action space btl knows)")?;
    if options.move_points && !profile.lists_screen() {
        return Err(format!(
            "moved points need a prompt that lists the screen, and this one is {}",
            profile.name()
        ));
    }
    if options.made_up && !options.move_points {
        return Err(
            "made-up texts need moved points: the screenshot would show the real ones".into(),
        );
    }
    let mut targets: Vec<&UiNode> = tap_targets(ui, cx.image_size)
        .into_iter()
        .filter(|node| !names_heldout_value(&tap_goal(node.text.trim())))
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(options.seed ^ fnv1a(&[cx.id.as_bytes()]));
    targets.shuffle(&mut rng);
    // The screen is the same for every sample of it: the lines the
    // recorded prompt listed, as the agent's keyboard packages had them.
    let screen = if profile.lists_screen() {
        listed_screen(&step.prompt.user).map_err(|e| format!("its prompt's screen: {e}"))?
    } else {
        Vec::new()
    };
    let reached = |at: DevicePoint| target_element(ui, at, cx.image_size);
    // The answer's point in whole model-frame pixels, as the model writes
    // it, and where the device would put it.
    let taps = targets.into_iter().filter_map(|node| {
        let (x, y) = node.center();
        // tap_targets keeps only nodes wholly on the screen.
        let centre = DevicePoint {
            x: u32::try_from(x).ok()?,
            y: u32::try_from(y).ok()?,
        };
        if profile.lists_screen() {
            // The model reads the list, so the text must be the whole
            // label of one line (a row that speaks "06:30, Work" names no
            // "Work" a copy could find), and the answer copies that line's
            // point, which must reach what a tap on the text reaches.
            let mut lines = screen.iter().filter(|e| e.label == node.text.trim());
            let (Some(line), None) = (lines.next(), lines.next()) else {
                return None;
            };
            let at = step.frame.to_device(line.point);
            let same = reached(at)
                .zip(reached(centre))
                .is_some_and(|(a, b)| std::ptr::eq(a, b));
            same.then_some((node, line.point, at))
        } else {
            // Still on the text after rounding, or the target is left out.
            let point = step.frame.to_model_rounded(centre);
            let at = step.frame.to_device(point);
            node.contains(i32::try_from(at.x).ok()?, i32::try_from(at.y).ok()?)
                .then_some((node, point, at))
        }
    });
    taps.take(options.per_screen)
        .enumerate()
        .map(|(k, (node, point, at))| {
            let mut screen = screen.clone();
            let text = if options.made_up {
                let labels = made_up_labels(&screen, &mut rng);
                for line in &mut screen {
                    line.label = labels[&line.label].clone();
                }
                labels[node.text.trim()].clone()
            } else {
                node.text.trim().to_owned()
            };
            let text = text.as_str();
            let plan = tap_goal(text);
            let goal = if options.phrased {
                let phrasing = PHRASINGS[rng.random_range(0..PHRASINGS.len())];
                Split::Train.phrase(&phrasing.replace("{}", text), rng.random())
            } else {
                plan.clone()
            };
            let (screen, point, at) = if options.move_points {
                let moved = moved_points(&screen, step.frame.model, &mut rng);
                let point = moved
                    .iter()
                    .find(|line| line.label == text)
                    .map(|line| line.point)
                    .ok_or_else(|| format!("{text:?} is not listed"))?;
                (moved, point, step.frame.to_device(point))
            } else {
                (screen, point, at)
            };
            let executed = Executed {
                plan,
                model: Action::Tap { point_2d: point },
                device: Some(DeviceAction::Tap { at }),
            };
            let user = Prompt::new(
                &Task::Navigation {
                    goal: &goal,
                    step_instruction: None,
                    history: &[],
                    screen: &screen,
                },
                profile,
                None,
            )
            .user;
            let prompt = Prompt {
                system: step.prompt.system.clone(),
                user,
            };
            let cx = StepContext {
                goal: &goal,
                image: cx.image.clone(),
                id: format!("{}/tap-{k}", cx.id),
                ..*cx
            };
            if options.move_points {
                let mut sample = state_sample(&step.frame, &prompt, &executed, None, &cx)?;
                without_screenshot(&mut sample);
                let kind = if options.made_up {
                    "moved-made-up"
                } else {
                    "moved"
                };
                sample.id = sample.id.map(|id| format!("{id}/{kind}"));
                Ok(sample)
            } else {
                state_sample(&step.frame, &prompt, &executed, Some(ui), &cx)
            }
        })
        .collect()
}

/// A made-up label for every label of `screen`: a random string of its
/// shape ([`reshape`]), no two alike, none a label that has no letter or
/// digit to change ("+" stays "+"), none naming a held-out value.
fn made_up_labels(screen: &[ScreenElement], rng: &mut ChaCha8Rng) -> HashMap<String, String> {
    let fixed = |label: &str| !label.chars().any(char::is_alphanumeric);
    let mut taken: HashSet<String> = screen
        .iter()
        .filter(|line| fixed(&line.label))
        .map(|line| line.label.clone())
        .collect();
    let mut labels = HashMap::new();
    for line in screen {
        if labels.contains_key(&line.label) {
            continue;
        }
        let new = if fixed(&line.label) {
            line.label.clone()
        } else {
            // A clash needs two short labels of one shape drawing alike;
            // the last draw stands if every draw clashes.
            let mut new = reshape(&line.label, rng);
            for _ in 0..MOVED_DRAWS {
                if !taken.contains(&new) && !names_heldout_value(&tap_goal(&new)) {
                    break;
                }
                new = reshape(&line.label, rng);
            }
            new
        };
        taken.insert(new.clone());
        labels.insert(line.label.clone(), new);
    }
    labels
}

/// Margin of a moved point from the model frame's edges, in model pixels:
/// where real lines' points lie, at least half a finger in.
const MOVED_MARGIN: u32 = 8;

/// Draws per moved point before two lines may share one (only a frame far
/// smaller than any screenshot's could need more).
const MOVED_DRAWS: usize = 64;

/// `screen` with every line at a new random point of a `model`-sized frame,
/// no two alike, re-sorted top to bottom, then left to right, as the list
/// of a screen with the same texts laid out anew.
fn moved_points(screen: &[ScreenElement], model: Size, rng: &mut ChaCha8Rng) -> Vec<ScreenElement> {
    let inside = |side: u32| MOVED_MARGIN..=side.saturating_sub(MOVED_MARGIN).max(MOVED_MARGIN);
    let (xs, ys) = (inside(model.width), inside(model.height));
    let mut taken = HashSet::new();
    let mut moved = Vec::with_capacity(screen.len());
    for line in screen {
        let mut point = (0, 0);
        for _ in 0..MOVED_DRAWS {
            point = (rng.random_range(xs.clone()), rng.random_range(ys.clone()));
            if !taken.contains(&point) {
                break;
            }
        }
        taken.insert(point);
        moved.push(ScreenElement {
            point: Point::new(f64::from(point.0), f64::from(point.1)),
            ..line.clone()
        });
    }
    moved.sort_by(|a, b| {
        a.point
            .y
            .total_cmp(&b.point.y)
            .then(a.point.x.total_cmp(&b.point.x))
    });
    moved
}

/// Tap-text samples of every screen of the episodes in `dirs` (see
/// [`episode_dirs`]), whatever the episodes' outcomes, into the sample
/// file `out`; screenshots go beside it as `from_trajectories` writes
/// them, the sample file last, each atomically.
pub fn tap_text(dirs: &[PathBuf], out: &Path, options: &TapTextOptions) -> Result<TapTextReport> {
    if options.lambda == 0 {
        return Err(Error::Usage("lambda must be at least 1".into()));
    }
    let episodes = episode_dirs(dirs)?;
    let mut stage = ImageStage::new(out)?;
    let images = stage.images.clone();
    let mut report = TapTextReport {
        episodes: episodes.len(),
        images_dir: stage.dir(),
        ..TapTextReport::default()
    };
    let mut names = EpisodeNames::default();
    let mut samples = Vec::new();
    for dir in &episodes {
        let trajectory = read_trajectory(dir)?;
        let input = EpisodeInput::new(dir, &trajectory, &mut names)?;
        for (k, step) in trajectory.steps.iter().enumerate() {
            let at_step = input.step_error(k);
            let Some(tree) = &step.ui_tree else {
                report.without_tree += 1;
                continue;
            };
            let ui = read_ui_tree(&dir.join(tree)).map_err(&at_step)?;
            let (cx, png) = input
                .screen(step, &images, options.lambda)
                .map_err(&at_step)?;
            report.screens += 1;
            let made = screen_samples(step, &ui, &cx, options).map_err(at_step)?;
            if made.is_empty() {
                continue;
            }
            if !options.move_points {
                stage.write(&cx.image, &png)?;
            }
            samples.extend(made);
        }
    }
    report.samples = samples.len();
    let why = match report.without_tree {
        0 => String::new(),
        n => format!(" ({n} steps have no UI tree to read a text from)"),
    };
    stage.finish(&samples, &why)?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCREEN: Size = Size {
        width: 720,
        height: 1280,
    };

    fn node(text: &str, bounds: [i32; 4], clickable: bool, children: Vec<UiNode>) -> UiNode {
        UiNode {
            text: text.into(),
            bounds,
            clickable,
            children,
            ..UiNode::default()
        }
    }

    fn texts<'a>(targets: &[&'a UiNode]) -> Vec<&'a str> {
        targets.iter().map(|n| n.text.as_str()).collect()
    }

    proptest::proptest! {
        /// Moved lines keep their labels and states, each at its own point
        /// inside the frame's margins, listed top to bottom, then left to
        /// right.
        #[test]
        fn moved_points_keep_every_line_at_its_own_point_in_the_frame(
            labels in proptest::collection::vec("[a-z]{1,6}", 0..48),
            (width, height) in (28u32..400, 28u32..900),
            seed: u64,
        ) {
            let screen: Vec<ScreenElement> = labels
                .iter()
                .enumerate()
                .map(|(k, label)| ScreenElement {
                    label: label.clone(),
                    point: Point::new(1.0, 1.0),
                    checked: (k % 3 == 0).then_some(k % 2 == 0),
                })
                .collect();
            let model = Size::new(width, height);
            let moved = moved_points(&screen, model, &mut ChaCha8Rng::seed_from_u64(seed));
            let key = |e: &ScreenElement| (e.label.clone(), e.checked);
            let mut before: Vec<_> = screen.iter().map(key).collect();
            let mut after: Vec<_> = moved.iter().map(key).collect();
            before.sort();
            after.sort();
            proptest::prop_assert_eq!(before, after);
            let margin = f64::from(MOVED_MARGIN);
            for e in &moved {
                proptest::prop_assert!(e.point.x >= margin && e.point.x <= f64::from(width) - margin);
                proptest::prop_assert!(e.point.y >= margin && e.point.y <= f64::from(height) - margin);
            }
            let points: HashSet<(u64, u64)> = moved
                .iter()
                .map(|e| (e.point.x as u64, e.point.y as u64))
                .collect();
            proptest::prop_assert_eq!(points.len(), moved.len());
            proptest::prop_assert!(moved
                .windows(2)
                .all(|w| (w[0].point.y, w[0].point.x) <= (w[1].point.y, w[1].point.x)));
        }

        /// Made-up labels are distinct wherever a label can change, keep
        /// every character that is no letter or digit, and leave a label
        /// with nothing to change as it is; a label listed twice gets one.
        #[test]
        fn made_up_labels_are_distinct_and_keep_what_is_no_letter_or_digit(
            labels in proptest::collection::vec("[A-Za-z0-9 :%+,.-]{1,12}", 1..40),
            seed: u64,
        ) {
            let screen: Vec<ScreenElement> = labels
                .iter()
                .map(|label| ScreenElement {
                    label: label.clone(),
                    point: Point::new(1.0, 1.0),
                    checked: None,
                })
                .collect();
            let made_up = made_up_labels(&screen, &mut ChaCha8Rng::seed_from_u64(seed));
            let distinct: HashSet<&String> = labels.iter().collect();
            proptest::prop_assert_eq!(made_up.len(), distinct.len());
            let kept = |text: &str| -> String {
                text.chars().filter(|c| !c.is_ascii_alphanumeric()).collect()
            };
            let mut drawn = HashSet::new();
            for (label, new) in &made_up {
                proptest::prop_assert_eq!(new.chars().count(), label.chars().count());
                proptest::prop_assert_eq!(kept(new), kept(label));
                if kept(label).len() == label.len() {
                    proptest::prop_assert_eq!(new, label);
                }
                // Two labels of one short shape may exhaust their draws;
                // with three or more letters or digits a clash is
                // practically impossible.
                if label.chars().filter(char::is_ascii_alphanumeric).count() >= 3 {
                    proptest::prop_assert!(drawn.insert(new.clone()), "{:?} twice", new);
                }
            }
        }
    }

    #[test]
    fn texts_inside_clickable_rows_are_targets_and_bare_labels_are_not() {
        let row = |text: &str, y: i32| {
            node(
                "",
                [0, y, 720, y + 100],
                true,
                vec![node(text, [100, y + 20, 400, y + 80], false, vec![])],
            )
        };
        let ui = node(
            "",
            [0, 0, 720, 1280],
            false,
            vec![
                node("Contacts", [20, 20, 300, 80], false, vec![]),
                row("Oskar Santos", 200),
                row("Oskar Sato", 300),
            ],
        );
        assert_eq!(
            texts(&tap_targets(&ui, SCREEN)),
            ["Oskar Santos", "Oskar Sato"]
        );
    }

    #[test]
    fn repeated_long_short_multiline_tiny_and_offscreen_texts_are_left_out() {
        let button = |text: &str, bounds| node(text, bounds, true, vec![]);
        let ui = node(
            "",
            [0, 0, 720, 1280],
            false,
            vec![
                button("Delete", [0, 100, 200, 200]),
                button("Delete", [0, 200, 200, 300]),
                button(&"a".repeat(MAX_TEXT_CHARS + 1), [0, 300, 700, 400]),
                button(&"b".repeat(MAX_TEXT_CHARS), [0, 400, 700, 500]),
                button("two\nlines", [0, 500, 200, 600]),
                button("dot", [0, 600, 7, 700]),
                button("below", [0, 1200, 200, 1300]),
                button("q", [300, 600, 360, 700]),
                button("Save", [500, 100, 700, 200]),
            ],
        );
        assert_eq!(
            texts(&tap_targets(&ui, SCREEN)),
            [&"b".repeat(MAX_TEXT_CHARS), "Save"]
        );
    }

    #[test]
    fn a_dialog_title_inside_its_scrim_is_not_a_target() {
        let ui = node(
            "",
            [0, 0, 720, 1280],
            true,
            vec![
                node("Delete contact?", [100, 500, 600, 560], false, vec![]),
                node("Delete", [400, 700, 600, 780], true, vec![]),
            ],
        );
        assert_eq!(texts(&tap_targets(&ui, SCREEN)), ["Delete"]);
    }

    #[test]
    fn a_text_covered_by_a_later_clickable_node_is_not_a_target() {
        // A dialog's scrim, later in document order, is drawn over the list.
        let ui = node(
            "",
            [0, 0, 720, 1280],
            false,
            vec![
                node("Notes", [0, 100, 720, 200], true, vec![]),
                node(
                    "",
                    [0, 0, 720, 1280],
                    true,
                    vec![node("Cancel", [100, 600, 300, 700], true, vec![])],
                ),
            ],
        );
        assert_eq!(texts(&tap_targets(&ui, SCREEN)), ["Cancel"]);
    }
}
