//! Suite-wide tests: the registry, determinism of sampling, set-ups that
//! leave work to do, and every template's oracle solving its task on the
//! in-process phone. Each app's checkers are tested next to them.

use super::*;
use crate::device::sim::SimDevice;
use crate::protocol::DevicePoint;
use crate::sim::phone::{PhoneConfig, SettingsState};
use crate::sim::virtual_phone::VirtualPhone;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Seeds per template in the oracle runs.
const SEEDS: u64 = 5;

/// A phone state with nothing in it: the starting point of hand-built
/// states in checker tests.
pub(super) fn blank_state() -> PhoneState {
    PhoneState {
        settings: SettingsState {
            wifi: false,
            bluetooth: false,
            airplane_mode: false,
            location: false,
            brightness: 128,
            store: BTreeMap::new(),
        },
        contacts: Vec::new(),
        notes: Vec::new(),
        alarms: Vec::new(),
        browser: Default::default(),
        files: Vec::new(),
        battery_level: 80,
    }
}

/// Instances with made-up values ([`Split::TrainOpen`]) per template in the
/// oracle runs, beside the plain suite's.
const OPEN_SEEDS: u64 = 3;

fn all_instances() -> impl Iterator<Item = (u64, Box<dyn Task>)> {
    templates().iter().flat_map(|t| {
        let open = (0..OPEN_SEEDS).map(|k| Split::TrainOpen.seed(k));
        (0..SEEDS)
            .chain(open)
            .map(move |seed| (seed, sample(t.name, seed).unwrap()))
    })
}

/// Made-up values are new: an open instance's goal is one no pooled
/// training instance has, and open instances rarely repeat one another.
#[test]
fn open_instances_make_up_their_values() {
    let named = [
        "alarm_set_labeled",
        "contact_add",
        "contact_delete",
        "contact_edit_phone",
        "note_append",
        "note_create",
        "note_delete",
        "photo_delete",
        "photos_delete_two",
        "web_open_first_result",
        "web_open_nth_result",
        "web_search",
    ];
    for name in named {
        let goals = |split: Split, n: u64| -> BTreeSet<String> {
            (0..n)
                .map(|k| sample(name, split.seed(k)).unwrap().goal())
                .collect()
        };
        let pooled = goals(Split::Train, 200);
        let open = goals(Split::TrainOpen, 50);
        assert!(open.len() >= 48, "{name}: {} distinct of 50", open.len());
        let shared: Vec<&String> = open.intersection(&pooled).collect();
        assert!(shared.is_empty(), "{name}: {shared:?}");
    }
}

#[test]
fn the_registry_is_sorted_and_names_its_tasks() {
    let names: Vec<&str> = templates().iter().map(|t| t.name).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(names, sorted, "templates sorted by name, no duplicates");
    for t in templates() {
        assert_eq!(sample(t.name, 0).unwrap().name(), t.name);
    }
    assert!(sample("no_such_task", 0).is_none());
}

#[test]
fn the_same_seed_gives_the_same_task() {
    for t in templates() {
        for seed in 0..10 {
            let (a, b) = (sample(t.name, seed).unwrap(), sample(t.name, seed).unwrap());
            assert_eq!(a.params(), b.params(), "{} seed {seed}", t.name);
            assert_eq!(a.goal(), b.goal(), "{} seed {seed}", t.name);
        }
    }
}

#[test]
fn different_seeds_give_different_parameters() {
    for t in templates() {
        let params = sample(t.name, 0).unwrap().params();
        if params.as_object().is_some_and(|o| o.is_empty()) {
            continue;
        }
        let goals: BTreeSet<String> = (0..20).map(|s| sample(t.name, s).unwrap().goal()).collect();
        assert!(goals.len() > 1, "{} gives one goal for 20 seeds", t.name);
    }
}

#[test]
fn setup_leaves_every_task_unsolved_on_the_home_screen() {
    for (seed, task) in all_instances() {
        let mut phone = Phone::new(PhoneConfig {
            seed,
            ..Default::default()
        });
        task.setup(&mut phone);
        assert!(
            !task.is_successful(phone.state()),
            "{} seed {seed} starts solved",
            task.name()
        );
        assert!(
            phone.focused_window().starts_with("com.btl.launcher/"),
            "{} seed {seed} starts on {}",
            task.name(),
            phone.focused_window()
        );
    }
}

fn contains(node: &UiNode, at: &DevicePoint) -> bool {
    let (Ok(x), Ok(y)) = (i32::try_from(at.x), i32::try_from(at.y)) else {
        return false;
    };
    node.contains(x, y)
}

/// Runs the oracle of `task` on a fresh phone, after `detour` when given;
/// panics with its steps when it does not solve the task.
fn solve(task: &dyn Task, seed: u64, detour: Option<fn(&mut Phone)>) -> OracleRun {
    let phone = Arc::new(VirtualPhone::new(PhoneConfig {
        seed,
        ..Default::default()
    }));
    phone.with_phone(|p| {
        task.setup(p);
        if let Some(detour) = detour {
            detour(p);
        }
    });
    let mut device = SimDevice::new(phone.clone());
    let run = run_oracle(task, &mut device).unwrap();
    let solved = phone.with_phone(|p| task.is_successful(p.state()));
    let plans: Vec<&str> = run.steps.iter().map(|s| s.plan.as_str()).collect();
    assert!(
        run.finished && solved,
        "{} seed {seed} ({}): finished {}, solved {solved}, steps {plans:#?}",
        task.name(),
        task.goal(),
        run.finished,
    );
    run
}

#[test]
fn every_oracle_solves_its_task_on_the_phone() {
    let mut instances = 0;
    for (seed, task) in all_instances() {
        let run = solve(task.as_ref(), seed, None);
        for step in &run.steps {
            assert!(
                !step.plan.is_empty(),
                "{}: a step without a plan",
                task.name()
            );
            match &step.action {
                DeviceAction::Tap { at } | DeviceAction::LongPress { at } => {
                    let target = step.target.as_ref().unwrap_or_else(|| {
                        panic!("{}: {:?} without a target", task.name(), step.action)
                    });
                    assert!(
                        contains(target, at),
                        "{}: {at:?} outside {:?}",
                        task.name(),
                        target.bounds
                    );
                }
                _ => assert!(step.target.is_none(), "{}: {:?}", task.name(), step.action),
            }
        }
        instances += 1;
    }
    assert!(
        instances >= 100 || templates().len() < 20,
        "{instances} instances"
    );
}

fn tap_id(p: &mut Phone, id: &str) {
    let node = p.ui_tree().find_by_id(id).cloned().unwrap();
    let (x, y) = node.center();
    p.tap(x, y);
}

/// A query half typed in the Browser, keyboard up.
fn typing_in_the_browser(p: &mut Phone) {
    p.start_app("com.btl.browser", None).unwrap();
    tap_id(p, "search_box");
    p.input_text("hello");
}

/// Settings left on a page no task needs.
fn deep_in_settings(p: &mut Phone) {
    p.start_app("com.btl.settings", None).unwrap();
    tap_id(p, "storage_row");
}

/// A new note's draft being typed, keyboard up.
fn drafting_a_note(p: &mut Phone) {
    p.start_app("com.btl.notes", None).unwrap();
    tap_id(p, "fab_new_note");
    tap_id(p, "title_field");
    p.input_text("Draft");
}

#[test]
fn oracles_find_their_way_from_where_an_agent_left_the_phone() {
    let detours: [fn(&mut Phone); 3] = [typing_in_the_browser, deep_in_settings, drafting_a_note];
    for t in templates() {
        for seed in 0..2 {
            for detour in detours {
                solve(sample(t.name, seed).unwrap().as_ref(), seed, Some(detour));
            }
        }
    }
}

/// Profile `btl-screen-text` lists what a model needs to act as the oracle
/// does: every oracle tap or long press, on every instance, is the point of
/// a listed element, named as the oracle's blink names its target (the
/// slider, tapped at a percentage, is exempt from the point); and the plan
/// that profile gets quotes the tapped line, so that looking the quote up in
/// the list, as a reader of the prompt would, gives the answer's point.
#[test]
fn every_oracle_target_is_a_listed_screen_element() {
    use crate::agent::safety::DEFAULT_KEYBOARD_PACKAGES;
    use crate::device::elements::screen_elements;
    use crate::model::oracle::quoting_its_line;
    use crate::protocol::{FrameMap, TRAINING_MAX_PIXELS};
    let mut taps = 0;
    let mut quoted = 0;
    for (seed, task) in all_instances() {
        let phone = Arc::new(VirtualPhone::new(PhoneConfig {
            seed,
            ..Default::default()
        }));
        phone.with_phone(|p| task.setup(p));
        let mut device = SimDevice::new(phone);
        let frame = FrameMap::new(device.screen_size().unwrap(), TRAINING_MAX_PIXELS).unwrap();
        run_oracle_watching(task.as_ref(), &mut device, |screen, step| {
            let Some(step) = step else {
                return;
            };
            let answer = crate::model::oracle::answer(step, &frame);
            if let Some(target) = &step.target
                && let Some(point) = answer.link.point()
            {
                let listed = screen_elements(screen, &frame, DEFAULT_KEYBOARD_PACKAGES);
                let hit = listed.iter().find(|e| {
                    step.span.is_some_and(|_| e.label == target.label()) || e.point == point
                });
                let context = || {
                    format!(
                        "{} seed {seed}: {} at {point:?} in {listed:#?}",
                        task.name(),
                        step.plan
                    )
                };
                let hit = hit.unwrap_or_else(|| panic!("not listed: {}", context()));
                if !DEFAULT_KEYBOARD_PACKAGES.contains(&target.package.as_str()) {
                    assert_eq!(hit.label, target.label(), "{}", context());
                }
                taps += 1;
                let plan = quoting_its_line(step.clone(), &listed, &frame).plan;
                let quote = ["Tap \"", "Long press \""]
                    .iter()
                    .find_map(|verb| plan.strip_prefix(verb)?.strip_suffix("\"."));
                if let Some(quote) = quote {
                    let lines: Vec<_> = listed.iter().filter(|e| e.label == quote).collect();
                    assert_eq!(lines.len(), 1, "{plan}: {}", context());
                    assert_eq!(lines[0].point, point, "{plan}: {}", context());
                    quoted += 1;
                } else {
                    // Only a slider's tap or a label two lines share keeps
                    // its own words.
                    let shared = listed.iter().filter(|e| e.label == hit.label).count() > 1;
                    assert!(step.span.is_some() || shared, "{plan}: {}", context());
                    assert_eq!(plan, step.plan);
                }
            }
        })
        .unwrap();
    }
    assert!(taps >= 300, "{taps} taps");
    assert!(
        quoted * 4 >= taps * 3,
        "{quoted} of {taps} taps quote their line"
    );
}
