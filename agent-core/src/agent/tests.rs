//! Episodes on the virtual phone with scripted answers: what runs, what is
//! refused, why each episode stops, and what lands on disk, including after
//! a `kill -9`.

use super::safety::{Confirm, Rejection, Scope, Verdict};
use super::stability::ManualClock;
use super::trajectory::{
    EPISODE_FILE, ParseRecord, STEPS_FILE, StepOutcome, Trajectory, read_trajectory,
};
use super::*;
use crate::device::sim::SimDevice;
use crate::device::ui::parse_uiautomator_xml;
use crate::model::{PolicyError, ScriptedPolicy};
use crate::protocol::{BtlOutput, DevicePoint, Part, Point, Roi, render};
use crate::sim::phone::{Phone, PhoneConfig};
use crate::sim::virtual_phone::VirtualPhone;
use std::io::Write;
use std::sync::Arc;

const PHONE: PhoneConfig = PhoneConfig {
    width: 720,
    height: 1280,
    density: 320,
    seed: 0,
};

fn frame() -> FrameMap {
    FrameMap::new(Size::new(PHONE.width, PHONE.height), TRAINING_MAX_PIXELS).unwrap()
}

fn new_phone() -> Arc<VirtualPhone> {
    Arc::new(VirtualPhone::new(PHONE))
}

/// The canonical answer for `action`, blinking at `roi` when given.
fn answer(plan: &str, action: Action, roi: Option<&UiNode>) -> String {
    let blink = roi
        .map(|n| {
            let [x1, y1, x2, y2] = n.bounds.map(|v| u32::try_from(v).unwrap());
            let (a, b) = (
                frame().to_model(DevicePoint { x: x1, y: y1 }),
                frame().to_model(DevicePoint { x: x2, y: y2 }),
            );
            Roi {
                bbox: crate::protocol::BBox::new(
                    a.x.round(),
                    a.y.round(),
                    b.x.round(),
                    b.y.round(),
                ),
                label: if n.text.is_empty() {
                    n.content_desc.clone()
                } else {
                    n.text.clone()
                },
            }
        })
        .into_iter()
        .collect();
    render(&BtlOutput {
        blink,
        think: format!(" {plan}. "),
        link: Link::Action {
            plan: plan.into(),
            action,
        },
    })
    .unwrap()
}

/// A tap at the centre of `node`, in whole model-frame pixels as a model
/// writes them.
fn tap(node: &UiNode) -> Action {
    let (x, y) = node.center();
    let p = frame().to_model(DevicePoint {
        x: x as u32,
        y: y as u32,
    });
    Action::Tap {
        point_2d: Point::new(p.x.round(), p.y.round()),
    }
}

fn tap_answer(plan: &str, node: &UiNode) -> String {
    answer(plan, tap(node), Some(node))
}

fn launcher_icon(phone: &Phone, label: &str) -> UiNode {
    phone
        .ui_tree()
        .find(|n| n.content_desc == label && n.clickable)
        .cloned()
        .unwrap()
}

/// Answers that open Settings from the launcher and flip the Wi-Fi switch,
/// worked out on a twin of the phone (same config, same screens).
fn wifi_script() -> Vec<String> {
    let mut twin = Phone::new(PHONE);
    let icon = launcher_icon(&twin, "Settings");
    let open = tap_answer("Open the Settings app", &icon);
    let (x, y) = icon.center();
    twin.tap(x, y);
    let switch = twin.ui_tree().find_by_id("wifi_switch").cloned().unwrap();
    vec![open, tap_answer("Turn Wi-Fi off", &switch)]
}

fn open_settings_answer() -> String {
    tap_answer(
        "Open the Settings app",
        &launcher_icon(&Phone::new(PHONE), "Settings"),
    )
}

fn back_answer() -> String {
    answer("Go back", Action::Back, None)
}

/// Opens Settings and goes back, `times` times.
fn settings_and_back(times: usize) -> Vec<String> {
    [open_settings_answer(), back_answer()]
        .iter()
        .cycle()
        .take(2 * times)
        .cloned()
        .collect()
}

fn config(goal: &str) -> AgentConfig {
    AgentConfig {
        goal: goal.into(),
        max_steps: 10,
        stability: StabilityConfig {
            poll_interval_ms: 10,
            timeout_ms: 100,
        },
        ..AgentConfig::default()
    }
}

fn agent(dir: &Path, config: AgentConfig, phone: &Arc<VirtualPhone>, script: Vec<String>) -> Agent {
    Agent::new(
        dir,
        config,
        Box::new(SimDevice::new(phone.clone())),
        Box::new(ScriptedPolicy::new(script)),
    )
    .unwrap()
    .with_clock(ManualClock::default())
}

fn run(
    config: AgentConfig,
    phone: &Arc<VirtualPhone>,
    script: Vec<String>,
) -> (Outcome, Trajectory) {
    let dir = tempfile::tempdir().unwrap();
    let outcome = agent(dir.path(), config, phone, script).run().unwrap();
    (outcome, read_trajectory(dir.path()).unwrap())
}

/// What an action could have changed on the phone.
fn screen_state(phone: &VirtualPhone) -> (String, UiNode) {
    phone.with_phone(|p| (p.focused_window(), p.ui_tree()))
}

fn wifi_off(phone: &Arc<VirtualPhone>) -> impl FnMut() -> bool + Send + 'static {
    let phone = phone.clone();
    move || phone.with_phone(|p| !p.state().settings.wifi)
}

#[test]
fn wifi_episode_stops_on_success_with_a_complete_trajectory() {
    let phone = new_phone();
    let dir = tempfile::tempdir().unwrap();
    let outcome = agent(dir.path(), config("Turn off Wi-Fi"), &phone, wifi_script())
        .with_checker(wifi_off(&phone))
        .run()
        .unwrap();
    assert_eq!(
        outcome,
        Outcome {
            stop: StopReason::Succeeded,
            steps: 2,
            success: Some(true)
        }
    );
    assert!(!phone.with_phone(|p| p.state().settings.wifi));

    let t = read_trajectory(dir.path()).unwrap();
    assert_eq!(t.truncated_tail, None);
    assert_eq!(t.episode.outcome, Some(outcome));
    assert_eq!(t.episode.goal, "Turn off Wi-Fi");
    assert_eq!(t.episode.policy, "scripted");
    assert_eq!(t.episode.screen, Size::new(720, 1280));
    assert_eq!(t.steps.len(), 2);
    assert_eq!(t.history(), ["Open the Settings app", "Turn Wi-Fi off"]);
    let first = &t.steps[0];
    assert!(
        first
            .prompt
            .user
            .contains("## User Instruction\nTurn off Wi-Fi\n\n## Action History\n\n\n")
    );
    assert!(
        t.steps[1]
            .prompt
            .user
            .contains("## Action History\nStep 1: Open the Settings app\n\n")
    );
    for (i, step) in t.steps.iter().enumerate() {
        assert_eq!(step.index as usize, i + 1);
        assert_eq!(step.outcome, StepOutcome::Performed);
        assert_eq!(step.frame, frame());
        assert_eq!(step.attempts.len(), 1);
        assert!(matches!(
            &step.attempts[0].parse,
            ParseRecord::Parsed { tolerances, .. } if tolerances.is_empty()
        ));
        assert_eq!(
            step.attempts[0].verdict,
            Some(Verdict::Allow { sensitive: None })
        );
        let executed = step.executed.as_ref().unwrap();
        assert!(matches!(executed.device, Some(DeviceAction::Tap { .. })));
        assert!(step.timings.settle.unwrap().stable);
        let png = image::open(dir.path().join(&step.screenshot)).unwrap();
        assert_eq!((png.width(), png.height()), (720, 1280));
        let xml = std::fs::read_to_string(dir.path().join(step.ui_tree.as_ref().unwrap())).unwrap();
        parse_uiautomator_xml(&xml).unwrap();
    }
    assert_eq!(first.screenshot, "step-0001.png");
    assert_eq!(first.ui_tree.as_deref(), Some("step-0001.xml"));
    // The device tap lands on the launcher icon the model pointed at.
    let icon = launcher_icon(&Phone::new(PHONE), "Settings");
    let Some(DeviceAction::Tap { at }) = first.executed.as_ref().unwrap().device else {
        unreachable!()
    };
    assert!(icon.contains(at.x as i32, at.y as i32));
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.starts_with('.') && !n.starts_with("tmp"))
        .collect();
    assert_eq!(names.len(), 6, "no temporary files left behind: {names:?}");
}

#[test]
fn step_budget_stops_the_episode() {
    let phone = new_phone();
    let script = vec![
        open_settings_answer(),
        back_answer(),
        open_settings_answer(),
    ];
    let (outcome, t) = run(
        AgentConfig {
            max_steps: 2,
            ..config("Browse")
        },
        &phone,
        script,
    );
    assert_eq!(outcome.stop, StopReason::StepBudget { max_steps: 2 });
    assert_eq!(outcome.success, None, "no checker, no verdict on success");
    assert_eq!(t.steps.len(), 2);
}

#[test]
fn malformed_answers_execute_nothing() {
    let canonical = open_settings_answer();
    let grounding = "<blink>```json\n[]\n```</blink>\n<think>x</think>\n<link>```json\n[{\"point_2d\": [10, 10]}]\n```</link>";
    let link = |body: &str| {
        format!(
            "<blink>```json\n[]\n```</blink>\n<think>x</think>\n<link>```json\n{body}\n```</link>"
        )
    };
    // (case, mode, raw answer, the part the parser blames or None when the
    // gate rejects a parsed answer)
    let rows: Vec<(&str, ParseMode, String, Option<Part>)> = vec![
        (
            "empty answer",
            ParseMode::Tolerant,
            String::new(),
            Some(Part::Blink),
        ),
        (
            "prose",
            ParseMode::Tolerant,
            "I will tap Settings.".into(),
            Some(Part::Blink),
        ),
        (
            "no link",
            ParseMode::Tolerant,
            canonical[..canonical.find("<link>").unwrap()].into(),
            Some(Part::Link),
        ),
        (
            "unclosed link",
            ParseMode::Tolerant,
            canonical.replace("</link>", ""),
            Some(Part::Link),
        ),
        (
            "broken JSON",
            ParseMode::Tolerant,
            link("[{\"Plan\": \"x\", \"Action\": {"),
            Some(Part::Link),
        ),
        (
            "two actions",
            ParseMode::Tolerant,
            link(
                r#"[{"Plan": "a", "Action": {"function": "Back"}}, {"Plan": "b", "Action": {"function": "Home"}}]"#,
            ),
            Some(Part::Link),
        ),
        (
            "unknown function",
            ParseMode::Tolerant,
            link(r#"[{"Plan": "a", "Action": {"function": "Fly"}}]"#),
            Some(Part::Link),
        ),
        (
            "tap without a point",
            ParseMode::Tolerant,
            link(r#"[{"Plan": "a", "Action": {"function": "Tap"}}]"#),
            Some(Part::Link),
        ),
        (
            "leading space in strict mode",
            ParseMode::Strict,
            format!(" {canonical}"),
            Some(Part::Envelope),
        ),
        (
            "grounding answer",
            ParseMode::Tolerant,
            grounding.into(),
            None,
        ),
    ];
    for (case, parse_mode, raw, blamed) in rows {
        let phone = new_phone();
        let before = screen_state(&phone);
        let (outcome, t) = run(
            AgentConfig {
                parse_mode,
                max_attempts: 1,
                ..config("Open Settings")
            },
            &phone,
            vec![raw],
        );
        assert_eq!(screen_state(&phone), before, "{case}: the phone changed");
        assert!(
            matches!(outcome.stop, StopReason::NoValidOutput { attempts: 1, .. }),
            "{case}: {:?}",
            outcome.stop
        );
        let step = &t.steps[0];
        assert_eq!(step.outcome, StepOutcome::NoValidOutput, "{case}");
        assert_eq!(step.executed, None, "{case}");
        assert_eq!(step.timings.settle, None, "{case}");
        match (&step.attempts[0].parse, blamed) {
            (ParseRecord::Failed { part, error, .. }, Some(blamed)) => {
                assert_eq!(*part, blamed, "{case}: {error}");
                assert!(!error.is_empty());
                assert_eq!(step.attempts[0].verdict, None, "{case}");
            }
            (ParseRecord::Parsed { .. }, None) => assert_eq!(
                step.attempts[0].verdict,
                Some(Verdict::Reject {
                    rejection: Rejection::NotAnAction
                }),
                "{case}"
            ),
            (other, _) => panic!("{case}: {other:?}"),
        }
    }
    // The leading space strict mode refuses is forgiven, and reported, by
    // the tolerant mode.
    let phone = new_phone();
    let (_, t) = run(
        AgentConfig {
            max_steps: 1,
            ..config("Open Settings")
        },
        &phone,
        vec![format!(" {canonical}")],
    );
    assert_eq!(t.steps[0].outcome, StepOutcome::Performed);
    assert!(matches!(
        &t.steps[0].attempts[0].parse,
        ParseRecord::Parsed { tolerances, .. } if tolerances.len() == 1
    ));
    assert!(
        phone
            .with_phone(|p| p.focused_window())
            .starts_with("com.btl.settings/")
    );
}

#[test]
fn unusable_answers_are_retried_with_new_seeds() {
    let phone = new_phone();
    let script = vec![
        "nonsense".into(),
        "more nonsense".into(),
        open_settings_answer(),
    ];
    let (outcome, t) = run(
        AgentConfig {
            max_steps: 1,
            ..config("Open Settings")
        },
        &phone,
        script,
    );
    assert_eq!(outcome.stop, StopReason::StepBudget { max_steps: 1 });
    let step = &t.steps[0];
    assert_eq!(step.outcome, StepOutcome::Performed);
    let seeds: std::collections::HashSet<u64> = step.attempts.iter().map(|a| a.seed).collect();
    assert_eq!((step.attempts.len(), seeds.len()), (3, 3));

    let phone = new_phone();
    let (outcome, t) = run(
        config("Open Settings"),
        &phone,
        vec!["a".into(), "b".into(), "c".into()],
    );
    let StopReason::NoValidOutput {
        attempts: 3,
        last_error,
    } = outcome.stop
    else {
        panic!("{:?}", outcome.stop)
    };
    assert!(last_error.starts_with("blink at byte 0"), "{last_error}");
    assert_eq!(t.steps[0].attempts.len(), 3);
}

#[test]
fn off_frame_points_are_rejected_not_clamped() {
    let phone = new_phone();
    let before = screen_state(&phone);
    let model = frame().model;
    let off = Point::new(f64::from(model.width) + 1.0, 100.0);
    let (outcome, t) = run(
        AgentConfig {
            max_attempts: 1,
            ..config("Tap")
        },
        &phone,
        vec![answer("Tap the edge", Action::Tap { point_2d: off }, None)],
    );
    assert_eq!(screen_state(&phone), before);
    assert!(matches!(outcome.stop, StopReason::NoValidOutput { .. }));
    assert_eq!(
        t.steps[0].attempts[0].verdict,
        Some(Verdict::Reject {
            rejection: Rejection::OutsideFrame { point: off, model }
        })
    );
}

/// A phone showing the first contact's page, and the answer tapping its
/// Delete button.
fn contact_page() -> (Arc<VirtualPhone>, String) {
    let phone = new_phone();
    phone.with_phone(|p| {
        let icon = launcher_icon(p, "Contacts");
        let (x, y) = icon.center();
        p.tap(x, y);
        let item = p.ui_tree().find_by_id("contact_item").cloned().unwrap();
        let (x, y) = item.center();
        p.tap(x, y);
    });
    let delete = phone.with_phone(|p| p.ui_tree().find_by_id("delete_button").cloned().unwrap());
    (phone, tap_answer("Delete the contact", &delete))
}

fn contact_count(phone: &VirtualPhone) -> usize {
    phone.with_phone(|p| p.state().contacts.len())
}

#[test]
fn denied_sensitive_action_is_recorded_not_executed() {
    let (phone, delete) = contact_page();
    let (before, contacts) = (screen_state(&phone), contact_count(&phone));
    let mut cfg = config("Delete the first contact");
    cfg.safety.on_sensitive = Confirm::Deny;
    let (outcome, t) = run(cfg, &phone, vec![delete]);
    assert_eq!(screen_state(&phone), before);
    assert_eq!(contact_count(&phone), contacts);
    let StopReason::SensitiveAction {
        rejection: Rejection::Denied { sensitive },
    } = &outcome.stop
    else {
        panic!("{:?}", outcome.stop)
    };
    assert_eq!(
        (sensitive.pattern.as_str(), sensitive.scope),
        ("delete", Scope::Target)
    );
    assert_eq!(t.steps[0].outcome, StepOutcome::Blocked);
    assert_eq!(t.steps[0].attempts.len(), 1, "a refusal is not retried");
}

#[test]
fn ask_goes_to_the_confirmer_and_declines_without_one() {
    let (phone, delete) = contact_page();
    let dir = tempfile::tempdir().unwrap();
    let outcome = agent(dir.path(), config("Delete"), &phone, vec![delete.clone()])
        .run()
        .unwrap();
    assert!(matches!(
        outcome.stop,
        StopReason::SensitiveAction {
            rejection: Rejection::Declined { .. }
        }
    ));

    let (phone, delete) = contact_page();
    let before = screen_state(&phone);
    let dir = tempfile::tempdir().unwrap();
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = asked.clone();
    let outcome = agent(
        dir.path(),
        AgentConfig {
            max_steps: 1,
            ..config("Delete")
        },
        &phone,
        vec![delete],
    )
    .with_confirmer(move |r: &ConfirmRequest| {
        log.lock().unwrap().push(r.plan.to_string());
        true
    })
    .run()
    .unwrap();
    assert_eq!(outcome.stop, StopReason::StepBudget { max_steps: 1 });
    assert_eq!(*asked.lock().unwrap(), ["Delete the contact"]);
    assert_ne!(screen_state(&phone), before, "the confirmed tap ran");
    let t = read_trajectory(dir.path()).unwrap();
    assert!(matches!(
        t.steps[0].attempts[0].verdict,
        Some(Verdict::Allow { sensitive: Some(_) })
    ));
}

/// The virtual phone, except that every screenshot is black, as
/// `screencap` shows a FLAG_SECURE window.
struct SecureScreen(SimDevice);

impl Device for SecureScreen {
    fn name(&self) -> String {
        "secure".into()
    }
    fn screen_size(&mut self) -> Result<Size, DeviceError> {
        self.0.screen_size()
    }
    fn screenshot(&mut self) -> Result<RgbaImage, DeviceError> {
        let Size { width, height } = self.0.screen_size()?;
        Ok(RgbaImage::from_pixel(
            width,
            height,
            image::Rgba([0, 0, 0, 255]),
        ))
    }
    fn ui_tree(&mut self) -> Result<Option<UiNode>, DeviceError> {
        self.0.ui_tree()
    }
    fn perform(&mut self, action: &DeviceAction) -> Result<(), DeviceError> {
        self.0.perform(action)
    }
}

#[test]
fn blank_screens_are_not_sent_to_the_model() {
    let dir = tempfile::tempdir().unwrap();
    // An empty script: asking the policy would end in PolicyFailed.
    let outcome = Agent::new(
        dir.path(),
        config("Pay"),
        Box::new(SecureScreen(SimDevice::new(new_phone()))),
        Box::new(ScriptedPolicy::new(Vec::<String>::new())),
    )
    .unwrap()
    .run()
    .unwrap();
    assert_eq!(outcome.stop, StopReason::BlankScreen);
    let t = read_trajectory(dir.path()).unwrap();
    assert_eq!(t.steps[0].outcome, StepOutcome::BlankScreen);
    assert!(t.steps[0].attempts.is_empty());
    assert!(dir.path().join("step-0001.png").exists());

    assert!(is_uniform(&RgbaImage::from_pixel(
        3,
        3,
        image::Rgba([7, 7, 7, 255])
    )));
    let mut almost = RgbaImage::from_pixel(3, 3, image::Rgba([0, 0, 0, 255]));
    almost.put_pixel(2, 2, image::Rgba([0, 0, 1, 255]));
    assert!(!is_uniform(&almost));
}

#[test]
fn the_same_action_on_an_unchanged_screen_stops_at_the_third() {
    let phone = new_phone();
    let home = answer("Go home", Action::Home, None);
    let (outcome, t) = run(config("Stay home"), &phone, vec![home; 5]);
    assert_eq!(
        outcome.stop,
        StopReason::RepeatedAction {
            action: Action::Home,
            times: 3
        }
    );
    let outcomes: Vec<_> = t.steps.iter().map(|s| s.outcome.clone()).collect();
    assert_eq!(
        outcomes,
        [
            StepOutcome::Performed,
            StepOutcome::Performed,
            StepOutcome::Repeated
        ]
    );
}

#[test]
fn an_action_that_changes_the_screen_may_repeat() {
    let phone = new_phone();
    let script = settings_and_back(3);
    let (outcome, t) = run(
        AgentConfig {
            max_steps: 6,
            ..config("Browse")
        },
        &phone,
        script,
    );
    assert_eq!(outcome.stop, StopReason::StepBudget { max_steps: 6 });
    assert!(t.steps.iter().all(|s| s.outcome == StepOutcome::Performed));
}

#[test]
fn finish_ends_the_episode_in_the_extended_profile_only() {
    let finish = answer(
        "Done",
        Action::Finish {
            answer: Some("Wi-Fi is on".into()),
        },
        None,
    );
    let phone = new_phone();
    let dir = tempfile::tempdir().unwrap();
    let outcome = agent(
        dir.path(),
        AgentConfig {
            profile: Profile::BtlExtended,
            ..config("Is Wi-Fi on?")
        },
        &phone,
        vec![finish.clone()],
    )
    .with_checker(wifi_off(&phone))
    .run()
    .unwrap();
    assert_eq!(
        outcome,
        Outcome {
            stop: StopReason::Finished {
                answer: Some("Wi-Fi is on".into())
            },
            steps: 1,
            success: Some(false),
        }
    );
    let t = read_trajectory(dir.path()).unwrap();
    assert_eq!(t.steps[0].outcome, StepOutcome::Finished);
    assert_eq!(t.steps[0].executed.as_ref().unwrap().device, None);
    assert!(t.steps[0].prompt.user.contains("Action 8: Finish"));

    let (outcome, t) = run(
        AgentConfig {
            max_attempts: 1,
            ..config("Is Wi-Fi on?")
        },
        &new_phone(),
        vec![finish],
    );
    assert!(matches!(outcome.stop, StopReason::NoValidOutput { .. }));
    assert!(matches!(
        t.steps[0].attempts[0].verdict,
        Some(Verdict::Reject {
            rejection: Rejection::OutsideProfile { .. }
        })
    ));
}

#[test]
fn a_policy_failure_ends_the_episode() {
    let (outcome, t) = run(config("Anything"), &new_phone(), Vec::new());
    assert!(matches!(outcome.stop, StopReason::PolicyFailed { .. }));
    assert!(matches!(
        t.steps[0].outcome,
        StepOutcome::PolicyFailed { .. }
    ));
}

#[test]
fn an_episode_directory_is_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let phone = new_phone();
    agent(dir.path(), config("x"), &phone, Vec::new())
        .run()
        .unwrap();
    let again = Agent::new(
        dir.path(),
        config("x"),
        Box::new(SimDevice::new(phone.clone())),
        Box::new(ScriptedPolicy::new(Vec::<String>::new())),
    );
    assert!(matches!(
        again,
        Err(AgentError::Trajectory(TrajectoryError::Exists(_)))
    ));
    let resumed = Agent::resume(
        dir.path(),
        Box::new(SimDevice::new(phone)),
        Box::new(ScriptedPolicy::new(Vec::<String>::new())),
    );
    assert!(matches!(resumed, Err(AgentError::AlreadyEnded { .. })));
}

/// While one agent writes an episode, a second cannot take it over (two
/// would interleave their lines in steps.jsonl); once the first is gone,
/// the episode resumes.
#[test]
fn one_writer_holds_an_episode_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let phone = new_phone();
    let scripted = || Box::new(ScriptedPolicy::new(Vec::<String>::new()));
    let first = agent(dir.path(), config("x"), &phone, Vec::new());
    let second = Agent::resume(
        dir.path(),
        Box::new(SimDevice::new(phone.clone())),
        scripted(),
    );
    match second {
        Err(AgentError::Trajectory(e @ TrajectoryError::Busy(_))) => assert_eq!(
            e.to_string(),
            format!(
                "another process is writing the episode in {}",
                dir.path().display()
            )
        ),
        other => panic!("{:?}", other.err()),
    }
    drop(first);
    let resumed = Agent::resume(dir.path(), Box::new(SimDevice::new(phone)), scripted());
    assert!(resumed.is_ok(), "{:?}", resumed.err());
}

/// Settings beyond the bounds are refused in words, from a new episode's
/// config and from an edited `episode.json` a resume reads, before a
/// vote of four billion answers is drawn up.
#[test]
fn settings_beyond_their_bounds_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let phone = new_phone();
    let start = |dir: &Path, config: AgentConfig| {
        Agent::new(
            dir,
            config,
            Box::new(SimDevice::new(phone.clone())),
            Box::new(ScriptedPolicy::new(vec![back_answer()])),
        )
    };
    let too_many = AgentConfig {
        max_attempts: MAX_ATTEMPTS + 1,
        ..config("x")
    };
    let err = start(&dir.path().join("new"), too_many).err().unwrap();
    assert_eq!(
        err.to_string(),
        "invalid agent settings: max_attempts = 33 is above 32"
    );
    let edited = dir.path().join("edited");
    start(&edited, config("x")).unwrap().run().unwrap();
    let mut t = read_trajectory(&edited).unwrap();
    t.episode.outcome = None;
    t.episode.settings.vote = 4_000_000_000;
    let json = serde_json::to_vec_pretty(&t.episode).unwrap();
    crate::atomic::write(&edited.join(EPISODE_FILE), &json).unwrap();
    let err = Agent::resume(
        &edited,
        Box::new(SimDevice::new(phone.clone())),
        Box::new(ScriptedPolicy::new(vec![back_answer()])),
    )
    .err()
    .unwrap();
    assert_eq!(
        err.to_string(),
        format!(
            "invalid agent settings in {}: vote = 4000000000 is above 32",
            edited.join(EPISODE_FILE).display()
        )
    );
    // A frame smaller than the smallest a model takes (56 × 56 = 3,136
    // pixels) would fail at the first screenshot, blamed on the device.
    let tiny = AgentConfig {
        max_pixels: 3135,
        ..config("x")
    };
    let err = start(&dir.path().join("tiny"), tiny).err().unwrap();
    assert_eq!(
        err.to_string(),
        "invalid agent settings: max_pixels = 3135 is below 3136, the fewest pixels of a model frame"
    );
}

/// The virtual phone with its cable pulled at the `n`-th action.
struct Unplugged {
    device: SimDevice,
    actions_left: u32,
}

impl Device for Unplugged {
    fn name(&self) -> String {
        self.device.name()
    }
    fn screen_size(&mut self) -> Result<Size, DeviceError> {
        self.device.screen_size()
    }
    fn screenshot(&mut self) -> Result<RgbaImage, DeviceError> {
        self.device.screenshot()
    }
    fn ui_tree(&mut self) -> Result<Option<UiNode>, DeviceError> {
        self.device.ui_tree()
    }
    fn perform(&mut self, action: &DeviceAction) -> Result<(), DeviceError> {
        self.actions_left = self.actions_left.saturating_sub(1);
        if self.actions_left == 0 {
            return Err(DeviceError::Disconnected {
                operation: "input".into(),
                reason: "the cable was pulled".into(),
            });
        }
        self.device.perform(action)
    }
}

#[test]
fn an_episode_its_device_failed_resumes_with_its_steps_intact() {
    let dir = tempfile::tempdir().unwrap();
    let phone = new_phone();
    let back = || answer("Go back.", Action::Back, None);
    let mut config = config("Look around");
    config.max_steps = 3;
    config.repeat_limit = 0;
    let outcome = Agent::new(
        dir.path(),
        config,
        Box::new(Unplugged {
            device: SimDevice::new(phone.clone()),
            actions_left: 2,
        }),
        Box::new(ScriptedPolicy::new(vec![back(), back()])),
    )
    .unwrap()
    .with_clock(ManualClock::default())
    .run()
    .unwrap();
    assert!(matches!(outcome.stop, StopReason::DeviceFailed { .. }));
    assert!(outcome.stop.resumable());
    let stopped = read_trajectory(dir.path()).unwrap();
    assert_eq!(stopped.episode.outcome, Some(outcome));
    assert_eq!(stopped.steps.len(), 2);

    let outcome = Agent::resume(
        dir.path(),
        Box::new(SimDevice::new(phone)),
        Box::new(ScriptedPolicy::new(vec![back()])),
    )
    .unwrap()
    .with_clock(ManualClock::default())
    .run()
    .unwrap();
    assert_eq!(outcome.stop, StopReason::StepBudget { max_steps: 3 });
    let resumed = read_trajectory(dir.path()).unwrap();
    assert_eq!(resumed.episode.resumed_at_steps, [2]);
    assert_eq!(resumed.steps[..2], stopped.steps[..]);
    assert_eq!(resumed.steps[2].outcome, StepOutcome::Performed);
    assert_consistent(&resumed);
}

/// The repeat check goes on across a resumption: the steps it looks at are
/// read back, so the episode stops on the third Home in a row whether or
/// not a device failure came between them.
#[test]
fn a_resumed_episode_still_stops_on_a_repeated_action() {
    let dir = tempfile::tempdir().unwrap();
    let phone = new_phone();
    let home = || answer("Go home", Action::Home, None);
    let outcome = Agent::new(
        dir.path(),
        config("Stay home"),
        Box::new(Unplugged {
            device: SimDevice::new(phone.clone()),
            actions_left: 2,
        }),
        Box::new(ScriptedPolicy::new(vec![home(), home()])),
    )
    .unwrap()
    .with_clock(ManualClock::default())
    .run()
    .unwrap();
    assert!(matches!(outcome.stop, StopReason::DeviceFailed { .. }));

    let outcome = Agent::resume(
        dir.path(),
        Box::new(SimDevice::new(phone)),
        Box::new(ScriptedPolicy::new(vec![home(); 4])),
    )
    .unwrap()
    .with_clock(ManualClock::default())
    .run()
    .unwrap();
    assert_eq!(
        (outcome.stop, outcome.steps),
        (
            StopReason::RepeatedAction {
                action: Action::Home,
                times: 3
            },
            4
        )
    );
    let t = read_trajectory(dir.path()).unwrap();
    let outcomes: Vec<_> = t.steps.iter().map(|s| &s.outcome).collect();
    assert!(
        matches!(
            outcomes[..],
            [
                StepOutcome::Performed,
                StepOutcome::DeviceFailed { .. },
                StepOutcome::Performed,
                StepOutcome::Repeated
            ]
        ),
        "{outcomes:?}"
    );
}

/// A scripted policy under another name and fingerprint.
struct Disguised {
    name: &'static str,
    fingerprint: Option<&'static str>,
    inner: ScriptedPolicy,
}

impl Policy for Disguised {
    fn name(&self) -> String {
        self.name.into()
    }

    fn fingerprint(&self) -> Option<String> {
        self.fingerprint.map(Into::into)
    }

    fn act(&mut self, obs: &Observation) -> Result<PolicyOutput, PolicyError> {
        self.inner.act(obs)
    }
}

/// Another policy, or the same name with other weights, may not continue
/// an episode: its steps would pass for the recorded policy's. The refusal
/// writes nothing; the recording policy, fingerprint and all, resumes.
#[test]
fn an_episode_resumes_only_with_the_policy_that_recorded_it() {
    let dir = tempfile::tempdir().unwrap();
    let phone = new_phone();
    let back = || answer("Go back.", Action::Back, None);
    let policy = |name, fingerprint| {
        Box::new(Disguised {
            name,
            fingerprint,
            inner: ScriptedPolicy::new(vec![back()]),
        })
    };
    let mut config = config("Look around");
    config.max_steps = 1;
    Agent::new(
        dir.path(),
        config,
        Box::new(SimDevice::new(phone.clone())),
        policy("model.gguf", Some("aaaa")),
    )
    .unwrap()
    .with_clock(ManualClock::default())
    .run()
    .unwrap();
    mark_interrupted(dir.path(), 2);
    let recorded = std::fs::read(dir.path().join(EPISODE_FILE)).unwrap();
    let resume =
        |policy| Agent::resume(dir.path(), Box::new(SimDevice::new(phone.clone())), policy);
    for (other, reason) in [
        (
            policy("other.gguf", Some("aaaa")),
            "an episode of model.gguf, and this run's policy is other.gguf",
        ),
        (
            policy("model.gguf", Some("bbbb")),
            "an episode of model.gguf with other weights (fingerprint aaaa; this run's files are bbbb)",
        ),
    ] {
        match resume(other) {
            Err(e @ AgentError::OtherPolicy { .. }) => assert_eq!(
                e.to_string(),
                format!(
                    "{} holds {reason}; resume it with the policy that recorded it",
                    dir.path().display()
                )
            ),
            Err(e) => panic!("{reason}: refused for another reason: {e}"),
            Ok(_) => panic!("{reason}: resumed"),
        }
        assert_eq!(
            std::fs::read(dir.path().join(EPISODE_FILE)).unwrap(),
            recorded
        );
    }
    let outcome = resume(policy("model.gguf", Some("aaaa")))
        .unwrap()
        .with_clock(ManualClock::default())
        .run()
        .unwrap();
    assert_eq!(outcome.steps, 2);
}

/// Marks a finished episode as interrupted, as if killed before its end,
/// with `max_steps` raised so it has steps left.
fn mark_interrupted(dir: &Path, max_steps: u32) {
    let mut t = read_trajectory(dir).unwrap();
    t.episode.outcome = None;
    t.episode.settings.max_steps = max_steps;
    let json = serde_json::to_vec_pretty(&t.episode).unwrap();
    crate::atomic::write(&dir.join(EPISODE_FILE), &json).unwrap();
}

/// Checks the invariants a resumed trajectory must keep.
fn assert_consistent(t: &Trajectory) {
    assert_eq!(t.truncated_tail, None);
    for (i, step) in t.steps.iter().enumerate() {
        assert_eq!(step.index as usize, i + 1);
        image::open(t.dir.join(&step.screenshot)).unwrap();
    }
}

#[test]
fn a_partial_last_line_is_ignored_and_cut_off_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let phone = new_phone();
    let script = vec![open_settings_answer(), back_answer()];
    let cfg = AgentConfig {
        max_steps: 2,
        ..config("Browse")
    };
    agent(dir.path(), cfg, &phone, script.clone())
        .run()
        .unwrap();
    mark_interrupted(dir.path(), 4);
    let steps_path = dir.path().join(STEPS_FILE);
    let mut partial = std::fs::OpenOptions::new()
        .append(true)
        .open(&steps_path)
        .unwrap();
    partial.write_all(br#"{"index": 3, "screensh"#).unwrap();
    drop(partial);

    let t = read_trajectory(dir.path()).unwrap();
    assert_eq!(t.steps.len(), 2);
    let tail = t.truncated_tail.unwrap();
    assert_eq!((tail.line, tail.bytes), (3, 22));
    assert!(tail.to_string().contains("ignored an unfinished line 3"));

    let outcome = Agent::resume(
        dir.path(),
        Box::new(SimDevice::new(phone)),
        Box::new(ScriptedPolicy::new(script)),
    )
    .unwrap()
    .with_clock(ManualClock::default())
    .run()
    .unwrap();
    assert_eq!(outcome.stop, StopReason::StepBudget { max_steps: 4 });
    assert_eq!(outcome.steps, 4);
    let t = read_trajectory(dir.path()).unwrap();
    assert_consistent(&t);
    assert_eq!(t.steps.len(), 4);
    assert_eq!(t.episode.resumed_at_steps, [2]);
    assert!(
        t.steps[2]
            .prompt
            .user
            .contains("## Action History\nStep 1: Open the Settings app\nStep 2: Go back\n\n")
    );
}

#[test]
fn a_corrupt_complete_line_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    agent(dir.path(), config("x"), &new_phone(), vec![back_answer()])
        .run()
        .unwrap();
    // Line 1 is the Back, line 2 the step where the script ran out.
    let steps_path = dir.path().join(STEPS_FILE);
    let mut text = std::fs::read_to_string(&steps_path).unwrap();
    text.push_str("{not json}\n");
    std::fs::write(&steps_path, text).unwrap();
    let err = read_trajectory(dir.path()).unwrap_err();
    assert!(
        matches!(err, TrajectoryError::Json { line: Some(3), .. }),
        "{err}"
    );
}

const CRASH_DIR_ENV: &str = "BTL_AGENT_CRASH_TEST_DIR";

/// Not a test on its own: the long, slow episode that
/// `kill_9_mid_episode_leaves_a_resumable_trajectory` runs in a child
/// process and kills.
#[test]
#[ignore = "the child process of kill_9_mid_episode_leaves_a_resumable_trajectory"]
fn crash_child_process() {
    let dir = std::env::var_os(CRASH_DIR_ENV).expect(
        "run by kill_9_mid_episode_leaves_a_resumable_trajectory, which names its directory",
    );
    let script = settings_and_back(1000);
    let cfg = AgentConfig {
        max_steps: 2000,
        stability: StabilityConfig {
            poll_interval_ms: 1,
            timeout_ms: 20,
        },
        ..config("Browse forever")
    };
    let policy = ScriptedPolicy::new(script).with_delay(std::time::Duration::from_millis(20));
    let outcome = Agent::new(
        Path::new(&dir),
        cfg,
        Box::new(SimDevice::new(new_phone())),
        Box::new(policy),
    )
    .unwrap()
    .run()
    .unwrap();
    panic!("the episode should have been killed, but it ended: {outcome:?}");
}

fn line_count(path: &Path) -> usize {
    std::fs::read(path)
        .map(|b| b.iter().filter(|&&c| c == b'\n').count())
        .unwrap_or(0)
}

#[test]
fn kill_9_mid_episode_leaves_a_resumable_trajectory() {
    let dir = tempfile::tempdir().unwrap();
    let episode = dir.path().join("episode");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "agent::tests::crash_child_process",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CRASH_DIR_ENV, &episode)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while line_count(&episode.join(STEPS_FILE)) < 4 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the child ended before it was killed"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "the child made no progress"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // Child::kill sends SIGKILL on Unix: no destructor, no flush runs.
    child.kill().unwrap();
    child.wait().unwrap();

    let t = read_trajectory(&episode).unwrap();
    assert_eq!(t.episode.outcome, None, "a killed episode has no outcome");
    let done = t.steps.len();
    assert!(done >= 4);
    for (i, step) in t.steps.iter().enumerate() {
        assert_eq!(step.index as usize, i + 1);
        image::open(episode.join(&step.screenshot)).unwrap();
    }
    let plans = t.history();
    assert_eq!(plans.len(), done);

    let mut checks = 0;
    let outcome = Agent::resume(
        &episode,
        Box::new(SimDevice::new(new_phone())),
        Box::new(ScriptedPolicy::new([open_settings_answer(), back_answer()])),
    )
    .unwrap()
    .with_clock(ManualClock::default())
    .with_checker(move || {
        checks += 1;
        checks == 2
    })
    .run()
    .unwrap();
    assert_eq!(outcome.stop, StopReason::Succeeded);
    assert_eq!(outcome.steps as usize, done + 2);

    let t = read_trajectory(&episode).unwrap();
    assert_consistent(&t);
    assert_eq!(t.steps.len(), done + 2);
    assert_eq!(t.episode.resumed_at_steps, [done as u32]);
    assert_eq!(t.episode.outcome, Some(outcome));
    let resumed_prompt = &t.steps[done].prompt.user;
    assert!(resumed_prompt.contains(&format!("Step {done}: {}\n\n", plans[done - 1])));
    assert_eq!(t.history().len(), done + 2);
}

#[test]
fn voting_executes_the_consensus_and_records_every_candidate() {
    let phone = new_phone();
    let settings = phone.with_phone(|p| launcher_icon(p, "Settings"));
    let contacts = phone.with_phone(|p| launcher_icon(p, "Contacts"));
    // Round of three: one tap on Contacts, an unparsable answer, two taps on
    // Settings a few pixels apart (the second is the first shifted by 4 px).
    let mut nudged = tap(&settings);
    if let Action::Tap { point_2d } = &mut nudged {
        point_2d.x += 4.0;
    }
    let script = vec![
        tap_answer("Open Contacts", &contacts),
        "<think>no tags</think>".to_string(),
        tap_answer("Open Settings", &settings),
        answer("Open Settings", nudged, Some(&settings)),
    ];
    let cfg = AgentConfig {
        vote: 4,
        max_steps: 1,
        ..config("Open Settings")
    };
    let (outcome, t) = run(cfg, &phone, script);
    assert_eq!(outcome.stop, StopReason::StepBudget { max_steps: 1 });
    let step = &t.steps[0];
    assert_eq!(step.attempts.len(), 4, "every candidate is recorded");
    let vote = step.vote.as_ref().unwrap();
    assert_eq!(vote.clusters, vec![vec![2, 3], vec![0]]);
    assert_eq!(step.executed.as_ref().unwrap().plan, "Open Settings");
    assert!(
        phone
            .with_phone(|p| p.focused_window())
            .contains("settings"),
        "the Settings tap ran"
    );
    // Each candidate drew its own seed.
    let seeds: std::collections::HashSet<u64> = step.attempts.iter().map(|a| a.seed).collect();
    assert_eq!(seeds.len(), 4);
}

#[test]
fn voting_asks_the_confirmer_once_for_the_winner_only() {
    let (phone, delete) = contact_page();
    let asked = Arc::new(std::sync::Mutex::new(0));
    let count = asked.clone();
    let dir = tempfile::tempdir().unwrap();
    let outcome = agent(
        dir.path(),
        AgentConfig {
            vote: 3,
            max_steps: 1,
            ..config("Delete")
        },
        &phone,
        vec![delete.clone(), delete.clone(), back_answer()],
    )
    .with_confirmer(move |_: &ConfirmRequest| {
        *count.lock().unwrap() += 1;
        false
    })
    .run()
    .unwrap();
    assert_eq!(*asked.lock().unwrap(), 1);
    assert!(matches!(
        outcome.stop,
        StopReason::SensitiveAction {
            rejection: Rejection::Declined { .. }
        }
    ));
    let t = read_trajectory(dir.path()).unwrap();
    let vote = t.steps[0].vote.as_ref().unwrap();
    assert_eq!(vote.clusters, vec![vec![0, 1], vec![2]]);
    assert!(matches!(
        t.steps[0].attempts[vote.chosen].verdict,
        Some(Verdict::Reject {
            rejection: Rejection::Declined { .. }
        })
    ));
}

#[test]
fn a_cancel_flag_stops_the_episode_before_the_next_step() {
    let phone = new_phone();
    let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let dir = tempfile::tempdir().unwrap();
    let raised = flag.clone();
    let outcome = agent(
        dir.path(),
        config("Open and close Settings"),
        &phone,
        settings_and_back(3),
    )
    .with_cancel(flag)
    .with_step_observer(move |step| {
        if step.index == 2 {
            raised.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    })
    .run()
    .unwrap();
    assert_eq!(outcome.stop, StopReason::Cancelled);
    assert_eq!(outcome.steps, 2);
    let episode = read_trajectory(dir.path()).unwrap().episode;
    assert_eq!(episode.outcome.unwrap().stop, StopReason::Cancelled);
}

/// The action of a recorded teacher target.
fn target_action(step: &super::trajectory::StepRecord) -> Action {
    let raw = step.target.as_deref().expect("the step has a target");
    match crate::protocol::parse(raw, crate::protocol::ParseMode::Strict)
        .unwrap()
        .output
        .link
    {
        Link::Action { action, .. } => action,
        other => panic!("not an action: {other:?}"),
    }
}

/// Runs a relabelled student that says Finish at every step of `wifi_on`
/// (profile `btl-extended`, two steps at most) and returns the steps.
fn early_finish_episode(
    teacher: Box<dyn Policy>,
    take_over: bool,
) -> (Outcome, Vec<super::trajectory::StepRecord>, UiNode) {
    use crate::model::Relabelled;
    use crate::sim::tasks;

    let phone = new_phone();
    let task = tasks::sample("wifi_on", 0).unwrap();
    phone.with_phone(|p| task.setup(p));
    let settings = phone.with_phone(|p| launcher_icon(p, "Settings"));
    let finish = || answer("Finish the task", Action::Finish { answer: None }, None);
    let student = ScriptedPolicy::new([finish(), finish()]);
    let dir = tempfile::tempdir().unwrap();
    let outcome = Agent::new(
        dir.path(),
        AgentConfig {
            max_steps: 2,
            profile: Profile::BtlExtended,
            ..config(&task.goal())
        },
        Box::new(SimDevice::new(phone.clone())),
        Box::new(Relabelled::new(Box::new(student), teacher).taking_over_early_finish(take_over)),
    )
    .unwrap()
    .with_clock(ManualClock::default())
    .run()
    .unwrap();
    (
        outcome,
        read_trajectory(dir.path()).unwrap().steps,
        settings,
    )
}

fn oracle(task: &str) -> Box<dyn Policy> {
    Box::new(crate::model::OraclePolicy::new(
        crate::sim::tasks::sample(task, 0).unwrap(),
    ))
}

#[test]
fn an_early_finish_ends_a_relabelled_episode_unless_the_teacher_takes_over() {
    let (outcome, steps, settings) = early_finish_episode(oracle("wifi_on"), false);
    assert_eq!(outcome.stop, StopReason::Finished { answer: None });
    assert_eq!(steps.len(), 1);
    assert_eq!(target_action(&steps[0]), tap(&settings));
    assert_eq!(steps[0].attempts[0].overruled, None);

    // Taken over, the oracle's tap on Settings runs, and the student is
    // asked (and labelled) again on the Settings screen.
    let (outcome, steps, settings) = early_finish_episode(oracle("wifi_on"), true);
    assert_eq!(outcome.stop, StopReason::StepBudget { max_steps: 2 });
    assert_eq!(steps.len(), 2);
    let executed = |i: usize| steps[i].executed.as_ref().unwrap().model.clone();
    assert_eq!(executed(0), tap(&settings));
    assert_eq!(target_action(&steps[0]), tap(&settings));
    assert_ne!(
        target_action(&steps[1]),
        tap(&settings),
        "the second screen is Settings, where the oracle goes on"
    );
    assert_eq!(executed(1), target_action(&steps[1]));
    // The trajectory says the student's Finish was overruled at both steps.
    let finish = answer("Finish the task", Action::Finish { answer: None }, None);
    for step in &steps {
        assert_eq!(step.attempts[0].overruled.as_deref(), Some(finish.as_str()));
        assert_eq!(Some(&step.attempts[0].raw), step.target.as_ref());
    }
}

#[test]
fn a_finish_the_teacher_agrees_with_is_not_taken_over() {
    let finish = answer("Finish the task", Action::Finish { answer: None }, None);
    let teacher = ScriptedPolicy::new([finish]);
    let (outcome, steps, _) = early_finish_episode(Box::new(teacher), true);
    assert_eq!(outcome.stop, StopReason::Finished { answer: None });
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].attempts[0].overruled, None);
}

#[test]
fn relabelled_steps_record_the_oracle_s_way_back_from_wrong_moves() {
    use crate::model::{OraclePolicy, Relabelled};
    use crate::sim::tasks;

    let phone = new_phone();
    let task = tasks::sample("wifi_on", 0).unwrap();
    phone.with_phone(|p| task.setup(p));
    let (contacts, settings) =
        phone.with_phone(|p| (launcher_icon(p, "Contacts"), launcher_icon(p, "Settings")));
    // The student opens the wrong app, goes home, then opens the right one.
    let student = ScriptedPolicy::new([
        tap_answer("Open the Contacts app", &contacts),
        answer("Go home", Action::Home, None),
        tap_answer("Open the Settings app", &settings),
    ]);
    let teacher = OraclePolicy::new(tasks::sample("wifi_on", 0).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let outcome = Agent::new(
        dir.path(),
        AgentConfig {
            max_steps: 3,
            ..config(&task.goal())
        },
        Box::new(SimDevice::new(phone.clone())),
        Box::new(Relabelled::new(Box::new(student), Box::new(teacher))),
    )
    .unwrap()
    .with_clock(ManualClock::default())
    .run()
    .unwrap();
    assert_eq!(outcome.steps, 3);
    let steps = read_trajectory(dir.path()).unwrap().steps;
    let executed = |i: usize| steps[i].executed.as_ref().unwrap().model.clone();
    // Home screen: the student taps Contacts; the oracle would open Settings.
    assert_eq!(executed(0), tap(&contacts));
    assert_eq!(target_action(&steps[0]), tap(&settings));
    // In Contacts, where the oracle never goes: its way back is Home.
    assert_eq!(target_action(&steps[1]), Action::Home);
    // Home again: the student now does what the oracle says.
    assert_eq!(executed(2), tap(&settings));
    assert_eq!(target_action(&steps[2]), tap(&settings));
}

/// What a policy was shown: the lines it was given and its user prompt.
type Shown = (Vec<ScreenElement>, String);

/// Records what the policy is shown, then answers from a script.
struct Watching {
    seen: Arc<std::sync::Mutex<Vec<Shown>>>,
    script: ScriptedPolicy,
}

impl Policy for Watching {
    fn name(&self) -> String {
        "watching".into()
    }
    fn act(&mut self, obs: &Observation) -> Result<PolicyOutput, crate::model::PolicyError> {
        let mut seen = self.seen.lock().unwrap();
        seen.push((obs.screen.to_vec(), obs.prompt.user.clone()));
        self.script.act(obs)
    }
}

/// In `btl-screen-text` the policy gets the lines its prompt lists, so its
/// decoding can bind a quoting Plan to one; other profiles list none.
#[test]
fn the_policy_is_given_the_lines_its_prompt_lists() {
    for profile in [Profile::BtlScreenText, Profile::BtlExtended] {
        let dir = tempfile::tempdir().unwrap();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let policy = Watching {
            seen: seen.clone(),
            script: ScriptedPolicy::new([answer("Go home", Action::Home, None)]),
        };
        let config = AgentConfig {
            profile,
            max_steps: 1,
            ..config("Open Settings.")
        };
        Agent::new(
            dir.path(),
            config,
            Box::new(SimDevice::new(new_phone())),
            Box::new(policy),
        )
        .unwrap()
        .with_clock(ManualClock::default())
        .run()
        .unwrap();
        let seen = seen.lock().unwrap();
        let (screen, user) = &seen[0];
        if profile == Profile::BtlScreenText {
            assert!(screen.iter().any(|l| l.label == "Settings"), "{screen:?}");
            for line in screen {
                let listed = format!("- \"{}\" [{}, {}]", line.label, line.point.x, line.point.y);
                assert!(user.contains(&listed), "{listed} not in\n{user}");
            }
        } else {
            assert!(screen.is_empty(), "{screen:?}");
        }
    }
}
