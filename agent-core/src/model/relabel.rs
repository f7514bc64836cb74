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

use super::{Observation, Policy, PolicyError, PolicyOutput};

pub struct Relabelled {
    student: Box<dyn Policy>,
    teacher: Box<dyn Policy>,
}

impl Relabelled {
    pub fn new(student: Box<dyn Policy>, teacher: Box<dyn Policy>) -> Self {
        Self { student, teacher }
    }

    fn target(&mut self, obs: &Observation) -> Result<String, PolicyError> {
        self.teacher.act(obs).map(|out| out.raw).map_err(|e| {
            PolicyError::Backend(format!(
                "the teacher ({}) could not label the screen: {e}",
                self.teacher.name()
            ))
        })
    }
}

impl Policy for Relabelled {
    fn name(&self) -> String {
        format!(
            "{}, relabelled by the {}",
            self.student.name(),
            self.teacher.name()
        )
    }

    fn act(&mut self, obs: &Observation) -> Result<PolicyOutput, PolicyError> {
        let target = self.target(obs)?;
        let mut out = self.student.act(obs)?;
        out.target = Some(target);
        Ok(out)
    }

    fn act_many(
        &mut self,
        obs: &Observation,
        seeds: &[u64],
    ) -> Result<Vec<PolicyOutput>, PolicyError> {
        let target = self.target(obs)?;
        let mut outs = self.student.act_many(obs, seeds)?;
        for out in &mut outs {
            out.target = Some(target.clone());
        }
        Ok(outs)
    }
}
