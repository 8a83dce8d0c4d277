//! Embeddings from an OpenAI-compatible endpoint (`POST <base>/embeddings`). Replies are
//! checked (count, order, dimension, finite values) before anything is returned.

use super::post_json;
use crate::config::EmbeddingSettings;
use crate::error::{Error, Result};
use crate::remote::http::Endpoint;
use crate::retrieve::embed::{Embedder, l2_normalise};
use serde_json::{Value, json};
use std::fmt;
use std::sync::OnceLock;
use std::time::Duration;

/// The embeddings path under the endpoint's base URL.
const EMBEDDINGS_PATH: &str = "embeddings";

/// A remote embedder; its id is `remote:<model>`.
pub struct RemoteEmbedder {
    endpoint: Endpoint,
    /// `<base>/embeddings`.
    url: String,
    model: String,
    id: String,
    /// Configured, or learned from the first reply.
    dim: OnceLock<usize>,
    batch: usize,
    timeout: Duration,
    /// Deadline of a query's embedding (a search waits for it): at most `timeout`.
    query_timeout: Duration,
}

impl fmt::Debug for RemoteEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteEmbedder")
            .field("endpoint", &self.endpoint)
            .field("model", &self.model)
            .field("dim", &self.dim.get())
            .field("batch", &self.batch)
            .field("timeout", &self.timeout)
            .field("query_timeout", &self.query_timeout)
            .finish()
    }
}

impl RemoteEmbedder {
    /// An embedder for the configured endpoint; an error names the missing key.
    pub fn new(s: &EmbeddingSettings) -> Result<Self> {
        if s.base_url.trim().is_empty() {
            return Err(Error::Invalid(
                "no embeddings endpoint: config key `embedding_base_url` is empty".into(),
            ));
        }
        if s.model.trim().is_empty() {
            return Err(Error::Invalid(format!(
                "embeddings endpoint {} has no model: config key `embedding_model` is empty",
                s.base_url
            )));
        }
        let dim = OnceLock::new();
        if let Some(d) = s.dim.filter(|d| *d > 0) {
            let _ = dim.set(d);
        }
        let endpoint = Endpoint::new(&s.base_url, s.api_key.clone())
            .map_err(|why| Error::Invalid(format!("config key `embedding_base_url` = {why}")))?;
        Ok(RemoteEmbedder {
            url: endpoint.url(EMBEDDINGS_PATH),
            endpoint,
            model: s.model.trim().to_owned(),
            id: format!("remote:{}", s.model.trim()),
            dim,
            batch: s.batch.max(1),
            timeout: s.timeout,
            query_timeout: s.timeout,
        })
    }

    /// Bounds a query's embedding by `d` as well as by `embedding_timeout_s` (the shorter
    /// wins), so a slow endpoint costs a search at most `d` before it answers lexically.
    pub fn with_query_timeout(mut self, d: Duration) -> Self {
        self.query_timeout = d.min(self.timeout);
        self
    }

    /// The embeddings URL (`<base>/embeddings`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The model id sent to the endpoint.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// Learns the dimension with one request when it is not known yet.
    pub fn probe(&self) -> Result<usize> {
        if let Some(d) = self.dim.get() {
            return Ok(*d);
        }
        self.embed(&["dimension probe"])?;
        Ok(self.dim())
    }

    fn bad(&self, message: String) -> Error {
        Error::Reply {
            url: self.url.clone(),
            message,
        }
    }

    fn embed_batch(&self, texts: &[&str], timeout: Duration) -> Result<Vec<Vec<f32>>> {
        let body = json!({"model": self.model, "input": texts});
        let reply = post_json(&self.endpoint, EMBEDDINGS_PATH, &body, timeout)?;
        let data = reply
            .get("data")
            .and_then(Value::as_array)
            .ok_or_else(|| self.bad("no `data` list in the reply".into()))?;
        if data.len() != texts.len() {
            return Err(self.bad(format!(
                "{} embeddings for {} texts",
                data.len(),
                texts.len()
            )));
        }
        let mut out: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        for (pos, item) in data.iter().enumerate() {
            let index = match item.get("index") {
                None | Some(Value::Null) => pos,
                Some(v) => v
                    .as_u64()
                    .map(|i| i as usize)
                    .filter(|i| *i < texts.len())
                    .ok_or_else(|| {
                        self.bad(format!("data[{pos}].index is {v}, not 0..{}", texts.len()))
                    })?,
            };
            if out[index].is_some() {
                return Err(self.bad(format!("index {index} appears twice in `data`")));
            }
            let values = item
                .get("embedding")
                .and_then(Value::as_array)
                .ok_or_else(|| self.bad(format!("data[{pos}] has no `embedding` list")))?;
            let mut v = Vec::with_capacity(values.len());
            for (k, x) in values.iter().enumerate() {
                // serde_json cannot hold NaN or infinity: they arrive as null, strings or overflow.
                match x.as_f64().map(|f| f as f32).filter(|f| f.is_finite()) {
                    Some(f) => v.push(f),
                    None => {
                        return Err(self.bad(format!(
                            "embedding {index} value {k} is {x}, not a finite number"
                        )));
                    }
                }
            }
            if v.is_empty() {
                return Err(self.bad(format!("embedding {index} is empty")));
            }
            let want = *self.dim.get_or_init(|| v.len());
            if v.len() != want {
                return Err(self.bad(format!(
                    "embedding {index} has dimension {}, expected {want}",
                    v.len()
                )));
            }
            if !l2_normalise(&mut v) {
                return Err(self.bad(format!("embedding {index} is a zero vector")));
            }
            out[index] = Some(v);
        }
        Ok(out.into_iter().flatten().collect())
    }
}

impl Embedder for RemoteEmbedder {
    fn id(&self) -> &str {
        &self.id
    }

    /// The dimension; 0 until configured or learned (see [`RemoteEmbedder::probe`]).
    fn dim(&self) -> usize {
        self.dim.get().copied().unwrap_or(0)
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(self.batch) {
            out.extend(self.embed_batch(chunk, self.timeout)?);
        }
        Ok(out)
    }

    fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        self.embed_batch(&[text], self.query_timeout)?
            .pop()
            .ok_or_else(|| self.bad("no embedding for the query".into()))
    }

    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.embed_batch(texts, self.query_timeout)
    }
}
