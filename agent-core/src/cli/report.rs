//! `btl report DIR`: writes `DIR/report.html`, a self-contained replay of
//! the trajectory (see [`crate::report`]).

use super::{Failure, Outcome};
use crate::report;
use anyhow::anyhow;
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A trajectory directory (from `btl run`, `btl bench`, `btl collect` or the phone app).
    dir: PathBuf,
}

pub fn run(args: &Args) -> Outcome {
    let path = report::write(&args.dir).map_err(|e| match e {
        e @ report::ReportError::Trajectory(_) => {
            Failure::BadInput(anyhow!("{}: {e}", args.dir.display()))
        }
        e => Failure::Failed(e.into()),
    })?;
    writeln!(std::io::stdout().lock(), "{}", path.display()).map_err(anyhow::Error::from)?;
    Ok(())
}
