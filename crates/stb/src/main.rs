//! The `stb` binary: all behaviour lives in `stb-cli`; this file only picks the allocator,
//! sets how the process takes memory, and hands over the exit code.

// Compile allocates many small strings from two threads; mimalloc is markedly faster than
// the system allocator at that (measured in docs/benchmarks.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // No transparent huge pages for this process. mimalloc asks for them, and where the
    // kernel compacts memory on such a fault (`defrag` = `madvise`, Debian's default)
    // each one can stall: a 10,000-model virtual plan spent 2.7-3.1 s of 6 s in the
    // kernel clearing and compacting pages, 0.3 s without (docs/design.md). A failure
    // only means the default stays.
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
    stb_cli::run()
}
