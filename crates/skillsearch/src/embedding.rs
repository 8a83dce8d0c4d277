//! Loading the embedder and keeping the open indexes' vectors complete.
//!
//! The embedder is the remote OpenAI-compatible endpoint when `embedding_base_url` is set
//! (probed once for its dimension unless `embedding_dim` gives it), otherwise the local sentence
//! model. Short-lived commands (`search`, `eval`, `index`) load it, embed whatever is missing
//! with a progress bar, and answer. Long-lived ones (`mcp`, `serve`) answer lexically at once
//! while a background thread loads it (trying a failing endpoint again with a backoff) and
//! embeds, then switch to hybrid by themselves. The per-turn hook never loads an embedder: a
//! fresh process would pay ~0.2–0.5 s for the local model and could not embed the corpus anyway.

use anyhow::Result;
use skillsearch_core::SkillIndex;
use skillsearch_core::config::Settings;
use skillsearch_core::remote::llm::RemoteEmbedder;
use skillsearch_core::retrieve::Retriever;
use skillsearch_core::retrieve::embed::{self, Embedder, LocalEmbedder};
use skillsearch_core::retrieve::semantic::{Semantic, SemanticSlot};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// Texts embedded per model call (the batch that ran fastest on 2 cores; see docs/performance.md, "Semantic speed").
pub(crate) const BATCH: usize = 16;

/// What [`load`] found.
#[derive(Default)]
pub(crate) struct Loaded {
    pub(crate) semantic: Option<Arc<Semantic>>,
    /// Why retrieval stays lexical.
    pub(crate) note: Option<String>,
    /// The failure may pass (an embeddings endpoint down, slow or misbehaving): a long-lived
    /// process tries again later.
    pub(crate) retry: bool,
}

impl Loaded {
    fn off(note: String, retry: bool) -> Loaded {
        Loaded {
            semantic: None,
            note: Some(note),
            retry,
        }
    }
}

/// The embedder the settings select, in words (for `models show`): the remote endpoint and
/// model when `embedding_base_url` is set, otherwise the local model directory. `None`: no
/// model installed.
pub(crate) fn describe(home: &Path, s: &Settings) -> Result<Option<String>> {
    let e = &s.embedding;
    if !e.base_url.trim().is_empty() {
        let emb = RemoteEmbedder::new(e)?;
        let dim = match e.dim {
            Some(d) => format!("dimension {d}"),
            None => "dimension learned from the first reply".into(),
        };
        return Ok(Some(format!(
            "remote: {} model `{}` ({dim}; vectors as `{}`)",
            emb.url(),
            emb.model(),
            emb.id()
        )));
    }
    Ok(
        embed::find_model_dir(home, s.embedding_model_dir.as_deref())?
            .map(|d| format!("local: {}", d.display())),
    )
}

/// The deadline of a query's embedding: `embedding_timeout_s`, and at most half the turn's
/// `deadline_ms`, so a slow endpoint still leaves the turn time to answer lexically.
pub(crate) fn query_timeout(s: &Settings) -> Duration {
    s.embedding
        .timeout
        .min(Duration::from_millis(s.deadline_ms / 2))
}

/// The embedder the settings ask for: the remote endpoint when `embedding_base_url` is set
/// (probed for its dimension unless `embedding_dim` gives it), otherwise the local sentence
/// model. No semantic retriever, with a note, when retrieval stays lexical: lexical was asked
/// for, no model is installed, or the endpoint failed its probe.
pub(crate) fn load(home: &Path, s: &Settings) -> Loaded {
    if s.retriever == Retriever::Lexical {
        return Loaded::default();
    }
    if !s.embedding.base_url.trim().is_empty() {
        return load_remote(home, s);
    }
    let dir = match embed::find_model_dir(home, s.embedding_model_dir.as_deref()) {
        Ok(Some(dir)) => dir,
        Ok(None) => {
            return Loaded::off(
                format!(
                    "no sentence model: retrieval is lexical. Install one with `skillsearch models add DIR` (a Hugging Face model directory such as all-MiniLM-L6-v2), set embedding_model_dir / SKILLSEARCH_MODEL_DIR, or set embedding_base_url for an OpenAI-compatible embeddings endpoint; looked in {}",
                    embed::models_dir(home).display()
                ),
                false,
            );
        }
        Err(e) => return Loaded::off(format!("{e}; retrieval is lexical"), false),
    };
    let started = std::time::Instant::now();
    match LocalEmbedder::load(&dir).and_then(|m| Semantic::new(home, Arc::new(m))) {
        Ok(sem) => {
            tracing::info!(model = %dir.display(), ms = started.elapsed().as_millis() as u64, "sentence model loaded");
            Loaded {
                semantic: Some(Arc::new(sem)),
                ..Loaded::default()
            }
        }
        Err(e) => Loaded::off(format!("{e}; retrieval is lexical"), false),
    }
}

fn load_remote(home: &Path, s: &Settings) -> Loaded {
    let emb = match RemoteEmbedder::new(&s.embedding) {
        Ok(e) => e.with_query_timeout(query_timeout(s)),
        Err(e) => return Loaded::off(format!("{e}; retrieval is lexical"), false),
    };
    let started = std::time::Instant::now();
    if let Err(e) = emb.probe() {
        return Loaded::off(
            format!(
                "embeddings endpoint {} (model `{}`) failed: {e}; retrieval is lexical",
                emb.url(),
                emb.model()
            ),
            true,
        );
    }
    let url = emb.url().to_owned();
    match Semantic::new(home, Arc::new(emb)) {
        Ok(sem) => {
            tracing::info!(endpoint = %url, model = sem.model(), ms = started.elapsed().as_millis() as u64, "remote embedder ready");
            Loaded {
                semantic: Some(Arc::new(sem)),
                ..Loaded::default()
            }
        }
        Err(e) => Loaded::off(format!("{e}; retrieval is lexical"), false),
    }
}

/// For a short-lived command: loads the embedder, embeds every skill of `idx` that has no
/// vector (a bar on a terminal), and attaches it to `slot`. Returns a note when retrieval stays
/// lexical; the slot keeps it too, so the search's own notes say why.
pub(crate) fn attach_now(
    home: &Path,
    s: &Settings,
    idx: &SkillIndex,
    slot: &SemanticSlot,
) -> Option<String> {
    let loaded = load(home, s);
    let Some(sem) = loaded.semantic else {
        slot.set_off(loaded.note.clone());
        return loaded.note;
    };
    let bar = EmbedBar::new();
    let stop = AtomicBool::new(false);
    let r = sem.embed_pending(idx, batch(s), &stop, &|done, todo| bar.update(done, todo));
    bar.finish();
    if let Err(e) = r {
        let note = format!(
            "embedding the skills with `{}` failed: {e}; retrieval is lexical",
            sem.model()
        );
        slot.set_off(Some(note.clone()));
        return Some(note);
    }
    slot.attach(sem);
    loaded.note
}

/// A terminal progress bar for embedding (nothing when stderr is not a terminal).
struct EmbedBar(Option<indicatif::ProgressBar>);

impl EmbedBar {
    fn new() -> Self {
        use std::io::IsTerminal;
        EmbedBar(std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(0);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "embedding {bar:30} {pos}/{len} skills ({eta})",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar
        }))
    }

    fn update(&self, done: usize, todo: usize) {
        if let Some(b) = &self.0 {
            b.set_length(todo as u64);
            b.set_position(done as u64);
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.0 {
            b.finish_and_clear();
        }
    }
}

/// Texts per embedder call when filling the store: `embedding_batch` for a remote endpoint
/// (one request each), [`BATCH`] for the local model.
pub(crate) fn batch(s: &Settings) -> usize {
    if s.embedding.base_url.trim().is_empty() {
        BATCH
    } else {
        s.embedding.batch.max(1)
    }
}

/// How long a long-lived process waits before loading the embedder again after a failure that
/// may pass (an endpoint down): `first`, doubling up to `max`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backoff {
    pub(crate) first: Duration,
    pub(crate) max: Duration,
}

impl Backoff {
    pub(crate) const DEFAULT: Backoff = Backoff {
        first: Duration::from_secs(5),
        max: Duration::from_secs(300),
    };
}

/// For a long-lived process: the embedder loads on a background thread and is attached to the
/// engine's slot; the skills of the indexes registered here are embedded, and each gets hybrid
/// retrieval once its vectors are complete. An embeddings endpoint that fails its probe is
/// tried again with a [`Backoff`]; meanwhile retrieval is lexical and every search's notes say
/// why.
pub(crate) struct Background {
    state: Mutex<BgState>,
    slot: Arc<SemanticSlot>,
}

#[derive(Default)]
struct BgState {
    indexes: Vec<Weak<SkillIndex>>,
    /// Why retrieval is lexical: for good (no model, a broken one) or until the next attempt.
    note: Option<String>,
    /// Failed attempts to load the embedder so far.
    attempts: u32,
}

impl Background {
    /// Starts loading the embedder into `slot` (unless the settings ask for lexical retrieval).
    pub(crate) fn start(home: &Path, s: &Settings, slot: Arc<SemanticSlot>) -> Arc<Background> {
        Self::start_with(home, s, slot, Backoff::DEFAULT)
    }

    pub(crate) fn start_with(
        home: &Path,
        s: &Settings,
        slot: Arc<SemanticSlot>,
        backoff: Backoff,
    ) -> Arc<Background> {
        let bg = Arc::new(Background {
            state: Mutex::new(BgState::default()),
            slot,
        });
        if s.retriever == Retriever::Lexical {
            return bg;
        }
        let (home, s, weak) = (home.to_path_buf(), s.clone(), Arc::downgrade(&bg));
        let spawned = std::thread::Builder::new()
            .name("skillsearch-embed".into())
            .spawn(move || {
                let mut wait = backoff.first;
                loop {
                    let loaded = load(&home, &s);
                    let Some(bg) = weak.upgrade() else { return };
                    let note = loaded.note.map(|n| {
                        if loaded.retry {
                            format!("{n} (trying again in {} s)", wait.as_secs_f64())
                        } else {
                            n
                        }
                    });
                    if let Some(n) = &note {
                        tracing::warn!("{n}");
                    }
                    bg.set(loaded.semantic.clone(), note);
                    drop(bg);
                    if let Some(sem) = loaded.semantic {
                        embed_loop(weak, sem, batch(&s));
                        return;
                    }
                    if !loaded.retry {
                        return;
                    }
                    std::thread::sleep(wait);
                    wait = (wait * 2).min(backoff.max);
                }
            });
        if let Err(e) = spawned {
            bg.lock().note = Some(format!("cannot start the embedding thread: {e}"));
        }
        bg
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BgState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records the outcome of one attempt to load the embedder: the slot gets the retriever,
    /// or why searches stay lexical.
    fn set(&self, semantic: Option<Arc<Semantic>>, note: Option<String>) {
        let mut st = self.lock();
        match semantic {
            Some(sem) => self.slot.attach(sem),
            None => {
                st.attempts += 1;
                self.slot.set_off(note.clone());
            }
        }
        st.note = note;
    }

    /// Keeps `idx`'s vectors complete from now on; it ranks semantically once they are.
    pub(crate) fn register(&self, idx: &Arc<SkillIndex>) {
        let mut st = self.lock();
        st.indexes.retain(|w| w.strong_count() > 0);
        st.indexes.push(Arc::downgrade(idx));
    }

    /// The model in use (`null` while loading or when there is none), why retrieval is
    /// lexical if it is, and how many attempts to load the embedder failed.
    pub(crate) fn status(&self) -> serde_json::Value {
        let st = self.lock();
        serde_json::json!({
            "model": self.slot.get().map(|s| s.model().to_owned()),
            "note": st.note,
            "failed_attempts": st.attempts,
        })
    }
}

/// Embeds what is missing in every registered index, then looks again every few hundred
/// milliseconds (a refresh adds skills without vectors). Ends with the process.
fn embed_loop(bg: Weak<Background>, sem: Arc<Semantic>, batch: usize) {
    let stop = AtomicBool::new(false);
    loop {
        let Some(b) = bg.upgrade() else { return };
        let indexes: Vec<Arc<SkillIndex>> = {
            let st = b.lock();
            st.indexes.iter().filter_map(Weak::upgrade).collect()
        };
        drop(b);
        for idx in indexes {
            match sem.coverage(&idx) {
                Ok(c) if c.complete() => {}
                Ok(_) => {
                    let started = std::time::Instant::now();
                    match sem.embed_pending(&idx, batch, &stop, &|_, _| {}) {
                        Ok(n) => tracing::info!(
                            index = %idx.dir().display(),
                            embedded = n,
                            per_s = n as f64 / started.elapsed().as_secs_f64().max(1e-9),
                            "skills embedded"
                        ),
                        Err(e) => {
                            tracing::warn!(index = %idx.dir().display(), error = %e, "embedding failed; retrying later");
                            std::thread::sleep(Duration::from_secs(5));
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot read the vector coverage"),
            }
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// `skillsearch models add DIR`: checks that the model loads and runs, then copies its files
/// into `<home>/models/<name>/` (name: the directory's name unless given).
pub(crate) fn add_model(home: &Path, dir: &Path, name: Option<&str>) -> Result<std::path::PathBuf> {
    use anyhow::Context;
    embed::check_model_dir(dir)?;
    LocalEmbedder::load(dir)
        .with_context(|| format!("{} does not load as a sentence model", dir.display()))?;
    let name = match name {
        Some(n) => n.to_owned(),
        None => std::fs::canonicalize(dir)
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "model".into()),
    };
    if name.contains(['/', '\\']) || name.starts_with('.') {
        anyhow::bail!("model name `{name}` must be a plain directory name");
    }
    let root = embed::models_dir(home);
    let target = root.join(&name);
    std::fs::create_dir_all(&root).with_context(|| format!("cannot create {}", root.display()))?;
    let staging = tempfile::tempdir_in(&root)
        .with_context(|| format!("cannot stage in {}", root.display()))?;
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let entry = entry?;
        let from = entry.path();
        if from.is_file() {
            std::fs::copy(&from, staging.path().join(entry.file_name()))
                .with_context(|| format!("cannot copy {}", from.display()))?;
        }
    }
    if target.exists() {
        std::fs::remove_dir_all(&target)
            .with_context(|| format!("cannot replace {}", target.display()))?;
    }
    let staged = staging.keep();
    std::fs::rename(&staged, &target)
        .with_context(|| format!("cannot move the model into {}", target.display()))?;
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use skillsearch_core::index::{IndexConfig, Refresh};
    use skillsearch_core::{EligibilityEnv, Roots, SearchOptions};
    use skillsearch_testkit::{BOW_DIM, Fake, Reply, bow_reply, dead_openai_base, write_skill};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;

    fn settings(base: &str) -> Settings {
        let mut s = skillsearch_core::config::resolve(&Default::default()).unwrap();
        s.embedding.base_url = base.into();
        s.embedding.model = "emb".into();
        s.embedding.timeout = Duration::from_secs(5);
        s
    }

    fn index(home: &Path, root: &Path) -> Arc<SkillIndex> {
        for (rel, name, desc) in [
            ("transcribe", "transcriber", "Transcribe a voice recording"),
            (
                "sql",
                "sql-helper",
                "Write a SQL query for a database table",
            ),
        ] {
            write_skill(root, rel, name, desc, "body");
        }
        let (idx, _) = SkillIndex::open(
            &Roots::explicit([root]),
            &IndexConfig::new(home),
            Refresh::Always,
            &|_| {},
        )
        .unwrap();
        Arc::new(idx)
    }

    fn search(idx: &SkillIndex, slot: &SemanticSlot) -> skillsearch_core::SearchResult {
        let opts = SearchOptions {
            top_k: 2,
            ..SearchOptions::default()
        };
        idx.search_with(
            "transcribe a voice recording",
            &opts,
            &EligibilityEnv::allow_all(),
            Some(slot),
        )
        .unwrap()
    }

    /// Polls `f` until it holds, for at most 20 s.
    fn eventually(what: &str, f: impl Fn() -> bool) {
        let until = Instant::now() + Duration::from_secs(20);
        while !f() {
            assert!(Instant::now() < until, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn remote_embed_load_selects_the_endpoint_and_probes_its_dimension() {
        let home = tempfile::tempdir().unwrap();
        let fake = Fake::openai(bow_reply);
        let s = settings(&fake.base);
        let loaded = load(home.path(), &s);
        let sem = loaded.semantic.expect("a remote embedder");
        assert_eq!(sem.model(), "remote:emb");
        assert!(loaded.note.is_none());
        assert!(
            sem.store()
                .path()
                .ends_with(format!("vectors/remote_emb-{BOW_DIM}.bin"))
        );
        let reqs = fake.requests();
        assert_eq!(reqs.len(), 1, "one probe");
        assert_eq!(reqs[0].inputs(), ["dimension probe"]);
        // A configured dimension needs no probe.
        let mut s2 = s.clone();
        s2.embedding.dim = Some(BOW_DIM);
        assert!(load(home.path(), &s2).semantic.is_some());
        assert_eq!(fake.requests().len(), 1);
        // Lexical asked for: nothing is loaded, nothing said.
        let mut lex = s.clone();
        lex.retriever = Retriever::Lexical;
        let l = load(home.path(), &lex);
        assert!(l.semantic.is_none() && l.note.is_none());
        // `models show` names the endpoint and the model.
        let what = describe(home.path(), &s).unwrap().unwrap();
        assert_eq!(
            what,
            format!(
                "remote: {}/embeddings model `emb` (dimension learned from the first reply; vectors as `remote:emb`)",
                fake.base
            )
        );
        assert_eq!(batch(&s), 64);
    }

    #[test]
    fn remote_embed_probe_failure_is_a_note_naming_the_endpoint_and_error() {
        let home = tempfile::tempdir().unwrap();
        let base = dead_openai_base();
        let loaded = load(home.path(), &settings(&base));
        assert!(loaded.semantic.is_none());
        assert!(loaded.retry, "an endpoint that is down may come back");
        let note = loaded.note.unwrap();
        assert!(
            note.starts_with(&format!(
                "embeddings endpoint {base}/embeddings (model `emb`) failed: "
            )),
            "{note}"
        );
        let lower = note.to_lowercase();
        assert!(
            lower.contains("refused") || lower.contains("connect"),
            "{note}"
        );
        assert!(note.ends_with("; retrieval is lexical"), "{note}");
        // A missing model key is a configuration error: not retried.
        let mut s = settings(&base);
        s.embedding.model = String::new();
        let loaded = load(home.path(), &s);
        assert!(!loaded.retry);
        assert!(loaded.note.unwrap().contains("embedding_model"));
        // A short-lived command's search says the same in its notes.
        let idx = index(&home.path().join("home"), &home.path().join("skills"));
        let slot = SemanticSlot::default();
        let note = attach_now(home.path(), &settings(&base), &idx, &slot).unwrap();
        let r = search(&idx, &slot);
        assert_eq!(r.retrievers, ["lexical"]);
        assert_eq!(r.hits[0].id, "transcribe");
        assert_eq!(r.notes, [format!("semantic retrieval is off: {note}")]);
        // The query deadline is half the turn's when that is shorter.
        let mut s = settings(&base);
        s.deadline_ms = 2000;
        assert_eq!(query_timeout(&s), Duration::from_secs(1));
        s.deadline_ms = 60_000;
        assert_eq!(query_timeout(&s), Duration::from_secs(5));
    }

    #[test]
    fn remote_embed_background_retries_a_failing_endpoint_then_goes_hybrid() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let idx = index(&home, &tmp.path().join("skills"));
        // The first two probes fail (HTTP 503), then the endpoint works.
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        let fake = Fake::openai(move |r| {
            if seen.fetch_add(1, Ordering::SeqCst) < 2 {
                Reply::Body(503, r#"{"error": "warming up"}"#.into())
            } else {
                bow_reply(r)
            }
        });
        let slot = Arc::new(SemanticSlot::default());
        let backoff = Backoff {
            first: Duration::from_millis(100),
            max: Duration::from_millis(400),
        };
        let bg = Background::start_with(&home, &settings(&fake.base), slot.clone(), backoff);
        bg.register(&idx);
        eventually("the first failed attempt", || {
            bg.status()["failed_attempts"].as_u64() >= Some(1)
        });
        let st = bg.status();
        let note = st["note"].as_str().unwrap_or_default();
        if st["model"].is_null() && !note.is_empty() {
            assert!(
                note.contains(&format!("{}/embeddings", fake.base)),
                "{note}"
            );
            assert!(note.contains("HTTP 503"), "{note}");
            assert!(note.contains("trying again in"), "{note}");
        }
        eventually("hybrid retrieval", || {
            search(&idx, &slot).retrievers == ["lexical", "semantic"]
        });
        let st = bg.status();
        assert_eq!(st["model"], "remote:emb");
        assert_eq!(st["failed_attempts"], 2);
        assert!(st["note"].is_null(), "{st}");
        assert!(search(&idx, &slot).notes.is_empty());
    }

    #[test]
    fn remote_embed_background_keeps_trying_and_says_why_while_down() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let idx = index(&home, &tmp.path().join("skills"));
        let base = dead_openai_base();
        let slot = Arc::new(SemanticSlot::default());
        let backoff = Backoff {
            first: Duration::from_millis(20),
            max: Duration::from_millis(40),
        };
        let bg = Background::start_with(&home, &settings(&base), slot.clone(), backoff);
        bg.register(&idx);
        eventually("three failed attempts", || {
            bg.status()["failed_attempts"].as_u64() >= Some(3)
        });
        let r = search(&idx, &slot);
        assert_eq!(r.retrievers, ["lexical"]);
        assert_eq!(r.hits[0].id, "transcribe");
        let note = r.notes.join(" | ");
        assert!(
            note.starts_with(&format!(
                "semantic retrieval is off: embeddings endpoint {base}/embeddings (model `emb`) failed: "
            )),
            "{note}"
        );
        assert!(note.contains("trying again in"), "{note}");
        // An index registered later is told the same at once.
        let idx2 = index(&tmp.path().join("home2"), &tmp.path().join("skills2"));
        bg.register(&idx2);
        assert!(
            search(&idx2, &slot).notes[0].contains(&base),
            "{:?}",
            search(&idx2, &slot).notes
        );
    }
}
