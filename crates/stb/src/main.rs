//! The `stb` binary: all behaviour lives in `stb-cli`; this file only hands over the exit code.

fn main() -> std::process::ExitCode {
    stb_cli::run()
}
