//! `skillsearch`: the one binary every host uses. Its code is the crate's library (`lib.rs`);
//! the work is done by `skillsearch-core`.

/// mimalloc: the embedding model's many short-lived large buffers made glibc malloc spend
/// most of a batch in page faults and `madvise` (see docs/performance.md, "Allocator").
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    skillsearch::run()
}
