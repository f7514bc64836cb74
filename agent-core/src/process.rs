//! How a command-line program of btl ends: its exit code and its one error
//! message. Shared by `btl` and `btl-train`, so both mean the same by
//! 0 (success), 1 (the command ran and failed) and 2 (bad usage or bad
//! input), and both print an error once, with its cause chain, on stderr.

use crate::terminal::printable;
use clap::Parser;
use std::process::ExitCode;

/// Why a command stopped; decides the exit code.
#[derive(Debug)]
pub enum Failure {
    /// Input the user can fix: exit code 2.
    BadInput(anyhow::Error),
    /// Anything else: exit code 1.
    Failed(anyhow::Error),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Self::Failed(e)
    }
}

pub type Outcome = Result<(), Failure>;

/// The process arguments as `C`, or the exit code after clap has printed
/// help, the version or the usage error.
pub fn parse_args<C: Parser>() -> Result<C, ExitCode> {
    C::try_parse().map_err(|e| {
        // clap prints help and version itself and knows their exit code (0).
        let _ = e.print();
        ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
    })
}

/// Whether `args` (without the program's name) is a command line `C`
/// accepts, checked without running anything; clap's message when not.
/// The documentation's commands are checked with it.
pub fn check_args<C: Parser>(program: &str, args: &[String]) -> Result<(), String> {
    C::try_parse_from(std::iter::once(program).chain(args.iter().map(String::as_str)))
        .map(drop)
        .map_err(|e| e.to_string())
}

/// The exit code of a command's outcome, its error printed once on stderr
/// as `program: error: …` with the cause chain.
pub fn exit_code(program: &str, outcome: Outcome) -> ExitCode {
    let (e, code) = match outcome {
        Ok(()) => return ExitCode::SUCCESS,
        Err(Failure::BadInput(e)) => (e, 2),
        Err(Failure::Failed(e)) if is_broken_pipe(&e) => return ExitCode::SUCCESS,
        Err(Failure::Failed(e)) => (e, 1),
    };
    eprintln!("{program}: error: {}", printable(&message(&e)));
    ExitCode::from(code)
}

/// The error and its causes, joined by `: ` as anyhow's `{:#}` joins them,
/// but a cause the message already ends with after a `: ` (an error that
/// writes its source into its own message, as `"{path}: {source}"` does)
/// is not said again.
fn message(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let said = cause.to_string();
        if text.is_empty() {
            text = said;
        } else if text != said && !text.ends_with(&format!(": {said}")) {
            text.push_str(": ");
            text.push_str(&said);
        }
    }
    text
}

/// A closed stdout (`btl score … | head`) is the reader's choice, not a failure.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that says its source in its own message and returns it
    /// as its cause too, as `#[error("{path}: {source}")]` does.
    #[derive(Debug)]
    struct Unreadable(std::io::Error);

    impl std::fmt::Display for Unreadable {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "cache/x.json: {}", self.0)
        }
    }

    impl std::error::Error for Unreadable {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn each_cause_is_said_once() {
        let gone = || std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = anyhow::Error::new(Unreadable(gone())).context("loading the samples");
        assert_eq!(
            format!("{e:#}"),
            "loading the samples: cache/x.json: no such file: no such file"
        );
        assert_eq!(
            message(&e),
            "loading the samples: cache/x.json: no such file"
        );
        // Causes their errors do not repeat are all said, in order.
        let e = anyhow::Error::new(gone())
            .context("reading x")
            .context("loading");
        assert_eq!(message(&e), "loading: reading x: no such file");
        // A cause that only ends the message's last word is its own.
        let e = anyhow::anyhow!("denied").context("access denied");
        assert_eq!(message(&e), "access denied: denied");
    }
}
