//! Argument parsing and the subcommands.

use anyhow::{Context, Result, bail};
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use skillsearch_core::config::{self, Settings};
use skillsearch_core::eval;
use skillsearch_core::index::{IndexConfig, Progress, Refresh, RefreshReport, SkillIndex};
use skillsearch_core::retrieve::semantic::SemanticSlot;
use skillsearch_core::retrieve::{Retriever, SearchOptions};
use skillsearch_core::tokens::{self, TokenCounter};
use skillsearch_core::turn::decision_log::DecisionLog;
use skillsearch_core::turn::render::{self, RenderSkill};
use skillsearch_core::{EligibilityEnv, Engine, Roots, Turn, corpus};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::context::{Flags, home_dir, roots_of, settings};
use crate::evals;
use crate::output::{Out, print_diagnostics, shown};

/// `--version`: the package version and the commit it was built from (`build.rs`).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("BUILD_ID_FOR_VERSION"),
    ")"
);

/// Exit codes: 0 hits, 1 no hits, 2 error.
const EXIT_NO_HITS: u8 = 1;
const EXIT_ERROR: u8 = 2;

#[derive(Parser)]
#[command(
    name = "skillsearch",
    version = VERSION,
    about = "Finds the few skills an agent needs this turn, from thousands, in milliseconds"
)]
struct Cli {
    /// Where indexes live [env: SKILLSEARCH_HOME; default: ~/.skillsearch]
    #[arg(long, global = true, value_name = "DIR")]
    home: Option<PathBuf>,
    /// Configuration file [env: SKILLSEARCH_CONFIG; default: <home>/config.toml if it exists]
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// More logging on stderr (-v debug, -vv trace); SKILLSEARCH_LOG sets a filter
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Clone)]
struct RootArgs {
    /// A skill root; repeat for several, the first wins a name collision. Without it:
    /// ./skills, ./.agents/skills, ~/.agents/skills, ~/.openclaw/skills
    #[arg(long = "skills", value_name = "DIR")]
    skills: Vec<PathBuf>,
}

#[derive(Args, Clone)]
pub(crate) struct RankArgs {
    /// Weight of the name field [config: name_weight]
    #[arg(long)]
    name_weight: Option<f32>,
    /// Weight of the description field [config: description_weight]
    #[arg(long)]
    description_weight: Option<f32>,
    /// Weight of the body field; 0 ignores bodies at query time [config: body_weight]
    #[arg(long)]
    body_weight: Option<f32>,
    /// A query term in more than this share of a field's documents is ignored in that field
    #[arg(long, hide = true)]
    stopword_df: Option<f32>,
    /// The same for the body field
    #[arg(long, hide = true)]
    body_stopword_df: Option<f32>,
    /// Most distinct query terms the lexical retriever keeps, most important first (0: all)
    #[arg(long, hide = true)]
    max_query_terms: Option<usize>,
    /// Share of a long query's term importance its kept terms hold (1: all)
    #[arg(long, hide = true)]
    query_term_share: Option<f32>,
    /// Queries of at most this many distinct terms keep them all
    #[arg(long, hide = true)]
    short_query_terms: Option<usize>,
    /// BM25's k3 for a term's count in the query (inf: the raw count)
    #[arg(long, hide = true)]
    query_tf_k3: Option<f32>,
    /// The semantic retriever embeds a longer query as passages of at most this many words (0: whole)
    #[arg(long, hide = true)]
    passage_words: Option<usize>,
    /// lexical, semantic or hybrid [config: retriever]
    #[arg(long)]
    retriever: Option<String>,
    /// Fusion constant k of weight / (k + rank) [config: rrf_k]
    #[arg(long)]
    rrf_k: Option<f32>,
    /// Fusion weight of the lexical ranking [config: lexical_weight]
    #[arg(long)]
    lexical_weight: Option<f32>,
    /// Fusion weight of the semantic ranking [config: semantic_weight]
    #[arg(long)]
    semantic_weight: Option<f32>,
}

#[derive(Clone, Copy, ValueEnum)]
enum RefreshArg {
    /// Re-check the skill files when the last check is older than refresh_ms
    Auto,
    /// Re-check the skill files before answering
    Always,
    /// Answer from the index as it is
    Never,
}

#[derive(Subcommand)]
enum Command {
    /// Build or update the index for the roots and list every diagnostic
    Index {
        #[command(flatten)]
        roots: RootArgs,
        /// One JSON object on stdout
        #[arg(long)]
        json: bool,
    },
    /// Find the skills for a task
    Search {
        /// The task or question, in plain words
        query: String,
        #[command(flatten)]
        roots: RootArgs,
        /// Skills to return [config: top_k]
        #[arg(long, short = 'k')]
        top_k: Option<usize>,
        /// One JSON object on stdout
        #[arg(long)]
        json: bool,
        /// Print the block a model reads (auto mode) instead of a list
        #[arg(long, conflicts_with = "json")]
        render: bool,
        /// Token budget for the rendered block; whole skills are dropped to fit [config: token_budget]
        #[arg(long, value_name = "TOKENS")]
        budget: Option<usize>,
        /// When to re-check the skill files [default: when older than config refresh_ms]
        #[arg(long, value_enum)]
        refresh: Option<RefreshArg>,
        #[command(flatten)]
        rank: RankArgs,
    },
    /// Why a query ranks what it does: each hit's retrievers with their ranks and scores, the
    /// terms it matched in which fields, the fusion's arithmetic, and why a match was held back
    Explain {
        /// The task or question, as given to `search`
        query: String,
        #[command(flatten)]
        roots: RootArgs,
        /// Also explain this skill, wherever it ranks (`<id>` or `local/<id>`); repeatable
        #[arg(long = "skill", value_name = "ID")]
        explain_ids: Vec<String>,
        /// Skills to return [config: top_k]
        #[arg(long, short = 'k')]
        top_k: Option<usize>,
        /// Token budget of the injected turn it explains [config: token_budget]
        #[arg(long, value_name = "TOKENS")]
        budget: Option<usize>,
        /// One JSON object on stdout (its fields: `Explanation` in skillsearch-core's retrieve::explain)
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        rank: RankArgs,
    },
    /// Show one skill as a model would read it
    Show {
        /// A skill id from `search` (`<id>` or `local/<id>`)
        id: String,
        #[command(flatten)]
        roots: RootArgs,
        #[arg(long)]
        json: bool,
    },
    /// Corpus size, eligibility, and what listing every skill costs versus a top-k injection
    Stats {
        #[command(flatten)]
        roots: RootArgs,
        /// Skills injected per turn, for the comparison [config: top_k]
        #[arg(long, short = 'k')]
        top_k: Option<usize>,
        /// The host's tool list, to add tool schemas to the per-turn funnel
        #[arg(long, value_name = "FILE")]
        tools: Option<PathBuf>,
        /// Plugin directories (one plugin per subdirectory) [config: plugins]
        #[arg(long = "plugins", value_name = "DIR")]
        plugins: Vec<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Retrieval quality on labelled queries (JSONL: {"id","query","relevant":{id: grade}})
    Eval {
        #[command(flatten)]
        roots: RootArgs,
        #[arg(long, value_name = "FILE.jsonl")]
        queries: PathBuf,
        /// Results ranked per query; at least 10, which the metrics look at
        #[arg(long, short = 'k', default_value_t = 10)]
        top_k: usize,
        /// One JSON object on stdout with hit@1, recall@5, recall@10, ndcg@10, mrr@10, p50_ms, p95_ms (warm: after one untimed query), queries, skills, retriever
        #[arg(long)]
        json: bool,
        /// Also store the run (metrics, time, set) under <home>/evals/runs.jsonl, which `ui` shows per set over time
        #[arg(long)]
        save: bool,
        /// The set a saved run belongs to [default: the queries file's name without .jsonl]
        #[arg(long, value_name = "NAME", requires = "save")]
        set: Option<String>,
        /// Store the queries' vectors so later runs skip the model (for tuning; the latencies
        /// then leave query embedding out)
        #[arg(long, hide = true)]
        store_queries: bool,
        /// Also write one JSON line per query (id, hit@1, ndcg@10, recall@10, ms) to this file
        /// (for cross-validated tuning)
        #[arg(long, hide = true, value_name = "FILE.jsonl")]
        per_query: Option<PathBuf>,
        /// Also write each query's lexical top 100 (BM25 scores) and semantic top 200 (cosines)
        /// to this file, one JSON line per query (for designing the second stage offline)
        #[arg(long, hide = true, value_name = "FILE.jsonl")]
        candidates: Option<PathBuf>,
        #[command(flatten)]
        rank: RankArgs,
    },
    /// Per-turn UserPromptSubmit hook (Claude Code, Codex, CodeBuddy): JSON on stdin, context on stdout; always exits 0
    Hook {
        /// Answer in this host's dialect [default: recognised from the input]
        #[arg(long, value_enum)]
        host: Option<crate::hook::HookHost>,
        #[command(flatten)]
        roots: RootArgs,
        /// auto or on_demand [config: mode]; only auto injects
        #[arg(long)]
        mode: Option<String>,
    },
    /// MCP stdio server: skill_search and skill_read in on_demand mode, no tools in auto mode
    Mcp {
        #[command(flatten)]
        roots: RootArgs,
        /// on_demand or auto [config: mode]
        #[arg(long)]
        mode: Option<String>,
    },
    /// Daemon: local HTTP JSON API (or --stdio) that keeps indexes warm for in-process host plugins
    Serve {
        #[command(flatten)]
        roots: RootArgs,
        /// Address to listen on; anything but loopback needs --token
        #[arg(long, default_value = "127.0.0.1:7077")]
        listen: std::net::SocketAddr,
        /// Bearer token every request must carry (prefer --token-file or the environment: argv is visible to other users)
        #[arg(long, env = "SKILLSEARCH_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// File whose first line is the bearer token
        #[arg(long, value_name = "FILE", conflicts_with = "token")]
        token_file: Option<PathBuf>,
        /// Newline-delimited JSON requests on stdin, replies on stdout, instead of HTTP
        #[arg(long)]
        stdio: bool,
        /// Most connections open at once; one more is answered 503
        #[arg(long, default_value_t = 512)]
        max_connections: usize,
        /// Milliseconds a client has to send a request's headers
        #[arg(long, default_value_t = 10_000)]
        header_timeout_ms: u64,
        /// Milliseconds open requests get to finish after SIGTERM
        #[arg(long, default_value_t = 5_000)]
        shutdown_grace_ms: u64,
        /// Over HTTP, a directory a request may name as a root or workspace, with everything below it; repeatable; `*` for any (the configured roots are always served; over --stdio the parent may name any)
        #[arg(long = "allow-roots", value_name = "DIR")]
        allow_roots: Vec<String>,
        /// Most warm workspaces (index and watcher per set of roots) besides the configured roots; one more closes the least recently used
        #[arg(long, default_value_t = 16)]
        max_workspaces: usize,
        /// on_demand or auto [config: mode]
        #[arg(long)]
        mode: Option<String>,
    },
    /// A local web page: search with explanations, the decision log's turns, the token funnel,
    /// the library and stored eval runs (loopback unless --token; nothing fetched from elsewhere)
    Ui {
        #[command(flatten)]
        roots: RootArgs,
        /// Address to listen on (port 0: any free port; the address is printed on stdout); anything but loopback needs --token
        #[arg(long, default_value = "127.0.0.1:7078")]
        listen: std::net::SocketAddr,
        /// Bearer token every API call must carry; open the page as http://ADDR/#token=TOKEN (prefer --token-file or the environment: argv is visible to other users)
        #[arg(long, env = "SKILLSEARCH_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// File whose first line is the bearer token
        #[arg(long, value_name = "FILE", conflicts_with = "token")]
        token_file: Option<PathBuf>,
    },
    /// Shell completions on stdout (e.g. `skillsearch completions bash > /etc/bash_completion.d/skillsearch`)
    Completions {
        /// bash, zsh, fish, elvish or powershell
        shell: clap_complete::Shell,
    },
    /// Re-check the skill files of the roots given as JSON and save the check's time; what a
    /// hook starts in the background when the check costs more than a turn (freshness.rs)
    #[command(name = "check-index", hide = true)]
    CheckIndex {
        #[arg(long)]
        roots: String,
    },
    /// The man page (roff) on stdout (e.g. `skillsearch man > ~/.local/share/man/man1/skillsearch.1`)
    Man,
    /// A skill hub for a team: the SkillHub API over the skills of --skills (see `hub serve --help`)
    Hub {
        #[command(subcommand)]
        command: HubCommand,
    },
    /// Which tools a turn should show: core tools, unmanaged plugins' tools, and the tools of
    /// plugins the matched skills activate (activates.plugins)
    Plan {
        /// The user's message this turn
        #[arg(long)]
        prompt: String,
        #[command(flatten)]
        roots: RootArgs,
        /// A plugin directory (one plugin per subdirectory with openclaw.plugin.json); repeatable [config: plugins]
        #[arg(long = "plugins", value_name = "DIR")]
        plugins: Vec<PathBuf>,
        /// The host's tool list this turn (JSON: names, or OpenAI-style function schemas)
        #[arg(long, value_name = "FILE")]
        tools: Option<PathBuf>,
        #[arg(long, short = 'k')]
        top_k: Option<usize>,
        #[arg(long)]
        json: bool,
    },
    /// The decision log
    Log {
        #[command(subcommand)]
        command: LogCommand,
    },
    /// Wire skillsearch into a host's own configuration (backup first, diff printed, idempotent)
    Setup {
        #[arg(value_enum)]
        host: crate::setup::Host,
        /// A skill root to serve; repeatable [default: the host's own skill roots]
        #[arg(long = "skills", value_name = "DIR")]
        skills: Vec<PathBuf>,
        /// auto (inject every turn) or on_demand (skill_search / skill_read tools)
        #[arg(long)]
        mode: Option<String>,
        /// Print the diff, write nothing
        #[arg(long)]
        dry_run: bool,
        /// A host-specific option, KEY=VALUE; repeatable (see the README's section for the host)
        #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_key_value)]
        options: Vec<(String, String)>,
    },
    /// Every gate that can leave the host integration silently inert, each with a one-line fix
    Doctor {
        #[arg(value_enum)]
        host: crate::setup::Host,
        #[arg(long)]
        json: bool,
    },
    /// The effective configuration, and its schema
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Sentence models for semantic retrieval (kept under <home>/models/; never downloaded)
    Models {
        #[command(subcommand)]
        command: ModelsCommand,
    },
}

#[derive(Subcommand)]
enum ModelsCommand {
    /// Check that a model directory (Hugging Face layout: config.json, tokenizer.json,
    /// model.safetensors) loads and runs, then copy it into <home>/models/
    Add {
        dir: PathBuf,
        /// Name under <home>/models/ [default: the directory's name]
        #[arg(long)]
        name: Option<String>,
    },
    /// The embedder retrieval would use: `remote: <endpoint> model <m>` when embedding_base_url
    /// is set, else `local: <model dir>`
    Show,
}

#[derive(Subcommand)]
enum LogCommand {
    /// The last decisions, one line each
    Tail {
        /// How many
        #[arg(short = 'n', long, default_value_t = 20)]
        lines: usize,
        /// Raw JSON lines
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum HubCommand {
    /// Serve the SkillHub API (discover, search, read, download, health) over the skills of
    /// --skills, ranked by this engine; point a client's hub_endpoint at it
    Serve {
        #[command(flatten)]
        roots: RootArgs,
        /// Address to listen on (port 0: any free port; the address is printed on stdout)
        #[arg(long, default_value = "127.0.0.1:7078")]
        listen: std::net::SocketAddr,
        /// Where published skills are kept: a directory (created when missing), or a PostgreSQL URI (postgres://… or postgresql://…?host=SOCKETDIR) that several replicas share; run `hub migrate` first [default: <home>/hub]
        #[arg(long, value_name = "DIR|URI")]
        store: Option<String>,
        /// File whose first line is a bearer token with the publish scope; with it, every API call must carry a token
        #[arg(long, value_name = "FILE")]
        token_file: Option<PathBuf>,
        /// Reads (discover, search, read, download) need a token too: one from `hub token create` or --token-file
        #[arg(long)]
        require_token: bool,
        /// Discover, search and read calls per client address and minute (0: no limit)
        #[arg(long, default_value_t = 120)]
        rate_read: u32,
        /// Downloads per client address and minute (0: no limit)
        #[arg(long, default_value_t = 30)]
        rate_download: u32,
        /// Publishes, yanks and deletes per client address and minute (0: no limit)
        #[arg(long, default_value_t = 30)]
        rate_publish: u32,
        /// Seconds between looks for added, changed or removed skills where a root cannot be watched (inotify sees changes at once elsewhere)
        #[arg(long, default_value_t = 5.0)]
        refresh_s: f64,
        /// Another hub (URL; replicas comma-separated) serving the same skills with the same sentence model: its vectors are taken instead of embedding them here (the key: hub_api_key / SKILLSEARCH_HUB_API_KEY)
        #[arg(long, value_name = "URL")]
        vectors_from: Option<String>,
        /// Most connections open at once; one more is answered 503
        #[arg(long, default_value_t = 1024)]
        max_connections: usize,
        /// Milliseconds a client has to send a request's headers
        #[arg(long, default_value_t = 10_000)]
        header_timeout_ms: u64,
        /// Milliseconds open requests get to finish after SIGTERM
        #[arg(long, default_value_t = 5_000)]
        shutdown_grace_ms: u64,
    },
    /// Publish every skill directory under each PATH (a skill directory holds SKILL.md) to a
    /// hub; the key (hub_api_key or SKILLSEARCH_HUB_API_KEY) needs the publish scope. A version
    /// is the frontmatter's `version`, else a digest of the content.
    Publish {
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
        #[command(flatten)]
        hub: HubArgs,
        /// One JSON line per skill
        #[arg(long)]
        json: bool,
    },
    /// The published versions of a skill (the current one, and which are yanked)
    Versions {
        name: String,
        #[command(flatten)]
        hub: HubArgs,
        #[arg(long)]
        json: bool,
    },
    /// Stop serving one version of a published skill; the latest version before it is served again
    Yank {
        name: String,
        version: String,
        #[command(flatten)]
        hub: HubArgs,
    },
    /// Remove a published skill and every version of it
    Delete {
        name: String,
        #[command(flatten)]
        hub: HubArgs,
    },
    /// Tokens of a hub store (run where the store is reachable)
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Create or upgrade the schema of a PostgreSQL hub store (versioned; running it again changes nothing)
    Migrate {
        /// The store's PostgreSQL URI
        #[arg(long, value_name = "URI")]
        store: String,
    },
}

#[derive(Args, Clone)]
struct HubArgs {
    /// The hub's URL; several, comma-separated, are tried in turn [config: hub_endpoint]
    #[arg(long, value_name = "URL")]
    hub: Option<String>,
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Create a token and print it (once: the store keeps only its SHA-256)
    Create {
        /// read (discover, search, read, download when the hub requires a token) or publish (also publish, yank, delete)
        #[arg(long)]
        scope: String,
        /// The hub's store: a directory or a PostgreSQL URI [default: <home>/hub]
        #[arg(long, value_name = "DIR|URI")]
        store: Option<String>,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Every effective value and where it came from (default, file, environment, flag)
    Show {
        #[command(flatten)]
        roots: RootArgs,
        #[arg(long)]
        json: bool,
    },
    /// The JSON Schema of config.toml, as host manifests embed it
    Schema,
    /// Print the config.toml for a configuration written for the reference system (its Python
    /// SearchConfig, or the OpenClaw / WorkBuddy / Hermes / Raven / DeepSeek Harness plugin config,
    /// also inside openclaw.json), as JSON, JSON5, TOML or YAML. Keys without a meaning here are
    /// listed as comments with the reason; unknown keys are errors. Nothing is written.
    Import {
        /// The file to convert
        file: PathBuf,
    },
}

pub fn run() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    match dispatch(cli) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            if is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            eprintln!("skillsearch: error: {err:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn init_logging(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let default = match verbose {
        0 => "warn",
        1 => "debug",
        _ => "trace",
    };
    let filter = std::env::var("SKILLSEARCH_LOG")
        .ok()
        .and_then(|f| EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| EnvFilter::new(default));
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(filter)
        .with_target(false)
        .try_init();
}

fn parse_key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("`{s}` is not KEY=VALUE")),
    }
}

impl Flags {
    fn roots(self, r: &RootArgs) -> Self {
        self.paths("skills", &r.skills)
    }

    fn plugins(self, dirs: &[PathBuf]) -> Self {
        self.paths("plugins", dirs)
    }

    fn rank(self, r: &RankArgs) -> Self {
        self.set("name_weight", r.name_weight)
            .set("description_weight", r.description_weight)
            .set("body_weight", r.body_weight)
            .set("retriever", r.retriever.clone())
            .set("rrf_k", r.rrf_k)
            .set("lexical_weight", r.lexical_weight)
            .set("semantic_weight", r.semantic_weight)
    }
}

/// The ranking the settings configure, with the ranking flags that are not config keys.
fn search_options(s: &Settings, rank: &RankArgs, top_k: usize) -> SearchOptions {
    let d = SearchOptions::from_settings(s, top_k);
    SearchOptions {
        stopword_df: rank.stopword_df.unwrap_or(d.stopword_df),
        body_stopword_df: rank.body_stopword_df.unwrap_or(d.body_stopword_df),
        max_query_terms: rank.max_query_terms.unwrap_or(d.max_query_terms),
        query_term_share: rank.query_term_share.unwrap_or(d.query_term_share),
        short_query_terms: rank.short_query_terms.unwrap_or(d.short_query_terms),
        query_tf_k3: rank.query_tf_k3.unwrap_or(d.query_tf_k3),
        passage_words: rank.passage_words.unwrap_or(d.passage_words),
        ..d
    }
}

/// Opens (building or refreshing as needed) the index, with a progress bar on a terminal.
fn open_index(
    home: &std::path::Path,
    roots: &Roots,
    refresh: Refresh,
) -> Result<(SkillIndex, Option<RefreshReport>)> {
    let cfg = IndexConfig::new(home);
    let bar = ProgressBar::new();
    let result = SkillIndex::open(roots, &cfg, refresh, &|p| bar.update(p));
    bar.finish();
    let (idx, report) =
        result.with_context(|| format!("cannot open the skill index under {}", home.display()))?;
    if let Some(r) = &report
        && r.locked
    {
        tracing::warn!(
            "another skillsearch process is updating the index; answering from the previous version"
        );
    }
    Ok((idx, report))
}

struct ProgressBar(std::cell::RefCell<Option<indicatif::ProgressBar>>, bool);

impl ProgressBar {
    fn new() -> Self {
        use std::io::IsTerminal;
        ProgressBar(
            std::cell::RefCell::new(None),
            std::io::stderr().is_terminal(),
        )
    }

    fn update(&self, p: Progress) {
        if !self.1 {
            return;
        }
        let mut slot = self.0.borrow_mut();
        match p {
            Progress::Start { to_read } if to_read >= 500 => {
                let bar = indicatif::ProgressBar::new(to_read as u64);
                bar.set_style(
                    indicatif::ProgressStyle::with_template(
                        "indexing {bar:30} {pos}/{len} skills ({eta})",
                    )
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                );
                *slot = Some(bar);
            }
            Progress::Read { done } => {
                if let Some(bar) = slot.as_ref() {
                    bar.set_position(done as u64);
                }
            }
            Progress::Start { .. } => {}
        }
    }

    fn finish(&self) {
        if let Some(bar) = self.0.borrow_mut().take() {
            bar.finish_and_clear();
        }
    }
}

fn dispatch(cli: Cli) -> Result<u8> {
    let home = home_dir(cli.home)?;
    let mut out = Out::stdout();
    let cfg = cli.config;
    match cli.command {
        Command::Index { roots, json } => {
            let s = settings(&home, cfg, Flags::default().roots(&roots))?;
            cmd_index(&mut out, &home, &s, &roots_of(&s)?, json)
        }
        Command::Search {
            query,
            roots,
            top_k,
            json,
            render,
            budget,
            refresh,
            rank,
        } => {
            let flags = Flags::default()
                .roots(&roots)
                .set("top_k", top_k)
                .set("token_budget", budget)
                .rank(&rank);
            let s = settings(&home, cfg, flags)?;
            let refresh = match refresh {
                None | Some(RefreshArg::Auto) => {
                    Refresh::IfOlderThan(Duration::from_millis(s.refresh_ms))
                }
                Some(RefreshArg::Always) => Refresh::Always,
                Some(RefreshArg::Never) => Refresh::Never,
            };
            let output = match (json, render) {
                (_, true) => SearchOutput::Render,
                (true, _) => SearchOutput::Json,
                _ => SearchOutput::List,
            };
            let opts = search_options(&s, &rank, s.top_k);
            cmd_search(&mut out, &home, &s, &query, &opts, refresh, output)
        }
        Command::Explain {
            query,
            roots,
            explain_ids,
            top_k,
            budget,
            json,
            rank,
        } => {
            let flags = Flags::default()
                .roots(&roots)
                .set("top_k", top_k)
                .set("token_budget", budget)
                .rank(&rank);
            let s = settings(&home, cfg, flags)?;
            let opts = search_options(&s, &rank, s.top_k);
            cmd_explain(&mut out, &home, &s, &query, &opts, &explain_ids, json)
        }
        Command::Show { id, roots, json } => {
            let s = settings(&home, cfg, Flags::default().roots(&roots))?;
            let refresh = Refresh::IfOlderThan(Duration::from_millis(s.refresh_ms));
            let gate = EligibilityEnv::for_settings(&s);
            cmd_show(&mut out, &home, &roots_of(&s)?, &id, refresh, json, &gate)
        }
        Command::Stats {
            roots,
            top_k,
            tools,
            plugins,
            json,
        } => {
            let flags = Flags::default()
                .roots(&roots)
                .set("top_k", top_k)
                .plugins(&plugins);
            let s = settings(&home, cfg, flags)?;
            let funnel = match &tools {
                Some(path) => Some(tool_funnel(&home, &s, path)?),
                None => None,
            };
            let gate = EligibilityEnv::for_settings(&s);
            cmd_stats(
                &mut out,
                &home,
                &roots_of(&s)?,
                s.top_k,
                funnel,
                json,
                &gate,
            )
        }
        Command::Eval {
            roots,
            queries,
            top_k,
            json,
            save,
            set,
            store_queries,
            per_query,
            candidates,
            rank,
        } => {
            if roots.skills.len() != 1 {
                bail!(
                    "eval needs exactly one --skills DIR: query labels are skill ids relative to it"
                );
            }
            let s = settings(&home, cfg, Flags::default().roots(&roots).rank(&rank))?;
            cmd_eval(
                &mut out,
                &home,
                &s,
                &queries,
                &search_options(&s, &rank, top_k.max(10)),
                EvalOutput {
                    json,
                    save: save.then(|| {
                        (
                            evals::set_name(set.as_deref(), &queries),
                            roots.skills[0].clone(),
                        )
                    }),
                    store_queries,
                    per_query: per_query.as_deref(),
                    candidates: candidates.as_deref(),
                },
            )
        }
        Command::Hook { host, roots, mode } => {
            let flags = Flags::default().roots(&roots).set("mode", mode);
            Ok(crate::hook::run(&home, cfg, host, flags))
        }
        Command::Plan {
            prompt,
            roots,
            plugins,
            tools,
            top_k,
            json,
        } => {
            let flags = Flags::default()
                .roots(&roots)
                .set("top_k", top_k)
                .plugins(&plugins);
            let s = settings(&home, cfg, flags)?;
            cmd_plan(&mut out, &home, &s, &prompt, tools.as_deref(), json)
        }
        Command::Serve {
            roots,
            listen,
            token,
            token_file,
            stdio,
            max_connections,
            header_timeout_ms,
            shutdown_grace_ms,
            allow_roots,
            max_workspaces,
            mode,
        } => {
            let s = settings(&home, cfg, Flags::default().roots(&roots).set("mode", mode))?;
            let token = match token_file {
                Some(f) => Some(read_token(&f)?),
                None => token.filter(|t| !t.is_empty()),
            };
            let limits = crate::serve::Limits {
                max_connections: max_connections.max(1),
                header_timeout: Duration::from_millis(header_timeout_ms.max(1)),
                grace: Duration::from_millis(shutdown_grace_ms),
            };
            let listen = crate::serve::Listen {
                addr: listen,
                allow_roots,
                max_workspaces,
                token,
                stdio,
                limits,
            };
            crate::serve::run(home, s, listen)
        }
        Command::Ui {
            roots,
            listen,
            token,
            token_file,
        } => {
            let s = settings(&home, cfg, Flags::default().roots(&roots))?;
            let token = match token_file {
                Some(f) => Some(read_token(&f)?),
                None => token.filter(|t| !t.is_empty()),
            };
            let opts = crate::ui::UiOptions {
                addr: listen,
                token,
                limits: crate::serve::Limits {
                    max_connections: 64,
                    header_timeout: Duration::from_secs(10),
                    grace: Duration::from_secs(2),
                },
            };
            crate::ui::run(home, s, opts)
        }
        Command::Mcp { roots, mode } => {
            let s = settings(&home, cfg, Flags::default().roots(&roots).set("mode", mode))?;
            crate::mcp::run(home, s)
        }
        Command::Log {
            command: LogCommand::Tail { lines, json },
        } => {
            let s = settings(&home, cfg, Flags::default())?;
            cmd_log_tail(&mut out, &s, lines, json)
        }
        Command::Setup {
            host,
            skills,
            mode,
            dry_run,
            options,
        } => {
            if let Some(m) = mode.as_deref().filter(|m| !config::MODES.contains(m)) {
                bail!(
                    "--mode: `{m}` is not one of {}",
                    config::MODES
                        .iter()
                        .map(|m| format!("`{m}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            let req = crate::setup::SetupRequest {
                skills,
                mode,
                home,
                binary: crate::setup::this_binary()?,
                options,
            };
            crate::setup::run_setup(&mut out, host, &req, dry_run)
        }
        Command::Doctor { host, json } => crate::setup::run_doctor(&mut out, host, &home, json),
        Command::Completions { shell } => {
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "skillsearch", &mut buf);
            out.line(String::from_utf8_lossy(&buf).trim_end())?;
            Ok(0)
        }
        Command::CheckIndex { roots } => {
            crate::freshness::run_check(&home, &roots)?;
            Ok(0)
        }
        Command::Man => {
            let mut buf = Vec::new();
            clap_mangen::Man::new(Cli::command())
                .render(&mut buf)
                .context("cannot render the man page")?;
            out.line(String::from_utf8_lossy(&buf).trim_end())?;
            Ok(0)
        }
        Command::Hub {
            command:
                HubCommand::Serve {
                    roots,
                    listen,
                    store,
                    token_file,
                    require_token,
                    rate_read,
                    rate_download,
                    rate_publish,
                    refresh_s,
                    vectors_from,
                    max_connections,
                    header_timeout_ms,
                    shutdown_grace_ms,
                },
        } => {
            let s = settings(&home, cfg, Flags::default().roots(&roots))?;
            let token = token_file.as_deref().map(read_token).transpose()?;
            if !(0.05..=86_400.0).contains(&refresh_s) {
                bail!("--refresh-s must be from 0.05 to 86400 seconds, not {refresh_s}");
            }
            let opts = crate::hub::HubOptions {
                addr: listen,
                store: crate::hub::store_arg(&home, store),
                token,
                require_token,
                limits: crate::serve::Limits {
                    max_connections: max_connections.max(1),
                    header_timeout: Duration::from_millis(header_timeout_ms.max(1)),
                    grace: Duration::from_millis(shutdown_grace_ms),
                },
                read_per_minute: rate_read,
                download_per_minute: rate_download,
                publish_per_minute: rate_publish,
                refresh_every: Duration::from_secs_f64(refresh_s),
                vectors_from,
            };
            crate::hub::run(home, s, opts)
        }
        Command::Hub { command } => {
            use crate::hub::HubClientCommand as C;
            let (hub, cmd) = match command {
                HubCommand::Serve { .. } => unreachable!("matched above"),
                HubCommand::Publish { paths, hub, json } => (hub.hub, C::Publish { paths, json }),
                HubCommand::Versions { name, hub, json } => (hub.hub, C::Versions { name, json }),
                HubCommand::Yank { name, version, hub } => (hub.hub, C::Yank { name, version }),
                HubCommand::Delete { name, hub } => (hub.hub, C::Delete { name }),
                HubCommand::Token {
                    command: TokenCommand::Create { scope, store },
                } => (
                    None,
                    C::TokenCreate {
                        scope,
                        store: crate::hub::store_arg(&home, store),
                    },
                ),
                HubCommand::Migrate { store } => (None, C::Migrate { store }),
            };
            let s = settings(&home, cfg, Flags::default().set("hub_endpoint", hub))?;
            crate::hub::run_client(&home, &s, cmd)
        }
        Command::Config {
            command: ConfigCommand::Import { file },
        } => {
            let text = crate::context::read_config(&file)?;
            let user_home = std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from);
            let imported =
                config::import::import(&file.display().to_string(), &text, user_home.as_deref())
                    .map_err(|e| anyhow::anyhow!("{}", e.message))?;
            out.line(imported.toml.trim_end())?;
            Ok(0)
        }
        Command::Config {
            command: ConfigCommand::Schema,
        } => {
            out.json_pretty(&config::schema())?;
            Ok(0)
        }
        Command::Models {
            command: ModelsCommand::Add { dir, name },
        } => {
            let target = crate::embedding::add_model(&home, &dir, name.as_deref())?;
            out.line(&format!("model installed: {}", target.display()))?;
            Ok(0)
        }
        Command::Models {
            command: ModelsCommand::Show,
        } => {
            let s = settings(&home, cfg, Flags::default())?;
            match skillsearch_core::turn::embedder::describe(&home, &s)? {
                Some(what) => {
                    out.line(&what)?;
                    Ok(0)
                }
                None => {
                    out.line(&format!(
                        "no model: retrieval is lexical (looked in {}; see `skillsearch models add` and the source tree's scripts/install-model, or set embedding_base_url)",
                        skillsearch_core::retrieve::embed::models_dir(&home).display()
                    ))?;
                    Ok(EXIT_NO_HITS)
                }
            }
        }
        Command::Config {
            command: ConfigCommand::Show { roots, json },
        } => {
            let s = settings(&home, cfg, Flags::default().roots(&roots))?;
            cmd_config_show(&mut out, &s, json)
        }
    }
}

fn cmd_plan(
    out: &mut Out,
    home: &Path,
    s: &Settings,
    prompt: &str,
    tools: Option<&Path>,
    json: bool,
) -> Result<u8> {
    use skillsearch_core::plan;
    use skillsearch_core::turn::PlanFrom;
    let (idx, _) = open_index(
        home,
        &roots_of(s)?,
        Refresh::IfOlderThan(Duration::from_millis(s.refresh_ms)),
    )?;
    let (tool_list, mut tool_diags) = match tools {
        None => (Vec::new(), Vec::new()),
        Some(path) => {
            let text = skillsearch_core::fsio::read_regular(path)
                .with_context(|| format!("cannot read the tool list {}", path.display()))?;
            let v: serde_json::Value = serde_json::from_slice(&text)
                .with_context(|| format!("tool list {} is not JSON", path.display()))?;
            plan::parse_tools(&v, path)
        }
    };
    let engine = Engine::new(s, home);
    let from = PlanFrom::Prompt {
        query: prompt,
        top_k: s.top_k,
    };
    let answer = engine.plan(&idx, from, &tool_list)?;
    let mut p = answer.plan;
    p.diagnostics.append(&mut tool_diags);
    let ids: Vec<&str> = answer.matched.iter().map(String::as_str).collect();
    if json {
        let mut v = p.report(&ids);
        v["prompt"] = prompt.into();
        v["search_ms"] = answer.search_ms.into();
        v["plan_ms"] = answer.plan_ms.into();
        out.json(&v)?;
        return Ok(0);
    }
    out.line(&format!("matched skills:    {}", shown(&ids.join(", "))))?;
    out.line(&format!(
        "activated plugins: {}",
        shown(&p.activated_plugins.join(", "))
    ))?;
    out.line(&format!(
        "visible tools:     {}",
        shown(&p.visible_tools.join(", "))
    ))?;
    out.line(&format!(
        "hidden tools:      {}",
        shown(&p.hidden_tools.join(", "))
    ))?;
    out.line(&format!(
        "schema tokens:     {} shown, {} hidden{}",
        p.tokens.shown,
        p.tokens.hidden,
        if p.tokens.unknown_schemas > 0 {
            format!(
                " ({} tools without a schema not counted)",
                p.tokens.unknown_schemas
            )
        } else {
            String::new()
        }
    ))?;
    for r in &p.reasons {
        out.line(&format!(
            "  {} {:<24} {:<9} {}",
            r.kind,
            shown(&r.subject),
            r.decision,
            shown(&r.reason)
        ))?;
    }
    print_diagnostics(out, &p.diagnostics)?;
    Ok(0)
}

fn cmd_log_tail(out: &mut Out, s: &Settings, n: usize, json: bool) -> Result<u8> {
    let Some(path) = &s.log_path else {
        bail!("the decision log is off (log_path = \"off\")");
    };
    let log = DecisionLog::new(path, s.log_max_bytes);
    let records = log
        .tail(n)
        .with_context(|| format!("cannot read the decision log {}", path.display()))?;
    if records.is_empty() {
        out.line(&format!("no decisions logged yet in {}", path.display()))?;
        return Ok(0);
    }
    for d in &records {
        if json {
            out.json(d)?;
            continue;
        }
        let hits = if d.hits.is_empty() {
            "no skills".to_owned()
        } else {
            d.hits
                .iter()
                .map(|h| format!("{} ({:.2})", shown(&h.id), h.score))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let total = d
            .elapsed_ms
            .get("total")
            .map(|t| format!("{t:.1} ms"))
            .unwrap_or_default();
        out.line(&format!(
            "{} {:<5} {:<11} {:<12} \"{}\" -> {hits}; {} chars, ~{} tokens; {total}{}",
            d.ts,
            d.surface,
            d.host,
            d.mode,
            crate::output::one_line(&d.query, 60),
            d.injected_chars,
            d.injected_tokens,
            d.error
                .as_ref()
                .map(|e| format!("; error: {}", shown(e)))
                .unwrap_or_default()
        ))?;
    }
    Ok(0)
}

fn cmd_config_show(out: &mut Out, s: &Settings, json: bool) -> Result<u8> {
    if json {
        let v: serde_json::Map<String, serde_json::Value> = s
            .effective
            .iter()
            .map(|(k, v, src)| {
                (
                    (*k).to_owned(),
                    serde_json::json!({"value": v, "source": src.to_string()}),
                )
            })
            .collect();
        out.json(&v)?;
        return Ok(0);
    }
    for (k, v, src) in &s.effective {
        out.line(&format!("{k:<20} = {v:<40} # {src}"))?;
    }
    Ok(0)
}

fn cmd_index(
    out: &mut Out,
    home: &std::path::Path,
    s: &Settings,
    roots: &Roots,
    json: bool,
) -> Result<u8> {
    let (idx, report) = open_index(home, roots, Refresh::Always)?;
    let report = report.unwrap_or_default();
    if let Some(why) = &report.unsaved {
        bail!(
            "cannot update the skill index {} ({why}); make {} writable (or free space on its disk) and run `skillsearch index` again",
            idx.dir().display(),
            home.display()
        );
    }
    // A check that found nothing new is not saved by the index itself; this command's job is
    // to, so that searches in the next `refresh_ms` skip the walk.
    if let Err(e) = idx.record_check() {
        tracing::warn!("the index is up to date, but the time of this check was not saved: {e}");
    }
    // Vectors too, so the first semantic query does not wait for them.
    let slot = SemanticSlot::default();
    let lexical = crate::embedding::attach_now(home, s, &idx, &slot);
    if let Some(l) = &lexical {
        // Printed below in full: later searches need not say it again.
        l.mark_said(home);
    }
    let note = lexical.map(|l| l.note);
    let semantic = match slot.get() {
        Some(sem) => serde_json::json!({
            "model": sem.model(),
            "coverage": sem.coverage(&idx)?,
            "vectors": sem.store().path(),
        }),
        None => serde_json::json!({"off": note}),
    };
    let diagnostics = idx.diagnostics()?;
    let keys = idx.doc_keys()?;
    let skills = keys.iter().filter(|k| k.valid).count();
    if json {
        let v = serde_json::json!({
            "index": idx.dir(),
            "roots": roots.0,
            "files": keys.len(),
            "skills": skills,
            "added": report.added,
            "updated": report.updated,
            "removed": report.removed,
            "unchanged": report.unchanged,
            "rebuilt": report.rebuilt,
            "locked": report.locked,
            "elapsed_ms": report.elapsed_ms,
            "semantic": semantic,
            "diagnostics": diagnostics,
        });
        out.json(&v)?;
    } else {
        out.line(&format!(
            "{skills} skills in {} files: {} added, {} updated, {} removed, {} unchanged ({:.0} ms)",
            keys.len(),
            report.added,
            report.updated,
            report.removed,
            report.unchanged,
            report.elapsed_ms
        ))?;
        if let Some(r) = &report.rebuilt {
            out.line(&format!("rebuilt: {r}"))?;
        }
        out.line(&format!("index: {}", idx.dir().display()))?;
        match (slot.get(), note) {
            (Some(sem), _) => {
                let c = sem.coverage(&idx)?;
                out.line(&format!(
                    "vectors: {} of {} skills ({})",
                    c.embedded,
                    c.total,
                    sem.model()
                ))?;
            }
            (None, Some(note)) => out.line(&format!("semantic: {note}"))?,
            (None, None) => {}
        }
        print_diagnostics(out, &diagnostics)?;
    }
    Ok(0)
}

/// How `search` prints its answer.
enum SearchOutput {
    List,
    Json,
    /// The block a model reads, within an optional token budget.
    Render,
}

fn cmd_search(
    out: &mut Out,
    home: &std::path::Path,
    s: &Settings,
    query: &str,
    opts: &SearchOptions,
    refresh: Refresh,
    output: SearchOutput,
) -> Result<u8> {
    let started = Instant::now();
    let roots = &roots_of(s)?;
    let (idx, report) = open_index(home, roots, refresh)?;
    if let Some(r) = &report {
        for d in &r.diagnostics {
            tracing::warn!("{d}");
        }
    }
    let slot = std::sync::Arc::new(SemanticSlot::default());
    let lexical = (opts.retriever != Retriever::Lexical)
        .then(|| crate::embedding::attach_now(home, s, &idx, &slot))
        .flatten();
    if let Some(l) = &lexical {
        l.warn(home);
    }
    if let SearchOutput::Render = &output {
        // Only a rendered turn needs the engine (its remote clients, the plugin inventory).
        let engine = Engine::new(s, home)
            .with_search_options(opts.clone())
            .with_semantic(slot);
        let turn = Turn {
            paths: crate::context::process_paths(),
            ..Turn::until(engine.deadline(started))
        };
        let r = engine.retrieve(&idx, query, &turn)?;
        // Why retrieval is lexical was said above (once, for a missing model).
        let said = lexical.as_ref().map(|l| l.note.as_str());
        for n in r
            .notes
            .iter()
            .filter(|n| !said.is_some_and(|s| n.contains(s)))
        {
            tracing::warn!("{n}");
        }
        if !r.over_budget.is_empty() {
            tracing::warn!(
                "left out to fit the token budget: {}",
                shown(&r.over_budget.join(", "))
            );
        }
        if r.text.is_empty() {
            return Ok(EXIT_NO_HITS);
        }
        out.line(&r.text)?;
        return Ok(0);
    }
    let result = idx.search_with(query, opts, &EligibilityEnv::for_settings(s), Some(&slot))?;
    let code = if result.hits.is_empty() {
        EXIT_NO_HITS
    } else {
        0
    };
    if let SearchOutput::Json = output {
        let v = serde_json::json!({
            "query": query,
            "hits": result.hits,
            "dropped": result.dropped,
            "terms": result.terms,
            "omitted": result.omitted,
            "stopwords": result.stopwords,
            "retrievers": result.retrievers,
            "notes": result.notes,
            "refresh": report,
            "elapsed_ms": started.elapsed().as_secs_f64() * 1e3,
        });
        out.json(&v)?;
    } else if result.hits.is_empty() {
        out.line("no matching skills")?;
    } else {
        for (i, h) in result.hits.iter().enumerate() {
            out.line(&format!(
                "{}. {}  [{}]  score {:.2}",
                i + 1,
                shown(&h.name),
                shown(&h.qualified_id),
                h.score
            ))?;
            if !h.description.is_empty() {
                out.line(&format!(
                    "   {}",
                    crate::output::one_line(&h.description, 160)
                ))?;
            }
            out.line(&format!("   {}", shown(&h.path.display().to_string())))?;
        }
    }
    Ok(code)
}

fn cmd_explain(
    out: &mut Out,
    home: &std::path::Path,
    s: &Settings,
    query: &str,
    opts: &SearchOptions,
    wanted: &[String],
    json: bool,
) -> Result<u8> {
    let started = Instant::now();
    let roots = &roots_of(s)?;
    let refresh = Refresh::IfOlderThan(Duration::from_millis(s.refresh_ms));
    let (idx, report) = open_index(home, roots, refresh)?;
    if let Some(r) = &report {
        for d in &r.diagnostics {
            tracing::warn!("{d}");
        }
    }
    let slot = std::sync::Arc::new(SemanticSlot::default());
    if opts.retriever != Retriever::Lexical
        && let Some(l) = crate::embedding::attach_now(home, s, &idx, &slot)
    {
        l.warn(home);
    }
    let engine = Engine::new(s, home)
        .with_search_options(opts.clone())
        .with_semantic(slot);
    let turn = Turn {
        paths: crate::context::process_paths(),
        ..Turn::until(engine.deadline(started))
    };
    let ex = engine.explain(&idx, query, &turn, wanted)?;
    if json {
        out.json(&ex)?;
    } else {
        for line in crate::explain::text(&ex) {
            out.line(&line)?;
        }
    }
    let hits = ex
        .skills
        .iter()
        .any(|s| s.status == skillsearch_core::retrieve::explain::Status::Hit);
    Ok(if hits { 0 } else { EXIT_NO_HITS })
}

fn cmd_show(
    out: &mut Out,
    home: &std::path::Path,
    roots: &Roots,
    id: &str,
    refresh: Refresh,
    json: bool,
    gate: &EligibilityEnv,
) -> Result<u8> {
    let (idx, _) = open_index(home, roots, refresh)?;
    let Some(hit) = idx.get(id)? else {
        bail!(
            "no skill with id `{id}` in {} root(s); `skillsearch search QUERY` lists ids",
            roots.0.len()
        );
    };
    let loaded = corpus::load(&hit.path, corpus::DEFAULT_MAX_FILE_BYTES);
    let skill = RenderSkill {
        name: hit.name.clone(),
        qualified_id: hit.qualified_id.clone(),
        skill_dir: Some(hit.skill_dir.clone()),
        body: loaded.body.as_str().into(),
    };
    let rendered = render::render(&[skill], render::HEADING, None, &TokenCounter::new());
    if json {
        let eligibility = gate.check(&hit.meta).err();
        let v = serde_json::json!({
            "hit": hit,
            "metadata": hit.meta,
            "excluded": eligibility,
            "diagnostics": loaded.diagnostics,
            "rendered": rendered.text,
        });
        out.json(&v)?;
    } else {
        out.line(&rendered.text)?;
    }
    Ok(0)
}

/// What OpenClaw's catalog of `skills` costs per turn: (characters, tokens).
fn catalog_cost(skills: &[&skillsearch_core::Hit], counter: &TokenCounter) -> (usize, f64) {
    let paths: Vec<String> = skills
        .iter()
        .map(|h| h.path.to_string_lossy().into_owned())
        .collect();
    let entries: Vec<(&str, &str, &str)> = skills
        .iter()
        .zip(&paths)
        .map(|(h, p)| (h.name.as_str(), h.description.as_str(), p.as_str()))
        .collect();
    let c = tokens::openclaw_catalog_cost(&entries, counter);
    (c.chars, c.tokens)
}

/// Tool schemas in the per-turn funnel: (all, shown on a turn that activates no plugin, hidden then).
fn tool_funnel(home: &Path, s: &Settings, tools: &Path) -> Result<(usize, usize, usize)> {
    use skillsearch_core::plan::{self, Inventory};
    let text = skillsearch_core::fsio::read_regular(tools)
        .with_context(|| format!("cannot read the tool list {}", tools.display()))?;
    let v: serde_json::Value = serde_json::from_slice(&text)
        .with_context(|| format!("tool list {} is not JSON", tools.display()))?;
    let (tool_list, _) = plan::parse_tools(&v, tools);
    let (idx, _) = open_index(
        home,
        &roots_of(s)?,
        Refresh::IfOlderThan(Duration::from_millis(s.refresh_ms)),
    )?;
    let gate = EligibilityEnv::for_settings(s);
    let managed = idx.managed_plugins(&gate)?;
    let p = plan::plan(
        &[],
        &managed,
        &[],
        &tool_list,
        &Inventory::load(&s.plugins),
        &TokenCounter::new(),
    );
    Ok((
        p.tokens.shown + p.tokens.hidden,
        p.tokens.shown,
        p.tokens.hidden,
    ))
}

fn cmd_stats(
    out: &mut Out,
    home: &std::path::Path,
    roots: &Roots,
    top_k: usize,
    funnel: Option<(usize, usize, usize)>,
    json: bool,
    gate: &EligibilityEnv,
) -> Result<u8> {
    let (idx, _) = open_index(home, roots, Refresh::Always)?;
    let keys = idx.doc_keys()?;
    let skills = idx.skills()?;
    let mut excluded: BTreeMap<String, usize> = BTreeMap::new();
    let mut excluded_skills = Vec::new();
    let mut offered = Vec::new();
    let mut eligible = Vec::new();
    for (hit, is_shadowed) in &skills {
        if *is_shadowed {
            continue;
        }
        offered.push(hit);
        match gate.check(&hit.meta) {
            Ok(()) => eligible.push(hit),
            Err(e) => {
                *excluded.entry(e.code.clone()).or_default() += 1;
                excluded_skills.push(serde_json::json!({
                    "id": hit.id, "name": hit.name, "code": e.code, "reason": e.reason,
                }));
            }
        }
    }
    let shadowed = skills.len() - offered.len();
    let counter = TokenCounter::new();
    let (all_chars, all_tokens) = catalog_cost(&offered, &counter);
    let (elig_chars, elig_tokens) = catalog_cost(&eligible, &counter);
    let exact = eligible.len() <= tokens::CATALOG_EXACT_LIMIT
        && offered.len() <= tokens::CATALOG_EXACT_LIMIT;
    // What a top-k injection costs: the mean rendered skill, k times.
    let sample = tokens::stride_sample(eligible.len());
    let (mut part_chars, mut part_tokens) = (0f64, 0f64);
    for &i in &sample {
        let h = eligible[i];
        let body = corpus::load(&h.path, corpus::DEFAULT_MAX_FILE_BYTES).body;
        let skill = RenderSkill {
            name: h.name.clone(),
            qualified_id: h.qualified_id.clone(),
            skill_dir: Some(h.skill_dir.clone()),
            body: body.into(),
        };
        let block = render::render(&[skill], "", None, &counter).text;
        part_chars += tokens::js_len(&block) as f64;
        part_tokens += counter.count(&block) as f64;
    }
    let n = sample.len().max(1) as f64;
    let k = top_k.min(eligible.len()) as f64;
    let inject_chars = (render::HEADING.len() as f64) + k * part_chars / n;
    let inject_tokens = 3.0 + k * part_tokens / n;
    if json {
        let v = serde_json::json!({
            "files": keys.len(),
            "skills": skills.len(),
            "invalid_files": keys.len() - skills.len(),
            "shadowed": shadowed,
            "eligible": eligible.len(),
            "excluded": excluded,
            "excluded_skills": excluded_skills,
            "openclaw_catalog_all": {"skills": offered.len(), "chars": all_chars, "tokens": all_tokens.round()},
            "openclaw_catalog": {"skills": eligible.len(), "chars": elig_chars, "tokens": elig_tokens.round()},
            "tokens_exact": exact,
            "top_k_injection": {"k": top_k, "chars": inject_chars.round(), "tokens": inject_tokens.round(), "mean_skill_tokens": (part_tokens / n).round()},
            "tokenizer": "o200k_base",
            "tool_schemas": funnel.map(|(all, shown, hidden)| serde_json::json!({"all_tokens": all, "shown_when_no_plugin_is_activated": shown, "hidden_when_no_plugin_is_activated": hidden})),
        });
        out.json(&v)?;
        return Ok(0);
    }
    out.line(&format!("files:     {}", keys.len()))?;
    out.line(&format!(
        "skills:    {} ({} unusable files, {shadowed} shadowed by an earlier root)",
        skills.len(),
        keys.len() - skills.len()
    ))?;
    out.line(&format!("eligible:  {} on this machine", eligible.len()))?;
    out.line(&format!("excluded:  {}", excluded.values().sum::<usize>()))?;
    for (code, n) in &excluded {
        out.line(&format!("  {code:<26} {n}"))?;
    }
    let approx = if exact { " " } else { "~" };
    out.line("")?;
    out.line("per-turn prompt cost                              chars   tokens (o200k)")?;
    let row = |label: &str, chars: f64, tokens: f64, approx: &str| {
        format!("{label:<42} {chars:>10.0}  {approx}{tokens:>9.0}")
    };
    out.line(&row(
        &format!("OpenClaw 2026.9.6 catalog, all {} skills", offered.len()),
        all_chars as f64,
        all_tokens,
        approx,
    ))?;
    out.line(&row(
        &format!("OpenClaw 2026.9.6 catalog, {} eligible", eligible.len()),
        elig_chars as f64,
        elig_tokens,
        approx,
    ))?;
    out.line(&row(
        &format!("skillsearch top-{top_k} injection (mean)"),
        inject_chars,
        inject_tokens,
        "~",
    ))?;
    if inject_tokens > 0.0 {
        out.line(&format!(
            "eligible catalog / top-{top_k} injection: {:.1}x",
            elig_tokens / inject_tokens
        ))?;
    }
    if let Some((all, shown, hidden)) = funnel {
        out.line(&format!(
            "tool schemas: {all} tokens in all; on a turn that activates no plugin, {shown} shown and {hidden} hidden"
        ))?;
    }
    Ok(0)
}

/// What `eval` writes besides its summary, and whether it stores the query vectors.
struct EvalOutput<'a> {
    json: bool,
    /// Store the run: its set name and skills root.
    save: Option<(String, PathBuf)>,
    store_queries: bool,
    per_query: Option<&'a std::path::Path>,
    candidates: Option<&'a std::path::Path>,
}

fn cmd_eval(
    out: &mut Out,
    home: &std::path::Path,
    s: &Settings,
    queries: &std::path::Path,
    opts: &SearchOptions,
    output: EvalOutput<'_>,
) -> Result<u8> {
    let EvalOutput {
        json,
        save,
        store_queries,
        per_query,
        candidates,
    } = output;
    let text = skillsearch_core::fsio::read_regular_string(queries)
        .with_context(|| format!("cannot read queries file {}", queries.display()))?;
    let labelled =
        eval::parse_queries(&text).map_err(|e| anyhow::anyhow!("{}: {e}", queries.display()))?;
    let (idx, _) = open_index(home, &roots_of(s)?, Refresh::Always)?;
    let slot = SemanticSlot::default();
    if opts.retriever != Retriever::Lexical
        && let Some(lexical) = crate::embedding::attach_now(home, s, &idx, &slot)
    {
        lexical.warn(home);
    }
    if store_queries && let Some(sem) = slot.get() {
        // Query vectors stored like skills', so repeated runs (tuning) skip the model; the
        // latencies then leave the query's embedding out.
        let texts: Vec<&str> = labelled.iter().map(|q| q.query.as_str()).collect();
        sem.store_queries(
            &texts,
            opts.passage_words,
            skillsearch_core::turn::embedder::batch(s),
        )?;
    }
    let keys = idx.doc_keys()?;
    let n_skills = keys.iter().filter(|k| k.valid).count();
    for warning in eval::label_warnings(
        &labelled,
        keys.iter().filter(|k| k.valid).map(|k| k.rel.as_str()),
    ) {
        tracing::warn!("{}: {warning}", queries.display());
    }
    // Eval measures ranking, so it does not gate on this machine's PATH or environment.
    let gate = EligibilityEnv::allow_all();
    let mut scores = Vec::with_capacity(labelled.len());
    let mut latencies = Vec::with_capacity(labelled.len());
    let mut ran = std::collections::BTreeSet::new();
    // An untimed query first, not from the set and long enough to be split into passages, so
    // the latencies are a warm process's (as the daemon's, MCP's and the hub's are).
    let warm_up = "Warm up the index and the model. ".repeat(20);
    idx.search_with(&warm_up, opts, &gate, Some(&slot))?;
    for q in &labelled {
        let t = Instant::now();
        let r = idx.search_with(&q.query, opts, &gate, Some(&slot))?;
        latencies.push(t.elapsed().as_secs_f64() * 1e3);
        ran.extend(r.retrievers.iter().copied());
        let ranked: Vec<String> = r.hits.into_iter().map(|h| h.id).collect();
        scores.push(eval::score(&ranked, &q.relevant));
    }
    if let Some(path) = candidates {
        let mut lines = String::new();
        for q in &labelled {
            let mut lists = Vec::new();
            for (retriever, k) in [(Retriever::Lexical, 100), (Retriever::Semantic, 200)] {
                let o = SearchOptions {
                    retriever,
                    top_k: k,
                    ..opts.clone()
                };
                let r = idx.search_with(&q.query, &o, &gate, Some(&slot))?;
                let ran = r.retrievers.contains(&retriever.as_str());
                lists.push(if ran {
                    r.hits.iter().map(|h| (h.id.clone(), h.score)).collect()
                } else {
                    Vec::new()
                });
            }
            let line = serde_json::json!({
                "id": q.id, "query": q.query, "relevant": q.relevant,
                "lexical": lists[0], "semantic": lists[1],
            });
            lines.push_str(&format!("{line}\n"));
        }
        std::fs::write(path, lines).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = per_query {
        let mut lines = String::new();
        for ((q, sc), ms) in labelled.iter().zip(&scores).zip(&latencies) {
            let line = serde_json::json!({
                "id": q.id, "hit@1": sc.hit1, "ndcg@10": sc.ndcg10,
                "recall@10": sc.recall10, "ms": ms,
            });
            lines.push_str(&format!("{line}\n"));
        }
        std::fs::write(path, lines).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let mut s = eval::summarise(&scores, &latencies, n_skills);
    // What ran: the retriever asked for once the model is attached (a query with no word in
    // the corpus is ranked by meaning alone even then), lexical when it is not.
    s.retriever = if ran.contains("semantic") || slot.get().is_some() {
        opts.retriever.as_str()
    } else {
        "lexical"
    }
    .to_owned();
    if let Some((set, skills)) = save {
        let run = evals::SavedRun {
            ts: skillsearch_core::turn::decision_log::now_rfc3339(),
            set,
            queries: std::path::absolute(queries).unwrap_or_else(|_| queries.to_path_buf()),
            skills: std::path::absolute(&skills).unwrap_or(skills),
            metrics: s.clone(),
        };
        let path = evals::save(home, &run)?;
        tracing::info!("eval run saved to {} (set {})", path.display(), run.set);
    }
    if json {
        out.json(&s)?;
    } else {
        out.line(&format!(
            "queries {}   skills {}   retriever {}",
            s.queries, s.skills, s.retriever
        ))?;
        out.line("hit@1   recall@5  recall@10  ndcg@10  mrr@10   p50_ms  p95_ms")?;
        out.line(&format!(
            "{:<7.3} {:<9.3} {:<10.3} {:<8.3} {:<8.3} {:<7.3} {:.3}",
            s.hit1, s.recall5, s.recall10, s.ndcg10, s.mrr10, s.p50_ms, s.p95_ms
        ))?;
    }
    Ok(0)
}

/// The bearer token in the first line of `path` (surrounding blanks dropped).
fn read_token(path: &Path) -> Result<String> {
    let text = skillsearch_core::fsio::read_regular_string(path)
        .with_context(|| format!("cannot read the token file {}", path.display()))?;
    let token = text.lines().next().unwrap_or_default().trim().to_owned();
    if token.is_empty() {
        bail!("the token file {} is empty", path.display());
    }
    Ok(token)
}
