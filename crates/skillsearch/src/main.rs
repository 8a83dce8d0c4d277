//! `skillsearch`: the one binary every host uses. This file parses arguments and prints; the
//! work is done by `skillsearch-core`.

/// mimalloc: the embedding model's many short-lived large buffers made glibc malloc spend
/// most of a batch in page faults and `madvise` (see docs/performance.md, "Allocator").
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod cli;
mod context;
mod embedding;
mod hook;
mod lines;
mod mcp;
mod output;
mod serve;
mod setup;
mod warm;

fn main() -> std::process::ExitCode {
    cli::run()
}
