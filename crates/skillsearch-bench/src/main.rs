#![allow(clippy::print_stdout, reason = "a benchmark program reports on stdout")]
//! `skillsearch-bench`: builds synthetic skill corpora from a real one and measures the engine on
//! them (full build, re-open, incremental update, warm and cold-process queries, peak RSS, index
//! size). A program that prints figures, not a test: nothing here passes or fails on a number,
//! except `soak`, which fails on any error and on memory or open files that keep growing.

/// mimalloc: the embedding model's many short-lived large buffers made glibc malloc spend
/// most of a batch in page faults and `madvise` (see docs/performance.md, "Allocator").
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod disclosure_bench;
mod hub_child;
mod hub_load;
mod hub_vectors;
mod hub_write;
mod run;
mod semantic_bench;
mod soak;
mod synth;
mod tools_bench;
mod turn_bench;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "skillsearch-bench",
    about = "Measures skillsearch on real and synthetic skill corpora"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build a synthetic corpus of N skills from a real one (idempotent)
    Corpus {
        /// The real corpus: every skill (a directory holding SKILL.md) below it, at any depth
        #[arg(long, value_name = "DIR")]
        from: PathBuf,
        /// Where `s000000/SKILL.md`... are written
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Number of skills to write
        #[arg(long)]
        count: usize,
        /// Seed of the paragraph shuffle
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Measure build, re-open, incremental update, queries, RSS and index size on a corpus
    Run(run::RunArgs),
    /// Semantic and hybrid retrieval: embedding throughput per batch size, query-embedding
    /// latency, the vector scan, and warm lexical / semantic / hybrid queries
    Semantic(semantic_bench::SemanticArgs),
    /// The daemon's work for fresh auto-mode turns without HTTP: CPU time per turn and wall
    /// time per turn, for unique queries on 1 or more threads
    Turn(turn_bench::TurnArgs),
    /// Tool visibility: schema tokens per turn with and without `activates`, over a scripted
    /// 20-turn conversation, for N plugins of 5 tools each (10 → 50 tools, 20 → 100 tools)
    Tools {
        #[arg(long, default_value_t = 20)]
        plugins: usize,
        #[arg(long)]
        json: bool,
    },
    /// Progressive disclosure: tokens per task for a full `skill_search` answer against a
    /// catalogue and one `skill_read`, over labelled tasks, and how often a relevant skill
    /// reached the model
    Disclosure(disclosure_bench::DisclosureArgs),
    /// The daemon under mixed load for a long while (reads, plans, unique and repeated
    /// queries, a writer changing skills): latency percentiles, errors, RSS and open files;
    /// fails on any error or on growth past the tolerances
    Soak(soak::SoakArgs),
    /// `skillsearch hub serve` under concurrent discover calls: latency percentiles, throughput
    /// and errors; fails on any error
    HubLoad(hub_load::HubLoadArgs),
    /// What one publish costs a hub holding many skills (CPU per write on each server, time
    /// to visible on the writer and on a second replica), for one `skillsearch` binary
    HubWrite(hub_write::HubWriteArgs),
    /// How long a `hub serve` replica over PostgreSQL takes to rank hybrid, with and without
    /// its skills' vectors in the database
    HubVectors(hub_vectors::HubVectorsArgs),
    /// (internal) Full build on an empty home; prints build time and VmHWM as JSON
    #[command(hide = true)]
    BuildChild {
        #[arg(long, value_name = "DIR")]
        skills: PathBuf,
        #[arg(long, value_name = "DIR")]
        home: PathBuf,
    },
    /// (internal) One search on an existing index; prints VmHWM as JSON
    #[command(hide = true)]
    SearchChild {
        #[arg(long, value_name = "DIR")]
        skills: PathBuf,
        #[arg(long, value_name = "DIR")]
        home: PathBuf,
        #[arg(long)]
        query: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result: Result<()> = match cli.command {
        Command::Corpus {
            from,
            out,
            count,
            seed,
        } => synth::build(&from, &out, count, seed),
        Command::Run(args) => run::run(&args),
        Command::Semantic(args) => semantic_bench::run(&args),
        Command::Turn(args) => turn_bench::run(&args),
        Command::Soak(args) => soak::run(&args),
        Command::HubLoad(args) => hub_load::run(&args),
        Command::HubWrite(args) => hub_write::run(&args),
        Command::HubVectors(args) => hub_vectors::run(&args),
        Command::Disclosure(args) => disclosure_bench::run(&args),
        Command::Tools { plugins, json } => tools_bench::run(plugins, json),
        Command::BuildChild { skills, home } => run::build_child(&skills, &home),
        Command::SearchChild {
            skills,
            home,
            query,
        } => run::search_child(&skills, &home, &query),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("skillsearch-bench: error: {err:#}");
            ExitCode::from(2)
        }
    }
}
