//! `quire`: the command-line entry point.

fn main() -> std::process::ExitCode {
    quire::cli::main()
}
