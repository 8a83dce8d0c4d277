//! The decision log: one JSON line per turn and per tool call, saying what was searched, what
//! was found, injected or held back, what it cost and how long each stage took. Appends are
//! single `write` calls on an `O_APPEND` file, so concurrent hook processes do not interleave
//! lines; the file is rotated (one previous file kept) when it passes its size limit.

use crate::secrets::redact;
use crate::turn::Retrieval;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One hit as logged.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LoggedHit {
    pub id: String,
    pub name: String,
    pub source: String,
    pub score: f32,
}

/// The gate's decision, as logged.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LoggedGate {
    pub candidates: Vec<String>,
    pub selected: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    /// The gate failed and the first candidates were kept.
    #[serde(default)]
    pub fell_back: bool,
}

/// The tool plan of one turn, as logged.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LoggedTools {
    pub visible: Vec<String>,
    pub hidden: Vec<String>,
    pub activated_plugins: Vec<String>,
    pub tokens_shown: usize,
    pub tokens_hidden: usize,
}

/// One decision.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Decision {
    /// RFC 3339 UTC, millisecond resolution.
    pub ts: String,
    /// `hook`, `mcp`, `serve`, `search`.
    pub surface: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
    /// `auto`, `on_demand`, or the tool called (`skill_search`, `skill_read`).
    pub mode: String,
    /// The query, secrets redacted, cut to 500 characters.
    pub query: String,
    #[serde(default)]
    pub hits: Vec<LoggedHit>,
    /// The retrievers that ranked the hits (`lexical`, `semantic`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retrievers: Vec<String>,
    /// Matches held back, as `id: reason`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<String>,
    pub injected_chars: usize,
    /// Tokens of what was injected or returned (o200k; estimated as chars/4 where counting
    /// would cost more than the turn can spare, see `tokens_exact`).
    pub injected_tokens: usize,
    #[serde(default)]
    pub tokens_exact: bool,
    /// Milliseconds per stage (`open`, `search`, `render`, `total`).
    #[serde(default)]
    pub elapsed_ms: std::collections::BTreeMap<String, f64>,
    /// Tool visibility, when the turn was planned: tools shown and hidden, and their schema tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<LoggedTools>,
    /// The query the model rewrote for retrieval (searched instead of `query`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewritten_query: Option<String>,
    /// What the gate was shown and chose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<LoggedGate>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diagnostics: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Decision {
    /// A record for `surface`, stamped now.
    pub fn new(surface: &str, host: &str, mode: &str, query: &str) -> Self {
        Decision {
            ts: now_rfc3339(),
            surface: surface.to_owned(),
            host: host.to_owned(),
            mode: mode.to_owned(),
            query: redact(&truncate(query, 500)),
            ..Decision::default()
        }
    }

    /// Fills hits, drops and sizes from a retrieval.
    pub fn with_retrieval(mut self, r: &Retrieval) -> Self {
        self.hits = r
            .hits
            .iter()
            .map(|h| LoggedHit {
                id: h.qualified_id.clone(),
                name: h.name.clone(),
                source: h.source().into(),
                score: h.score,
            })
            .collect();
        self.dropped =
            r.dropped
                .iter()
                .map(|d| format!("{}: {}", d.id, d.exclusion.reason))
                .chain(r.off_topic.iter().map(|id| {
                    format!("{id}: shares too few words with the query (relevance guard)")
                }))
                .collect();
        self.injected_chars = r.chars;
        self.injected_tokens = r.tokens.unwrap_or_else(|| r.text.len().div_ceil(4));
        self.elapsed_ms.insert("search".into(), round3(r.search_ms));
        self.elapsed_ms.insert("render".into(), round3(r.render_ms));
        self.retrievers = r.retrievers.iter().map(|s| s.to_string()).collect();
        self.diagnostics.extend(r.notes.iter().cloned());
        let st = &r.stages;
        if let Some(rw) = &st.rewrite {
            self.elapsed_ms.insert("rewrite".into(), rw.ms as f64);
            self.rewritten_query = rw.rewritten.as_deref().map(|q| truncate(&redact(q), 500));
        }
        for src in &st.sources {
            self.elapsed_ms.insert(src.source.clone(), src.ms as f64);
        }
        if let Some(g) = &st.gate {
            self.elapsed_ms.insert("gate".into(), g.ms as f64);
            self.gate = Some(LoggedGate {
                candidates: g.candidates.clone(),
                selected: g.selected.clone(),
                plan: g.plan.as_deref().map(|p| truncate(&redact(p), 500)),
                fell_back: g.fell_back,
            });
        }
        self
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn truncate(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s.to_owned(),
    }
}

/// Current UTC time as RFC 3339 with milliseconds, from the system clock (no date crate needed).
pub fn now_rfc3339() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// An append-only, size-rotated JSON-lines file.
#[derive(Debug, Clone)]
pub struct DecisionLog {
    path: PathBuf,
    max_bytes: u64,
}

impl DecisionLog {
    pub fn new(path: impl Into<PathBuf>, max_bytes: u64) -> Self {
        DecisionLog {
            path: path.into(),
            max_bytes,
        }
    }

    /// The log the settings configure (`log_path`, `log_max_bytes`); `None` when it is off.
    pub fn from_settings(s: &crate::config::Settings) -> Option<DecisionLog> {
        s.log_path
            .as_ref()
            .filter(|p| !p.as_os_str().is_empty())
            .map(|p| DecisionLog::new(p, s.log_max_bytes))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record. Errors are returned for the caller to report; they never matter to
    /// the turn.
    pub fn append(&self, d: &Decision) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(d).map_err(std::io::Error::other)?;
        line.push(b'\n');
        if std::fs::metadata(&self.path).is_ok_and(|m| m.len() + line.len() as u64 > self.max_bytes)
        {
            let _ = std::fs::rename(&self.path, self.rotated());
        }
        crate::secrets::append_private(&self.path, &line)
    }

    /// The previous file after a rotation.
    pub fn rotated(&self) -> PathBuf {
        let mut p = self.path.clone().into_os_string();
        p.push(".1");
        PathBuf::from(p)
    }

    /// The last `n` records, oldest first (the rotated file is read too when needed). Lines
    /// that do not parse are skipped.
    pub fn tail(&self, n: usize) -> std::io::Result<Vec<Decision>> {
        let mut out: Vec<Decision> = Vec::new();
        for p in [self.rotated(), self.path.clone()] {
            let text = match crate::fsio::read_regular_string(&p) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            out.extend(text.lines().filter_map(|l| serde_json::from_str(l).ok()));
        }
        let skip = out.len().saturating_sub(n);
        Ok(out.split_off(skip))
    }
}

/// What a list of turns needs of one logged line without reading all of it: the fields a
/// filter or a plot reads. [`brief`] takes them from the line as [`DecisionLog::append`]
/// writes it (compact JSON, fields in [`Decision`]'s order), so a log of 100,000 turns is
/// indexed in a fraction of what parsing every record would cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Brief<'a> {
    pub ts: &'a str,
    pub surface: &'a str,
    pub host: &'a str,
    pub mode: &'a str,
    pub injected_tokens: usize,
    /// Tool-schema tokens (shown, hidden), when the turn was planned.
    pub tools: Option<(usize, usize)>,
    /// The turn has an `error`.
    pub failed: bool,
}

/// The [`Brief`] of one log line (without its newline), or `None` when the line is not a
/// record as this log writes it (a caller then parses the whole line, or skips it).
pub fn brief(line: &[u8]) -> Option<Brief<'_>> {
    use memchr::memmem;
    let mut rest = line.strip_prefix(b"{")?;
    let ts = plain_field(&mut rest, b"ts")?;
    let surface = plain_field(&mut rest, b"surface")?;
    let host = if rest.starts_with(b"\"host\":") {
        plain_field(&mut rest, b"host")?
    } else {
        ""
    };
    let mode = plain_field(&mut rest, b"mode")?;
    // In compact JSON a quote inside a string is escaped, so `,"key":` with bare quotes is a key.
    // These keys occur once each, at the top level (or, for the token counts, in `tools`).
    let number_after = |hay: &[u8], key: &[u8]| -> Option<usize> {
        let at = memmem::find(hay, key)? + key.len();
        let digits = hay[at..].iter().take_while(|b| b.is_ascii_digit()).count();
        std::str::from_utf8(&hay[at..at + digits])
            .ok()?
            .parse()
            .ok()
    };
    let injected_tokens = number_after(rest, b",\"injected_tokens\":")?;
    let tools = match memmem::find(rest, b",\"tools\":{") {
        Some(at) => {
            let t = &rest[at..];
            Some((
                number_after(t, b"\"tokens_shown\":")?,
                number_after(t, b"\"tokens_hidden\":")?,
            ))
        }
        None => None,
    };
    // `error` is the last field; a `,"error":` followed by a number would be a key of
    // `elapsed_ms`.
    let failed = memmem::rfind(rest, b",\"error\":\"").is_some();
    Some(Brief {
        ts,
        surface,
        host,
        mode,
        injected_tokens,
        tools,
        failed,
    })
}

/// Reads `"key":"value",` from the front of `rest`; `None` unless the value is a string
/// without escapes.
fn plain_field<'a>(rest: &mut &'a [u8], key: &[u8]) -> Option<&'a str> {
    let r = rest
        .strip_prefix(b"\"")?
        .strip_prefix(key)?
        .strip_prefix(b"\":\"")?;
    let end = memchr::memchr2(b'"', b'\\', r)?;
    if r[end] != b'"' {
        return None;
    }
    let value = std::str::from_utf8(&r[..end]).ok()?;
    *rest = r[end + 1..].strip_prefix(b",")?;
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_credentials_and_keeps_the_rest() {
        assert_eq!(
            redact("use key sk-abcdefghijklmnop1234 now"),
            "use key [redacted] now"
        );
        assert_eq!(
            redact("Authorization: Bearer abc.def-ghi_jkl123"),
            "Authorization: Bearer [redacted]"
        );
        assert_eq!(
            redact("api_key=supersecretvalue and more"),
            "api_key=[redacted] and more"
        );
        assert_eq!(
            redact("extract tables from a PDF"),
            "extract tables from a PDF"
        );
    }

    #[test]
    fn rotates_and_tails_across_the_rotation() {
        let tmp = tempfile::tempdir().unwrap();
        let log = DecisionLog::new(tmp.path().join("logs/d.jsonl"), 600);
        for i in 0..10 {
            log.append(&Decision::new(
                "hook",
                "claude-code",
                "auto",
                &format!("query {i}"),
            ))
            .unwrap();
        }
        assert!(log.rotated().exists());
        assert!(std::fs::metadata(log.path()).unwrap().len() <= 600);
        let last = log.tail(3).unwrap();
        let qs: Vec<_> = last.iter().map(|d| d.query.as_str()).collect();
        assert_eq!(qs, ["query 7", "query 8", "query 9"]);
    }

    #[test]
    fn a_brief_reads_what_the_whole_record_says() {
        let mut plain = Decision::new("hook", "codex", "auto", "extract tables");
        plain.injected_tokens = 1234;
        let mut tricky = Decision::new(
            "serve",
            "",
            "plan",
            r#"say ,"injected_tokens":9 and ,"error":"x" and ,"tools":{"tokens_shown":1 \ “quotes”"#,
        );
        tricky.injected_tokens = 7;
        tricky.tools = Some(LoggedTools {
            tokens_shown: 310,
            tokens_hidden: 4200,
            ..LoggedTools::default()
        });
        tricky.elapsed_ms.insert("error".into(), 3.0);
        tricky.diagnostics = vec![r#"hub: ,"error":"down""#.into()];
        let mut failed = Decision::new("mcp", "", "skill_search", "q");
        failed.error = Some("deadline passed".into());
        for d in [plain, tricky, failed] {
            let line = serde_json::to_vec(&d).unwrap();
            let b = brief(&line).unwrap_or_else(|| panic!("{}", String::from_utf8_lossy(&line)));
            assert_eq!(b.ts, d.ts);
            assert_eq!(b.surface, d.surface);
            assert_eq!(b.host, d.host);
            assert_eq!(b.mode, d.mode);
            assert_eq!(b.injected_tokens, d.injected_tokens);
            assert_eq!(
                b.tools,
                d.tools.as_ref().map(|t| (t.tokens_shown, t.tokens_hidden))
            );
            assert_eq!(
                b.failed,
                d.error.is_some(),
                "{}",
                String::from_utf8_lossy(&line)
            );
        }
        // Not a record as written here: the caller falls back to parsing it.
        assert_eq!(brief(br#"{"surface":"hook","ts":"x"}"#), None);
        assert_eq!(brief(b"not json"), None);
        assert_eq!(
            brief(br#"{"ts":"t","surface":"ho\"ok","mode":"auto","query":"","injected_chars":0,"injected_tokens":0}"#),
            None
        );
    }

    #[test]
    fn timestamps_are_rfc3339() {
        let ts = now_rfc3339();
        assert_eq!(ts.len(), 24, "{ts}");
        assert!(ts.ends_with('Z') && ts.as_bytes()[10] == b'T', "{ts}");
        assert!(ts.starts_with("20"), "{ts}");
    }
}
