//! The `btl-train` binary. All logic lives in [`host_trainer::cli`]; this
//! file only hands over the process exit code.

fn main() -> std::process::ExitCode {
    host_trainer::cli::main()
}
