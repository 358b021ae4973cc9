//! The `stb` binary: all behaviour lives in `stb-cli`; this file only picks the allocator
//! and hands over the exit code.

// Compile allocates many small strings from two threads; mimalloc is markedly faster than
// the system allocator at that (measured in docs/benchmarks.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    stb_cli::run()
}
