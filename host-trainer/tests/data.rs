//! Training samples from real trajectories: agent-core's agent runs suite
//! tasks on the virtual phone with each task's oracle as its policy, and
//! the recorded episodes are converted.
//!
//! The expectations come from outside the converter: the target box is the
//! element the task's oracle targets on the UI tree the step recorded, the
//! action is the one the agent executed, and the rewards are agent-core's.

use agent_core::agent::safety::{Confirm, SafetyConfig, Verdict};
use agent_core::agent::stability::{ManualClock, StabilityConfig};
use agent_core::agent::trajectory::{
    Outcome, ParseRecord, StepOutcome, StepRecord, Trajectory, read_trajectory,
};
use agent_core::agent::{Agent, AgentConfig};
use agent_core::device::DeviceAction;
use agent_core::device::sim::SimDevice;
use agent_core::device::ui::parse_uiautomator_xml;
use agent_core::model::{OraclePolicy, Policy, Relabelled, ScriptedPolicy};
use agent_core::protocol::{
    Action, BtlOutput, DevicePoint, FrameMap, Link, ParseMode, Point, Profile, Size,
    TRAINING_MAX_PIXELS, parse, parse_link_json, render,
};
use agent_core::reward::{RewardMode, Weights, score};
use agent_core::sample::Sample;
use agent_core::sim::phone::PhoneConfig;
use agent_core::sim::tasks::{self, Task};
use agent_core::sim::virtual_phone::VirtualPhone;
use host_trainer::data::ms_swift::{DATASET_FILE, ExportOptions, Purpose, export_ms_swift};
use host_trainer::data::tap_text::tap_targets;
use host_trainer::data::{ConvertOptions, DEFAULT_LAMBDA, from_trajectories, load_samples};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::util::{btl_train, btl_train_succeeds};

/// Tasks whose oracles between them tap (a slider off its centre too),
/// long-press, type and swipe; with their seeds.
const TASKS: [(&str, u64); 4] = [
    ("wifi_on", 0),
    ("contact_add", 1),
    ("photos_delete_two", 1),
    ("brightness_set", 4),
];

/// Records one episode of `name` (seed `seed`) in `dir` with the oracle as
/// the policy; `budget` overrides the task's step budget.
fn record(dir: &Path, name: &str, seed: u64, budget: Option<u32>) -> Outcome {
    let oracle = OraclePolicy::new(tasks::sample(name, seed).expect("a suite task"));
    record_with(dir, name, seed, budget, |_| (), Box::new(oracle))
}

/// [`record`] with another policy, and the agent's settings as `configure`
/// leaves them.
fn record_with(
    dir: &Path,
    name: &str,
    seed: u64,
    budget: Option<u32>,
    configure: impl FnOnce(&mut AgentConfig),
    policy: Box<dyn Policy>,
) -> Outcome {
    let task: Arc<dyn Task> = Arc::from(tasks::sample(name, seed).expect("a suite task"));
    let phone = Arc::new(VirtualPhone::new(PhoneConfig {
        seed,
        ..PhoneConfig::default()
    }));
    phone.with_phone(|p| task.setup(p));
    let mut config = AgentConfig {
        goal: task.goal(),
        max_steps: budget.unwrap_or(task.max_steps()),
        stability: StabilityConfig {
            poll_interval_ms: 10,
            timeout_ms: 100,
        },
        // Deleting a photo is sensitive; nothing real is at stake here.
        safety: SafetyConfig {
            on_sensitive: Confirm::Allow,
            ..SafetyConfig::default()
        },
        seed,
        ..AgentConfig::default()
    };
    configure(&mut config);
    let checker = {
        let (phone, task) = (phone.clone(), task.clone());
        move || phone.with_phone(|p| task.is_successful(p.state()))
    };
    Agent::new(dir, config, Box::new(SimDevice::new(phone)), policy)
        .expect("the agent starts")
        .with_clock(ManualClock::default())
        .with_task(serde_json::json!({"name": name, "params": task.params()}))
        .expect("the task is recorded")
        .with_checker(checker)
        .run()
        .expect("the episode runs")
}

/// Records every task of [`TASKS`] under `root` and returns their directories.
fn record_all(root: &Path) -> Vec<PathBuf> {
    TASKS
        .iter()
        .map(|&(name, seed)| {
            let dir = root.join(format!("{name}-s{seed}"));
            let outcome = record(&dir, name, seed, None);
            assert_eq!(outcome.success, Some(true), "the oracle solves {name}");
            dir
        })
        .collect()
}

/// The raw answer whose action the step executed.
fn executed_raw(step: &StepRecord) -> &str {
    let executed = step.executed.as_ref().expect("an executed step");
    step.attempts
        .iter()
        .rev()
        .find(|a| {
            matches!(&a.parse, ParseRecord::Parsed { action: Some(action), .. } if *action == executed.model)
                && matches!(a.verdict, Some(Verdict::Allow { .. }))
        })
        .map(|a| a.raw.as_str())
        .expect("the executed attempt is recorded")
}

fn sample_by_id<'a>(samples: &'a [Sample], id: &str) -> &'a Sample {
    samples
        .iter()
        .find(|s| s.id.as_deref() == Some(id))
        .unwrap_or_else(|| panic!("no sample {id}"))
}

fn convert(dirs: &[PathBuf], out: &Path, options: &ConvertOptions) -> Vec<Sample> {
    from_trajectories(dirs, out, options).expect("the trajectories convert");
    load_samples(out).expect("the written samples read back")
}

#[test]
fn oracle_steps_become_samples_with_the_oracles_targets_and_full_rewards() {
    let tmp = tempfile::tempdir().unwrap();
    let dirs = record_all(&tmp.path().join("episodes"));
    let out = tmp.path().join("out/samples.json");
    let report = from_trajectories(&dirs, &out, &ConvertOptions::default()).unwrap();
    let samples = load_samples(&out).unwrap();
    assert_eq!(report.episodes, TASKS.len());
    assert_eq!(report.samples, samples.len());
    let mut functions = std::collections::BTreeSet::new();
    let mut checked = 0;
    for (dir, &(name, seed)) in dirs.iter().zip(&TASKS) {
        let trajectory: Trajectory = read_trajectory(dir).unwrap();
        let task = tasks::sample(name, seed).unwrap();
        let episode = dir.file_name().unwrap().to_str().unwrap();
        for step in &trajectory.steps {
            assert_eq!(step.outcome, StepOutcome::Performed, "{name}: {step:?}");
            let executed = step.executed.as_ref().unwrap();
            let stem = format!("step-{:04}", step.index);
            let sample = sample_by_id(&samples, &format!("{episode}/{stem}"));
            functions.insert(executed.model.function());

            // The box: the element the oracle aimed at on this very screen.
            let xml = std::fs::read_to_string(dir.join(format!("{stem}.xml"))).unwrap();
            let oracle = task
                .oracle(&parse_uiautomator_xml(&xml).unwrap())
                .expect("the oracle had a step here");
            let expected: Vec<f64> = match (&oracle.action, &oracle.target) {
                (DeviceAction::Tap { .. } | DeviceAction::LongPress { .. }, Some(target)) => {
                    target.bounds.iter().map(|&v| f64::from(v)).collect()
                }
                _ => Vec::new(),
            };
            assert_eq!(sample.bbox, expected, "{name} {stem}: {}", executed.plan);
            if !expected.is_empty() {
                let first = &sample.rois[0];
                assert_eq!(first.priority, 1);
                assert_eq!(
                    [
                        first.bbox_2d.x1,
                        first.bbox_2d.y1,
                        first.bbox_2d.x2,
                        first.bbox_2d.y2
                    ],
                    expected[..]
                );
            }
            assert!(!sample.rois.is_empty() && sample.rois.len() <= DEFAULT_LAMBDA);
            for (k, roi) in sample.rois.iter().enumerate() {
                assert_eq!(roi.priority as usize, k + 1);
            }

            // The solution is the executed action, and parses strictly.
            let (link, _) = parse_link_json(&sample.solution, ParseMode::Strict).unwrap();
            assert_eq!(
                link,
                Link::Action {
                    plan: executed.plan.clone(),
                    action: executed.model.clone()
                }
            );
            assert_eq!(sample.messages[0].content, step.prompt.system);
            assert_eq!(sample.messages[1].content, step.prompt.user);
            assert_eq!(sample.image_sizes, [[1080, 2400]]);
            assert_eq!(sample.max_pixels, TRAINING_MAX_PIXELS);

            // The screenshot is the step's PNG, byte for byte.
            let copied = std::fs::read(out.parent().unwrap().join(&sample.images[0])).unwrap();
            let original = std::fs::read(dir.join(&step.screenshot)).unwrap();
            assert!(copied == original, "{name} {stem}: the screenshot changed");

            // What the oracle answered scores full marks against its sample.
            let raw = executed_raw(step);
            for mode in [RewardMode::Released, RewardMode::Paper] {
                let r = score(sample, raw, mode, Weights::default());
                assert_eq!(
                    (r.format, r.blink, r.link),
                    (1.0, 1.0, 1.0),
                    "{name} {stem} ({}): {raw}",
                    mode.name()
                );
            }
            checked += 1;
        }
    }
    assert_eq!(checked, samples.len(), "every sample is a recorded step");
    let seen: Vec<&str> = functions.into_iter().collect();
    assert_eq!(seen, ["LongPress", "Swipe", "Tap", "Type"]);
}

#[test]
fn only_successful_episodes_are_used_unless_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let solved = tmp.path().join("solved");
    record(&solved, "wifi_on", 0, None);
    let cut = tmp.path().join("cut");
    let outcome = record(&cut, "wifi_on", 0, Some(1));
    assert_eq!(outcome.success, Some(false));
    let dirs = [solved.clone(), cut.clone()];
    let out = tmp.path().join("samples.json");
    let report = from_trajectories(&dirs, &out, &ConvertOptions::default()).unwrap();
    let solved_steps = read_trajectory(&solved).unwrap().steps.len();
    assert_eq!((report.episodes, report.episodes_skipped), (2, 1));
    assert_eq!(report.samples, solved_steps);
    let all = convert(
        &dirs,
        &out,
        &ConvertOptions {
            all_episodes: true,
            ..ConvertOptions::default()
        },
    );
    assert_eq!(all.len(), solved_steps + 1);
    assert_eq!(all.last().unwrap().id.as_deref(), Some("cut/step-0001"));

    // Unsuccessful episodes alone make no sample: the earlier file stays.
    let before = std::fs::read(&out).unwrap();
    let e = from_trajectories(&[cut], &out, &ConvertOptions::default())
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        format!(
            "no samples were made (1 of 1 episodes were unsuccessful and left out, which \
             --all-episodes would use); nothing was written to {}",
            out.display()
        )
    );
    assert_eq!(std::fs::read(&out).unwrap(), before);
}

/// A canonical answer with no blink.
fn plain_answer(plan: &str, action: Action) -> String {
    render(&BtlOutput {
        blink: Vec::new(),
        think: plan.into(),
        link: Link::Action {
            plan: plan.into(),
            action,
        },
    })
    .unwrap()
}

#[test]
fn relabelled_episodes_teach_the_teacher_s_answers_even_when_they_fail() {
    let tmp = tempfile::tempdir().unwrap();
    let phone = agent_core::sim::phone::Phone::new(PhoneConfig::default());
    let screen = phone.ui_tree();
    let icon = |label: &str| {
        screen
            .find(|n| n.content_desc == label && n.clickable)
            .cloned()
            .unwrap()
    };
    let (contacts, settings) = (icon("Contacts"), icon("Settings"));
    let size = Size::new(PhoneConfig::default().width, PhoneConfig::default().height);
    let frame = FrameMap::new(size, TRAINING_MAX_PIXELS).unwrap();
    let tap = |node: &agent_core::device::ui::UiNode| {
        let (x, y) = node.center();
        let p = frame.to_model(DevicePoint {
            x: x as u32,
            y: y as u32,
        });
        Action::Tap {
            point_2d: Point::new(p.x.round(), p.y.round()),
        }
    };
    // Wrong app, Home: two steps, and the episode fails (budget 2).
    let student = ScriptedPolicy::new([
        plain_answer("Open Contacts.", tap(&contacts)),
        plain_answer("Go home.", Action::Home),
    ]);
    let teacher = OraclePolicy::new(tasks::sample("wifi_on", 0).unwrap());
    let dir = tmp.path().join("relabelled");
    let outcome = record_with(
        &dir,
        "wifi_on",
        0,
        Some(2),
        |_| (),
        Box::new(Relabelled::new(Box::new(student), Box::new(teacher))),
    );
    assert_eq!(outcome.success, Some(false));

    let out = tmp.path().join("samples.json");
    let report = from_trajectories(&[dir], &out, &ConvertOptions::default()).unwrap();
    assert_eq!(
        (report.samples, report.relabelled, report.episodes_skipped),
        (2, 2, 0)
    );
    let samples = load_samples(&out).unwrap();
    let action = |s: &Sample| match parse_link_json(&s.solution, ParseMode::Strict).unwrap().0 {
        Link::Action { action, .. } => action,
        other => panic!("{other:?}"),
    };
    // Step 1 teaches the oracle's Settings tap, aimed at the Settings icon,
    // not the Contacts tap the student made; step 2 (in Contacts) teaches Home.
    assert_eq!(action(&samples[0]), tap(&settings));
    let [x1, y1, x2, y2] = settings.bounds;
    assert_eq!(
        samples[0].bbox,
        vec![x1 as f64, y1 as f64, x2 as f64, y2 as f64]
    );
    assert_eq!(action(&samples[1]), Action::Home);
    assert!(samples[1].bbox.is_empty());
}

#[test]
fn a_directory_of_episodes_is_read_in_name_order_and_lambda_caps_the_rois() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("collected");
    record(&root.join("b-contact"), "contact_add", 1, None);
    record(&root.join("a-wifi"), "wifi_on", 0, None);
    std::fs::write(root.join("collect.jsonl"), "").unwrap();
    let samples = convert(
        &[root],
        &tmp.path().join("s.json"),
        &ConvertOptions {
            lambda: 2,
            ..ConvertOptions::default()
        },
    );
    assert!(samples[0].id.as_deref().unwrap().starts_with("a-wifi/"));
    assert!(
        samples
            .last()
            .unwrap()
            .id
            .as_deref()
            .unwrap()
            .starts_with("b-contact/")
    );
    assert!(samples.iter().all(|s| (1..=2).contains(&s.rois.len())));
}

/// A recorded episode copied into `name`, for breaking.
fn broken_copy(source: &Path, root: &Path, name: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(source).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
    dir
}

fn error_of(dir: &Path, out: &Path) -> String {
    from_trajectories(&[dir.to_path_buf()], out, &ConvertOptions::default())
        .unwrap_err()
        .to_string()
}

#[test]
fn bad_trajectories_name_the_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let good = tmp.path().join("good");
    record(&good, "wifi_on", 0, None);
    let out = tmp.path().join("out.json");

    let dir = broken_copy(&good, tmp.path(), "no-steps");
    std::fs::remove_file(dir.join("steps.jsonl")).unwrap();
    let err = error_of(&dir, &out);
    assert!(
        err.contains(&dir.join("steps.jsonl").display().to_string()),
        "{err}"
    );

    let dir = broken_copy(&good, tmp.path(), "bad-line");
    let text = std::fs::read_to_string(dir.join("steps.jsonl")).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[1] = "{\"index\": 2, \"screenshot\": 7}";
    std::fs::write(dir.join("steps.jsonl"), lines.join("\n") + "\n").unwrap();
    let err = error_of(&dir, &out);
    assert!(
        err.starts_with(&format!("{} line 2: ", dir.join("steps.jsonl").display())),
        "{err}"
    );

    // The error of a bad screenshot names the step's line and the file.
    let screenshot_error = |dir: &Path, step: usize| {
        let err = error_of(dir, &out);
        let expected = format!(
            "{} line {step} (step {step}): screenshot {}",
            dir.join("steps.jsonl").display(),
            dir.join(format!("step-{step:04}.png")).display()
        );
        assert!(err.starts_with(&expected), "{err}");
    };
    let dir = broken_copy(&good, tmp.path(), "no-screenshot");
    std::fs::remove_file(dir.join("step-0002.png")).unwrap();
    screenshot_error(&dir, 2);
    // A PNG is kept byte for byte, but only once it decodes.
    let dir = broken_copy(&good, tmp.path(), "cut-png");
    let png = std::fs::read(dir.join("step-0001.png")).unwrap();
    std::fs::write(dir.join("step-0001.png"), &png[..png.len() / 2]).unwrap();
    screenshot_error(&dir, 1);

    let dir = broken_copy(&good, tmp.path(), "bad-tree");
    std::fs::write(dir.join("step-0001.xml"), "<hierarchy></hierarchy>").unwrap();
    let err = error_of(&dir, &out);
    assert!(
        err.contains("line 1 (step 1): UI tree") && err.contains("the hierarchy has no nodes"),
        "{err}"
    );

    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let err = error_of(&empty, &out);
    assert!(err.contains("not an episode directory"), "{err}");
    assert!(!out.exists(), "nothing is written when the input is bad");
}

/// An oracle episode of `task` (instance `seed`) recorded in `dir`,
/// converted to samples and exported to `dir/out` as `options` say: the
/// samples file, its samples and the dataset's rows (one per sample).
fn export_episode(
    dir: &Path,
    task: &str,
    seed: u64,
    options: &ExportOptions,
) -> (PathBuf, Vec<Sample>, Vec<Value>) {
    let episode = dir.join("ep");
    record(&episode, task, seed, None);
    let samples_path = dir.join("data/samples.json");
    let samples = convert(&[episode], &samples_path, &ConvertOptions::default());
    let out = dir.join("out");
    let report = export_ms_swift(&samples_path, &out, options).unwrap();
    assert_eq!(report.rows, samples.len());
    let text = std::fs::read_to_string(out.join(DATASET_FILE)).unwrap();
    let rows: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), samples.len());
    (samples_path, samples, rows)
}

#[test]
fn the_ms_swift_export_carries_every_sample_and_its_image() {
    let tmp = tempfile::tempdir().unwrap();
    let (samples_path, samples, rows) =
        export_episode(tmp.path(), "contact_add", 1, &ExportOptions::default());
    let out = tmp.path().join("out");
    for (row, sample) in rows.iter().zip(&samples) {
        let image = row["images"][0].as_str().unwrap();
        assert!(Path::new(image).is_absolute(), "{image}");
        assert_eq!(
            std::fs::read(image).unwrap(),
            std::fs::read(samples_path.parent().unwrap().join(&sample.images[0])).unwrap()
        );
        let inner: Sample = serde_json::from_str(row["btl_sample"].as_str().unwrap()).unwrap();
        assert_eq!(
            inner,
            Sample {
                images: vec![image.to_string()],
                ..sample.clone()
            }
        );
        assert_eq!(row["solution"], sample.solution.as_str());
        assert_eq!(
            row["messages"][0]["content"],
            sample.messages[0].content.as_str()
        );
    }

    let moved = ExportOptions {
        dataset_root: Some("/mnt/btl/swift/".into()),
        ..ExportOptions::default()
    };
    export_ms_swift(&samples_path, &tmp.path().join("swift2"), &moved).unwrap();
    let text = std::fs::read_to_string(tmp.path().join("swift2").join(DATASET_FILE)).unwrap();
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["images"][0], "/mnt/btl/swift/images/000000-0.png");

    // A sample naming an endless file is refused at its index, not read
    // until memory runs out, and the previous export stays as it was: its
    // rows still name their own images.
    let swift2 = tmp.path().join("swift2");
    let read = |name: &str| std::fs::read(swift2.join(name)).unwrap();
    let before = (read(DATASET_FILE), read("images/000000-0.png"));
    let mut endless: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&samples_path).unwrap()).unwrap();
    endless[0]["images"][0] = endless[1]["images"][0].clone();
    endless[1]["images"][0] = "/dev/zero".into();
    std::fs::write(&samples_path, serde_json::to_string(&endless).unwrap()).unwrap();
    let err = export_ms_swift(&samples_path, &swift2, &moved)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("sample 1: image /dev/zero: not a regular file, so not a screenshot"),
        "{err}"
    );
    assert_eq!((read(DATASET_FILE), read("images/000000-0.png")), before);
    // Nor may a sample's image lie where the export puts its own.
    endless[1]["images"][0] = swift2
        .join("images/000000-0.png")
        .display()
        .to_string()
        .into();
    std::fs::write(&samples_path, serde_json::to_string(&endless).unwrap()).unwrap();
    let err = export_ms_swift(&samples_path, &swift2, &moved)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("sample 1: image ") && err.contains("which the export replaces"),
        "{err}"
    );
    // Nor may it be a file that is no image, or an image of another size
    // than the sample's coordinates are in.
    endless[1]["images"][0] = endless[0]["images"][0].clone();
    let mut wrong_size = endless.clone();
    wrong_size[1]["image_sizes"] = serde_json::json!([[10, 10]]);
    std::fs::write(&samples_path, serde_json::to_string(&wrong_size).unwrap()).unwrap();
    let err = export_ms_swift(&samples_path, &swift2, &moved)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("sample 1: image ")
            && err.contains("but the sample says 10×10: its coordinates would not match"),
        "{err}"
    );
    let text = samples_path.with_file_name("notes.txt");
    std::fs::write(&text, "not a picture").unwrap();
    endless[1]["images"][0] = "notes.txt".into();
    std::fs::write(&samples_path, serde_json::to_string(&endless).unwrap()).unwrap();
    let err = export_ms_swift(&samples_path, &swift2, &moved)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("sample 1: image ") && err.contains("notes.txt: not an image"),
        "{err}"
    );
    assert_eq!((read(DATASET_FILE), read("images/000000-0.png")), before);

    std::fs::write(&samples_path, "[\n  {\"images\": 1}\n]").unwrap();
    let err = export_ms_swift(&samples_path, &out, &ExportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(&format!("{}:2: sample 0:", samples_path.display())),
        "{err}"
    );
}

#[test]
fn the_sft_export_answers_each_prompt_with_its_oracle_step() {
    let tmp = tempfile::tempdir().unwrap();
    let options = ExportOptions {
        purpose: Purpose::Sft { max_regions: 3 },
        ..ExportOptions::default()
    };
    let (samples_path, samples, rows) = export_episode(tmp.path(), "contact_add", 2, &options);
    let mut typed = 0;
    for (row, sample) in rows.iter().zip(&samples) {
        let messages = row["messages"].as_array().unwrap();
        assert_eq!(messages.len(), sample.messages.len() + 1);
        assert_eq!(messages[messages.len() - 1]["role"], "assistant");
        let answer = parse(
            messages[messages.len() - 1]["content"].as_str().unwrap(),
            ParseMode::Strict,
        )
        .unwrap()
        .output;
        let (solution, _) = parse_link_json(&sample.solution, ParseMode::Strict).unwrap();
        assert_eq!(answer.link, solution, "{}", sample.solution);
        assert!(answer.blink.len() <= 3);
        typed += usize::from(matches!(
            answer.link,
            Link::Action {
                action: Action::Type { .. },
                ..
            }
        ));
        let image = row["images"][0].as_str().unwrap();
        assert_eq!(
            std::fs::read(image).unwrap(),
            std::fs::read(samples_path.parent().unwrap().join(&sample.images[0])).unwrap()
        );
    }
    assert!(typed > 0, "contact_add types a name and a number");

    // The official grounding examples have no Plan, so no answer to learn.
    let official = tmp.path().join("official.json");
    std::fs::write(
        &official,
        include_str!("../../tests/data/btl-ui-examples/navigation_meta_format.json"),
    )
    .unwrap();
    // A stand-in for its screenshot, of the size the example gives.
    let screenshot = tmp.path().join("examples/images/8418572386209486_10.png");
    std::fs::create_dir_all(screenshot.parent().unwrap()).unwrap();
    image::RgbImage::new(720, 1280).save(&screenshot).unwrap();
    let err = export_ms_swift(&official, &tmp.path().join("sft2"), &options)
        .unwrap_err()
        .to_string();
    assert!(err.contains("sample 0:") && err.contains("Plan"), "{err}");
}

#[test]
fn the_cli_converts_and_exports_and_reports_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let episode = tmp.path().join("wifi");
    record(&episode, "wifi_on", 0, None);
    let steps = read_trajectory(&episode).unwrap().steps.len();
    let samples = tmp.path().join("s.json");
    let stdout = btl_train_succeeds(&[
        "data",
        "from-trajectories",
        episode.to_str().unwrap(),
        "--out",
        samples.to_str().unwrap(),
        "--lambda",
        "3",
    ]);
    assert!(
        stdout.starts_with(&format!("{steps} samples from {steps} steps of 1 episodes")),
        "{stdout}"
    );
    let written = load_samples(&samples).unwrap();
    assert_eq!(written.len(), steps);
    assert!(written.iter().all(|s| s.rois.len() <= 3));

    let swift = tmp.path().join("swift");
    let stdout = btl_train_succeeds(&as_strs(&export_args(&samples, &swift, &[])));
    assert!(stdout.starts_with(&format!("{steps} rows in ")), "{stdout}");
    assert!(swift.join(DATASET_FILE).is_file());

    let missing = tmp.path().join("nowhere");
    let out = btl_train(&[
        "data",
        "from-trajectories",
        missing.to_str().unwrap(),
        "--out",
        samples.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "btl-train: error: cannot read {}:",
            missing.display()
        )),
        "{stderr}"
    );
    let out = btl_train(&[
        "data",
        "from-trajectories",
        "x",
        "--out",
        "y",
        "--lambda",
        "0",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

/// The files under `dir`, by path, with their bytes.
fn tree(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut files = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(tree(&path));
        } else {
            files.insert(path.clone(), std::fs::read(&path).unwrap());
        }
    }
    files
}

/// A conversion that fails on a broken episode leaves the previous run's
/// samples and screenshots as they were, though its first episode has the
/// same name as one of them (`ep`, another task's screens); a conversion
/// that succeeds replaces both.
#[test]
fn a_failed_conversion_keeps_the_previous_samples_and_images() {
    let tmp = tempfile::tempdir().unwrap();
    let (first, second, broken) = (
        tmp.path().join("a/ep"),
        tmp.path().join("b/ep"),
        tmp.path().join("broken"),
    );
    record(&first, "wifi_on", 0, None);
    record(&second, "note_create", 0, None);
    record(&broken, "wifi_on", 1, None);
    std::fs::remove_file(broken.join("step-0001.png")).unwrap();
    let out = tmp.path().join("keep.json");
    let convert_all = |dirs: &[&Path]| {
        let mut args = vec!["data", "from-trajectories", "--out", out.to_str().unwrap()];
        args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
        btl_train(&args)
    };
    assert!(convert_all(&[&first]).status.success());
    let (samples, images) = (
        std::fs::read(&out).unwrap(),
        tree(&tmp.path().join("keep-images")),
    );
    let failed = convert_all(&[&second, &broken]);
    assert_eq!(failed.status.code(), Some(2));
    assert_eq!(std::fs::read(&out).unwrap(), samples);
    assert_eq!(tree(&tmp.path().join("keep-images")), images);
    assert!(convert_all(&[&second]).status.success());
    assert_ne!(std::fs::read(&out).unwrap(), samples);
    assert_ne!(tree(&tmp.path().join("keep-images")), images);
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with('.'))
        .collect();
    // The lock that makes runs on one --out take turns stays.
    assert_eq!(left, [".keep-images.lock"]);
}

/// No command writes its output over what it reads: a samples file over
/// its own input, or anything into an episode it converts; the input is
/// left as it was.
#[test]
fn an_output_never_overwrites_an_input() {
    let tmp = tempfile::tempdir().unwrap();
    let episode = tmp.path().join("wifi");
    record(&episode, "wifi_on", 0, None);
    let samples = tmp.path().join("s.json");
    convert(
        std::slice::from_ref(&episode),
        &samples,
        &ConvertOptions::default(),
    );
    let log = episode.join("steps.jsonl");
    let (steps, written) = (
        std::fs::read(&log).unwrap(),
        std::fs::read(&samples).unwrap(),
    );
    let via_dots = tmp.path().join("wifi/../s.json");
    for (command, input, out) in [
        ("from-trajectories", &episode, &log),
        ("tap-text", &episode, &log),
        ("augment-typed", &samples, &via_dots),
        ("text-only", &samples, &samples),
    ] {
        let args = [
            "data",
            command,
            input.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        refused_over(&args, input);
    }
    let run = format!("a={}", samples.display());
    refused_over(
        &["plot-bench", &run, "--out", samples.to_str().unwrap()],
        &samples,
    );
    assert_eq!(std::fs::read(&log).unwrap(), steps);
    assert_eq!(std::fs::read(&samples).unwrap(), written);

    // The images directory beside --out replaces its namesake: an input
    // collection of that name would be moved aside and removed.
    let collection = tmp.path().join("runs/x-images");
    let episode_copy = collection.join("wifi");
    std::fs::create_dir_all(&collection).unwrap();
    std::fs::rename(&episode, &episode_copy).unwrap();
    let out = tmp.path().join("runs/x.json");
    for command in ["from-trajectories", "tap-text"] {
        let args = [
            "data",
            command,
            collection.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        let expected = format!(
            "its images would replace {}, which this command reads",
            collection.display()
        );
        refused(&args, &expected);
        assert!(episode_copy.join("steps.jsonl").is_file());
    }

    // An export replaces the images and dataset an earlier export made,
    // and no others unless told to.
    let theirs = tmp.path().join("theirs");
    std::fs::create_dir_all(theirs.join("images")).unwrap();
    std::fs::write(theirs.join("images/keep.txt"), "mine").unwrap();
    let expected = format!(
        "{} would be replaced, and the directory has no .btl-data-export (no export made it, or \
         one from before exports marked their directory); export elsewhere, or give --force",
        theirs.join("images").display()
    );
    refused(&as_strs(&export_args(&samples, &theirs, &[])), &expected);
    assert_eq!(
        std::fs::read(theirs.join("images/keep.txt")).unwrap(),
        b"mine"
    );
    for again in [&["--force"][..], &[]] {
        btl_train_succeeds(&as_strs(&export_args(&samples, &theirs, again)));
    }
    assert!(!theirs.join("images/keep.txt").exists());

    // An export over its own samples is refused as such, before the lack
    // of a mark: --force would not make it possible.
    let own = tmp.path().join("own");
    std::fs::create_dir_all(&own).unwrap();
    let own_samples = own.join("train.jsonl");
    std::fs::copy(&samples, &own_samples).unwrap();
    let expected = format!(
        "--out {}: the export would write over {}, which it reads; export elsewhere",
        own.display(),
        own_samples.display()
    );
    for force in [&[][..], &["--force"]] {
        refused(&as_strs(&export_args(&own_samples, &own, force)), &expected);
    }
    assert_eq!(
        std::fs::read(&own_samples).unwrap(),
        std::fs::read(&samples).unwrap()
    );
}

/// `btl-train data export` of `samples` into `out` for ms-swift, then
/// `more`.
fn export_args(samples: &Path, out: &Path, more: &[&str]) -> Vec<String> {
    let (samples, out) = (samples.to_str().unwrap(), out.to_str().unwrap());
    let args = [
        "data",
        "export",
        "--format",
        "ms-swift",
        "--samples",
        samples,
        "--out",
        out,
    ];
    args.iter().chain(more).map(|a| a.to_string()).collect()
}

fn as_strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// `btl-train ARGS` fails as bad input, saying `expected`.
fn refused(args: &[&str], expected: &str) {
    let out = btl_train(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stderr.contains(expected), "{args:?}: {stderr}");
}

/// `btl-train ARGS` fails as bad input for writing over `over`.
fn refused_over(args: &[&str], over: &Path) {
    let expected = format!(
        "it would write over {}, which this command reads",
        over.display()
    );
    refused(args, &expected);
}

/// A real contact_add episode: its two typing steps are copied with other
/// values that the goal and the answer agree on, the copies written in
/// another directory still find their screenshots, and the trainer makes
/// its target answers from them.
#[test]
fn typing_steps_are_copied_with_random_values_the_goal_names() {
    let tmp = tempfile::tempdir().unwrap();
    let episode = tmp.path().join("contact");
    // A training instance: a plain-suite goal may name a held-out value,
    // and then no copy of it may be made.
    let seed = tasks::Split::Train.seed(3);
    let outcome = record(&episode, "contact_add", seed, None);
    assert_eq!(outcome.success, Some(true));
    let samples = tmp.path().join("s.json");
    convert(
        std::slice::from_ref(&episode),
        &samples,
        &ConvertOptions::default(),
    );
    let out = tmp.path().join("elsewhere").join("typed.json");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let stdout = btl_train_succeeds(&[
        "data",
        "augment-typed",
        samples.to_str().unwrap(),
        "--copies",
        "3",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        stdout.starts_with("6 copies of 2 typing samples in "),
        "{stdout}"
    );
    let typed = |sample: &Sample| match parse_link_json(&sample.solution, ParseMode::Strict)
        .unwrap()
        .0
    {
        Link::Action {
            action: Action::Type { text },
            ..
        } => text,
        other => panic!("{other:?}: not a typing step"),
    };
    let originals = load_samples(&samples).unwrap();
    let copies = load_samples(&out).unwrap();
    assert_eq!(copies.len(), 6);
    for copy in &copies {
        let id = copy.id.as_deref().unwrap();
        let (of, _) = id.rsplit_once("/copy-").unwrap();
        let original = typed(
            originals
                .iter()
                .find(|s| s.id.as_deref() == Some(of))
                .unwrap(),
        );
        let goal = goal_of(copy);
        let text = typed(copy);
        assert_ne!(text, original);
        assert!(!goal.contains(&original), "{goal}");
        assert!(goal.contains(&text), "{goal} / {text}");
        assert!(Path::new(&copy.images[0]).is_file(), "{:?}", copy.images);
        let answer = host_trainer::sft::target_answer(copy, TRAINING_MAX_PIXELS, 5).unwrap();
        let link = agent_core::protocol::parse(&answer, ParseMode::Strict)
            .unwrap()
            .output
            .link;
        assert!(
            matches!(link, Link::Action { action: Action::Type { text: t }, .. } if t == text),
            "{answer}"
        );
    }
    // Inputs that make nothing (no typing step; no sample at all) leave an
    // earlier output as it was rather than an empty list in its place.
    let none = tmp.path().join("none.json");
    std::fs::write(&none, "[]").unwrap();
    let earlier = std::fs::read(&out).unwrap();
    for (command, input, says) in [
        ("augment-typed", &none, "holds no typing sample"),
        ("text-only", &none, "holds no sample"),
    ] {
        let run = btl_train(&[
            "data",
            command,
            input.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{command}: {stderr}");
        assert!(
            stderr.contains(says) && stderr.contains("nothing was written"),
            "{stderr}"
        );
        assert_eq!(std::fs::read(&out).unwrap(), earlier, "{command}");
    }
}

/// Runs `btl-train data tap-text` with `flags` on `episode`, every target
/// of each screen into `out`; its report line and the samples.
fn tap_text_all(episode: &Path, out: &Path, flags: &[&str]) -> (String, Vec<Sample>) {
    let mut args = vec![
        "data",
        "tap-text",
        episode.to_str().unwrap(),
        "--per-screen",
        "100",
    ];
    args.extend_from_slice(flags);
    args.extend(["--out", out.to_str().unwrap()]);
    let stdout = btl_train_succeeds(&args);
    (stdout, load_samples(out).unwrap())
}

/// The goal line of a sample's user prompt.
fn goal_of(sample: &Sample) -> &str {
    sample
        .messages
        .last()
        .unwrap()
        .content
        .split("## User Instruction\n")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .unwrap()
}

/// The text a tap-text sample's goal (`Tap "…".`) names; its history is
/// empty.
fn tap_goal_text(sample: &Sample) -> String {
    let user = &sample.messages.last().unwrap().content;
    let goal = goal_of(sample);
    assert!(user.contains("## Action History\n\n"), "no history: {user}");
    goal.strip_prefix("Tap \"")
        .and_then(|g| g.strip_suffix("\"."))
        .unwrap_or_else(|| panic!("{goal}: not a tap-text goal"))
        .to_owned()
}

#[test]
fn tap_text_samples_name_one_text_of_the_screen_and_their_tap_reaches_it_on_the_phone() {
    let tmp = tempfile::tempdir().unwrap();
    let episode = tmp.path().join("contact");
    let (name, seed) = ("contact_delete", tasks::Split::Train.seed(2));
    assert_eq!(record(&episode, name, seed, None).success, Some(true));
    let (stdout, samples) = tap_text_all(&episode, &tmp.path().join("tap.json"), &[]);
    let trajectory = read_trajectory(&episode).unwrap();
    assert!(
        stdout.starts_with(&format!(
            "{} samples from {} screens of 1 episodes",
            samples.len(),
            trajectory.steps.len()
        )),
        "{stdout}"
    );
    // The contact the task deletes is one of the texts some screen names.
    let params = tasks::sample(name, seed).unwrap().params();
    let target = params["task"]["name"].as_str().unwrap();
    assert!(
        samples.iter().any(|s| tap_goal_text(s) == target),
        "no sample names {target}"
    );
    for (k, step) in trajectory.steps.iter().enumerate() {
        let mine: Vec<&Sample> = samples
            .iter()
            .filter(|s| {
                s.id.as_deref()
                    .is_some_and(|id| id.starts_with(&format!("contact/step-{:04}/", step.index)))
            })
            .collect();
        let xml = std::fs::read_to_string(episode.join(step.ui_tree.as_ref().unwrap())).unwrap();
        let tree = parse_uiautomator_xml(&xml).unwrap();
        let recorded = std::fs::read(episode.join(&step.screenshot)).unwrap();
        for sample in &mine {
            let text = tap_goal_text(sample);
            let holders = tree.find_all(|n| n.text.trim() == text);
            assert_eq!(holders.len(), 1, "{text} is on the screen once");
            let (link, _) = parse_link_json(&sample.solution, ParseMode::Strict).unwrap();
            let Link::Action {
                action: Action::Tap { point_2d },
                plan,
            } = link
            else {
                panic!("{}: not a tap", sample.solution);
            };
            assert_eq!(plan, format!("Tap \"{text}\"."));
            let at = step.frame.to_device(point_2d);
            let [x1, y1, x2, y2] = holders[0].bounds;
            assert!(
                (x1..x2).contains(&(at.x as i32)) && (y1..y2).contains(&(at.y as i32)),
                "{text}: {at:?} outside {:?}",
                holders[0].bounds
            );
            assert_eq!(
                std::fs::read(tmp.path().join(&sample.images[0])).unwrap(),
                recorded
            );
            // On a new phone brought to this screen by the episode's own
            // actions, the tap does something.
            let task = tasks::sample(name, seed).unwrap();
            let phone = Arc::new(VirtualPhone::new(PhoneConfig {
                seed,
                ..PhoneConfig::default()
            }));
            phone.with_phone(|p| task.setup(p));
            let mut device = SimDevice::new(phone.clone());
            for before in &trajectory.steps[..k] {
                if let Some(action) = before.executed.as_ref().and_then(|e| e.device.as_ref()) {
                    agent_core::device::Device::perform(&mut device, action).unwrap();
                }
            }
            let screen = phone.with_phone(|p| p.ui_tree());
            assert_eq!(
                screen.find_all(|n| n.text.trim() == text).len(),
                1,
                "the replayed screen shows {text}"
            );
            agent_core::device::Device::perform(&mut device, &DeviceAction::Tap { at }).unwrap();
            assert_ne!(
                phone.with_phone(|p| p.ui_tree()),
                screen,
                "tapping {text} changes nothing"
            );
        }
    }
    assert!(samples.iter().all(|s| {
        let text = tap_goal_text(s);
        !tasks::names_heldout_value(&text)
    }));
}

/// The lines of a sample's `## Screen Elements`, as a reader of the prompt
/// sees them: `- "label" [x, y]`, with ` on`/` off` after a switch.
fn listed_lines(sample: &Sample) -> Vec<(String, Point)> {
    let user = &sample.messages.last().unwrap().content;
    user.split("## Screen Elements\n")
        .nth(1)
        .unwrap()
        .lines()
        .map_while(|line| line.strip_prefix("- "))
        .map(|line| {
            let (label, rest) = line.split_at(line.rfind(" [").unwrap());
            let label: String = serde_json::from_str(label).unwrap();
            let coords = &rest[2..rest.find(']').unwrap()];
            let (x, y) = coords.split_once(", ").unwrap();
            (label, Point::new(x.parse().unwrap(), y.parse().unwrap()))
        })
        .collect()
}

/// The point of the one listed line labelled `text`.
fn listed_point(sample: &Sample, text: &str) -> Point {
    let named: Vec<Point> = listed_lines(sample)
        .into_iter()
        .filter_map(|(label, point)| (label == text).then_some(point))
        .collect();
    assert_eq!(
        named.len(),
        1,
        "{text:?} is not one listed line of {sample:?}"
    );
    named[0]
}

/// Where a sample's answer taps.
fn tapped(sample: &Sample) -> Point {
    match parse_link_json(&sample.solution, ParseMode::Strict)
        .unwrap()
        .0
    {
        Link::Action {
            action: Action::Tap { point_2d },
            ..
        } => point_2d,
        other => panic!("not a tap: {other:?}"),
    }
}

/// Records the oracle of `name` (instance `seed`) in profile
/// `btl-screen-text`, which must succeed.
fn record_listed(dir: &Path, name: &str, seed: u64) {
    let oracle = OraclePolicy::new(tasks::sample(name, seed).unwrap());
    let outcome = record_with(
        dir,
        name,
        seed,
        None,
        |config| config.profile = Profile::BtlScreenText,
        Box::new(oracle),
    );
    assert_eq!(outcome.success, Some(true));
}

/// With the screen listed (`btl-screen-text`), a tap-text goal names the
/// whole label of one listed line and the answer taps that line's point,
/// so the list alone answers it. The alarm list is the case that needs
/// this: a row speaks "06:30, Work", so the texts "06:30" and "Work" it
/// holds, targets where the screen is not listed, are no line of their own.
#[test]
fn listed_screens_get_tap_text_goals_their_list_answers() {
    let tmp = tempfile::tempdir().unwrap();
    let episode = tmp.path().join("alarm");
    let (name, seed) = ("alarm_off", tasks::Split::Train.seed(1));
    record_listed(&episode, name, seed);
    let (_, samples) = tap_text_all(&episode, &tmp.path().join("tap.json"), &[]);
    let mut goals = std::collections::HashSet::new();
    for sample in &samples {
        let text = tap_goal_text(sample);
        assert_eq!(
            tapped(sample),
            listed_point(sample, &text),
            "{text:?}: {}",
            sample.solution
        );
        goals.insert(text);
    }
    // The home screen's app names are lines of their own.
    assert!(goals.contains("Clock"), "{goals:?}");
    let trajectory = read_trajectory(&episode).unwrap();
    let alarm_texts: Vec<String> = trajectory
        .steps
        .iter()
        .flat_map(|step| {
            let xml =
                std::fs::read_to_string(episode.join(step.ui_tree.as_ref().unwrap())).unwrap();
            let tree = parse_uiautomator_xml(&xml).unwrap();
            tap_targets(&tree, step.frame.device)
                .iter()
                .map(|node| node.text.trim().to_owned())
                .filter(|text| text == "Work" || text == "Weekend")
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        !alarm_texts.is_empty(),
        "the alarm list was never on screen"
    );
    assert!(
        alarm_texts.iter().all(|text| !goals.contains(text)),
        "{goals:?}"
    );
}

/// Tap-text lists a screen as its episode's prompt listed it, under the
/// agent's keyboard packages rather than the default ones: recorded with
/// none, the on-screen keyboard's keys are lines of their own, and every
/// sample, those of keyboard screens among them, lists the lines of a
/// recorded prompt.
#[test]
fn tap_text_lists_the_screen_as_its_prompt_listed_it() {
    use agent_core::agent::safety::DEFAULT_KEYBOARD_PACKAGES;
    use agent_core::device::elements::screen_elements;
    use agent_core::protocol::prompt::listed_screen;
    let tmp = tempfile::tempdir().unwrap();
    let episode = tmp.path().join("contact");
    let (name, seed) = ("contact_add", tasks::Split::Train.seed(1));
    let oracle = OraclePolicy::new(tasks::sample(name, seed).unwrap());
    let configure = |config: &mut AgentConfig| {
        config.profile = Profile::BtlScreenText;
        config.safety.keyboard_packages.clear();
    };
    let outcome = record_with(&episode, name, seed, None, configure, Box::new(oracle));
    assert_eq!(outcome.success, Some(true));
    let as_pairs =
        |lines: Vec<agent_core::protocol::prompt::ScreenElement>| -> Vec<(String, Point)> {
            lines.into_iter().map(|l| (l.label, l.point)).collect()
        };
    // Each recorded list, and whether the default packages list it otherwise.
    let recorded: Vec<(Vec<(String, Point)>, bool)> = read_trajectory(&episode)
        .unwrap()
        .steps
        .iter()
        .map(|step| {
            let xml =
                std::fs::read_to_string(episode.join(step.ui_tree.as_ref().unwrap())).unwrap();
            let tree = parse_uiautomator_xml(&xml).unwrap();
            let listed = as_pairs(listed_screen(&step.prompt.user).unwrap());
            let default = as_pairs(screen_elements(
                &tree,
                &step.frame,
                DEFAULT_KEYBOARD_PACKAGES,
            ));
            let keyboard_up = listed != default;
            (listed, keyboard_up)
        })
        .collect();
    let (_, samples) = tap_text_all(&episode, &tmp.path().join("tap.json"), &[]);
    let mut from_keyboard_screens = 0;
    for sample in &samples {
        let lines = listed_lines(sample);
        let (_, keyboard_up) = recorded
            .iter()
            .find(|(listed, _)| *listed == lines)
            .unwrap_or_else(|| panic!("no recorded prompt lists {lines:?}"));
        from_keyboard_screens += usize::from(*keyboard_up);
    }
    assert!(
        from_keyboard_screens > 0,
        "{} samples, none of a keyboard screen",
        samples.len()
    );
}

/// `--move-points` keeps each sample's goal and its screen's lines, moves
/// every point, and still answers with the point the list gives the quoted
/// line: only the lookup pays. The samples are text-only with no regions,
/// and a prompt that lists no screen is refused.
#[test]
fn moved_points_leave_the_list_as_the_only_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let episode = tmp.path().join("alarm");
    let (name, seed) = ("alarm_off", tasks::Split::Train.seed(1));
    record_listed(&episode, name, seed);
    let (_, plain) = tap_text_all(&episode, &tmp.path().join("tap.json"), &[]);
    let (_, moved) = tap_text_all(&episode, &tmp.path().join("moved.json"), &["--move-points"]);
    assert_eq!(moved.len(), plain.len());
    assert!(!tmp.path().join("moved-images").exists());
    let mut shifted = 0;
    for (moved, plain) in moved.iter().zip(&plain) {
        assert_eq!(
            moved.id.as_deref(),
            Some(format!("{}/moved", plain.id.as_deref().unwrap()).as_str())
        );
        let text = tap_goal_text(moved);
        assert_eq!(text, tap_goal_text(plain));
        assert!(moved.images.is_empty() && moved.rois.is_empty());
        assert!(!moved.messages.iter().any(|m| m.content.contains("<image>")));
        let point = listed_point(moved, &text);
        assert_eq!(tapped(moved), point, "{text:?}: {}", moved.solution);
        shifted += usize::from(point != listed_point(plain, &text));
        let lines = listed_lines(moved);
        let mut labels: Vec<String> = lines.iter().map(|(label, _)| label.clone()).collect();
        let mut before: Vec<String> = listed_lines(plain).into_iter().map(|(l, _)| l).collect();
        labels.sort();
        before.sort();
        assert_eq!(labels, before, "the same texts, moved");
        assert!(
            lines
                .windows(2)
                .all(|w| (w[0].1.y, w[0].1.x) <= (w[1].1.y, w[1].1.x)),
            "sorted by position: {lines:?}"
        );
    }
    // A random point of a 280 x 644 frame rarely falls on the old one.
    assert!(
        shifted * 10 >= moved.len() * 9,
        "{shifted} of {}",
        moved.len()
    );

    let extended = tmp.path().join("extended");
    assert_eq!(record(&extended, name, seed, None).success, Some(true));
    let refused = btl_train(&[
        "data",
        "tap-text",
        extended.to_str().unwrap(),
        "--move-points",
        "--out",
        tmp.path().join("no.json").to_str().unwrap(),
    ]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("moved points need a prompt that lists the screen"),
        "{stderr}"
    );
}

/// `--phrased` puts each tap-text goal as a task would, in the training
/// frames only, and keeps the answer's Plan the quote of the text
/// (`Tap "…".`), as the oracle's Plan in this profile is.
#[test]
fn phrased_goals_name_the_text_and_the_plan_quotes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let episode = tmp.path().join("contact");
    let (name, seed) = ("contact_delete", tasks::Split::Train.seed(2));
    record_listed(&episode, name, seed);
    let (_, samples) = tap_text_all(
        &episode,
        &tmp.path().join("phrased.json"),
        &["--phrased", "--move-points"],
    );
    assert!(samples.len() >= 20, "{} samples", samples.len());
    let mut shapes = std::collections::HashSet::new();
    for sample in &samples {
        let text = &plan_quote(sample);
        let goal = goal_of(sample);
        assert!(goal.contains(text), "{goal} does not name {text:?}");
        assert!(
            !goal.starts_with("Could you"),
            "a held-out phrasing: {goal}"
        );
        assert_eq!(tapped(sample), listed_point(sample, text));
        shapes.insert(goal.replacen(text, "{}", 1));
    }
    // Six sentences in three frames: 18 shapes, of which an episode's few
    // dozen draws show most.
    assert!(shapes.len() >= 6, "{shapes:?}");
}

/// The text a tap-text answer's Plan quotes (`Tap "…".`).
fn plan_quote(sample: &Sample) -> String {
    let Link::Action { plan, .. } = parse_link_json(&sample.solution, ParseMode::Strict)
        .unwrap()
        .0
    else {
        panic!("no plan: {}", sample.solution);
    };
    plan.strip_prefix("Tap \"")
        .and_then(|p| p.strip_suffix("\"."))
        .unwrap_or_else(|| panic!("{plan}: no quote"))
        .to_owned()
}

/// A text's shape: every digit 0, every upper-case letter A, every other
/// letter a, the rest as it is.
fn shape(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            c if c.is_ascii_digit() => '0',
            c if c.is_uppercase() => 'A',
            c if c.is_alphabetic() => 'a',
            c => c,
        })
        .collect()
}

/// `--made-up` lists the same screen with every label a new string of its
/// shape, drawn anew for each sample: the quoted text is one listed line,
/// is named by the goal, was on none of the episode's screens, and the
/// answer taps its line. Without `--move-points` it is refused.
#[test]
fn made_up_texts_are_copied_from_the_goal_and_found_in_the_list() {
    let tmp = tempfile::tempdir().unwrap();
    let episode = tmp.path().join("contact");
    let (name, seed) = ("contact_delete", tasks::Split::Train.seed(3));
    record_listed(&episode, name, seed);
    let (_, moved) = tap_text_all(&episode, &tmp.path().join("moved.json"), &["--move-points"]);
    let (stdout, made_up) = tap_text_all(
        &episode,
        &tmp.path().join("made-up.json"),
        &["--move-points", "--phrased", "--made-up"],
    );
    assert!(stdout.contains("(text-only)"), "{stdout}");
    assert_eq!(made_up.len(), moved.len());
    assert!(made_up.len() >= 20, "{} samples", made_up.len());
    let real: std::collections::HashSet<String> = moved
        .iter()
        .flat_map(|sample| listed_lines(sample).into_iter().map(|(label, _)| label))
        .collect();
    let mut quotes = std::collections::HashSet::new();
    for (sample, before) in made_up.iter().zip(&moved) {
        let id = before.id.as_deref().unwrap();
        assert_eq!(
            sample.id.as_deref(),
            Some(format!("{}-made-up", id).as_str())
        );
        let text = plan_quote(sample);
        let goal = goal_of(sample);
        assert!(goal.contains(&text), "{goal} does not name {text:?}");
        assert!(!goal.starts_with("Could you"), "held out: {goal}");
        assert_eq!(tapped(sample), listed_point(sample, &text));
        assert_eq!(shape(&text), shape(&tap_goal_text(before)));
        let shapes = |sample: &Sample| {
            let mut shapes: Vec<String> = listed_lines(sample)
                .iter()
                .map(|(label, _)| shape(label))
                .collect();
            shapes.sort();
            shapes
        };
        assert_eq!(shapes(sample), shapes(before), "{id}: not the same lines");
        // Four letters drawn alike by chance is about one in 10^5.
        if text.chars().filter(|c| c.is_alphabetic()).count() >= 4 {
            assert!(!real.contains(&text), "{text:?} is a real label");
            assert!(quotes.insert(text.clone()), "{text:?} drawn twice");
        }
    }
    assert!(quotes.len() * 2 >= made_up.len(), "{quotes:?}");

    let refused = btl_train(&[
        "data",
        "tap-text",
        episode.to_str().unwrap(),
        "--made-up",
        "--out",
        tmp.path().join("no.json").to_str().unwrap(),
    ]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("--move-points"), "{stderr}");
}
