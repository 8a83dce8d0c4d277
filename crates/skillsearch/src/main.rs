//! `skillsearch`: the one binary every host uses. This file parses arguments and prints; the
//! work is done by `skillsearch-core`.

mod cli;
mod embedding;
mod hook;
mod mcp;
mod mcp_skills;
mod output;
mod serve;
mod setup;

fn main() -> std::process::ExitCode {
    cli::run()
}
