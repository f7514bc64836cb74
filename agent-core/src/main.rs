//! The `btl` binary. All logic lives in [`agent_core::cli`]; this file only
//! hands over the process exit code.

fn main() -> std::process::ExitCode {
    agent_core::cli::main()
}
