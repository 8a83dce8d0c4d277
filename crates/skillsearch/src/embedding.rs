//! When the embedder loads, and keeping the open indexes' vectors complete. Which embedder the
//! settings select, and loading it, is the engine's (`skillsearch_core::turn::embedder`).
//!
//! Short-lived commands (`search`, `eval`, `index`) load it, embed whatever is missing
//! with a progress bar, and answer. Long-lived ones (`mcp`, `serve`) answer lexically at once
//! while a background thread loads it (trying a failing endpoint again with a backoff) and
//! embeds, then switch to hybrid by themselves. The per-turn hook never loads an embedder: a
//! fresh process would pay ~0.2–0.5 s for the local model and could not embed the corpus anyway.

use anyhow::Result;
use skillsearch_core::SkillIndex;
use skillsearch_core::config::Settings;
use skillsearch_core::retrieve::Retriever;
use skillsearch_core::retrieve::embed::{self, LocalEmbedder};
use skillsearch_core::retrieve::semantic::{Semantic, SemanticSlot, SharedVectors};
use skillsearch_core::turn::embedder::{batch, load};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// Why a short-lived command's retrieval stays lexical.
#[derive(Debug, Clone)]
pub(crate) struct Lexical {
    pub note: String,
    /// No model is installed at all (nothing failed).
    pub missing_model: bool,
}

/// Where the one-time "no sentence model" line is remembered.
const MODEL_NOTICE: &str = ".no-model-notice-shown";

impl Lexical {
    /// Logs why retrieval is lexical. A missing model is said once per home, in one line
    /// (`models show` says it again); a model that failed is a warning every time.
    pub(crate) fn warn(&self, home: &Path) {
        if !self.missing_model {
            tracing::warn!("{}", self.note);
            return;
        }
        let marker = skillsearch_core::retrieve::embed::models_dir(home).join(MODEL_NOTICE);
        if marker.exists() {
            tracing::debug!("{}", self.note);
            return;
        }
        tracing::warn!(
            "no sentence model installed, so ranking is lexical; `skillsearch models add DIR` installs one, the source tree's scripts/install-model fetches all-MiniLM-L6-v2 (said once; `skillsearch models show` says it again)"
        );
        self.mark_said(home);
    }

    /// Remembers that the user was told a model is missing (by `search`, or by `index`,
    /// which prints the whole note), so later searches stay quiet about it. A home that
    /// cannot be written keeps saying it.
    pub(crate) fn mark_said(&self, home: &Path) {
        if !self.missing_model {
            return;
        }
        let marker = skillsearch_core::retrieve::embed::models_dir(home).join(MODEL_NOTICE);
        if marker.exists() {
            return;
        }
        if let Some(dir) = marker.parent()
            && std::fs::create_dir_all(dir).is_ok()
        {
            let _ = std::fs::write(&marker, b"");
        }
    }
}

/// For a short-lived command: loads the embedder, embeds every skill of `idx` that has no
/// vector (a bar on a terminal), and attaches it to `slot`. Returns why retrieval stays
/// lexical, if it does; the slot keeps the note too, so the search's own notes say why.
pub(crate) fn attach_now(
    home: &Path,
    s: &Settings,
    idx: &SkillIndex,
    slot: &SemanticSlot,
) -> Option<Lexical> {
    let loaded = load(home, s);
    let Some(sem) = loaded.semantic else {
        slot.set_off(loaded.note.clone());
        return loaded.note.map(|note| Lexical {
            note,
            missing_model: loaded.missing_model,
        });
    };
    let bar = EmbedBar::new();
    let stop = AtomicBool::new(false);
    let done = std::sync::atomic::AtomicUsize::new(0);
    let r = sem.embed_pending(idx, batch(s), &stop, &|n, todo| {
        done.store(n, std::sync::atomic::Ordering::Relaxed);
        bar.update(n, todo)
    });
    bar.finish(done.into_inner());
    if let Err(e) = r {
        let note = format!(
            "embedding the skills with `{}` failed: {e}; retrieval is lexical",
            sem.model()
        );
        slot.set_off(Some(note.clone()));
        return Some(Lexical {
            note,
            missing_model: false,
        });
    }
    slot.attach(sem);
    loaded.note.map(|note| Lexical {
        note,
        missing_model: false,
    })
}

/// Embedding progress on stderr: a bar with an ETA on a terminal; elsewhere (a log, CI) a line
/// every [`EmbedBar::EVERY`] with the count, the rate and the time left, and one when it ends
/// (only when it took that long: a quick embedding stays quiet).
struct EmbedBar {
    bar: Option<indicatif::ProgressBar>,
    started: std::time::Instant,
    /// When the last line was logged, and the count then (no bar only).
    said: Mutex<(std::time::Instant, usize)>,
}

impl EmbedBar {
    const EVERY: Duration = Duration::from_secs(10);

    fn new() -> Self {
        use std::io::IsTerminal;
        let now = std::time::Instant::now();
        EmbedBar {
            bar: std::io::stderr().is_terminal().then(|| {
                let bar = indicatif::ProgressBar::new(0);
                bar.set_style(
                    indicatif::ProgressStyle::with_template(
                        "embedding {bar:30} {pos}/{len} skills, {per_sec} ({eta} left)",
                    )
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                );
                bar
            }),
            started: now,
            said: Mutex::new((now, 0)),
        }
    }

    fn update(&self, done: usize, todo: usize) {
        if let Some(b) = &self.bar {
            b.set_length(todo as u64);
            b.set_position(done as u64);
            return;
        }
        let mut said = self.said.lock().unwrap_or_else(|e| e.into_inner());
        if said.0.elapsed() < Self::EVERY || done == todo {
            return;
        }
        *said = (std::time::Instant::now(), done);
        let rate = done as f64 / self.started.elapsed().as_secs_f64().max(1e-3);
        let left = (todo - done.min(todo)) as f64 / rate.max(1e-9);
        eprintln!(
            "skillsearch: embedding {done}/{todo} skills, {rate:.1} skills/s, about {} left",
            human_secs(left)
        );
    }

    fn finish(&self, done: usize) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
        let secs = self.started.elapsed().as_secs_f64();
        if done > 0 && secs >= Self::EVERY.as_secs_f64() {
            eprintln!(
                "skillsearch: embedded {done} skills in {} ({:.1} skills/s)",
                human_secs(secs),
                done as f64 / secs.max(1e-3)
            );
        }
    }
}

/// `75` → "1m15s", `8` → "8s".
fn human_secs(secs: f64) -> String {
    let s = secs.round() as u64;
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
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
        Self::start_with(home, s, slot, Backoff::DEFAULT, Vec::new())
    }

    /// [`Background::start`], the embedder asking `shared` for skills' vectors before
    /// embedding them, and writing back what it embeds (`hub serve`: its PostgreSQL store, a
    /// peer hub).
    pub(crate) fn start_sharing(
        home: &Path,
        s: &Settings,
        slot: Arc<SemanticSlot>,
        shared: Vec<Arc<dyn SharedVectors>>,
    ) -> Arc<Background> {
        Self::start_with(home, s, slot, Backoff::DEFAULT, shared)
    }

    pub(crate) fn start_with(
        home: &Path,
        s: &Settings,
        slot: Arc<SemanticSlot>,
        backoff: Backoff,
        shared: Vec<Arc<dyn SharedVectors>>,
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
                    if let Some(sem) = &loaded.semantic {
                        sem.share_with(shared.clone());
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
                    match sem.fill_pending(&idx, batch, &stop, &|_, _| {}) {
                        Ok(f) => tracing::info!(
                            index = %idx.dir().display(),
                            embedded = f.embedded,
                            fetched = f.fetched,
                            secs = started.elapsed().as_secs_f64(),
                            per_s = f.embedded as f64 / started.elapsed().as_secs_f64().max(1e-9),
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

    #[test]
    fn durations_read_as_hours_minutes_seconds() {
        assert_eq!(human_secs(8.4), "8s");
        assert_eq!(human_secs(75.0), "1m15s");
        assert_eq!(human_secs(3600.0 + 125.0), "1h02m");
    }
    use skillsearch_core::index::{IndexConfig, Refresh};
    use skillsearch_core::{EligibilityEnv, Roots, SearchOptions};
    use skillsearch_testkit::{Fake, Reply, bow_reply, dead_openai_base, write_skill};
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
    fn a_short_lived_search_says_why_it_stays_lexical() {
        let home = tempfile::tempdir().unwrap();
        let base = dead_openai_base();
        let idx = index(&home.path().join("home"), &home.path().join("skills"));
        let slot = SemanticSlot::default();
        let note = attach_now(home.path(), &settings(&base), &idx, &slot)
            .unwrap()
            .note;
        assert!(
            note.starts_with(&format!("embeddings endpoint {base}/embeddings")),
            "{note}"
        );
        let r = search(&idx, &slot);
        assert_eq!(r.retrievers, ["lexical"]);
        assert_eq!(r.hits[0].id, "transcribe");
        assert_eq!(r.notes, [format!("semantic retrieval is off: {note}")]);
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
        let bg = Background::start_with(
            &home,
            &settings(&fake.base),
            slot.clone(),
            backoff,
            Vec::new(),
        );
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
        let bg = Background::start_with(&home, &settings(&base), slot.clone(), backoff, Vec::new());
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
