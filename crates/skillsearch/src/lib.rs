//! The `skillsearch` binary's code: this file parses arguments and prints (through `cli`); the
//! work is done by `skillsearch-core`. It is a library only so that `main.rs` and the fuzz
//! targets (`fuzz/` at the repository's root) reach the same code: [`run`] is the binary,
//! [`fuzzing`] the parsers of what the surfaces read.

mod cli;
mod context;
mod embedding;
mod evals;
mod explain;
mod freshness;
#[doc(hidden)]
pub mod fuzzing;
mod hook;
mod hub;
mod lines;
mod mcp;
mod output;
mod serve;
mod setup;
mod ui;
mod warm;

pub use cli::run;
