//! [`ScriptedPolicy`]: replays a fixed list of answers, one per call,
//! whatever it is shown. The agent loop is tested with it, and a recorded
//! trajectory can be replayed through it.

use super::{GenerationStats, Observation, Policy, PolicyError, PolicyOutput};
use std::time::Duration;

/// Replays raw answers in order; an error once they run out.
#[derive(Debug, Clone)]
pub struct ScriptedPolicy {
    answers: Vec<String>,
    next: usize,
    delay: Duration,
    seeds: Vec<u64>,
}

impl ScriptedPolicy {
    pub fn new<S: Into<String>>(answers: impl IntoIterator<Item = S>) -> Self {
        Self {
            answers: answers.into_iter().map(Into::into).collect(),
            next: 0,
            delay: Duration::ZERO,
            seeds: Vec::new(),
        }
    }

    /// Sleeps this long before each answer, standing in for a slow model
    /// (the crash test needs an episode that is still running when killed).
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// The seeds of the observations answered so far, in order.
    pub fn seeds(&self) -> &[u64] {
        &self.seeds
    }
}

impl Policy for ScriptedPolicy {
    fn name(&self) -> String {
        "scripted".into()
    }

    fn act(&mut self, obs: &Observation) -> Result<PolicyOutput, PolicyError> {
        let raw = self
            .answers
            .get(self.next)
            .cloned()
            .ok_or(PolicyError::Exhausted {
                given: self.answers.len(),
            })?;
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
        self.next += 1;
        self.seeds.push(obs.seed);
        Ok(PolicyOutput {
            raw,
            stats: GenerationStats::default(),
            target: None,
            overruled: None,
            reward: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{FrameMap, Profile, Prompt, Size, TRAINING_MAX_PIXELS, Task};
    use image::RgbaImage;

    #[test]
    fn replays_in_order_then_reports_exhaustion() {
        let image = RgbaImage::new(56, 56);
        let prompt = Prompt::new(&Task::Grounding { instruction: "x" }, Profile::BtlUi, None);
        let frame = FrameMap::new(Size::new(56, 56), TRAINING_MAX_PIXELS).unwrap();
        let obs = |seed| Observation {
            profile: crate::protocol::Profile::BtlUi,
            screenshot: Some(&image),
            frame,
            prompt: &prompt,
            ui_tree: None,
            screen: &[],
            seed,
        };
        let mut policy = ScriptedPolicy::new(["a", "b"]);
        assert_eq!(policy.act(&obs(7)).unwrap().raw, "a");
        assert_eq!(policy.act(&obs(8)).unwrap().raw, "b");
        assert!(matches!(
            policy.act(&obs(9)),
            Err(PolicyError::Exhausted { given: 2 })
        ));
        assert_eq!(policy.seeds(), [7, 8]);
    }
}
