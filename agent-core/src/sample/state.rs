//! The sample of one screen the agent saw: the prompt it was shown and a
//! teacher's answer there, with the target box and ranked ROIs of the
//! screen's UI tree. What `btl-train data` makes of a recorded step, what
//! online GRPO and `btl sim env` score a completion against.

use super::rois::DEFAULT_LAMBDA;
use super::rois::{rank_rois, screen_box, target_element};
use super::{Message, Sample};
use crate::agent::trajectory::Executed;
use crate::device::DeviceAction;
use crate::device::ui::UiNode;
use crate::model::Observation;
use crate::protocol::{
    Action, FrameMap, Link, ParseMode, Prompt, Size, parse, smart_resize, to_python_json,
};
use serde::Serialize;

/// A teacher's BTL answer on a screen of `frame` as an executed action: its
/// Plan and action (strictly parsed), with the device point a tap or long
/// press lands on.
pub fn teacher_action(raw: &str, frame: &FrameMap) -> Result<Executed, String> {
    let parsed = parse(raw, ParseMode::Strict)
        .map_err(|e| format!("the recorded target does not parse: {e}"))?;
    let Link::Action { plan, action } = parsed.output.link else {
        return Err("the recorded target is a grounding answer, not an action".into());
    };
    let device = match &action {
        Action::Tap { point_2d } => Some(DeviceAction::Tap {
            at: frame.to_device(*point_2d),
        }),
        Action::LongPress { point_2d } => Some(DeviceAction::LongPress {
            at: frame.to_device(*point_2d),
        }),
        _ => None,
    };
    Ok(Executed {
        plan,
        model: action,
        device,
    })
}

/// Everything a step's sample needs besides its record and UI tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepContext<'a> {
    pub goal: &'a str,
    pub max_pixels: u64,
    /// The screenshot's path, relative to the sample file.
    pub image: String,
    /// The screenshot's size as decoded.
    pub image_size: Size,
    pub id: String,
    pub lambda: usize,
}

/// The solution's link item, keys in the official order.
#[derive(Serialize)]
struct SolutionItem<'a> {
    #[serde(rename = "Plan")]
    plan: &'a str,
    #[serde(rename = "Action")]
    action: &'a Action,
}

/// The sample of a screen seen in `frame` with `prompt`, whose answer is
/// `executed` (pure): what `btl-train data` makes of a recorded step, and
/// what online training scores a state's completions against.
pub fn state_sample(
    frame: &FrameMap,
    prompt: &Prompt,
    executed: &Executed,
    ui: Option<&UiNode>,
    cx: &StepContext,
) -> Result<Sample, String> {
    if cx.image_size != frame.device {
        return Err(format!(
            "the screenshot {} is {}, but the step's frame says the screen was {}",
            cx.image, cx.image_size, frame.device
        ));
    }
    let model = smart_resize(cx.image_size, cx.max_pixels).map_err(|e| e.to_string())?;
    if model != frame.model {
        return Err(format!(
            "smart_resize of {} with max_pixels {} is {model}, but the step's model frame was {}",
            cx.image_size, cx.max_pixels, frame.model
        ));
    }
    // A point off the model frame (or a device point off the screen), as
    // an edited step log may hold, would teach answers no phone takes.
    if let Some(p) = executed.model.point()
        && !frame.in_model_frame(p)
    {
        return Err(format!(
            "the executed {}'s point [{}, {}] lies outside the {} model frame",
            executed.model.function(),
            p.x,
            p.y,
            frame.model
        ));
    }
    if let Some(DeviceAction::Tap { at } | DeviceAction::LongPress { at }) = &executed.device
        && (at.x >= frame.device.width || at.y >= frame.device.height)
    {
        return Err(format!(
            "the executed device point ({}, {}) lies off the {} screen",
            at.x, at.y, frame.device
        ));
    }
    let point = match (&executed.model, &executed.device) {
        (_, Some(DeviceAction::Tap { at } | DeviceAction::LongPress { at })) => Some(*at),
        (Action::Tap { .. } | Action::LongPress { .. }, _) => {
            return Err(format!(
                "the executed {} has no device point",
                executed.model.function()
            ));
        }
        _ => None,
    };
    let target = point.and_then(|p| target_element(ui?, p, cx.image_size));
    let bbox = target
        .and_then(|t| screen_box(t, cx.image_size))
        .map_or_else(Vec::new, |b| vec![b.x1, b.y1, b.x2, b.y2]);
    let rois = ui.map_or_else(Vec::new, |tree| {
        rank_rois(
            tree,
            target,
            cx.image_size,
            cx.goal,
            &executed.plan,
            cx.lambda,
        )
    });
    let solution = to_python_json(&[SolutionItem {
        plan: &executed.plan,
        action: &executed.model,
    }]);
    Ok(Sample {
        id: Some(cx.id.clone()),
        images: vec![cx.image.clone()],
        image_sizes: vec![[cx.image_size.width, cx.image_size.height]],
        max_pixels: cx.max_pixels,
        messages: vec![
            Message {
                role: "system".into(),
                content: prompt.system.clone(),
            },
            Message {
                role: "user".into(),
                content: prompt.user.clone(),
            },
        ],
        solution,
        bbox,
        rois,
    })
}

/// The sample of the screen `obs` shows, with a teacher's answer `raw`
/// there as its solution: what online GRPO and `btl sim env` score a
/// completion on that screen against. `id` names the sample and stands in
/// for its image, which scoring does not read.
pub fn observation_sample(
    obs: &Observation,
    raw: &str,
    goal: &str,
    max_pixels: u64,
    id: String,
) -> Result<Sample, String> {
    let executed = teacher_action(raw, &obs.frame)?;
    let cx = StepContext {
        goal,
        max_pixels,
        image: id.clone(),
        image_size: obs.frame.device,
        id,
        lambda: DEFAULT_LAMBDA,
    };
    state_sample(&obs.frame, obs.prompt, &executed, obs.ui_tree, &cx)
}
