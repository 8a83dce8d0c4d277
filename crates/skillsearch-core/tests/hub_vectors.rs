//! Skills' vectors shared between hub replicas through the PostgreSQL store (`vectors`, migration
//! 3), against a real PostgreSQL 16 (`skillsearch_testkit::pg`; skipped, and said so, without
//! `pgserver`). Each replica is a home of its own with a counting embedder, so what it embeds
//! itself and what it takes from the database are both seen.

use skillsearch_core::corpus::text_hash;
use skillsearch_core::index::{IndexConfig, Refresh, SkillIndex};
use skillsearch_core::registry::pg::{self, PgStore, SCHEMA_VERSION};
use skillsearch_core::retrieve::embed::Embedder;
use skillsearch_core::retrieve::semantic::{Filled, Semantic, SemanticSlot, SharedVectors};
use skillsearch_core::{Roots, SearchOptions};
use skillsearch_testkit::pg::Postgres;
use skillsearch_testkit::write_skill;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A deterministic embedder: each text's vector is made from its bytes; counts what it embeds.
struct Counting {
    id: &'static str,
    dim: usize,
    texts: AtomicUsize,
}

impl Counting {
    fn new(id: &'static str, dim: usize) -> Arc<Counting> {
        Arc::new(Counting {
            id,
            dim,
            texts: AtomicUsize::new(0),
        })
    }
    fn embedded(&self) -> usize {
        self.texts.load(Ordering::SeqCst)
    }
}

impl Embedder for Counting {
    fn id(&self) -> &str {
        self.id
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn embed(&self, texts: &[&str]) -> skillsearch_core::Result<Vec<Vec<f32>>> {
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0.01f32; self.dim];
                for (i, b) in t.bytes().enumerate() {
                    v[i % self.dim] += f32::from(b) / 255.0;
                }
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                v.iter().map(|x| x / n).collect()
            })
            .collect())
    }
}

const SKILLS: usize = 12;

/// The same catalogue under `root` (as every replica of one hub serves it), indexed for `home`.
fn catalogue(home: &Path, root: &Path) -> SkillIndex {
    for i in 0..SKILLS {
        write_skill(
            root,
            &format!("s{i:02}"),
            &format!("skill-{i}"),
            &format!("Does task number {i} with care"),
            &format!("Body of skill {i}."),
        );
    }
    SkillIndex::open(
        &Roots::explicit([root]),
        &IndexConfig::new(home),
        Refresh::Always,
        &|_| {},
    )
    .unwrap()
    .0
}

/// One replica: its own home, index and embedder, sharing through `store`.
struct Replica {
    _dir: tempfile::TempDir,
    idx: SkillIndex,
    emb: Arc<Counting>,
    sem: Arc<Semantic>,
}

fn replica(emb: Arc<Counting>, shared: Vec<Arc<dyn SharedVectors>>) -> Replica {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let idx = catalogue(&home, &dir.path().join("skills"));
    let sem = Arc::new(Semantic::new(&home, emb.clone()).unwrap());
    sem.share_with(shared);
    Replica {
        _dir: dir,
        idx,
        emb,
        sem,
    }
}

impl Replica {
    fn fill(&self) -> Filled {
        self.sem
            .fill_pending(&self.idx, 4, &AtomicBool::new(false), &|_, _| {})
            .unwrap()
    }
    fn hybrid(&self) -> bool {
        let r = self
            .idx
            .search_with(
                "task number 3",
                &SearchOptions {
                    retriever: skillsearch_core::retrieve::Retriever::Hybrid,
                    ..SearchOptions::default()
                },
                &skillsearch_core::EligibilityEnv::allow_all(),
                Some(&SemanticSlot::with(self.sem.clone())),
            )
            .unwrap();
        // (Every skill has "task" and "number": the lexical side has nothing to rank by.)
        assert!(r.notes.is_empty(), "{:?}", r.notes);
        r.retrievers.contains(&"semantic")
    }
}

fn store(pg: &Postgres) -> (tempfile::TempDir, Arc<PgStore>) {
    let cache = tempfile::tempdir().unwrap();
    let s = Arc::new(PgStore::open(&pg.uri(), cache.path()).unwrap());
    (cache, s)
}

fn rows(pg: &Postgres) -> Vec<(String, i32, i64, usize)> {
    let mut c = postgres::Client::connect(&pg.uri(), postgres::NoTls).unwrap();
    c.query(
        "SELECT embedder, dim, text_key, length(vec) FROM vectors ORDER BY 1, 2, 3",
        &[],
    )
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2), r.get::<_, i32>(3) as usize))
    .collect()
}

#[test]
fn a_second_replica_takes_the_vectors_the_first_embedded_and_embeds_nothing() {
    let Some(pg) = Postgres::new() else { return };
    assert_eq!(pg::migrate(&pg.uri()).unwrap(), SCHEMA_VERSION);
    let (_ca, sa) = store(&pg);
    let a = replica(Counting::new("m", 8), vec![sa.clone()]);
    assert_eq!(
        a.fill(),
        Filled {
            embedded: SKILLS,
            fetched: 0
        }
    );
    let stored = rows(&pg);
    assert_eq!(stored.len(), SKILLS);
    assert!(
        stored
            .iter()
            .all(|(m, d, _, len)| m == "m" && *d == 8 && *len == 32),
        "{stored:?}"
    );

    let (_cb, sb) = store(&pg);
    let b = replica(Counting::new("m", 8), vec![sb.clone()]);
    assert_eq!(
        b.fill(),
        Filled {
            embedded: 0,
            fetched: SKILLS
        }
    );
    assert_eq!(b.emb.embedded(), 0);
    // The same vectors: B's local store has exactly what A embedded.
    for (_, _, key, _) in &stored {
        assert_eq!(
            b.sem.store().get(*key as u64),
            a.sem.store().get(*key as u64)
        );
    }
    assert!(b.hybrid(), "B ranks hybrid with the vectors it took");
    // Nothing missing any more: a second pass asks nobody.
    assert_eq!(b.fill(), Filled::default());
}

#[test]
fn vectors_of_another_embedder_or_dimension_are_never_used() {
    let Some(pg) = Postgres::new() else { return };
    pg::migrate(&pg.uri()).unwrap();
    let (_ca, sa) = store(&pg);
    // Another model with the same dimension, and the same id with another dimension.
    replica(Counting::new("other", 8), vec![sa.clone()]).fill();
    replica(Counting::new("m", 4), vec![sa.clone()]).fill();
    assert_eq!(rows(&pg).len(), 2 * SKILLS);
    let b = replica(Counting::new("m", 8), vec![sa.clone()]);
    assert_eq!(
        b.fill(),
        Filled {
            embedded: SKILLS,
            fetched: 0
        }
    );
    // Asked directly for those keys, the store answers only for the embedder and dimension.
    let keys: Vec<u64> = rows(&pg).iter().map(|r| r.2 as u64).collect();
    let got = sa.vectors("m", 8, &keys).unwrap();
    assert_eq!(got.len(), SKILLS);
    assert!(got.iter().all(|(_, v)| v.len() == 8));
    assert!(sa.vectors("nobody", 8, &keys).unwrap().is_empty());
    assert_eq!(rows(&pg).len(), 3 * SKILLS);
}

#[test]
fn a_corrupt_vector_row_is_skipped_and_that_skill_embedded_here_and_mended() {
    let Some(pg) = Postgres::new() else { return };
    pg::migrate(&pg.uri()).unwrap();
    let (_ca, sa) = store(&pg);
    replica(Counting::new("m", 8), vec![sa.clone()]).fill();
    let mut c = postgres::Client::connect(&pg.uri(), postgres::NoTls).unwrap();
    // One row cut short, one holding a NaN.
    let keys: Vec<i64> = rows(&pg).iter().map(|r| r.2).collect();
    c.execute(
        "UPDATE vectors SET vec = '\\x0102'::bytea WHERE text_key = $1",
        &[&keys[0]],
    )
    .unwrap();
    let mut nan = vec![0u8; 32];
    nan[..4].copy_from_slice(&f32::NAN.to_le_bytes());
    c.execute(
        "UPDATE vectors SET vec = $2 WHERE text_key = $1",
        &[&keys[1], &nan],
    )
    .unwrap();
    let b = replica(Counting::new("m", 8), vec![sa.clone()]);
    assert_eq!(
        b.fill(),
        Filled {
            embedded: 2,
            fetched: SKILLS - 2
        }
    );
    assert_eq!(b.emb.embedded(), 2);
    // B wrote its vectors back over the bad rows.
    assert!(rows(&pg).iter().all(|r| r.3 == 32));
    let fixed = sa
        .vectors("m", 8, &[keys[0] as u64, keys[1] as u64])
        .unwrap();
    assert!(
        fixed.iter().all(|(_, v)| v.iter().all(|x| x.is_finite())),
        "{fixed:?}"
    );
}

#[test]
fn the_database_unreachable_the_replica_embeds_everything_itself() {
    let Some(mut pg) = Postgres::new() else {
        return;
    };
    pg::migrate(&pg.uri()).unwrap();
    let (_ca, sa) = store(&pg);
    replica(Counting::new("m", 8), vec![sa.clone()]).fill();
    pg.stop();
    let b = replica(Counting::new("m", 8), vec![sa.clone()]);
    assert_eq!(
        b.fill(),
        Filled {
            embedded: SKILLS,
            fetched: 0
        }
    );
    assert!(b.hybrid());
    let err = sa.fetch("m", 8, &[1]).unwrap_err().to_string();
    assert!(
        err.starts_with("shared vectors at postgresql://") && err.contains("cannot reach"),
        "{err}"
    );
}

#[test]
fn a_database_of_schema_2_migrates_to_the_vectors_table() {
    let Some(pg) = Postgres::new() else { return };
    pg::migrate(&pg.uri()).unwrap();
    let (_ca, sa) = store(&pg);
    sa.publish(&skillsearch_testkit::zip_of(&[(
        "alpha/SKILL.md",
        b"---\nname: alpha\ndescription: First\nversion: \"1\"\n---\nbody\n",
    )]))
    .unwrap();
    drop(sa);
    let mut c = postgres::Client::connect(&pg.uri(), postgres::NoTls).unwrap();
    c.batch_execute("DROP TABLE vectors; DELETE FROM schema_migrations WHERE version = 3;")
        .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let err = PgStore::open(&pg.uri(), cache.path()).unwrap_err();
    assert!(err.to_string().contains("schema version 2"), "{err}");
    assert_eq!(pg::migrate(&pg.uri()).unwrap(), 3);
    let s = PgStore::open(&pg.uri(), cache.path()).unwrap();
    assert!(s.live().join("alpha/SKILL.md").exists());
    s.put_vectors("m", 2, &[(text_hash("x"), vec![0.6, 0.8])])
        .unwrap();
    assert_eq!(
        s.vectors("m", 2, &[text_hash("x")]).unwrap(),
        [(text_hash("x"), vec![0.6, 0.8])]
    );
    assert!(s.put_vectors("m", 2, &[(1, vec![1.0])]).is_err());
}
