//! One remote HTTP endpoint. The hub, the chat model and the embeddings server each hold an
//! [`Endpoint`]: its base URL (http or https), its API key (sent only as `Authorization: Bearer`,
//! redacted from `Debug`), one pooled agent that follows no redirect (a marketplace's download
//! endpoint follows a few, never sending the key on), and one circuit breaker
//! shared by every clone. Every call has a hard deadline covering connect, send and read, and a
//! limit on the bytes read; a transport failure comes back as a [`Failure`] that the client
//! turns into its own error (naming the hub operation, or the model URL).

use super::breaker::Breaker;
use crate::config::Secret;
use serde_json::Value;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// See the module documentation. Cheap to clone; clones share the breaker and the pool.
#[derive(Clone)]
pub(crate) struct Endpoint {
    base: String,
    key: Secret,
    agent: ureq::Agent,
    breaker: Arc<Breaker>,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("base", &self.base)
            .field("key", &self.key)
            .finish()
    }
}

/// A call that reached the endpoint and read its whole answer, whatever the status.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

/// A call that did not read a whole answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Failure {
    /// The deadline passed (connect, send or read).
    Timeout,
    /// Connection, DNS, TLS or read failure, or an answer past the byte limit.
    Transport(String),
    /// The circuit breaker refused the call (why).
    Refused(String),
}

/// What a call sends.
#[derive(Clone, Copy)]
pub(crate) enum Request<'a> {
    /// `GET` with these query parameters, accepting `accept`.
    Get {
        query: &'a [(&'a str, &'a str)],
        accept: &'a str,
    },
    /// `POST` of this JSON, accepting JSON.
    PostJson(&'a Value),
    /// `POST` of these bytes with this content type, accepting JSON (a hub publish or yank).
    PostBytes {
        content_type: &'a str,
        body: &'a [u8],
    },
    /// `DELETE`, accepting JSON.
    Delete,
}

impl Endpoint {
    /// An endpoint at `base` (surrounding blanks and trailing slashes dropped), or why not:
    /// only `http://` and `https://` URLs are used.
    pub fn new(base: &str, key: Secret) -> Result<Endpoint, String> {
        Self::build(base, key, 0)
    }

    /// Like [`Endpoint::new`], but up to `max` redirects are followed (a marketplace download
    /// answers 302 to a signed storage URL on another host). The key is never sent past the
    /// first hop, and more redirects than `max` are a transport failure.
    pub fn following_redirects(base: &str, key: Secret, max: u32) -> Result<Endpoint, String> {
        Self::build(base, key, max)
    }

    fn build(base: &str, key: Secret, redirects: u32) -> Result<Endpoint, String> {
        let base = base.trim().trim_end_matches('/').to_owned();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(format!("`{base}` is not an http:// or https:// URL"));
        }
        let agent = ureq::Agent::config_builder()
            // Statuses are the client's to judge; without `redirects`, a redirect is an
            // answer, never followed.
            .http_status_as_error(false)
            .max_redirects(redirects)
            .max_redirects_will_error(redirects > 0)
            .redirect_auth_headers(ureq::config::RedirectAuthHeaders::Never)
            .user_agent(concat!("skillsearch/", env!("CARGO_PKG_VERSION")))
            .build()
            .new_agent();
        Ok(Endpoint {
            base,
            key,
            agent,
            breaker: Arc::new(Breaker::new()),
        })
    }

    /// The base URL, as configured (no trailing slash).
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `<base>/<path>` with exactly one slash between.
    pub fn url(&self, path: &str) -> String {
        format!("{}/{}", self.base, path.trim_start_matches('/'))
    }

    /// Sends `request` to `path` with these extra headers, within `budget`, reading at most
    /// `max_bytes`. The breaker is asked first; a refusal is [`Failure::Refused`]. The caller
    /// tells the breaker how the call went ([`Endpoint::succeeded`], [`Endpoint::failed`]):
    /// only it knows whether an answer shows the endpoint up.
    pub fn send(
        &self,
        path: &str,
        request: Request<'_>,
        headers: &[(&str, &str)],
        budget: Duration,
        max_bytes: u64,
    ) -> Result<Answer, Failure> {
        self.breaker.check().map_err(Failure::Refused)?;
        let url = self.url(path);
        let bearer = (!self.key.is_empty()).then(|| format!("Bearer {}", self.key.expose()));
        let with_headers = |mut req: ureq::RequestBuilder<ureq::typestate::WithBody>| {
            for (k, v) in headers {
                req = req.header(*k, *v);
            }
            if let Some(b) = &bearer {
                req = req.header("Authorization", b);
            }
            req.header("Accept", "application/json")
                .config()
                .timeout_global(Some(budget))
                .build()
        };
        let result = match request {
            Request::Get { query, accept } => {
                let mut req = self.agent.get(&url).header("Accept", accept);
                for (k, v) in headers {
                    req = req.header(*k, *v);
                }
                if let Some(b) = &bearer {
                    req = req.header("Authorization", b);
                }
                for (k, v) in query {
                    req = req.query(*k, *v);
                }
                req.config().timeout_global(Some(budget)).build().call()
            }
            Request::PostJson(body) => with_headers(
                self.agent
                    .post(&url)
                    .header("Content-Type", "application/json"),
            )
            .send(body.to_string()),
            Request::PostBytes { content_type, body } => {
                with_headers(self.agent.post(&url).header("Content-Type", content_type)).send(body)
            }
            Request::Delete => {
                let mut req = self.agent.delete(&url).header("Accept", "application/json");
                for (k, v) in headers {
                    req = req.header(*k, *v);
                }
                if let Some(b) = &bearer {
                    req = req.header("Authorization", b);
                }
                req.config().timeout_global(Some(budget)).build().call()
            }
        };
        result
            .and_then(|mut resp| {
                let status = resp.status().as_u16();
                let body = resp
                    .body_mut()
                    .with_config()
                    .limit(max_bytes)
                    .read_to_vec()?;
                Ok(Answer { status, body })
            })
            .map_err(classify)
    }

    /// The call went through: the breaker closes.
    pub fn succeeded(&self) {
        self.breaker.success();
    }

    /// The call failed with `error`: it counts against the endpoint.
    pub fn failed(&self, error: &str) {
        self.breaker.failure(error);
    }
}

/// A timeout, wherever it struck, or the transport's own words.
fn classify(e: ureq::Error) -> Failure {
    match e {
        ureq::Error::Timeout(_) => Failure::Timeout,
        ureq::Error::Io(io)
            if matches!(
                io.kind(),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
            ) =>
        {
            Failure::Timeout
        }
        ureq::Error::BodyExceedsLimit(n) => {
            Failure::Transport(format!("answer larger than {n} bytes"))
        }
        other => Failure::Transport(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_urls_and_one_slash_between_base_and_path() {
        assert!(Endpoint::new("ftp://x", Secret::default()).is_err());
        assert!(Endpoint::new("  ", Secret::default()).is_err());
        let e = Endpoint::new(" http://h:1/v1/ ", Secret::default()).unwrap();
        assert_eq!(e.base(), "http://h:1/v1");
        assert_eq!(e.url("embeddings"), "http://h:1/v1/embeddings");
        assert_eq!(
            e.url("/openapi/v1/skills"),
            "http://h:1/v1/openapi/v1/skills"
        );
    }

    #[test]
    fn the_key_never_shows_in_debug() {
        let e = Endpoint::new("https://h", Secret::new("sk-very-secret")).unwrap();
        assert!(!format!("{e:?}").contains("sk-very-secret"));
    }

    #[test]
    fn an_unreachable_endpoint_fails_and_three_failures_open_the_breaker() {
        // Port 9 (discard) on loopback: nothing listens, the connect is refused at once.
        let e = Endpoint::new("http://127.0.0.1:9", Secret::default()).unwrap();
        let send = || {
            e.send(
                "x",
                Request::PostJson(&Value::Null),
                &[],
                Duration::from_secs(2),
                1024,
            )
        };
        for _ in 0..3 {
            let f = send().unwrap_err();
            assert!(matches!(f, Failure::Transport(_)), "{f:?}");
            e.failed("refused");
        }
        assert!(matches!(send().unwrap_err(), Failure::Refused(_)));
        // A clone shares the breaker.
        let c = e.clone();
        assert!(matches!(
            c.send(
                "x",
                Request::Get {
                    query: &[],
                    accept: "*/*"
                },
                &[],
                Duration::from_secs(1),
                1
            ),
            Err(Failure::Refused(_))
        ));
    }
}
