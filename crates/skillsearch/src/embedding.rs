//! Loading the sentence model and keeping the open indexes' vectors complete.
//!
//! Short-lived commands (`search`, `eval`, `index`) load the model, embed whatever is missing
//! with a progress bar, and answer. Long-lived ones (`mcp`, `serve`) answer lexically at once
//! while a background thread loads the model and embeds, then switch to hybrid by themselves.
//! The per-turn hook never loads the model: a fresh process would pay ~0.2–0.5 s for it.

use anyhow::Result;
use skillsearch_core::SkillIndex;
use skillsearch_core::config::Settings;
use skillsearch_core::embed::{self, LocalEmbedder};
use skillsearch_core::search::Retriever;
use skillsearch_core::semantic::Semantic;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// Texts embedded per model call (the batch that ran fastest on 2 cores; see ARCHITECTURE.md).
pub(crate) const BATCH: usize = 16;

/// The sentence model the settings ask for. `Ok(None)` with a note when retrieval stays
/// lexical: lexical was asked for, or no model is installed.
pub(crate) fn load(home: &Path, s: &Settings) -> (Option<Arc<Semantic>>, Option<String>) {
    if s.retriever == Retriever::Lexical {
        return (None, None);
    }
    let dir = match embed::find_model_dir(home, s.embedding_model_dir.as_deref()) {
        Ok(Some(dir)) => dir,
        Ok(None) => {
            return (
                None,
                Some(format!(
                    "no sentence model: retrieval is lexical. Install one with `skillsearch models add DIR` (a Hugging Face model directory such as all-MiniLM-L6-v2) or set embedding_model_dir / SKILLSEARCH_MODEL_DIR; looked in {}",
                    embed::models_dir(home).display()
                )),
            );
        }
        Err(e) => return (None, Some(format!("{e}; retrieval is lexical"))),
    };
    let started = std::time::Instant::now();
    match LocalEmbedder::load(&dir).and_then(|m| Semantic::new(home, Arc::new(m))) {
        Ok(sem) => {
            tracing::info!(model = %dir.display(), ms = started.elapsed().as_millis() as u64, "sentence model loaded");
            (Some(Arc::new(sem)), None)
        }
        Err(e) => (None, Some(format!("{e}; retrieval is lexical"))),
    }
}

/// For a short-lived command: loads the model, embeds every skill of `idx` that has no vector
/// (a bar on a terminal), and attaches it. Returns a note when retrieval stays lexical.
pub(crate) fn attach_now(home: &Path, s: &Settings, idx: &SkillIndex) -> Option<String> {
    let (sem, note) = load(home, s);
    let Some(sem) = sem else {
        return note;
    };
    let bar = EmbedBar::new();
    let stop = AtomicBool::new(false);
    let r = sem.embed_pending(idx, BATCH, &stop, &|done, todo| bar.update(done, todo));
    bar.finish();
    if let Err(e) = r {
        return Some(format!(
            "embedding the skills failed: {e}; retrieval is lexical"
        ));
    }
    idx.attach_semantic(sem);
    note
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

/// For a long-lived process: the model loads and skills are embedded on a background thread;
/// indexes registered here get hybrid retrieval once their vectors are complete.
pub(crate) struct Background {
    state: Mutex<BgState>,
}

#[derive(Default)]
struct BgState {
    semantic: Option<Arc<Semantic>>,
    indexes: Vec<Weak<SkillIndex>>,
    /// Why retrieval is lexical, when it is for good (no model, a broken one).
    note: Option<String>,
}

impl Background {
    /// Starts loading the model (unless the settings ask for lexical retrieval).
    pub(crate) fn start(home: &Path, s: &Settings) -> Arc<Background> {
        let bg = Arc::new(Background {
            state: Mutex::new(BgState::default()),
        });
        if s.retriever == Retriever::Lexical {
            return bg;
        }
        let (home, s, weak) = (home.to_path_buf(), s.clone(), Arc::downgrade(&bg));
        let spawned = std::thread::Builder::new()
            .name("skillsearch-embed".into())
            .spawn(move || {
                let (sem, note) = load(&home, &s);
                let Some(bg) = weak.upgrade() else { return };
                {
                    let mut st = bg.lock();
                    st.note = note.clone();
                    st.semantic = sem.clone();
                }
                if let Some(n) = note {
                    tracing::warn!("{n}");
                }
                drop(bg);
                if let Some(sem) = sem {
                    embed_loop(weak, sem);
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

    /// Keeps `idx`'s vectors complete from now on, and lets it rank semantically when they are.
    pub(crate) fn register(&self, idx: &Arc<SkillIndex>) {
        let mut st = self.lock();
        st.indexes.retain(|w| w.strong_count() > 0);
        st.indexes.push(Arc::downgrade(idx));
        if let Some(sem) = &st.semantic {
            idx.attach_semantic(sem.clone());
        }
    }

    /// The model in use (`null` while loading or when there is none) and why retrieval is
    /// lexical for good, if it is.
    pub(crate) fn status(&self) -> serde_json::Value {
        let st = self.lock();
        serde_json::json!({
            "model": st.semantic.as_ref().map(|s| s.model().to_owned()),
            "note": st.note,
        })
    }
}

/// Embeds what is missing in every registered index, then looks again every few hundred
/// milliseconds (a refresh adds skills without vectors). Ends with the process.
fn embed_loop(bg: Weak<Background>, sem: Arc<Semantic>) {
    let stop = AtomicBool::new(false);
    loop {
        let Some(b) = bg.upgrade() else { return };
        let indexes: Vec<Arc<SkillIndex>> = {
            let st = b.lock();
            st.indexes.iter().filter_map(Weak::upgrade).collect()
        };
        drop(b);
        for idx in indexes {
            idx.attach_semantic(sem.clone());
            match sem.coverage(&idx) {
                Ok(c) if c.complete() => {}
                Ok(_) => {
                    let started = std::time::Instant::now();
                    match sem.embed_pending(&idx, BATCH, &stop, &|_, _| {}) {
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
