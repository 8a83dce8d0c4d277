//! The decision log as the page reads it: an index of every line (which file, where, and the
//! few fields a filter or the funnel needs, from [`brief`]), built once and then extended by
//! what was appended since; a page of turns reads and parses only its own lines. A rotation
//! (the current file renamed to `.1`) or a file that shrank is indexed again from the start.

use serde::Serialize;
use skillsearch_core::secrets::redact;
use skillsearch_core::turn::decision_log::{Decision, DecisionLog, brief};
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;

/// Bytes read at a time while indexing.
const CHUNK: usize = 8 << 20;
/// Longest line indexed; a longer one (not written by this log) is skipped.
const MAX_LINE: usize = 4 << 20;

/// One indexed line.
#[derive(Debug, Clone)]
struct Entry {
    /// 0: the rotated file, 1: the current one.
    file: u8,
    offset: u64,
    len: u32,
    ts: Box<str>,
    surface: u32,
    host: u32,
    mode: u32,
    tokens: u32,
    tools: Option<(u32, u32)>,
    failed: bool,
}

/// What is known of one of the two files.
#[derive(Debug, Default, Clone, Copy)]
struct Scanned {
    /// (device, inode) of the file indexed.
    id: Option<(u64, u64)>,
    /// Bytes indexed: every line up to here.
    upto: u64,
    /// The file's length when it was last looked at.
    len: u64,
}

/// Which turns a request wants.
#[derive(Debug, Default, Clone)]
pub(crate) struct Filter {
    pub host: Option<String>,
    pub mode: Option<String>,
    pub surface: Option<String>,
    /// RFC 3339 prefix: turns at or after it.
    pub since: Option<String>,
    /// RFC 3339 prefix: turns up to it (a date includes the whole day).
    pub until: Option<String>,
}

/// How many turns carry one value of a field.
#[derive(Debug, Serialize)]
pub(crate) struct Facet {
    pub name: String,
    pub turns: usize,
}

/// One turn of a page: its number in the log (1 = the oldest line kept) and the record.
#[derive(Debug, Serialize)]
pub(crate) struct Row {
    pub n: usize,
    #[serde(flatten)]
    pub decision: Decision,
}

/// One page of turns, newest first.
#[derive(Debug, Serialize)]
pub(crate) struct Page {
    pub log: PathBuf,
    /// Turns in the log.
    pub all: usize,
    /// Turns the filter keeps.
    pub total: usize,
    pub page: usize,
    pub pages: usize,
    pub per_page: usize,
    pub turns: Vec<Row>,
    pub hosts: Vec<Facet>,
    pub modes: Vec<Facet>,
    pub surfaces: Vec<Facet>,
    /// Lines that are not records (skipped).
    pub unreadable: usize,
    /// Milliseconds this answer took, indexing what was new included.
    pub elapsed_ms: f64,
}

/// A page past the last one.
#[derive(Debug)]
pub(crate) struct PastTheEnd {
    pub page: usize,
    pub pages: usize,
}

/// One point of the funnel: consecutive turns, their time span and what they cost.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct Point {
    pub from: String,
    pub to: String,
    pub turns: usize,
    /// Mean tokens injected or returned per turn.
    pub mean: f64,
    pub max: usize,
}

/// Tool-schema tokens of the planned turns at one point.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct ToolPoint {
    pub from: String,
    pub to: String,
    pub turns: usize,
    pub shown_mean: f64,
    pub hidden_mean: f64,
}

/// What the log says turns cost.
#[derive(Debug, Serialize)]
pub(crate) struct Spent {
    /// Turns that searched skills (every mode but `plan`).
    pub turns: usize,
    pub tokens: u64,
    pub points: Vec<Point>,
    /// Turns whose tool visibility was planned.
    pub tool_turns: usize,
    pub tools_shown: u64,
    pub tools_hidden: u64,
    pub tool_points: Vec<ToolPoint>,
    pub failed: usize,
}

/// The index of one decision log.
pub(crate) struct Turns {
    log: DecisionLog,
    scanned: [Scanned; 2],
    entries: Vec<Entry>,
    names: Vec<String>,
    ids: HashMap<String, u32>,
    unreadable: usize,
}

impl Turns {
    pub(crate) fn new(log: DecisionLog) -> Turns {
        Turns {
            log,
            scanned: [Scanned::default(); 2],
            entries: Vec::new(),
            names: Vec::new(),
            ids: HashMap::new(),
            unreadable: 0,
        }
    }

    pub(crate) fn path(&self) -> &std::path::Path {
        self.log.path()
    }

    fn files(&self) -> [PathBuf; 2] {
        [self.log.rotated(), self.log.path().to_path_buf()]
    }

    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(s.to_owned());
        self.ids.insert(s.to_owned(), i);
        i
    }

    /// Indexes what changed since the last call.
    pub(crate) fn update(&mut self) -> std::io::Result<()> {
        let files = self.files();
        let stat = |p: &PathBuf| -> std::io::Result<Option<((u64, u64), u64)>> {
            match std::fs::metadata(p) {
                Ok(m) => Ok(Some(((m.dev(), m.ino()), m.len()))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            }
        };
        let (rotated, current) = (stat(&files[0])?, stat(&files[1])?);
        let rotated_changed = rotated.map(|r| r.0) != self.scanned[0].id
            || rotated.is_some_and(|(_, len)| len != self.scanned[0].len);
        if rotated_changed {
            self.entries.clear();
            self.unreadable = 0;
            self.scanned = [Scanned::default(); 2];
            if let Some((id, len)) = rotated {
                self.scanned[0].id = Some(id);
                self.scanned[0].len = len;
                self.scan(0, &files[0])?;
            }
        }
        match current {
            None => {
                self.entries.retain(|e| e.file == 0);
                self.scanned[1] = Scanned::default();
            }
            Some((id, len)) => {
                if self.scanned[1].id != Some(id) || len < self.scanned[1].upto {
                    self.entries.retain(|e| e.file == 0);
                    self.scanned[1] = Scanned {
                        id: Some(id),
                        ..Scanned::default()
                    };
                }
                if len > self.scanned[1].upto {
                    self.scan(1, &files[1])?;
                }
            }
        }
        Ok(())
    }

    /// Indexes the complete lines of file `which` after what is indexed of it.
    fn scan(&mut self, which: u8, path: &std::path::Path) -> std::io::Result<()> {
        let mut f = skillsearch_core::fsio::open_regular(path)?;
        let mut offset = self.scanned[which as usize].upto;
        f.seek(SeekFrom::Start(offset))?;
        let mut buf: Vec<u8> = Vec::with_capacity(CHUNK);
        let mut chunk = vec![0u8; CHUNK];
        loop {
            let n = f.read(&mut chunk)?;
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
            let mut start = 0;
            while let Some(nl) = memchr::memchr(b'\n', &buf[start..]) {
                let line = &buf[start..start + nl];
                self.add(which, offset + start as u64, line);
                start += nl + 1;
            }
            offset += start as u64;
            buf.drain(..start);
            if buf.len() > MAX_LINE {
                // Not a line of this log: skip to its end.
                self.unreadable += 1;
                offset += buf.len() as u64;
                buf.clear();
                let mut rest = Vec::new();
                loop {
                    let n = f.read(&mut chunk)?;
                    if n == 0 {
                        break;
                    }
                    if let Some(nl) = memchr::memchr(b'\n', &chunk[..n]) {
                        offset += nl as u64 + 1;
                        rest.extend_from_slice(&chunk[nl + 1..n]);
                        break;
                    }
                    offset += n as u64;
                }
                buf = rest;
            }
        }
        self.scanned[which as usize].upto = offset;
        Ok(())
    }

    fn add(&mut self, file: u8, offset: u64, line: &[u8]) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let entry = match brief(line) {
            Some(b) => Entry {
                file,
                offset,
                len: line.len() as u32,
                ts: b.ts.into(),
                surface: self.intern(b.surface),
                host: self.intern(b.host),
                mode: self.intern(b.mode),
                tokens: b.injected_tokens.min(u32::MAX as usize) as u32,
                tools: b.tools.map(|(s, h)| (s as u32, h as u32)),
                failed: b.failed,
            },
            // Not as this log writes it (older or hand-made): read the whole record.
            None => match serde_json::from_slice::<Decision>(line) {
                Ok(d) => Entry {
                    file,
                    offset,
                    len: line.len() as u32,
                    ts: d.ts.as_str().into(),
                    surface: self.intern(&d.surface),
                    host: self.intern(&d.host),
                    mode: self.intern(&d.mode),
                    tokens: d.injected_tokens.min(u32::MAX as usize) as u32,
                    tools: d
                        .tools
                        .as_ref()
                        .map(|t| (t.tokens_shown as u32, t.tokens_hidden as u32)),
                    failed: d.error.is_some(),
                },
                Err(_) => {
                    self.unreadable += 1;
                    return;
                }
            },
        };
        self.entries.push(entry);
    }

    /// The positions (oldest first) of the entries `filter` keeps.
    fn select(&self, filter: &Filter) -> Vec<usize> {
        let id = |v: &Option<String>| -> Option<Option<u32>> {
            v.as_ref().map(|v| self.ids.get(v.as_str()).copied())
        };
        let (host, mode, surface) = (id(&filter.host), id(&filter.mode), id(&filter.surface));
        // A value no turn has keeps nothing.
        if [host, mode, surface]
            .iter()
            .any(|f| matches!(f, Some(None)))
        {
            return Vec::new();
        }
        let until_day = filter.until.as_deref().filter(|u| u.len() == 10);
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| {
                host.is_none_or(|h| h == Some(e.host))
                    && mode.is_none_or(|m| m == Some(e.mode))
                    && surface.is_none_or(|s| s == Some(e.surface))
                    && filter.since.as_deref().is_none_or(|s| &*e.ts >= s)
                    && match (until_day, filter.until.as_deref()) {
                        (Some(day), _) => e.ts.get(..10).is_some_and(|d| d <= day),
                        (None, Some(u)) => &*e.ts <= u,
                        (None, None) => true,
                    }
            })
            .map(|(i, _)| i)
            .collect()
    }

    fn facets(&self, of: impl Fn(&Entry) -> u32) -> Vec<Facet> {
        let mut counts: HashMap<u32, usize> = HashMap::new();
        for e in &self.entries {
            *counts.entry(of(e)).or_default() += 1;
        }
        let mut out: Vec<Facet> = counts
            .into_iter()
            .map(|(id, turns)| Facet {
                name: self.names[id as usize].clone(),
                turns,
            })
            .collect();
        out.sort_by(|a, b| b.turns.cmp(&a.turns).then_with(|| a.name.cmp(&b.name)));
        out
    }

    /// The record at entry `i`, read from its file.
    fn read(&self, i: usize, files: &[Option<std::fs::File>; 2]) -> std::io::Result<Decision> {
        let e = &self.entries[i];
        let f = files[e.file as usize].as_ref().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::NotFound, "the log file went away")
        })?;
        let mut line = vec![0u8; e.len as usize];
        f.read_exact_at(&mut line, e.offset)?;
        serde_json::from_slice(&line).map_err(std::io::Error::other)
    }

    fn open_files(&self) -> [Option<std::fs::File>; 2] {
        let files = self.files();
        [0, 1].map(|i| skillsearch_core::fsio::open_regular(&files[i]).ok())
    }

    /// Page `page` (1: the newest turns) of `per_page` turns that `filter` keeps.
    pub(crate) fn page(
        &self,
        filter: &Filter,
        page: usize,
        per_page: usize,
        started: std::time::Instant,
    ) -> Result<Page, PageError> {
        let kept = self.select(filter);
        let pages = kept.len().div_ceil(per_page).max(1);
        if page > pages {
            return Err(PageError::PastTheEnd(PastTheEnd { page, pages }));
        }
        let files = self.open_files();
        let mut turns = Vec::with_capacity(per_page);
        for &i in kept.iter().rev().skip((page - 1) * per_page).take(per_page) {
            match self.read(i, &files) {
                Ok(mut decision) => {
                    // The log redacts what it records; a line written otherwise (by hand, by an
                    // older version) is redacted here too.
                    decision.query = redact(&decision.query);
                    decision.rewritten_query = decision.rewritten_query.map(|q| redact(&q));
                    turns.push(Row { n: i + 1, decision })
                }
                Err(e) => return Err(PageError::Read(e)),
            }
        }
        Ok(Page {
            log: self.log.path().to_path_buf(),
            all: self.entries.len(),
            total: kept.len(),
            page,
            pages,
            per_page,
            turns,
            hosts: self.facets(|e| e.host),
            modes: self.facets(|e| e.mode),
            surfaces: self.facets(|e| e.surface),
            unreadable: self.unreadable,
            elapsed_ms: started.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// Tokens per turn of the turns `filter` keeps, in at most `points` points of consecutive
    /// turns (and likewise tool-schema tokens of the planned turns).
    pub(crate) fn spent(&self, filter: &Filter, points: usize) -> Spent {
        let kept = self.select(filter);
        let plan = self.ids.get("plan").copied();
        let searched: Vec<&Entry> = kept
            .iter()
            .map(|&i| &self.entries[i])
            .filter(|e| Some(e.mode) != plan)
            .collect();
        let planned: Vec<&Entry> = kept
            .iter()
            .map(|&i| &self.entries[i])
            .filter(|e| e.tools.is_some())
            .collect();
        let span = |group: &[&Entry]| {
            (
                group.first().map(|e| e.ts.to_string()).unwrap_or_default(),
                group.last().map(|e| e.ts.to_string()).unwrap_or_default(),
            )
        };
        let per = |n: usize| n.div_ceil(points.max(1)).max(1);
        let out_points = searched
            .chunks(per(searched.len()))
            .map(|g| {
                let (from, to) = span(g);
                let sum: u64 = g.iter().map(|e| u64::from(e.tokens)).sum();
                Point {
                    from,
                    to,
                    turns: g.len(),
                    mean: sum as f64 / g.len() as f64,
                    max: g.iter().map(|e| e.tokens as usize).max().unwrap_or(0),
                }
            })
            .collect();
        let tool_points = planned
            .chunks(per(planned.len()))
            .map(|g| {
                let (from, to) = span(g);
                let n = g.len() as f64;
                let (s, h) = g.iter().fold((0u64, 0u64), |(s, h), e| {
                    let (ts, th) = e.tools.unwrap_or_default();
                    (s + u64::from(ts), h + u64::from(th))
                });
                ToolPoint {
                    from,
                    to,
                    turns: g.len(),
                    shown_mean: s as f64 / n,
                    hidden_mean: h as f64 / n,
                }
            })
            .collect();
        let tools = |f: fn(&(u32, u32)) -> u32| -> u64 {
            planned
                .iter()
                .filter_map(|e| e.tools.as_ref())
                .map(|t| u64::from(f(t)))
                .sum()
        };
        Spent {
            turns: searched.len(),
            tokens: searched.iter().map(|e| u64::from(e.tokens)).sum(),
            points: out_points,
            tool_turns: planned.len(),
            tools_shown: tools(|t| t.0),
            tools_hidden: tools(|t| t.1),
            tool_points,
            failed: kept.iter().filter(|&&i| self.entries[i].failed).count(),
        }
    }

    /// The skill ids (without `local/`) the last `n` turns found, and how many turns that was.
    pub(crate) fn recently_found(&self, n: usize) -> (std::collections::HashSet<String>, usize) {
        let files = self.open_files();
        let from = self.entries.len().saturating_sub(n);
        let mut found = std::collections::HashSet::new();
        for i in from..self.entries.len() {
            if let Ok(d) = self.read(i, &files) {
                for h in d.hits {
                    let id = h.id.strip_prefix("local/").unwrap_or(&h.id).to_owned();
                    found.insert(id);
                }
            }
        }
        (found, self.entries.len() - from)
    }
}

/// Why a page cannot be answered.
#[derive(Debug)]
pub(crate) enum PageError {
    PastTheEnd(PastTheEnd),
    Read(std::io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(i: usize, host: &str, mode: &str) -> Decision {
        let mut d = Decision::new("hook", host, mode, &format!("query {i}"));
        d.ts = format!("2026-12-{:02}T10:00:00.{:03}Z", 1 + i % 3, i % 1000);
        d.injected_tokens = i;
        d
    }

    #[test]
    fn pages_filters_and_follows_appends_and_rotations() {
        let tmp = tempfile::tempdir().unwrap();
        let log = DecisionLog::new(tmp.path().join("d.jsonl"), 1 << 30);
        let mut turns = Turns::new(log.clone());
        turns.update().unwrap();
        let all = Filter::default();
        let now = std::time::Instant::now();
        let p = turns.page(&all, 1, 10, now).unwrap();
        assert_eq!((p.all, p.total, p.pages, p.turns.len()), (0, 0, 1, 0));
        for i in 0..25 {
            let host = if i % 5 == 0 { "codex" } else { "claude-code" };
            log.append(&decision(i, host, "auto")).unwrap();
        }
        // A line that is not a record, and a half-written one at the end.
        std::fs::OpenOptions::new()
            .append(true)
            .open(log.path())
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"garbage\n{\"ts\":\"20"))
            .unwrap();
        turns.update().unwrap();
        let p = turns.page(&all, 1, 10, now).unwrap();
        assert_eq!((p.all, p.total, p.pages, p.unreadable), (25, 25, 3, 1));
        let queries: Vec<&str> = p.turns.iter().map(|r| r.decision.query.as_str()).collect();
        assert_eq!(queries[0], "query 24");
        assert_eq!(p.turns[0].n, 25);
        let last = turns.page(&all, 3, 10, now).unwrap();
        assert_eq!(last.turns.len(), 5);
        assert_eq!(last.turns[4].decision.query, "query 0");
        assert!(matches!(
            turns.page(&all, 4, 10, now),
            Err(PageError::PastTheEnd(PastTheEnd { page: 4, pages: 3 }))
        ));
        let codex = Filter {
            host: Some("codex".into()),
            ..Filter::default()
        };
        assert_eq!(turns.page(&codex, 1, 10, now).unwrap().total, 5);
        let day2 = Filter {
            since: Some("2026-12-02".into()),
            until: Some("2026-12-02".into()),
            ..Filter::default()
        };
        let p = turns.page(&day2, 1, 50, now).unwrap();
        assert!(
            p.turns
                .iter()
                .all(|r| r.decision.ts.starts_with("2026-12-02"))
        );
        assert_eq!(p.total, 8);
        let nobody = Filter {
            host: Some("nobody".into()),
            ..Filter::default()
        };
        assert_eq!(turns.page(&nobody, 1, 10, now).unwrap().total, 0);
        let hosts: Vec<(&str, usize)> =
            p.hosts.iter().map(|f| (f.name.as_str(), f.turns)).collect();
        assert_eq!(hosts, [("claude-code", 20), ("codex", 5)]);

        // The half-written line completes; a planned turn follows; then the log rotates.
        std::fs::OpenOptions::new()
            .append(true)
            .open(log.path())
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"garbage\n"))
            .unwrap();
        let mut planned = decision(25, "openclaw", "plan");
        planned.tools = Some(skillsearch_core::turn::decision_log::LoggedTools {
            tokens_shown: 100,
            tokens_hidden: 900,
            ..Default::default()
        });
        log.append(&planned).unwrap();
        turns.update().unwrap();
        let spent = turns.spent(&all, 4);
        assert_eq!((spent.turns, spent.tool_turns), (25, 1));
        assert_eq!(spent.tokens, (0..25).sum::<u64>());
        assert_eq!((spent.tools_shown, spent.tools_hidden), (100, 900));
        assert_eq!(spent.points.len(), 4);
        assert_eq!(spent.points.iter().map(|p| p.turns).sum::<usize>(), 25);
        assert_eq!(spent.points[0].max, 6);
        std::fs::rename(log.path(), log.rotated()).unwrap();
        log.append(&decision(26, "codex", "on_demand")).unwrap();
        turns.update().unwrap();
        let p = turns.page(&all, 1, 100, now).unwrap();
        assert_eq!(p.all, 27);
        assert_eq!(p.turns[0].decision.query, "query 26");
        assert_eq!(p.turns[1].decision.mode, "plan");
        let (found, n) = turns.recently_found(5);
        assert_eq!((found.len(), n), (0, 5));

        // A tool call through MCP names no host: the surface keeps it, and so does "no host".
        let mut call = Decision::new("mcp", "", "skill_search", "pdf");
        call.ts = "2026-12-03T11:00:00.000Z".into();
        log.append(&call).unwrap();
        turns.update().unwrap();
        let mcp = Filter {
            surface: Some("mcp".into()),
            ..Filter::default()
        };
        let p = turns.page(&mcp, 1, 10, now).unwrap();
        assert_eq!((p.all, p.total), (28, 1));
        assert_eq!(p.turns[0].decision.mode, "skill_search");
        let no_host = Filter {
            host: Some(String::new()),
            ..Filter::default()
        };
        assert_eq!(turns.page(&no_host, 1, 10, now).unwrap().total, 1);
        let hook_on_demand = Filter {
            surface: Some("hook".into()),
            mode: Some("on_demand".into()),
            ..Filter::default()
        };
        assert_eq!(turns.page(&hook_on_demand, 1, 10, now).unwrap().total, 1);
        let surfaces: Vec<(&str, usize)> = p
            .surfaces
            .iter()
            .map(|f| (f.name.as_str(), f.turns))
            .collect();
        assert_eq!(surfaces, [("hook", 27), ("mcp", 1)]);
    }
}
