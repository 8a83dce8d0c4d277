//! `semantic`: the semantic and hybrid retrievers on one corpus — embedding throughput per batch
//! size (corpus order and length-sorted), query-embedding latency, the vector scan alone, and
//! warm end-to-end lexical / semantic / hybrid queries, each over queries no earlier phase saw.

use crate::run::{ms, query_set};
use anyhow::{Context, Result, bail};
use serde::Serialize;
use skillsearch_core::eval::percentile;
use skillsearch_core::index::{IndexConfig, Refresh, SkillIndex};
use skillsearch_core::retrieve::embed::{Embedder, LocalEmbedder};
use skillsearch_core::retrieve::semantic::{Semantic, SemanticSlot};
use skillsearch_core::retrieve::{Retriever, SearchOptions};
use skillsearch_core::{EligibilityEnv, Roots, corpus};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

#[derive(clap::Args)]
pub struct SemanticArgs {
    /// The skill corpus (one root)
    #[arg(long, value_name = "DIR")]
    skills: PathBuf,
    /// The sentence model (Hugging Face layout) [default: $SKILLSEARCH_EMBEDDING_MODEL_DIR]
    #[arg(long, value_name = "DIR")]
    model: Option<PathBuf>,
    /// SKILLSEARCH home holding (or receiving) the index and the vectors; kept, so vectors
    /// computed once are reused by later runs
    #[arg(long, value_name = "DIR")]
    home: PathBuf,
    /// Where the skills' vectors come from: `model` embeds every skill that has none yet
    /// (slow: tens of docs/s on 2 cores), `synthetic` stores random unit vectors for them, which
    /// is enough to time the scan and fusion at scale (query vectors always come from the model)
    #[arg(long, value_enum, default_value_t = Vectors::Model)]
    vectors: Vectors,
    /// Unique queries per latency phase
    #[arg(long, default_value_t = 200)]
    queries: usize,
    /// Batch sizes for the throughput phase (0 skips it)
    #[arg(long, value_delimiter = ',', default_value = "1,8,16,32,64")]
    batches: Vec<usize>,
    /// Texts embedded per batch size in the throughput phase
    #[arg(long, default_value_t = 256)]
    sample: usize,
    /// Arithmetic of the model: f32, int8, or auto (int8 where the CPU has AVX-512 VNNI)
    #[arg(long, default_value = "f32", value_parser = ["auto", "f32", "int8"])]
    precision: String,
    /// One JSON object on stdout
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Vectors {
    Model,
    Synthetic,
}

#[derive(Debug, Default, Serialize)]
struct Throughput {
    batch: usize,
    /// Texts in corpus order, each batch padded to its longest.
    docs_per_s: f64,
    /// Texts sorted by length first (what `embed_pending` does).
    sorted_docs_per_s: f64,
}

#[derive(Debug, Default, Serialize)]
struct Report {
    skills: usize,
    model: String,
    threads: usize,
    vectors: String,
    vectors_added: usize,
    vectors_add_ms: f64,
    throughput: Vec<Throughput>,
    query_embed_p50_ms: f64,
    query_embed_p95_ms: f64,
    scan_p50_ms: f64,
    scan_p95_ms: f64,
    lexical_p50_ms: f64,
    lexical_p95_ms: f64,
    semantic_p50_ms: f64,
    semantic_p95_ms: f64,
    hybrid_p50_ms: f64,
    hybrid_p95_ms: f64,
    hybrid_max_ms: f64,
    queries: usize,
}

/// Deterministic pseudo-random unit vector for a key (splitmix64).
fn synthetic_vector(key: u64, dim: usize) -> Vec<f32> {
    let mut s = key;
    let mut v: Vec<f32> = (0..dim)
        .map(|_| {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            (z >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        })
        .collect();
    skillsearch_core::retrieve::embed::l2_normalise(&mut v);
    v
}

/// The model under another id, so synthetic skill vectors go to a store of their own and never
/// pass for the model's in a home that is also used for real.
struct SyntheticStore {
    model: Arc<LocalEmbedder>,
    id: String,
}

impl Embedder for SyntheticStore {
    fn id(&self) -> &str {
        &self.id
    }

    fn dim(&self) -> usize {
        self.model.dim()
    }

    fn embed(&self, texts: &[&str]) -> skillsearch_core::Result<Vec<Vec<f32>>> {
        self.model.embed(texts)
    }

    fn embed_query(&self, text: &str) -> skillsearch_core::Result<Vec<f32>> {
        self.model.embed_query(text)
    }

    fn embed_passages(&self, texts: &[&str]) -> skillsearch_core::Result<Vec<Vec<f32>>> {
        self.model.embed_passages(texts)
    }
}

fn p(v: &[f64], q: f64) -> f64 {
    (percentile(v, q) * 100.0).round() / 100.0
}

pub fn run(args: &SemanticArgs) -> Result<()> {
    let say = |m: &str| eprintln!("bench: {m}");
    let dir = corpus::absolute(&args.skills);
    if !dir.is_dir() {
        bail!("{} is not a directory", dir.display());
    }
    let model_dir = match &args.model {
        Some(m) => m.clone(),
        None => std::env::var_os("SKILLSEARCH_EMBEDDING_MODEL_DIR")
            .map(PathBuf::from)
            .context("no model: pass --model DIR or set SKILLSEARCH_EMBEDDING_MODEL_DIR")?,
    };
    std::fs::create_dir_all(&args.home)
        .with_context(|| format!("cannot create {}", args.home.display()))?;
    let roots = Roots::explicit([&dir]);
    let cfg = IndexConfig::new(&args.home);
    say("opening the index (built on first use)");
    let (idx, _) = SkillIndex::open(&roots, &cfg, Refresh::Always, &|_| {})?;
    let embedder = Arc::new(
        LocalEmbedder::load_with(
            &model_dir,
            skillsearch_core::config::Precision::parse(&args.precision).unwrap_or_default(),
        )
        .with_context(|| format!("cannot load the model in {}", model_dir.display()))?,
    );
    let sem = if args.vectors == Vectors::Synthetic {
        let id = format!("synthetic-{}", embedder.id());
        let e = SyntheticStore {
            model: embedder.clone(),
            id,
        };
        Arc::new(Semantic::new(&args.home, Arc::new(e))?)
    } else {
        Arc::new(Semantic::new(&args.home, embedder.clone())?)
    };
    let mut r = Report {
        skills: idx.doc_keys()?.iter().filter(|k| k.valid).count(),
        model: embedder.id().to_owned(),
        threads: std::env::var("RAYON_NUM_THREADS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        vectors: match args.vectors {
            Vectors::Model => "model",
            Vectors::Synthetic => "synthetic",
        }
        .to_owned(),
        ..Report::default()
    };

    // Throughput, on the first `sample` texts.
    let sample = idx.embed_texts(args.sample.max(1))?;
    let texts: Vec<&str> = sample.iter().map(|(_, t)| t.as_str()).collect();
    let mut sorted = texts.clone();
    sorted.sort_by_key(|t| t.len());
    for &b in args.batches.iter().filter(|b| **b > 0) {
        let rate = |set: &[&str]| -> Result<f64> {
            let t = Instant::now();
            for part in set.chunks(b) {
                embedder.embed(part)?;
            }
            Ok(set.len() as f64 / t.elapsed().as_secs_f64())
        };
        let docs_per_s = rate(&texts)?;
        let sorted_docs_per_s = rate(&sorted)?;
        say(&format!(
            "batch {b}: {docs_per_s:.1} docs/s, length-sorted {sorted_docs_per_s:.1} docs/s"
        ));
        r.throughput.push(Throughput {
            batch: b,
            docs_per_s: (docs_per_s * 10.0).round() / 10.0,
            sorted_docs_per_s: (sorted_docs_per_s * 10.0).round() / 10.0,
        });
    }

    // Every skill's vector.
    let t = Instant::now();
    if args.vectors == Vectors::Synthetic {
        let dim = embedder.dim();
        let items: Vec<(u64, Vec<f32>)> = idx
            .doc_keys()?
            .iter()
            .filter(|k| k.valid && k.chash != 0 && !sem.store().has(k.chash))
            .map(|k| (k.chash, synthetic_vector(k.chash, dim)))
            .collect();
        r.vectors_added = items.len();
        sem.store().append(&items)?;
    } else {
        let stop = AtomicBool::new(false);
        let started = Instant::now();
        // The batch the product uses for the local model.
        r.vectors_added = sem.embed_pending(&idx, 16, &stop, &|done, todo| {
            if done % 1024 < 16 || done == todo {
                let rate = done as f64 / started.elapsed().as_secs_f64();
                eprintln!("bench: embedded {done}/{todo} ({rate:.1} docs/s)");
            }
        })?;
    }
    r.vectors_add_ms = ms(t.elapsed());
    let slot = SemanticSlot::with(sem.clone());
    if !sem.coverage(&idx)?.complete() {
        bail!("some skills still have no vector");
    }

    // Four disjoint query sets, so no phase profits from another's cached query vectors.
    let n = args.queries.max(1);
    let all = query_set(&idx, 8 * n)?;
    let mut all: Vec<String> = {
        let mut seen = std::collections::HashSet::new();
        all.into_iter()
            .filter(|q| seen.insert(q.clone()))
            .take(4 * n)
            .collect()
    };
    if all.len() < 4 * n {
        bail!(
            "only {} distinct queries for 4 × {n}; lower --queries",
            all.len()
        );
    }
    // Dealt round-robin, so every phase gets the same mix of short and long queries.
    let mut phases: [Vec<String>; 4] = Default::default();
    for (i, q) in all.drain(..).enumerate() {
        phases[i % 4].push(q);
    }
    let [embed_q, lexical_q, semantic_q, hybrid_q] = phases;
    r.queries = n;
    let gate = EligibilityEnv::from_process();
    let opts = |retriever| SearchOptions {
        retriever,
        ..SearchOptions::default()
    };
    // Warm-up: the matrix is built and the model's first-call costs are paid.
    for q in ["warm up the model", "another warm up"] {
        idx.search_with(q, &opts(Retriever::Hybrid), &gate, Some(&slot))?;
    }

    let words = SearchOptions::default().passage_words;
    let mut lat = Vec::new();
    for q in &embed_q {
        let t = Instant::now();
        sem.query_vectors(q, words)?;
        lat.push(ms(t.elapsed()));
    }
    r.query_embed_p50_ms = p(&lat, 50.0);
    r.query_embed_p95_ms = p(&lat, 95.0);
    let depth = SearchOptions::default().fusion_depth;
    lat.clear();
    for q in &embed_q {
        let t = Instant::now();
        sem.search(&idx, q, words, depth)?;
        lat.push(ms(t.elapsed()));
    }
    r.scan_p50_ms = p(&lat, 50.0);
    r.scan_p95_ms = p(&lat, 95.0);

    let phase = |set: &[String], retriever| -> Result<Vec<f64>> {
        let o = opts(retriever);
        let mut lat = Vec::with_capacity(set.len());
        for q in set {
            let t = Instant::now();
            let res = idx.search_with(q, &o, &gate, Some(&slot))?;
            lat.push(ms(t.elapsed()));
            if retriever != Retriever::Lexical && !res.retrievers.contains(&"semantic") {
                bail!(
                    "the semantic retriever did not run for {q:?}: {:?}",
                    res.notes
                );
            }
        }
        Ok(lat)
    };
    let l = phase(&lexical_q, Retriever::Lexical)?;
    r.lexical_p50_ms = p(&l, 50.0);
    r.lexical_p95_ms = p(&l, 95.0);
    let l = phase(&semantic_q, Retriever::Semantic)?;
    r.semantic_p50_ms = p(&l, 50.0);
    r.semantic_p95_ms = p(&l, 95.0);
    let l = phase(&hybrid_q, Retriever::Hybrid)?;
    r.hybrid_p50_ms = p(&l, 50.0);
    r.hybrid_p95_ms = p(&l, 95.0);
    r.hybrid_max_ms = p(&l, 100.0);

    if args.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        println!(
            "{} skills, model {}, {} threads, vectors {} ({} added in {:.0} ms)",
            r.skills, r.model, r.threads, r.vectors, r.vectors_added, r.vectors_add_ms
        );
        println!("embedding throughput ({} texts):", texts.len());
        for t in &r.throughput {
            println!(
                "  batch {:>3}: {:>7.1} docs/s   length-sorted {:>7.1} docs/s",
                t.batch, t.docs_per_s, t.sorted_docs_per_s
            );
        }
        println!("{n} unique queries per phase, p50 / p95 ms:");
        println!(
            "  query embedding   {:>7.2} / {:>7.2}",
            r.query_embed_p50_ms, r.query_embed_p95_ms
        );
        println!(
            "  vector scan       {:>7.2} / {:>7.2}",
            r.scan_p50_ms, r.scan_p95_ms
        );
        println!(
            "  lexical query     {:>7.2} / {:>7.2}",
            r.lexical_p50_ms, r.lexical_p95_ms
        );
        println!(
            "  semantic query    {:>7.2} / {:>7.2}",
            r.semantic_p50_ms, r.semantic_p95_ms
        );
        println!(
            "  hybrid query      {:>7.2} / {:>7.2}   (max {:.2})",
            r.hybrid_p50_ms, r.hybrid_p95_ms, r.hybrid_max_ms
        );
    }
    Ok(())
}
