//! The prompts a BTL model is asked with.
//!
//! Profile `btl-ui` reproduces the released BTL-UI training prompts byte for
//! byte, irregular spacing included (`- format` on action 1, ` - format` on
//! actions 2–6), because a released checkpoint was trained on exactly these
//! bytes. Profile `btl-extended` adds `Wait` and `Finish` so an agent can stop
//! by itself; it is for models we train.

use super::action::Action;
use serde_json::{Value, json};

/// Where the screenshot goes; the model backend swaps it for the vision tokens.
pub const IMAGE_PLACEHOLDER: &str = "<image>";

/// The placeholder for the number of regions to blink, kept literally by default.
pub const ROI_COUNT_PLACEHOLDER: &str = "$N$";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Profile {
    /// The released BTL-UI prompts and action space.
    #[default]
    #[serde(rename = "btl-ui")]
    BtlUi,
    /// `btl-ui` plus `Wait` and `Finish`.
    #[serde(rename = "btl-extended")]
    BtlExtended,
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Self::BtlUi => "btl-ui",
            Self::BtlExtended => "btl-extended",
        }
    }

    /// Whether the action belongs to this profile's action space.
    pub fn allows(self, action: &Action) -> bool {
        match action {
            Action::Wait | Action::Finish { .. } => self == Self::BtlExtended,
            _ => true,
        }
    }

    /// The profile whose action space a navigation user prompt lists;
    /// `None` for other prompts (grounding).
    pub fn of_user_prompt(user: &str) -> Option<Self> {
        if user.contains(&Self::BtlExtended.action_space()) {
            Some(Self::BtlExtended)
        } else if user.contains(ACTIONS_BTL_UI) {
            Some(Self::BtlUi)
        } else {
            None
        }
    }

    fn action_space(self) -> String {
        match self {
            Self::BtlUi => ACTIONS_BTL_UI.to_string(),
            Self::BtlExtended => format!("{ACTIONS_BTL_UI}{ACTIONS_EXTENDED}"),
        }
    }
}

impl std::str::FromStr for Profile {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "btl-ui" => Ok(Self::BtlUi),
            "btl-extended" => Ok(Self::BtlExtended),
            _ => Err(format!(
                "unknown prompt profile '{s}' (expected btl-ui or btl-extended)"
            )),
        }
    }
}

const SYSTEM_NAVIGATION_INTRO: &str = "You are a GUI Agent capable of reasoning based on user instructions, action history, and the current screenshot.";
const SYSTEM_GROUNDING_INTRO: &str =
    "You are a GUI Agent capable of reasoning based on user instructions and the screenshot.";
const SYSTEM_TASK: &str = " You should first observe the layout of the screenshot and locate $N$ elements RELATED TO the user instruction. Next, think about the reasoning process BASED ON the observations and instructions in your mind, and then provide the user with the answer.\n\nThe observation process";
const SYSTEM_NAVIGATION_EMPTY_BLINK: &str = " (can be None if $N$ == 0)";
const SYSTEM_FORMAT: &str = ", reasoning process and answer are enclosed within <blink></blink>, <think></think> and <link></link> tags, respectively, i.e.,\n<blink>```json\n[{\"bbox_2d\": [x1, y1, x2, y2], \"label\": \"object name/description\"},\n ...]\n ```</blink>\n<think> reasoning process here </think>\n<link>```json\n";
const SYSTEM_NAVIGATION_LINK: &str =
    "[{\"Plan\": \"action description\", \"Action\": {\"function\": \"...\", \"...\": \"...\"}}]";
const SYSTEM_GROUNDING_LINK: &str = "[{\"point_2d\": [x, y]}]";
const SYSTEM_END: &str = "\n```</link>";

const USER_NAVIGATION_INTRO: &str = "You are given a task and your action history, with screenshots. You need to perform the next action to complete the task.\n\n## Action Space\n";
const ACTIONS_BTL_UI: &str = "Action 1: Tap\n- format: {'function': 'Tap', 'point_2d':[x, y]}\n- purpose: tap the specified position.\nAction 2: Type\n - format: {'function': 'Type', 'text':'text_to_input'}\n - purpose: input specified text.\nAction 3: Swipe\n - format: {'function': 'Swipe', 'direction': 'up/down/right/left'}\n - purpose: swipe on the screen.\nAction 4: Back\n - format: {'function': 'Back'}\n - purpose: return to the previous screen.\nAction 5: Home\n - format: {'function': 'Home'}\n - purpose: navigate to the home screen.\nAction 6: LongPress\n - format: {'function': 'LongPress', 'point_2d':[x,y]}\n - purpose: longpress the specified position.";
const ACTIONS_EXTENDED: &str = "\nAction 7: Wait\n - format: {'function': 'Wait'}\n - purpose: wait for the screen to finish loading.\nAction 8: Finish\n - format: {'function': 'Finish', 'answer': 'answer_text'}\n - purpose: end the task once it is complete; answer is optional and holds the reply if the task asks a question.";

/// What the model is asked to do at this step.
#[derive(Debug, Clone, PartialEq)]
pub enum Task<'a> {
    /// A navigation step: the goal, for low-level tasks the instruction of
    /// this step, and the Plan strings of the previous steps.
    Navigation {
        goal: &'a str,
        step_instruction: Option<&'a str>,
        history: &'a [String],
    },
    /// Point at the element most relevant to an instruction.
    Grounding { instruction: &'a str },
}

/// System and user message; the user message holds [`IMAGE_PLACEHOLDER`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Prompt {
    pub system: String,
    pub user: String,
}

impl Prompt {
    /// Builds the prompt for one step. `roi_count` replaces the literal `$N$`
    /// when given.
    pub fn new(task: &Task, profile: Profile, roi_count: Option<usize>) -> Self {
        let (system, user) = match task {
            Task::Navigation {
                goal,
                step_instruction,
                history,
            } => {
                let system = [
                    SYSTEM_NAVIGATION_INTRO,
                    SYSTEM_TASK,
                    SYSTEM_NAVIGATION_EMPTY_BLINK,
                    SYSTEM_FORMAT,
                    SYSTEM_NAVIGATION_LINK,
                    SYSTEM_END,
                ]
                .concat();
                let instruction = match step_instruction {
                    Some(step) => format!("{goal}\n{step}"),
                    None => goal.to_string(),
                };
                let user = format!(
                    "{USER_NAVIGATION_INTRO}{actions}\n\n## User Instruction\n{instruction}\n\n## Action History\n{history}\n\n## Screenshots\n{IMAGE_PLACEHOLDER}",
                    actions = profile.action_space(),
                    history = render_history(history),
                );
                (system, user)
            }
            Task::Grounding { instruction } => {
                let system = [
                    SYSTEM_GROUNDING_INTRO,
                    SYSTEM_TASK,
                    SYSTEM_FORMAT,
                    SYSTEM_GROUNDING_LINK,
                    SYSTEM_END,
                ]
                .concat();
                let user = format!(
                    "Point to the UI element most relevant to {instruction}.\n{IMAGE_PLACEHOLDER}"
                );
                (system, user)
            }
        };
        let system = match roi_count {
            Some(n) => system.replace(ROI_COUNT_PLACEHOLDER, &n.to_string()),
            None => system,
        };
        Self { system, user }
    }

    /// The official `messages` list (system then user, no assistant turn).
    pub fn to_messages(&self) -> Value {
        json!([
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.user},
        ])
    }
}

/// `Step k: plan` lines, k from 1; empty when there is no history.
pub fn render_history(plans: &[String]) -> String {
    plans
        .iter()
        .enumerate()
        .map(|(i, plan)| format!("Step {}: {plan}", i + 1))
        .collect::<Vec<_>>()
        .join("\n")
}
