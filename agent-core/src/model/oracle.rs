//! [`OraclePolicy`]: a suite task's oracle answering in BTL, as a model would.
//!
//! The oracle reads the UI tree and knows the next device action; this
//! policy writes that action as canonical BTL text in the model frame (the
//! target element as the blink region, the oracle's plan as the thought and
//! the Plan), so it goes through the same parser, safety gate and
//! coordinate mapping as a model's answer. That makes it the reference run
//! of `btl bench` and a way to collect demonstration trajectories.

use super::{GenerationStats, Observation, Policy, PolicyError, PolicyOutput};
use crate::device::DeviceAction;
use crate::device::ui::UiNode;
use crate::protocol::prompt::{ScreenElement, label_is_its_own, quoting_plan, quoting_verb};
use crate::protocol::{
    Action, BBox, BtlOutput, DevicePoint, Direction, FrameMap, Link, Point, Roi, render,
};
use crate::sim::tasks::{OracleStep, Task};

pub struct OraclePolicy {
    task: Box<dyn Task>,
}

impl OraclePolicy {
    /// The oracle of `task`; with the `btl-extended` profile it answers
    /// Finish once it sees nothing left to do.
    pub fn new(task: Box<dyn Task>) -> Self {
        Self { task }
    }
}

impl Policy for OraclePolicy {
    fn name(&self) -> String {
        format!("oracle of {}", self.task.name())
    }

    fn act(&mut self, obs: &Observation) -> Result<PolicyOutput, PolicyError> {
        let screen = obs.ui_tree.ok_or_else(|| {
            PolicyError::Backend("the oracle reads the UI tree, and the device offers none".into())
        })?;
        let output = match self.task.oracle(screen) {
            Some(step) if obs.profile.lists_screen() => {
                answer(&quoting_its_line(step, obs.screen, &obs.frame), &obs.frame)
            }
            Some(step) => answer(&step, &obs.frame),
            None if obs.profile.allows(&Action::Finish { answer: None }) => BtlOutput {
                blink: Vec::new(),
                think: "The task is done.".into(),
                link: Link::Action {
                    plan: "Finish the task.".into(),
                    action: Action::Finish { answer: None },
                },
            },
            None => {
                return Err(PolicyError::Backend(format!(
                    "the oracle of {} sees nothing left to do, and the profile has no Finish",
                    self.task.name()
                )));
            }
        };
        let raw = render(&output).map_err(|e| PolicyError::Backend(e.to_string()))?;
        Ok(PolicyOutput {
            raw,
            stats: GenerationStats::default(),
            target: None,
            overruled: None,
            reward: None,
        })
    }
}

/// The oracle's step as a BTL answer in the model frame.
pub fn answer(step: &OracleStep, frame: &FrameMap) -> BtlOutput {
    let model_point = |p: &DevicePoint| frame.to_model_rounded(*p);
    let action = match &step.action {
        DeviceAction::Tap { at } => Action::Tap {
            point_2d: match step.span {
                Some(span) => point_in_span(at, span, frame),
                None => model_point(at),
            },
        },
        DeviceAction::LongPress { at } => Action::LongPress {
            point_2d: model_point(at),
        },
        DeviceAction::Swipe { from, to, .. } => Action::Swipe {
            direction: swipe_direction(*from, *to),
        },
        DeviceAction::Type { text } => Action::Type { text: text.clone() },
        DeviceAction::Back => Action::Back,
        DeviceAction::Home => Action::Home,
        DeviceAction::Wait { .. } => Action::Wait,
    };
    BtlOutput {
        blink: step.target.iter().map(|node| roi(node, frame)).collect(),
        think: step.plan.clone(),
        link: Link::Action {
            plan: step.plan.clone(),
            action,
        },
    }
}

/// `step` with a Plan that quotes the line of `listed` (the prompt's
/// `## Screen Elements`) it taps or long-presses (`Tap "Dmitri King".`),
/// for profiles whose prompt lists the screen: the answer's point is then
/// what follows that quote in the list, so every such step teaches the
/// lookup the tap-text lessons teach, rather than where a target usually
/// sits. The lines are the prompt's own, listed under the agent's keyboard
/// packages, so a quote is always one the prompt shows. Slider taps, which
/// aim inside a line rather than at its point, and lines whose label
/// another line shares keep their plan.
pub fn quoting_its_line(
    mut step: OracleStep,
    listed: &[ScreenElement],
    frame: &FrameMap,
) -> OracleStep {
    if step.span.is_some() {
        return step;
    }
    let Link::Action { action, .. } = answer(&step, frame).link else {
        return step;
    };
    let (Some(verb), Some(point)) = (quoting_verb(&action), action.point()) else {
        return step;
    };
    if let Some(line) = listed.iter().find(|line| line.point == point)
        && label_is_its_own(listed, &line.label)
    {
        step.plan = quoting_plan(verb, &line.label);
    }
    step
}

/// The model-frame point for a device tap at `at` that may land anywhere in
/// the x-range `span`: of the whole model x values whose device x falls in
/// the span, the one nearest `at`; rounding alone can step outside a span
/// narrower than a model pixel's width in device pixels.
fn point_in_span(at: &DevicePoint, (lo, hi): (i32, i32), frame: &FrameMap) -> Point {
    let exact = frame.to_model(*at);
    let y = exact.y.round();
    let lands = |x: f64| {
        let device = i64::from(frame.to_device(Point::new(x, y)).x);
        (i64::from(lo)..=i64::from(hi)).contains(&device)
    };
    let (x0, x1) = (exact.x.floor() - 1.0, exact.x.ceil() + 1.0);
    let mut best: Option<f64> = None;
    let mut x = x0;
    while x <= x1 {
        if lands(x) && best.is_none_or(|b| (x - exact.x).abs() < (b - exact.x).abs()) {
            best = Some(x);
        }
        x += 1.0;
    }
    Point::new(best.unwrap_or_else(|| exact.x.round()), y)
}

/// The way the finger moves, by the larger of the two displacements.
fn swipe_direction(from: DevicePoint, to: DevicePoint) -> Direction {
    let dx = i64::from(to.x) - i64::from(from.x);
    let dy = i64::from(to.y) - i64::from(from.y);
    match (dx.abs() > dy.abs(), dx, dy) {
        (true, dx, _) if dx < 0 => Direction::Left,
        (true, _, _) => Direction::Right,
        (false, _, dy) if dy < 0 => Direction::Up,
        (false, _, _) => Direction::Down,
    }
}

fn roi(node: &UiNode, frame: &FrameMap) -> Roi {
    let corner = |x: i32, y: i32| {
        let clamp = |v: i32, max: u32| u32::try_from(v.max(0)).unwrap_or(0).min(max);
        frame.to_model(DevicePoint {
            x: clamp(x, frame.device.width),
            y: clamp(y, frame.device.height),
        })
    };
    let [x1, y1, x2, y2] = node.bounds;
    let (a, b) = (corner(x1, y1), corner(x2, y2));
    Roi {
        bbox: BBox::new(a.x.round(), a.y.round(), b.x.round(), b.y.round()),
        label: node.label(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ParseMode, Size, parse};

    fn frame() -> FrameMap {
        // 1080x2400 at the training max_pixels -> model 1092x2408.
        FrameMap::new(Size::new(1080, 2400), crate::protocol::TRAINING_MAX_PIXELS).unwrap()
    }

    fn node(text: &str, bounds: [i32; 4]) -> UiNode {
        UiNode {
            text: text.into(),
            bounds,
            ..UiNode::default()
        }
    }

    #[test]
    fn a_tap_becomes_a_strictly_parsable_answer_that_maps_back_into_its_target() {
        let target = node("Wi-Fi", [40, 400, 1040, 560]);
        let step = OracleStep {
            action: DeviceAction::Tap {
                at: DevicePoint { x: 540, y: 480 },
            },
            target: Some(target),
            plan: "Open Wi-Fi.".into(),
            span: None,
        };
        let raw = render(&answer(&step, &frame())).unwrap();
        let parsed = parse(&raw, ParseMode::Strict).unwrap().output;
        let Link::Action {
            action: Action::Tap { point_2d },
            plan,
        } = &parsed.link
        else {
            panic!("not a tap: {raw}");
        };
        assert_eq!(plan, "Open Wi-Fi.");
        // 540 * 1092/1080 = 546; 480 * 2408/2400 = 481.6 -> 482.
        assert_eq!((point_2d.x, point_2d.y), (546.0, 482.0));
        // 482 * 2400/2408 = 480.4 -> 480: back where the oracle tapped.
        assert_eq!(frame().to_device(*point_2d), DevicePoint { x: 540, y: 480 });
        // x: 40 -> 40.44 -> 40, 1040 -> 1051.6 -> 1052; y: 400 -> 401.3 ->
        // 401, 560 -> 561.9 -> 562.
        assert_eq!(parsed.blink[0].bbox, BBox::new(40.0, 401.0, 1052.0, 562.0));
        assert_eq!(parsed.blink[0].label, "Wi-Fi");
    }

    /// 1080×2400 at 200,704 pixels is seen as 280×644: a model pixel is
    /// 3.857 device pixels wide. The slider tap at x 542 may land on 537–543
    /// (the 50% span of the Display page's bar). Rounding 542 · 280/1080 =
    /// 140.52 gives 141, which maps back to 141 · 1080/280 = 543.9 → 544,
    /// outside; 140 maps to 540, inside and the nearest such.
    #[test]
    fn a_slider_tap_lands_in_its_span_at_a_coarse_frame() {
        let frame = FrameMap::new(Size::new(1080, 2400), 200_704).unwrap();
        let bar = node("", [11, 368, 1069, 494]);
        let mut step = OracleStep {
            action: DeviceAction::Tap {
                at: DevicePoint { x: 542, y: 431 },
            },
            target: Some(bar),
            plan: "Tap the brightness slider at 50% of its length.".into(),
            span: None,
        };
        let x_of = |step: &OracleStep| match answer(step, &frame).link {
            Link::Action {
                action: Action::Tap { point_2d },
                ..
            } => point_2d,
            other => panic!("not a tap: {other:?}"),
        };
        assert_eq!(frame.to_device(x_of(&step)).x, 544);
        step.span = Some((537, 543));
        let point = x_of(&step);
        // y: 431 · 644/2400 = 115.65 → 116.
        assert_eq!((point.x, point.y), (140.0, 116.0));
        assert_eq!(frame.to_device(point).x, 540);
    }

    /// The quote is of a line the prompt lists, as it lists it: a line
    /// at the answer's point whose label is its own. A target the list
    /// left out (cut at 48 lines, or listed under other keyboard packages)
    /// or shares with another line keeps the oracle's words.
    #[test]
    fn a_quote_is_of_a_line_the_prompt_lists() {
        let step = OracleStep {
            action: DeviceAction::Tap {
                at: DevicePoint { x: 540, y: 480 },
            },
            target: Some(node("Wi-Fi", [40, 400, 1040, 560])),
            plan: "Open Wi-Fi.".into(),
            span: None,
        };
        // The answer's point, as worked out above: (546, 482).
        let line = |label: &str, x, y| ScreenElement {
            label: label.into(),
            point: Point::new(x, y),
            checked: None,
        };
        let plan = |listed: &[ScreenElement]| quoting_its_line(step.clone(), listed, &frame()).plan;
        assert_eq!(
            plan(&[line("Wi-Fi, On", 546.0, 482.0)]),
            "Tap \"Wi-Fi, On\"."
        );
        for listed in [
            vec![],
            vec![line("Wi-Fi", 546.0, 500.0)],
            vec![line("Wi-Fi", 546.0, 482.0), line("Wi-Fi", 546.0, 900.0)],
        ] {
            assert_eq!(plan(&listed), "Open Wi-Fi.", "{listed:?}");
        }
    }

    #[test]
    fn swipes_keep_the_finger_direction() {
        let p = |x, y| DevicePoint { x, y };
        assert_eq!(swipe_direction(p(540, 1800), p(540, 600)), Direction::Up);
        assert_eq!(swipe_direction(p(540, 600), p(540, 1800)), Direction::Down);
        assert_eq!(swipe_direction(p(900, 1200), p(100, 1250)), Direction::Left);
        assert_eq!(
            swipe_direction(p(100, 1200), p(900, 1150)),
            Direction::Right
        );
    }
}
