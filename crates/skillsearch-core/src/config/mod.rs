//! Configuration: one table of keys drives the TOML reader, the `SKILLSEARCH_*` environment
//! reader, flag overrides, `config show` and the JSON Schema that host manifests embed, so they
//! cannot drift apart. Layers, lowest first: defaults < file < environment < flags.
//!
//! Nothing here reads the process environment or the disk: the caller passes the file text and
//! the environment in, so every rule is testable.

pub mod import;

use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// How a key's value is checked.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// One of a fixed set of strings.
    Enum(&'static [&'static str]),
    Int {
        min: i64,
        max: i64,
    },
    Float {
        min: f64,
        max: f64,
    },
    Str,
    /// `true` or `false` (from the environment also `1`/`0`, `yes`/`no`, `on`/`off`).
    Bool,
    /// A [`Kind::Bool`] that may also be `"auto"`: the engine decides.
    AutoBool,
    Path,
    /// A list of paths; `:`-separated in the environment.
    Paths,
    /// An `http://` or `https://` URL, or empty (off).
    Url,
    /// One or more `http://` / `https://` URLs separated by commas (tried in turn), or empty.
    Urls,
    /// A string that is never shown: `config show`, errors and `Debug` print it redacted.
    Secret,
}

/// One configuration key.
#[derive(Debug, Clone, Copy)]
pub struct KeyDef {
    pub name: &'static str,
    pub env: &'static str,
    pub kind: Kind,
    /// The default, as JSON text.
    pub default: &'static str,
    pub doc: &'static str,
}

/// The shapes of a `skill_search` answer.
pub const DETAILS: &[&str] = &["full", "catalog"];

/// The modes of delivery; exactly one is active.
pub const MODES: &[&str] = &["on_demand", "auto"];

/// Every key skillsearch reads.
pub const KEYS: &[KeyDef] = &[
    KeyDef {
        name: "skills",
        env: "SKILLSEARCH_SKILLS_DIRS",
        kind: Kind::Paths,
        default: "[]",
        doc: "Skill roots, highest precedence first (the first wins a name collision). Empty: the workspace's skills/ and .agents/skills, then ~/.agents/skills and ~/.openclaw/skills.",
    },
    KeyDef {
        name: "plugins",
        env: "SKILLSEARCH_PLUGINS_DIRS",
        kind: Kind::Paths,
        default: "[]",
        doc: "Plugin directories: each holds one plugin per subdirectory (with its openclaw.plugin.json), or is one plugin. Used to plan which tools a turn shows.",
    },
    KeyDef {
        name: "workspace",
        env: "SKILLSEARCH_WORKSPACE",
        kind: Kind::Path,
        default: "\"\"",
        doc: "Workspace whose skills/ and .agents/skills are the default roots. Empty: the current directory.",
    },
    KeyDef {
        name: "mode",
        env: "SKILLSEARCH_MODE",
        kind: Kind::Enum(MODES),
        default: "\"on_demand\"",
        doc: "on_demand: offer the skill_search and skill_read tools and inject nothing. auto: inject the matching skills every turn and offer no tools.",
    },
    KeyDef {
        name: "top_k",
        env: "SKILLSEARCH_TOP_K",
        kind: Kind::Int { min: 1, max: 50 },
        default: "2",
        doc: "Skills returned or injected per turn.",
    },
    KeyDef {
        name: "token_budget",
        env: "SKILLSEARCH_TOKEN_BUDGET",
        kind: Kind::Int {
            min: 0,
            max: 1_000_000,
        },
        default: "8000",
        doc: "Most tokens (o200k) a rendered block may take; whole skills are dropped to fit. 0: no budget.",
    },
    KeyDef {
        name: "deadline_ms",
        env: "SKILLSEARCH_DEADLINE_MS",
        kind: Kind::Int {
            min: 50,
            max: 120_000,
        },
        default: "8000",
        doc: "Whole-turn deadline in milliseconds; past it the turn goes on without skills.",
    },
    KeyDef {
        name: "refresh_ms",
        env: "SKILLSEARCH_REFRESH_MS",
        kind: Kind::Int {
            min: 0,
            max: 86_400_000,
        },
        default: "2000",
        doc: "Re-check the skill files when the last check is older than this (milliseconds). 0: every time.",
    },
    KeyDef {
        name: "heading",
        env: "SKILLSEARCH_HEADING",
        kind: Kind::Str,
        default: "\"# Skills\"",
        doc: "First line of the rendered block.",
    },
    KeyDef {
        name: "search_answer",
        env: "SKILLSEARCH_SEARCH_ANSWER",
        kind: Kind::Enum(DETAILS),
        default: "\"full\"",
        doc: "What a skill_search call returns unless it asks (`detail`): `full`, the best skills in full; `catalog`, a list of the matching skills (id, name, description, why it matched, size in tokens) that the model reads with skill_read.",
    },
    KeyDef {
        name: "host_config",
        env: "SKILLSEARCH_HOST_CONFIG",
        kind: Kind::Path,
        default: "\"\"",
        doc: "The host's config document (JSON or JSON5) that skills' `requires.config` and `skills.entries` are judged against, re-read when it changes. Empty: OpenClaw's ($OPENCLAW_CONFIG_PATH, else $OPENCLAW_STATE_DIR/openclaw.json, else ~/.openclaw/openclaw.json); a missing file is no config. \"off\": none.",
    },
    KeyDef {
        name: "resolve_placeholders",
        env: "SKILLSEARCH_RESOLVE_PLACEHOLDERS",
        kind: Kind::Bool,
        default: "false",
        doc: "Replace {{SKILL_DIR}}, {{SKILL_DIR:<name>}}, {{HOME}}, {{OUTPUT_DIR}} and {{AGENT_STATE_DIR}} in local and hub skills' bodies with the host's directories; one that cannot be resolved stays as written, with a diagnostic.",
    },
    KeyDef {
        name: "output_dir",
        env: "SKILLSEARCH_OUTPUT_DIR",
        kind: Kind::Path,
        default: "\"\"",
        doc: "{{OUTPUT_DIR}}. Empty: the turn's workspace (the host's working directory), else `workspace`; with neither it stays as written.",
    },
    KeyDef {
        name: "home_dir",
        env: "SKILLSEARCH_HOME_DIR",
        kind: Kind::Path,
        default: "\"\"",
        doc: "{{HOME}}. Empty: the user's home directory, else the output directory.",
    },
    KeyDef {
        name: "state_dir",
        env: "SKILLSEARCH_STATE_DIR",
        kind: Kind::Path,
        default: "\"\"",
        doc: "{{AGENT_STATE_DIR}}. Empty: the host's own state directory (e.g. ~/.openclaw, ~/.claude, $CODEX_HOME), else the output directory.",
    },
    KeyDef {
        name: "log_path",
        env: "SKILLSEARCH_LOG_PATH",
        kind: Kind::Path,
        default: "\"\"",
        doc: "Decision log (one JSON line per turn and tool call). Empty: <home>/logs/decisions.jsonl. \"off\" disables it.",
    },
    KeyDef {
        name: "log_max_bytes",
        env: "SKILLSEARCH_LOG_MAX_BYTES",
        kind: Kind::Int {
            min: 4096,
            max: 1 << 40,
        },
        default: "10485760",
        doc: "Size at which the decision log is rotated (one previous file is kept).",
    },
    KeyDef {
        name: "name_weight",
        env: "SKILLSEARCH_NAME_WEIGHT",
        kind: Kind::Float {
            min: 0.0,
            max: 100.0,
        },
        default: "1.0",
        doc: "BM25 weight of the skill name.",
    },
    KeyDef {
        name: "description_weight",
        env: "SKILLSEARCH_DESCRIPTION_WEIGHT",
        kind: Kind::Float {
            min: 0.0,
            max: 100.0,
        },
        default: "2.0",
        doc: "BM25 weight of the description.",
    },
    KeyDef {
        name: "body_weight",
        env: "SKILLSEARCH_BODY_WEIGHT",
        kind: Kind::Float {
            min: 0.0,
            max: 100.0,
        },
        default: "1.0",
        doc: "BM25 weight of the body.",
    },
    KeyDef {
        name: "retriever",
        env: "SKILLSEARCH_RETRIEVER",
        kind: Kind::Enum(&Retriever::ALL),
        default: "\"hybrid\"",
        doc: "Ranking: lexical (BM25), semantic (sentence vectors) or hybrid (both, fused by weighted reciprocal rank). Semantic and hybrid need a sentence model; without one, and in the per-turn hook, retrieval is lexical.",
    },
    KeyDef {
        name: "embedding_model_dir",
        env: "SKILLSEARCH_EMBEDDING_MODEL_DIR",
        kind: Kind::Path,
        default: "\"\"",
        doc: "Sentence model directory in the Hugging Face layout (config.json, tokenizer.json, model.safetensors), e.g. all-MiniLM-L6-v2. Empty: the first model under <home>/models/ (see `skillsearch models add`). Nothing is ever downloaded. In TOML also `[embedding] model_dir`; in the environment also SKILLSEARCH_MODEL_DIR.",
    },
    KeyDef {
        name: "embedding_precision",
        env: "SKILLSEARCH_EMBEDDING_PRECISION",
        kind: Kind::Enum(&Precision::ALL),
        default: "\"f32\"",
        doc: "Arithmetic of the local sentence model: f32, int8 (int8 linear layers on AVX-512 VNNI, a skill's text read up to 128 tokens: a library embeds ~10x faster, 64K skills in ~6 min on 2 cores; queries ~3-4x faster; dev hit@1 within 0.01 of f32 on the short-query sets, one long prompt of 24 lower on a 6K pool; an error on other CPUs), or auto (int8 where the CPU can, f32 elsewhere). int8 and f32 vectors are stored apart.",
    },
    KeyDef {
        name: "rrf_k",
        env: "SKILLSEARCH_RRF_K",
        kind: Kind::Float {
            min: 0.0,
            max: 1000.0,
        },
        default: "5.0",
        doc: "Fusion constant k: a hit at rank r of a retriever adds weight / (k + r).",
    },
    KeyDef {
        name: "lexical_weight",
        env: "SKILLSEARCH_LEXICAL_WEIGHT",
        kind: Kind::Float {
            min: 0.0,
            max: 100.0,
        },
        default: "1.0",
        doc: "Fusion weight of the lexical ranking.",
    },
    KeyDef {
        name: "semantic_weight",
        env: "SKILLSEARCH_SEMANTIC_WEIGHT",
        kind: Kind::Float {
            min: 0.0,
            max: 100.0,
        },
        default: "0.9",
        doc: "Fusion weight of the semantic ranking.",
    },
    KeyDef {
        name: "hub_endpoint",
        env: "SKILLSEARCH_HUB_ENDPOINT",
        kind: Kind::Urls,
        default: "\"\"",
        doc: "Base URL of a SkillHub-compatible hub (e.g. https://skillhub.evermind.ai), or several separated by commas: replicas of one hub, tried in turn when one is down. Empty: no hub.",
    },
    KeyDef {
        name: "hub_api_key",
        env: "SKILLSEARCH_HUB_API_KEY",
        kind: Kind::Secret,
        default: "\"\"",
        doc: "Bearer key sent to the hub. Never shown: config show and logs print it redacted.",
    },
    KeyDef {
        name: "hub_timeout_s",
        env: "SKILLSEARCH_HUB_TIMEOUT_S",
        kind: Kind::Float {
            min: 0.05,
            max: 60.0,
        },
        default: "2.0",
        doc: "Hard deadline of one hub search or read (seconds).",
    },
    KeyDef {
        name: "hub_download_timeout_s",
        env: "SKILLSEARCH_HUB_DOWNLOAD_TIMEOUT_S",
        kind: Kind::Float {
            min: 0.05,
            max: 600.0,
        },
        default: "30.0",
        doc: "Hard deadline of one hub bundle download (seconds).",
    },
    KeyDef {
        name: "hub_min_safety",
        env: "SKILLSEARCH_HUB_MIN_SAFETY",
        kind: Kind::Float { min: 0.0, max: 1.0 },
        default: "0.7",
        doc: "Hub skills whose safety score is below this are never returned or installed.",
    },
    KeyDef {
        name: "weight_hub",
        env: "SKILLSEARCH_WEIGHT_HUB",
        kind: Kind::Float {
            min: 0.0,
            max: 10.0,
        },
        default: "0.85",
        doc: "Weight of hub hits when they are fused with local hits.",
    },
    KeyDef {
        name: "clawhub_endpoint",
        env: "SKILLSEARCH_CLAWHUB_ENDPOINT",
        kind: Kind::Url,
        default: "\"\"",
        doc: "Base URL of the ClawHub marketplace (e.g. https://clawhub.ai), searched as a skill source; its skills are installed into <home>/cache/clawhub before the gate. Empty: not used.",
    },
    KeyDef {
        name: "skillhub_cn_endpoint",
        env: "SKILLSEARCH_SKILLHUB_CN_ENDPOINT",
        kind: Kind::Url,
        default: "\"\"",
        doc: "Base URL of the skillhub.cn marketplace (e.g. https://api.skillhub.cn), searched as a skill source; its skills are installed into <home>/cache/skillhub_cn before the gate. Empty: not used.",
    },
    KeyDef {
        name: "weight_clawhub",
        env: "SKILLSEARCH_WEIGHT_CLAWHUB",
        kind: Kind::Float {
            min: 0.0,
            max: 10.0,
        },
        default: "0.75",
        doc: "Weight of ClawHub hits when they are fused with local hits.",
    },
    KeyDef {
        name: "weight_skillhub_cn",
        env: "SKILLSEARCH_WEIGHT_SKILLHUB_CN",
        kind: Kind::Float {
            min: 0.0,
            max: 10.0,
        },
        default: "0.75",
        doc: "Weight of skillhub.cn hits when they are fused with local hits.",
    },
    KeyDef {
        name: "marketplace_timeout_s",
        env: "SKILLSEARCH_MARKETPLACE_TIMEOUT_S",
        kind: Kind::Float {
            min: 0.05,
            max: 60.0,
        },
        default: "5.0",
        doc: "Hard deadline of one marketplace search (seconds).",
    },
    KeyDef {
        name: "marketplace_download_timeout_s",
        env: "SKILLSEARCH_MARKETPLACE_DOWNLOAD_TIMEOUT_S",
        kind: Kind::Float {
            min: 0.05,
            max: 600.0,
        },
        default: "30.0",
        doc: "Hard deadline of one marketplace skill download, redirects included (seconds).",
    },
    KeyDef {
        name: "per_source_max",
        env: "SKILLSEARCH_PER_SOURCE_MAX",
        kind: Kind::Int { min: 1, max: 50 },
        default: "2",
        doc: "Most hits one source (the local index, the hub, a marketplace) contributes to a turn.",
    },
    KeyDef {
        name: "model",
        env: "SKILLSEARCH_MODEL",
        kind: Kind::Str,
        default: "\"\"",
        doc: "Chat model id (OpenAI-compatible) for query rewriting and the skill gate. Empty: no model calls.",
    },
    KeyDef {
        name: "model_base_url",
        env: "SKILLSEARCH_MODEL_BASE_URL",
        kind: Kind::Str,
        default: "\"\"",
        doc: "Base URL of the OpenAI-compatible chat endpoint, e.g. http://127.0.0.1:8000/v1 (POST <base>/chat/completions).",
    },
    KeyDef {
        name: "model_api_key",
        env: "SKILLSEARCH_MODEL_API_KEY",
        kind: Kind::Secret,
        default: "\"\"",
        doc: "Bearer token for model_base_url. Never shown or logged. Empty: no Authorization header.",
    },
    KeyDef {
        name: "model_timeout_s",
        env: "SKILLSEARCH_MODEL_TIMEOUT_S",
        kind: Kind::Float {
            min: 0.1,
            max: 600.0,
        },
        default: "30.0",
        doc: "Ceiling in seconds on any one model call (connect, send and read); a step's own shorter deadline wins.",
    },
    KeyDef {
        name: "rewrite",
        env: "SKILLSEARCH_REWRITE",
        kind: Kind::Bool,
        default: "true",
        doc: "Let the model rewrite the query for retrieval before searching (needs model). Any failure searches the raw query.",
    },
    KeyDef {
        name: "rewrite_timeout_s",
        env: "SKILLSEARCH_REWRITE_TIMEOUT_S",
        kind: Kind::Float {
            min: 0.1,
            max: 120.0,
        },
        default: "5.0",
        doc: "Deadline in seconds of the query rewrite; past it the raw query is searched.",
    },
    KeyDef {
        name: "gate",
        env: "SKILLSEARCH_GATE",
        kind: Kind::AutoBool,
        default: "\"auto\"",
        doc: "Let the model pick which retrieved skills to inject (needs model). auto: on when a remote skill source is configured.",
    },
    KeyDef {
        name: "gate_pool",
        env: "SKILLSEARCH_GATE_POOL",
        kind: Kind::Int { min: 1, max: 100 },
        default: "10",
        doc: "Candidates the gate is shown.",
    },
    KeyDef {
        name: "max_select",
        env: "SKILLSEARCH_MAX_SELECT",
        kind: Kind::Int { min: 1, max: 50 },
        default: "2",
        doc: "Most skills the gate may select; on a gate failure the first max_select candidates are kept.",
    },
    KeyDef {
        name: "gate_timeout_s",
        env: "SKILLSEARCH_GATE_TIMEOUT_S",
        kind: Kind::Float {
            min: 0.1,
            max: 600.0,
        },
        default: "20.0",
        doc: "Deadline in seconds of the gate call; past it the first max_select candidates are kept.",
    },
    KeyDef {
        name: "available_tools",
        env: "SKILLSEARCH_AVAILABLE_TOOLS",
        kind: Kind::Paths,
        default: "[]",
        doc: "The agent's tool names, for the gate, where the host does not send them with the turn (OpenClaw 2026.7, OpenClaw with another context engine, Hermes' prefetch); `:`-separated in the environment. Empty: the gate judges without a tool list and the decision log says so.",
    },
    KeyDef {
        name: "gate_log_path",
        env: "SKILLSEARCH_GATE_LOG_PATH",
        kind: Kind::Path,
        default: "\"\"",
        doc: "Append one JSON line per successful gate decision to this file. Empty: off.",
    },
    KeyDef {
        name: "embedding_base_url",
        env: "SKILLSEARCH_EMBEDDING_BASE_URL",
        kind: Kind::Str,
        default: "\"\"",
        doc: "Base URL of an OpenAI-compatible embeddings endpoint (POST <base>/embeddings). Empty: no remote embedder.",
    },
    KeyDef {
        name: "embedding_model",
        env: "SKILLSEARCH_EMBEDDING_MODEL",
        kind: Kind::Str,
        default: "\"\"",
        doc: "Model id sent to embedding_base_url.",
    },
    KeyDef {
        name: "embedding_api_key",
        env: "SKILLSEARCH_EMBEDDING_API_KEY",
        kind: Kind::Secret,
        default: "\"\"",
        doc: "Bearer token for embedding_base_url. Never shown or logged.",
    },
    KeyDef {
        name: "embedding_dim",
        env: "SKILLSEARCH_EMBEDDING_DIM",
        kind: Kind::Int { min: 0, max: 65536 },
        default: "0",
        doc: "Dimension the remote embeddings must have. 0: learned from the first reply.",
    },
    KeyDef {
        name: "embedding_batch",
        env: "SKILLSEARCH_EMBEDDING_BATCH",
        kind: Kind::Int { min: 1, max: 4096 },
        default: "64",
        doc: "Texts per remote embeddings request.",
    },
    KeyDef {
        name: "embedding_timeout_s",
        env: "SKILLSEARCH_EMBEDDING_TIMEOUT_S",
        kind: Kind::Float {
            min: 0.1,
            max: 600.0,
        },
        default: "10.0",
        doc: "Deadline in seconds of each remote embeddings request (connect, send and read).",
    },
];

/// What `config show` and errors print instead of a secret.
pub const REDACTED: &str = "<redacted>";

/// A secret string (an API key). `Debug`, `Display` and `Serialize` print [`REDACTED`] (or
/// nothing when empty); only [`Secret::expose`] gives the value.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn shown(&self) -> &'static str {
        if self.0.is_empty() { "" } else { REDACTED }
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({:?})", self.shown())
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.shown())
    }
}

impl Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.shown())
    }
}

/// Other spellings of a key's environment variable (alias, the key's own).
pub const ENV_ALIASES: &[(&str, &str)] =
    &[("SKILLSEARCH_MODEL_DIR", "SKILLSEARCH_EMBEDDING_MODEL_DIR")];

/// Environment variables that are ours but are not configuration keys.
pub const OTHER_ENV: &[&str] = &[
    "SKILLSEARCH_HOME",
    "SKILLSEARCH_CONFIG",
    "SKILLSEARCH_LOG",
    "SKILLSEARCH_TOKEN",
];

/// Where an effective value came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "at", rename_all = "lowercase")]
pub enum Source {
    Default,
    File(PathBuf),
    Env(String),
    Flag(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => write!(f, "default"),
            Source::File(p) => write!(f, "{}", p.display()),
            Source::Env(n) => write!(f, "environment {n}"),
            Source::Flag(n) => write!(f, "flag --{n}"),
        }
    }
}

/// A configuration mistake, naming the key, the bad value, where it came from and what is accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ConfigError {
    pub key: String,
    /// Where the bad value came from (a file, an environment variable, a flag).
    pub origin: String,
    pub message: String,
}

/// The input layers. `env` is the whole environment (only `SKILLSEARCH_*` is read).
#[derive(Debug, Default, Clone)]
pub struct Layers {
    pub file: Option<(PathBuf, String)>,
    pub env: Vec<(String, String)>,
    /// (key, raw value) from command-line flags.
    pub flags: Vec<(String, String)>,
}

/// The effective configuration.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    pub skills: Vec<PathBuf>,
    pub plugins: Vec<PathBuf>,
    pub workspace: Option<PathBuf>,
    pub mode: Mode,
    pub top_k: usize,
    pub token_budget: Option<usize>,
    pub deadline_ms: u64,
    pub refresh_ms: u64,
    pub heading: String,
    /// `host_config`.
    pub host_config: HostConfig,
    /// `search_answer`.
    pub search_answer: Detail,
    /// `resolve_placeholders`, and the directories the placeholders name (`output_dir`,
    /// `home_dir`, `state_dir`; unset ones come from the host, turn by turn).
    pub placeholders: Option<PathFacts>,
    /// `None`: logging is off.
    pub log_path: Option<PathBuf>,
    pub log_max_bytes: u64,
    pub name_weight: f32,
    pub description_weight: f32,
    pub body_weight: f32,
    pub retriever: Retriever,
    /// `None`: look under `<home>/models/`.
    pub embedding_model_dir: Option<PathBuf>,
    /// `embedding_precision`.
    pub embedding_precision: Precision,
    pub rrf_k: f32,
    pub lexical_weight: f32,
    pub semantic_weight: f32,
    /// Empty: no hub.
    pub hub_endpoint: String,
    pub hub_api_key: Secret,
    pub hub_timeout_s: f64,
    pub hub_download_timeout_s: f64,
    pub hub_min_safety: f64,
    pub weight_hub: f32,
    /// Empty: ClawHub is not searched.
    pub clawhub_endpoint: String,
    /// Empty: skillhub.cn is not searched.
    pub skillhub_cn_endpoint: String,
    pub weight_clawhub: f32,
    pub weight_skillhub_cn: f32,
    pub marketplace_timeout_s: f64,
    pub marketplace_download_timeout_s: f64,
    pub per_source_max: usize,
    /// The chat model (`model*` keys).
    pub llm: ModelSettings,
    pub rewrite: bool,
    pub rewrite_timeout: Duration,
    /// `None`: auto (on when a remote skill source is configured).
    pub gate: Option<bool>,
    pub gate_pool: usize,
    pub max_select: usize,
    pub gate_timeout: Duration,
    /// `None`: no gate decision log.
    pub gate_log_path: Option<PathBuf>,
    /// `available_tools`: the agent's tools when a turn brings none.
    pub available_tools: Vec<String>,
    /// The remote embedder (`embedding_*` keys).
    pub embedding: EmbeddingSettings,
    /// Every key's effective value (JSON) and its source, in table order.
    #[serde(skip)]
    pub effective: Vec<(&'static str, Value, Source)>,
}

/// The shape of a `skill_search` answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Detail {
    /// The best skills in full.
    #[default]
    Full,
    /// A catalogue of the matching skills, to be read with `skill_read`.
    Catalog,
}

impl Detail {
    pub fn parse(s: &str) -> Option<Detail> {
        match s.trim() {
            "full" => Some(Detail::Full),
            "catalog" => Some(Detail::Catalog),
            _ => None,
        }
    }
}

/// Which host config document eligibility reads (`host_config`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HostConfig {
    /// OpenClaw's, as OpenClaw finds it.
    Default,
    Off,
    File(PathBuf),
}

/// The directories PathGuard placeholders name; `None`: not known (from these settings; the
/// host may tell it with a turn).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PathFacts {
    /// `{{OUTPUT_DIR}}`: where the agent writes (its workspace).
    pub output_dir: Option<PathBuf>,
    /// `{{HOME}}`.
    pub home_dir: Option<PathBuf>,
    /// `{{AGENT_STATE_DIR}}`: the host agent's own state directory.
    pub state_dir: Option<PathBuf>,
}

impl PathFacts {
    /// Each fact of `self`, else `other`'s.
    pub fn or(&self, other: &PathFacts) -> PathFacts {
        let pick = |a: &Option<PathBuf>, b: &Option<PathBuf>| a.clone().or_else(|| b.clone());
        PathFacts {
            output_dir: pick(&self.output_dir, &other.output_dir),
            home_dir: pick(&self.home_dir, &other.home_dir),
            state_dir: pick(&self.state_dir, &other.state_dir),
        }
    }
}

/// The OpenAI-compatible chat model.
#[derive(Debug, Clone, Serialize)]
pub struct ModelSettings {
    /// Model id; empty: no model is configured.
    pub model: String,
    /// E.g. `http://127.0.0.1:8000/v1`.
    pub base_url: String,
    pub api_key: Secret,
    /// Ceiling on any one call.
    pub timeout: Duration,
}

impl ModelSettings {
    /// A model is configured (id and endpoint both set).
    pub fn is_configured(&self) -> bool {
        !self.model.trim().is_empty() && !self.base_url.trim().is_empty()
    }
}

/// The OpenAI-compatible embeddings endpoint.
#[derive(Debug, Clone, Serialize)]
pub struct EmbeddingSettings {
    /// Empty: no remote embedder.
    pub base_url: String,
    pub model: String,
    pub api_key: Secret,
    /// `None`: learned from the first reply.
    pub dim: Option<usize>,
    pub batch: usize,
    /// Deadline of each request.
    pub timeout: Duration,
}

impl Settings {
    /// Whether the query rewrite runs: a model is configured and `rewrite` is on.
    pub fn rewrite_enabled(&self) -> bool {
        self.llm.is_configured() && self.rewrite
    }

    /// Whether the gate runs: a model is configured and `gate` is on, or `auto` and a remote
    /// skill source is configured.
    pub fn gate_enabled(&self, remote_sources: bool) -> bool {
        self.llm.is_configured() && self.gate.unwrap_or(remote_sources)
    }
}

/// The delivery mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    OnDemand,
    Auto,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::OnDemand => "on_demand",
            Mode::Auto => "auto",
        }
    }
}

fn key_def(name: &str) -> Option<&'static KeyDef> {
    KEYS.iter().find(|k| k.name == name)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push(
                (prev[j] + usize::from(ca != *cb))
                    .min(prev[j + 1] + 1)
                    .min(cur[j] + 1),
            );
        }
        prev = cur;
    }
    prev[b.len()]
}

fn suggestion<'a>(bad: &str, options: impl Iterator<Item = &'a str>) -> String {
    options
        .map(|o| (edit_distance(bad, o), o))
        .filter(|(d, _)| *d <= 3)
        .min()
        .map(|(_, o)| format!("; did you mean `{o}`?"))
        .unwrap_or_default()
}

fn kind_text(kind: Kind) -> String {
    match kind {
        Kind::Enum(opts) => format!(
            "one of {}",
            opts.iter()
                .map(|o| format!("`{o}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Kind::Int { min, max } => format!("a whole number from {min} to {max}"),
        Kind::Float { min, max } => format!("a number from {min} to {max}"),
        Kind::Str | Kind::Secret => "a string".into(),
        Kind::Bool => "`true` or `false`".into(),
        Kind::AutoBool => "`true`, `false` or `auto`".into(),
        Kind::Path => "a path".into(),
        Kind::Paths => "a list of paths".into(),
        Kind::Url => "an http:// or https:// URL, or empty".into(),
        Kind::Urls => {
            "an http:// or https:// URL (or several, separated by commas), or empty".into()
        }
    }
}

/// Checks one value (already JSON: typed from TOML, or a string from env/flags) against a key.
fn check(def: &KeyDef, raw: Value, source: &Source) -> Result<Value, ConfigError> {
    let bad = |shown: &str| ConfigError {
        key: def.name.to_owned(),
        origin: source.to_string(),
        message: format!(
            "config key `{}` ({source}): `{shown}` is not {}{}",
            def.name,
            kind_text(def.kind),
            match def.kind {
                Kind::Enum(opts) => suggestion(shown, opts.iter().copied()),
                _ => String::new(),
            }
        ),
    };
    let shown = match &raw {
        _ if matches!(def.kind, Kind::Secret) => REDACTED.to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let flag = |s: &str| match s.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    };
    let from_string = matches!(source, Source::Env(_) | Source::Flag(_));
    match def.kind {
        Kind::Enum(opts) => match &raw {
            Value::String(s) if opts.contains(&s.as_str()) => Ok(raw),
            _ => Err(bad(&shown)),
        },
        Kind::Int { min, max } => {
            let n = match &raw {
                Value::Number(n) => n.as_i64(),
                Value::String(s) if from_string => s.trim().parse::<i64>().ok(),
                _ => None,
            };
            match n {
                Some(n) if (min..=max).contains(&n) => Ok(json!(n)),
                _ => Err(bad(&shown)),
            }
        }
        Kind::Float { min, max } => {
            let n = match &raw {
                Value::Number(n) => n.as_f64(),
                Value::String(s) if from_string => s.trim().parse::<f64>().ok(),
                _ => None,
            };
            match n {
                Some(n) if n.is_finite() && n >= min && n <= max => Ok(json!(n)),
                _ => Err(bad(&shown)),
            }
        }
        Kind::Bool => match &raw {
            Value::Bool(_) => Ok(raw),
            Value::String(s) if from_string => flag(s).map(Value::Bool).ok_or_else(|| bad(&shown)),
            _ => Err(bad(&shown)),
        },
        Kind::AutoBool => match &raw {
            Value::Bool(_) => Ok(raw),
            Value::String(s) if s.trim().eq_ignore_ascii_case("auto") => Ok(json!("auto")),
            Value::String(s) if from_string => flag(s).map(Value::Bool).ok_or_else(|| bad(&shown)),
            _ => Err(bad(&shown)),
        },
        Kind::Str | Kind::Secret | Kind::Path => match raw {
            Value::String(_) => Ok(raw),
            _ => Err(bad(&shown)),
        },
        Kind::Url => match &raw {
            Value::String(s) if s.trim().is_empty() => Ok(Value::String(String::new())),
            Value::String(s) if is_http_url(s.trim()) => {
                Ok(Value::String(s.trim().trim_end_matches('/').to_owned()))
            }
            _ => Err(bad(&shown)),
        },
        Kind::Urls => match &raw {
            Value::String(s) if s.trim().is_empty() => Ok(Value::String(String::new())),
            Value::String(s) if s.split(',').all(|u| is_http_url(u.trim())) => Ok(Value::String(
                s.split(',')
                    .map(|u| u.trim().trim_end_matches('/'))
                    .collect::<Vec<_>>()
                    .join(","),
            )),
            _ => Err(bad(&shown)),
        },
        Kind::Paths => match raw {
            Value::Array(items) if items.iter().all(Value::is_string) => Ok(Value::Array(items)),
            // `:`-separated in the environment; one path per line from repeated flags.
            Value::String(s) if from_string => {
                let sep = if matches!(source, Source::Flag(_)) {
                    '\n'
                } else {
                    ':'
                };
                Ok(Value::Array(
                    s.split(sep)
                        .filter(|p| !p.trim().is_empty())
                        .map(|p| Value::String(p.trim().to_owned()))
                        .collect(),
                ))
            }
            _ => Err(bad(&shown)),
        },
    }
}

/// `http://host…` or `https://host…` with a non-empty host and no whitespace.
fn is_http_url(s: &str) -> bool {
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"));
    rest.is_some_and(|r| {
        !r.is_empty() && !r.starts_with('/') && !r.chars().any(|c| c.is_whitespace())
    })
}

fn toml_to_json(v: toml::Value) -> Value {
    match v {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => json!(i),
        toml::Value::Float(f) => json!(f),
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.into_iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => {
            Value::Object(t.into_iter().map(|(k, v)| (k, toml_to_json(v))).collect())
        }
    }
}

/// Resolves the layers into settings. Every problem is an error; nothing falls back silently.
pub fn resolve(layers: &Layers) -> Result<Settings, ConfigError> {
    let mut values: BTreeMap<&'static str, (Value, Source)> = BTreeMap::new();
    for def in KEYS {
        let v: Value = serde_json::from_str(def.default).unwrap_or(Value::Null);
        values.insert(def.name, (v, Source::Default));
    }
    if let Some((path, text)) = &layers.file {
        let source = Source::File(path.clone());
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| ConfigError {
            key: String::new(),
            origin: source.to_string(),
            message: format!(
                "config file {} is not valid TOML: {}",
                path.display(),
                e.message()
            ),
        })?;
        // A table is a section: `[embedding] model_dir` is the key `embedding_model_dir`.
        let mut flat: Vec<(String, toml::Value)> = Vec::new();
        for (key, raw) in table {
            match raw {
                toml::Value::Table(section) => {
                    flat.extend(section.into_iter().map(|(k, v)| (format!("{key}_{k}"), v)))
                }
                other => flat.push((key, other)),
            }
        }
        for (key, raw) in flat {
            let Some(def) = key_def(&key) else {
                return Err(ConfigError {
                    message: format!(
                        "unknown config key `{key}` in {}{}; known keys: {}",
                        path.display(),
                        suggestion(&key, KEYS.iter().map(|k| k.name)),
                        KEYS.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
                    ),
                    key,
                    origin: source.to_string(),
                });
            };
            let v = check(def, toml_to_json(raw), &source)?;
            values.insert(def.name, (v, source.clone()));
        }
    }
    let mut env: Vec<&(String, String)> = layers
        .env
        .iter()
        .filter(|(k, _)| k.starts_with("SKILLSEARCH_"))
        .collect();
    env.sort();
    for (name, raw) in env {
        if OTHER_ENV.contains(&name.as_str()) {
            continue;
        }
        let key_env = ENV_ALIASES
            .iter()
            .find(|(alias, _)| alias == name)
            .map_or(name.as_str(), |(_, env)| *env);
        let Some(def) = KEYS.iter().find(|k| k.env == key_env) else {
            return Err(ConfigError {
                key: name.clone(),
                origin: format!("environment {name}"),
                message: format!(
                    "unknown environment variable `{name}`{}; skillsearch reads {}",
                    suggestion(
                        name,
                        KEYS.iter().map(|k| k.env).chain(OTHER_ENV.iter().copied())
                    ),
                    KEYS.iter()
                        .map(|k| k.env)
                        .chain(OTHER_ENV.iter().copied())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        };
        let source = Source::Env(name.clone());
        let v = check(def, Value::String(raw.clone()), &source)?;
        values.insert(def.name, (v, source));
    }
    for (key, raw) in &layers.flags {
        let def = key_def(key).ok_or_else(|| ConfigError {
            key: key.clone(),
            origin: format!("flag --{key}"),
            message: format!("unknown config key `{key}`"),
        })?;
        let source = Source::Flag(key.replace('_', "-"));
        // A repeated flag (`--skills A --skills B`) arrives joined with `:`.
        let v = check(def, Value::String(raw.clone()), &source)?;
        values.insert(def.name, (v, source));
    }
    let get = |k: &str| values.get(k).map(|(v, _)| v.clone()).unwrap_or(Value::Null);
    let text = |k: &str| get(k).as_str().unwrap_or_default().to_owned();
    let int = |k: &str| get(k).as_i64().unwrap_or(0);
    let float = |k: &str| get(k).as_f64().unwrap_or(0.0) as f32;
    let secs = |k: &str| Duration::from_secs_f64(get(k).as_f64().unwrap_or(0.0));
    let boolean = |k: &str| get(k).as_bool().unwrap_or(false);
    let log = text("log_path");
    let paths = |k: &str| -> Vec<PathBuf> {
        get(k)
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|p| p.as_str())
                    .map(PathBuf::from)
                    .collect()
            })
            .unwrap_or_default()
    };
    Ok(Settings {
        skills: paths("skills"),
        plugins: paths("plugins"),
        workspace: Some(text("workspace"))
            .filter(|w| !w.is_empty())
            .map(PathBuf::from),
        mode: if text("mode") == "auto" {
            Mode::Auto
        } else {
            Mode::OnDemand
        },
        top_k: int("top_k") as usize,
        token_budget: Some(int("token_budget") as usize).filter(|b| *b > 0),
        deadline_ms: int("deadline_ms") as u64,
        refresh_ms: int("refresh_ms") as u64,
        heading: text("heading"),
        search_answer: Detail::parse(&text("search_answer")).unwrap_or_default(),
        host_config: match text("host_config").as_str() {
            "" => HostConfig::Default,
            "off" => HostConfig::Off,
            p => HostConfig::File(PathBuf::from(p)),
        },
        placeholders: boolean("resolve_placeholders").then(|| {
            let dir = |k: &str| Some(text(k)).filter(|d| !d.is_empty()).map(PathBuf::from);
            PathFacts {
                output_dir: dir("output_dir"),
                home_dir: dir("home_dir"),
                state_dir: dir("state_dir"),
            }
        }),
        log_path: match log.as_str() {
            "off" => None,
            "" => Some(PathBuf::new()),
            p => Some(PathBuf::from(p)),
        },
        log_max_bytes: int("log_max_bytes") as u64,
        name_weight: float("name_weight"),
        description_weight: float("description_weight"),
        body_weight: float("body_weight"),
        retriever: Retriever::parse(&text("retriever")).unwrap_or_default(),
        embedding_precision: Precision::parse(&text("embedding_precision")).unwrap_or_default(),
        embedding_model_dir: Some(text("embedding_model_dir"))
            .filter(|w| !w.is_empty())
            .map(PathBuf::from),
        rrf_k: float("rrf_k"),
        lexical_weight: float("lexical_weight"),
        semantic_weight: float("semantic_weight"),
        hub_endpoint: text("hub_endpoint"),
        hub_api_key: Secret::new(text("hub_api_key")),
        hub_timeout_s: get("hub_timeout_s").as_f64().unwrap_or(0.0),
        hub_download_timeout_s: get("hub_download_timeout_s").as_f64().unwrap_or(0.0),
        hub_min_safety: get("hub_min_safety").as_f64().unwrap_or(0.0),
        weight_hub: float("weight_hub"),
        clawhub_endpoint: text("clawhub_endpoint"),
        skillhub_cn_endpoint: text("skillhub_cn_endpoint"),
        weight_clawhub: float("weight_clawhub"),
        weight_skillhub_cn: float("weight_skillhub_cn"),
        marketplace_timeout_s: get("marketplace_timeout_s").as_f64().unwrap_or(0.0),
        marketplace_download_timeout_s: get("marketplace_download_timeout_s")
            .as_f64()
            .unwrap_or(0.0),
        per_source_max: int("per_source_max") as usize,
        llm: ModelSettings {
            model: text("model").trim().to_owned(),
            base_url: text("model_base_url").trim().to_owned(),
            api_key: Secret::new(text("model_api_key").trim()),
            timeout: secs("model_timeout_s"),
        },
        rewrite: boolean("rewrite"),
        rewrite_timeout: secs("rewrite_timeout_s"),
        gate: get("gate").as_bool(),
        gate_pool: int("gate_pool") as usize,
        max_select: int("max_select") as usize,
        gate_timeout: secs("gate_timeout_s"),
        available_tools: paths("available_tools")
            .into_iter()
            .map(|p| p.to_string_lossy().trim().to_owned())
            .filter(|t| !t.is_empty())
            .collect(),
        gate_log_path: Some(text("gate_log_path"))
            .filter(|p| !p.is_empty())
            .map(PathBuf::from),
        embedding: EmbeddingSettings {
            base_url: text("embedding_base_url").trim().to_owned(),
            model: text("embedding_model").trim().to_owned(),
            api_key: Secret::new(text("embedding_api_key").trim()),
            dim: Some(int("embedding_dim") as usize).filter(|d| *d > 0),
            batch: int("embedding_batch") as usize,
            timeout: secs("embedding_timeout_s"),
        },
        effective: KEYS
            .iter()
            .map(|d| {
                let (v, s) = values
                    .remove(d.name)
                    .unwrap_or((Value::Null, Source::Default));
                let v = match (d.kind, v) {
                    (Kind::Secret, Value::String(text)) => {
                        Value::String(Secret::new(text).shown().to_owned())
                    }
                    // An endpoint may carry a password (`https://user:pw@host`).
                    (_, Value::String(text)) => {
                        Value::String(crate::secrets::redact_url_userinfo(&text))
                    }
                    (_, v) => v,
                };
                (d.name, v, s)
            })
            .collect(),
    })
}

/// The JSON Schema of the configuration document (what a host manifest embeds).
pub fn schema() -> Value {
    let mut props = serde_json::Map::new();
    for def in KEYS {
        let default: Value = serde_json::from_str(def.default).unwrap_or(Value::Null);
        let mut p = match def.kind {
            Kind::Enum(opts) => json!({"type": "string", "enum": opts}),
            Kind::Int { min, max } => json!({"type": "integer", "minimum": min, "maximum": max}),
            Kind::Float { min, max } => json!({"type": "number", "minimum": min, "maximum": max}),
            Kind::Str | Kind::Path => json!({"type": "string"}),
            Kind::Url => json!({"type": "string", "pattern": "^(https?://\\S+)?$"}),
            Kind::Urls => {
                json!({"type": "string", "pattern": "^(https?://[^\\s,]+(\\s*,\\s*https?://[^\\s,]+)*)?$"})
            }
            Kind::Secret => json!({"type": "string", "writeOnly": true}),
            Kind::Bool => json!({"type": "boolean"}),
            Kind::AutoBool => json!({"type": ["boolean", "string"], "enum": [true, false, "auto"]}),
            Kind::Paths => json!({"type": "array", "items": {"type": "string"}}),
        };
        p["default"] = default;
        p["description"] = Value::String(format!("{} Environment: {}.", def.doc, def.env));
        props.insert(def.name.to_owned(), p);
    }
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "skillsearch configuration",
        "type": "object",
        "additionalProperties": false,
        "properties": props,
    })
}

/// A ranking method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Retriever {
    Lexical,
    Semantic,
    #[default]
    Hybrid,
}

impl Retriever {
    pub const ALL: [&str; 3] = ["lexical", "semantic", "hybrid"];

    pub fn parse(s: &str) -> Option<Retriever> {
        match s {
            "lexical" => Some(Retriever::Lexical),
            "semantic" => Some(Retriever::Semantic),
            "hybrid" => Some(Retriever::Hybrid),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Retriever::Lexical => "lexical",
            Retriever::Semantic => "semantic",
            Retriever::Hybrid => "hybrid",
        }
    }
}

/// How a local sentence model's arithmetic runs (`embedding_precision`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// Int8 where the CPU has AVX-512 VNNI, f32 elsewhere.
    Auto,
    /// f32 throughout.
    #[default]
    F32,
    /// Int8 linear layers; an error where the CPU cannot run them.
    Int8,
}

impl Precision {
    pub const ALL: [&str; 3] = ["auto", "f32", "int8"];

    pub fn parse(s: &str) -> Option<Precision> {
        match s {
            "auto" => Some(Precision::Auto),
            "f32" => Some(Precision::F32),
            "int8" => Some(Precision::Int8),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> Layers {
        Layers {
            file: Some((PathBuf::from("/cfg/config.toml"), text.to_owned())),
            ..Layers::default()
        }
    }

    #[test]
    fn defaults_and_layering_with_sources() {
        let s = resolve(&Layers::default()).unwrap();
        assert_eq!(
            (s.mode, s.top_k, s.token_budget, s.deadline_ms),
            (Mode::OnDemand, 2, Some(8000), 8000)
        );
        assert_eq!(s.heading, "# Skills");
        let mut l = file("mode = \"auto\"\ntop_k = 4\nskills = [\"/a\", \"/b\"]\n");
        l.env = vec![
            ("SKILLSEARCH_TOP_K".into(), "6".into()),
            ("PATH".into(), "/bin".into()),
        ];
        l.flags = vec![("top_k".into(), "9".into())];
        let s = resolve(&l).unwrap();
        assert_eq!(s.mode, Mode::Auto);
        assert_eq!(s.top_k, 9);
        assert_eq!(s.skills, [PathBuf::from("/a"), PathBuf::from("/b")]);
        let src = |k: &str| s.effective.iter().find(|e| e.0 == k).unwrap().2.clone();
        assert_eq!(src("mode"), Source::File("/cfg/config.toml".into()));
        assert_eq!(src("top_k"), Source::Flag("top-k".into()));
        assert_eq!(src("heading"), Source::Default);
        let l = Layers {
            env: vec![("SKILLSEARCH_SKILLS_DIRS".into(), "/x:/y::".into())],
            ..Layers::default()
        };
        assert_eq!(
            resolve(&l).unwrap().skills,
            [PathBuf::from("/x"), PathBuf::from("/y")]
        );
    }

    #[test]
    fn misspelled_value_and_unknown_key_are_errors_that_name_them() {
        let e = resolve(&file("mode = \"atuo\"")).unwrap_err();
        assert_eq!(e.key, "mode");
        assert_eq!(
            e.message,
            "config key `mode` (/cfg/config.toml): `atuo` is not one of `on_demand`, `auto`; did you mean `auto`?"
        );
        let e = resolve(&file("topk = 3")).unwrap_err();
        assert!(
            e.message.starts_with(
                "unknown config key `topk` in /cfg/config.toml; did you mean `top_k`?"
            ),
            "{}",
            e.message
        );
        let e = resolve(&Layers {
            env: vec![("SKILLSEARCH_MODE".into(), "AUTO".into())],
            ..Layers::default()
        })
        .unwrap_err();
        assert!(
            e.message.contains("environment SKILLSEARCH_MODE"),
            "{}",
            e.message
        );
        let e = resolve(&Layers {
            env: vec![("SKILLSEARCH_TOPK".into(), "3".into())],
            ..Layers::default()
        })
        .unwrap_err();
        assert!(
            e.message.contains("did you mean `SKILLSEARCH_TOP_K`?"),
            "{}",
            e.message
        );
        assert!(
            resolve(&file("top_k = 0"))
                .unwrap_err()
                .message
                .contains("from 1 to 50")
        );
        assert!(
            resolve(&file("top_k = \"3\"")).is_err(),
            "a TOML string is not a number"
        );
        assert!(resolve(&file("skills = \"/a\"")).is_err());
        assert!(
            resolve(&file("mode = "))
                .unwrap_err()
                .message
                .contains("not valid TOML")
        );
    }

    #[test]
    fn hub_keys_default_off_and_the_key_is_never_shown() {
        let s = resolve(&Layers::default()).unwrap();
        assert_eq!(s.hub_endpoint, "");
        assert!(s.hub_api_key.is_empty());
        assert_eq!(
            (s.hub_timeout_s, s.hub_download_timeout_s, s.hub_min_safety),
            (2.0, 30.0, 0.7)
        );
        assert_eq!((s.weight_hub, s.per_source_max), (0.85, 2));
        let mut l = file("hub_endpoint = \"https://hub.example/\"\nhub_api_key = \"sk-FILE\"\n");
        l.env = vec![("SKILLSEARCH_HUB_API_KEY".into(), "sk-ENV-123".into())];
        let s = resolve(&l).unwrap();
        assert_eq!(
            s.hub_endpoint, "https://hub.example",
            "trailing slash dropped"
        );
        assert_eq!(s.hub_api_key.expose(), "sk-ENV-123");
        let (_, v, src) = s.effective.iter().find(|e| e.0 == "hub_api_key").unwrap();
        assert_eq!(v, &json!(REDACTED));
        assert_eq!(src, &Source::Env("SKILLSEARCH_HUB_API_KEY".into()));
        let shown = format!(
            "{s:?} {} {}",
            serde_json::to_string(&s).unwrap(),
            s.hub_api_key
        );
        assert!(!shown.contains("sk-ENV-123"), "{shown}");
        assert!(shown.contains(REDACTED));
        // A bad value names the key but not the secret.
        let e = resolve(&file("hub_api_key = 12345")).unwrap_err();
        assert_eq!(e.key, "hub_api_key");
        assert!(!e.message.contains("12345"), "{}", e.message);
        assert!(e.message.contains("is not a string"), "{}", e.message);
    }

    #[test]
    fn hub_values_are_checked() {
        for bad in [
            "hub_endpoint = \"ftp://x\"",
            "hub_endpoint = \"https://a.example, ftp://b\"",
            "hub_endpoint = \"https://a.example,,https://b.example\"",
            "hub_endpoint = \"skillhub.evermind.ai\"",
            "hub_endpoint = \"https://\"",
            "hub_min_safety = 1.5",
            "hub_timeout_s = 0",
            "per_source_max = 0",
            "weight_hub = -1.0",
        ] {
            let e = resolve(&file(bad)).unwrap_err();
            assert!(bad.starts_with(&e.key), "{bad}: {}", e.message);
        }
        let e = resolve(&Layers {
            env: vec![("SKILLSEARCH_HUB_ENDPOINT".into(), "hub.local".into())],
            ..Layers::default()
        })
        .unwrap_err();
        assert_eq!(
            e.message,
            "config key `hub_endpoint` (environment SKILLSEARCH_HUB_ENDPOINT): `hub.local` is not an http:// or https:// URL (or several, separated by commas), or empty"
        );
        for def in KEYS {
            assert_eq!(
                def.env,
                format!("SKILLSEARCH_{}", def.name.to_uppercase())
                    .replace("SKILLSEARCH_SKILLS", "SKILLSEARCH_SKILLS_DIRS")
                    .replace("SKILLSEARCH_PLUGINS", "SKILLSEARCH_PLUGINS_DIRS")
            );
        }
        let s = resolve(&file(
            "hub_endpoint = \" https://a.example/ , http://10.0.0.2:7078\"",
        ))
        .unwrap();
        assert_eq!(s.hub_endpoint, "https://a.example,http://10.0.0.2:7078");
        let s = resolve(&file("hub_endpoint = \"  \"\nhub_timeout_s = 0.5")).unwrap();
        assert_eq!((s.hub_endpoint.as_str(), s.hub_timeout_s), ("", 0.5));
    }

    #[test]
    fn schema_and_reader_agree_both_ways() {
        let schema = schema();
        let props = schema["properties"].as_object().unwrap();
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(props.len(), KEYS.len());
        // Every schema default is accepted by the reader, from a file.
        let mut doc = String::new();
        for (k, p) in props {
            let d = &p["default"];
            let v: toml::Value = serde_json::from_value(d.clone()).unwrap();
            doc.push_str(&format!("{k} = {v}\n"));
        }
        resolve(&file(&doc)).unwrap();
        // Every enum value in the schema is accepted, and a value outside it is not.
        for m in props["mode"]["enum"].as_array().unwrap() {
            resolve(&file(&format!("mode = {m}"))).unwrap();
        }
        // Every key the reader knows is in the schema.
        for def in KEYS {
            assert!(props.contains_key(def.name), "{}", def.name);
        }
    }

    #[test]
    fn model_gate_and_embedding_keys() {
        let s = resolve(&Layers::default()).unwrap();
        assert!(!s.llm.is_configured());
        assert!(s.rewrite && s.gate.is_none());
        assert_eq!((s.gate_pool, s.max_select), (10, 2));
        assert_eq!(
            (s.rewrite_timeout, s.gate_timeout, s.llm.timeout),
            (
                Duration::from_secs(5),
                Duration::from_secs(20),
                Duration::from_secs(30)
            )
        );
        assert_eq!((s.embedding.dim, s.embedding.batch), (None, 64));
        assert!(!s.rewrite_enabled() && !s.gate_enabled(true));
        let mut l = file(
            "model = \"m\"\nmodel_base_url = \"http://127.0.0.1:1/v1\"\nrewrite = false\ngate = \"auto\"\nembedding_dim = 384\ngate_log_path = \"/tmp/g.jsonl\"\n",
        );
        l.env = vec![
            ("SKILLSEARCH_MODEL_API_KEY".into(), "sk-secret".into()),
            ("SKILLSEARCH_EMBEDDING_API_KEY".into(), "sk-emb".into()),
            ("SKILLSEARCH_GATE".into(), "on".into()),
            ("SKILLSEARCH_GATE_TIMEOUT_S".into(), "2.5".into()),
        ];
        let s = resolve(&l).unwrap();
        assert_eq!(s.llm.api_key.expose(), "sk-secret");
        assert_eq!(s.embedding.api_key.expose(), "sk-emb");
        assert_eq!(s.gate, Some(true));
        assert!(!s.rewrite_enabled() && s.gate_enabled(false));
        assert_eq!(s.gate_timeout, Duration::from_millis(2500));
        assert_eq!(s.embedding.dim, Some(384));
        assert_eq!(s.gate_log_path, Some(PathBuf::from("/tmp/g.jsonl")));
        // `config show` (effective), Debug and Serialize never carry a key.
        let shown = format!(
            "{:?} {:?} {}",
            s.effective,
            s,
            serde_json::to_string(&s).unwrap()
        );
        assert!(
            !shown.contains("sk-secret") && !shown.contains("sk-emb"),
            "{shown}"
        );
        let v = |k: &str| s.effective.iter().find(|e| e.0 == k).unwrap().1.clone();
        assert_eq!(v("model_api_key"), json!(REDACTED));
        assert_eq!(v("gate"), json!(true));
        // gate: true/false/auto from a file; anything else names the accepted values.
        assert_eq!(resolve(&file("gate = false")).unwrap().gate, Some(false));
        assert_eq!(resolve(&file("gate = \"AUTO\"")).unwrap().gate, None);
        let e = resolve(&file("gate = \"maybe\"")).unwrap_err();
        assert_eq!(
            e.message,
            "config key `gate` (/cfg/config.toml): `maybe` is not `true`, `false` or `auto`"
        );
        let e = resolve(&file("rewrite = \"yes\"")).unwrap_err();
        assert!(
            e.message.contains("`yes` is not `true` or `false`"),
            "{}",
            e.message
        );
        let e = resolve(&Layers {
            env: vec![("SKILLSEARCH_REWRITE".into(), "perhaps".into())],
            ..Layers::default()
        })
        .unwrap_err();
        assert!(e.message.contains("SKILLSEARCH_REWRITE"), "{}", e.message);
        // A bad secret is reported without its value.
        let e = resolve(&file("model_api_key = 42")).unwrap_err();
        assert!(e.message.contains("is not a string"), "{}", e.message);
        assert!(!e.message.contains("42"), "{}", e.message);
        let e = resolve(&file("max_select = 0")).unwrap_err();
        assert!(e.message.contains("from 1 to 50"), "{}", e.message);
    }

    #[test]
    fn the_model_dir_has_a_short_environment_spelling_and_an_embedding_section() {
        let s = resolve(&Layers {
            env: vec![("SKILLSEARCH_MODEL_DIR".into(), "/m/minilm".into())],
            ..Layers::default()
        })
        .unwrap();
        assert_eq!(s.embedding_model_dir, Some(PathBuf::from("/m/minilm")));
        let s = resolve(&file(
            "retriever = \"semantic\"\n[embedding]\nmodel_dir = \"/x\"\n",
        ))
        .unwrap();
        assert_eq!(s.embedding_model_dir, Some(PathBuf::from("/x")));
        assert_eq!(s.retriever, Retriever::Semantic);
        let e = resolve(&file("retriever = \"hybird\"")).unwrap_err();
        assert!(e.message.contains("did you mean `hybrid`"), "{}", e.message);
        let e = resolve(&file("[embedding]\nmodel_dri = \"/x\"\n")).unwrap_err();
        assert!(e.message.contains("embedding_model_dir"), "{}", e.message);
    }

    #[test]
    fn config_show_hides_the_password_in_an_endpoint_url() {
        let s = resolve(&Layers {
            env: vec![(
                "SKILLSEARCH_HUB_ENDPOINT".into(),
                "https://team:hunter22@hub.internal/api".into(),
            )],
            ..Default::default()
        })
        .unwrap();
        let (_, v, _) = s.effective.iter().find(|e| e.0 == "hub_endpoint").unwrap();
        assert_eq!(v, &json!("https://team:[redacted]@hub.internal/api"));
        // The setting itself keeps it, for the one place that connects.
        assert_eq!(s.hub_endpoint, "https://team:hunter22@hub.internal/api");
    }
}
