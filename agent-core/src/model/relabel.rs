//! [`Relabelled`]: a policy that acts as its student while a teacher says
//! what it would have answered at the same observation (DAgger's data
//! collection). The student's answer is what the agent executes; the
//! teacher's is carried in [`PolicyOutput::target`], and the agent records
//! it with the step, so the states the student reaches, mistakes included,
//! become training samples with the teacher's answer as their target.
//!
//! With a suite task's `OraclePolicy` (host builds) as teacher
//! this is `btl collect --relabel oracle`: the oracle is stateless, so its
//! answer on a screen the student got wrong is the way back.
//!
//! A student that says Finish too early ends its episode at its first
//! mistake, so plain relabelling never sees the screens after it. With
//! [`Relabelled::taking_over_early_finish`] the teacher's answer is executed
//! instead whenever the student says Finish and the teacher does not: the
//! episode goes on, and the student acts (and is labelled) again on the
//! later screens. Such a step's attempt records the teacher's answer, the
//! one executed, and the student's Finish as `overruled`.

use super::{Observation, Policy, PolicyError, PolicyOutput};
use crate::protocol::{Action, Link, ParseMode, parse};

pub struct Relabelled {
    student: Box<dyn Policy>,
    teacher: Box<dyn Policy>,
    take_over_early_finish: bool,
}

impl Relabelled {
    pub fn new(student: Box<dyn Policy>, teacher: Box<dyn Policy>) -> Self {
        Self {
            student,
            teacher,
            take_over_early_finish: false,
        }
    }

    /// Whether the teacher's answer runs where the student says Finish and
    /// the teacher would not.
    pub fn taking_over_early_finish(mut self, on: bool) -> Self {
        self.take_over_early_finish = on;
        self
    }

    fn target(&mut self, obs: &Observation) -> Result<String, PolicyError> {
        self.teacher.act(obs).map(|out| out.raw).map_err(|e| {
            PolicyError::Backend(format!(
                "the teacher ({}) could not label the screen: {e}",
                self.teacher.name()
            ))
        })
    }

    /// The answer the agent executes: the student's, or the teacher's where
    /// the student would finish and the teacher would not.
    fn acted(&self, mut out: PolicyOutput, target: &str) -> PolicyOutput {
        if self.take_over_early_finish && says_finish(&out.raw) && !says_finish(target) {
            out.overruled = Some(std::mem::replace(&mut out.raw, target.to_owned()));
        }
        out.target = Some(target.to_owned());
        out
    }
}

fn says_finish(raw: &str) -> bool {
    matches!(
        parse(raw, ParseMode::Tolerant).map(|p| p.output.link),
        Ok(Link::Action {
            action: Action::Finish { .. },
            ..
        })
    )
}

impl Policy for Relabelled {
    fn name(&self) -> String {
        let takeover = if self.take_over_early_finish {
            ", which takes over an early Finish"
        } else {
            ""
        };
        format!(
            "{}, relabelled by the {}{takeover}",
            self.student.name(),
            self.teacher.name()
        )
    }

    fn fingerprint(&self) -> Option<String> {
        self.student.fingerprint()
    }

    fn decoding(&self) -> Option<super::Decoding> {
        self.student.decoding()
    }

    fn act(&mut self, obs: &Observation) -> Result<PolicyOutput, PolicyError> {
        let target = self.target(obs)?;
        let out = self.student.act(obs)?;
        Ok(self.acted(out, &target))
    }

    fn act_many(
        &mut self,
        obs: &Observation,
        seeds: &[u64],
    ) -> Result<Vec<PolicyOutput>, PolicyError> {
        let target = self.target(obs)?;
        let outs = self.student.act_many(obs, seeds)?;
        Ok(outs
            .into_iter()
            .map(|out| self.acted(out, &target))
            .collect())
    }
}
