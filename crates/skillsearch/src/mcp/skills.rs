//! The MCP Skills extension (SEP-2640, `io.modelcontextprotocol/skills`) served by
//! `skillsearch mcp` over the same index its tools search: `skills/list` (paginated),
//! `skills/get`, and the skill files through `resources/read` and `resources/directory/read`.
//!
//! The catalogue holds one entry per skill that is valid, not shadowed by a skill of the same
//! name in a root of higher precedence, and eligible on this machine (the gate), at
//! `skill://<name>/SKILL.md`. A name the spec rejects (it must be lowercase letters and digits
//! with single inner hyphens, at most 64 characters), and a second skill of one name in the same
//! root, are left out and logged at debug level: one bad entry would otherwise fail the whole
//! listing. The catalogue is rebuilt when the index commits (its generation changes).
//!
//! A skill's files are `SKILL.md` and every regular file under its directory that `skill_read`
//! would also treat as the skill's: no dotfiles or dot-directories, no `node_modules` and the
//! like, no symbolic links (listed or followed), at most [`MAX_FILE_BYTES`] each. Each digest is
//! of the bytes `resources/read` serves. A skill whose tree passes [`MAX_SKILL_FILES`] files or
//! [`MAX_SKILL_BYTES`] bytes gets the `"dynamic"` manifest: its files stay readable one by one
//! and its directories browsable, but no digests are computed for it.

use rmcp::ErrorData as McpError;
use rmcp::model::{
    DIRECTORY_MIME_TYPE, Resource, ResourceContents, SKILL_MD, Skill, SkillFrontmatter,
    SkillResource, SkillResources,
};
use serde_json::Value;
use skillsearch_core::corpus::SKIP_DIRS;
use skillsearch_core::corpus::frontmatter;
use skillsearch_core::{EligibilityEnv, SkillIndex};
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Skills per `skills/list` (and `resources/list`) page.
pub const PAGE_SIZE: usize = 100;
/// Largest file served; larger ones are left out of manifests and refused.
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// Files above which a skill's manifest is `"dynamic"` (the SDK's own catalogue limit).
pub const MAX_SKILL_FILES: usize = 512;
/// Bytes above which a skill's manifest is `"dynamic"` (the SDK's own catalogue limit).
pub const MAX_SKILL_BYTES: u64 = 16 * 1024 * 1024;
/// Deepest directory walked below a skill directory.
const MAX_DEPTH: usize = 8;
const SCHEME: &str = "skill://";
const CURSOR_PREFIX: &str = "after:";

/// One listed skill.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    /// `skill://<name>/SKILL.md`.
    pub uri: String,
    /// The index id (directory relative to its root), for logs.
    pub id: String,
    pub dir: PathBuf,
    pub skill_md: PathBuf,
    pub description: String,
}

/// Every listed skill of one index generation, sorted by name (names are unique).
#[derive(Debug, Default)]
pub struct Catalogue {
    entries: Vec<Entry>,
    by_name: HashMap<String, usize>,
}

impl Catalogue {
    /// The skills of `index` a client may list: valid, not shadowed, eligible under `gate`,
    /// with a name the spec accepts, the first of each name.
    pub fn build(index: &SkillIndex, gate: &EligibilityEnv) -> skillsearch_core::Result<Catalogue> {
        let mut entries: Vec<Entry> = Vec::new();
        let mut by_name: HashMap<String, usize> = HashMap::new();
        for (hit, shadowed) in index.skills()? {
            if shadowed {
                tracing::debug!(target: "mcp", id = %hit.id, name = %hit.name, "skills: shadowed by a skill of the same name in a root of higher precedence; not listed");
                continue;
            }
            if let Err(ex) = gate.check(&hit.meta) {
                tracing::debug!(target: "mcp", id = %hit.id, reason = %ex.reason, "skills: not eligible on this machine; not listed");
                continue;
            }
            let uri = skill_md_uri(&hit.name);
            let probe = Skill::new(
                uri.clone(),
                SkillFrontmatter::new(hit.name.clone(), ""),
                SkillResources::Dynamic,
            );
            if let Err(e) = probe.validate() {
                tracing::debug!(target: "mcp", id = %hit.id, error = %e, "skills: name not allowed by the Skills extension; not listed");
                continue;
            }
            if let Some(&first) = by_name.get(&hit.name) {
                tracing::debug!(target: "mcp", id = %hit.id, first = %entries[first].id, name = %hit.name, "skills: a skill of this name in the same root is listed already; not listed");
                continue;
            }
            by_name.insert(hit.name.clone(), entries.len());
            entries.push(Entry {
                name: hit.name,
                uri,
                id: hit.id,
                dir: hit.skill_dir,
                skill_md: hit.path,
                description: hit.description,
            });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let by_name = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.name.clone(), i))
            .collect();
        Ok(Catalogue { entries, by_name })
    }

    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.by_name.get(name).map(|&i| &self.entries[i])
    }

    /// One page: the entries after the cursor's name, and the cursor of the next page. Names
    /// are the cursor, so a page stays right when the index changes between two requests.
    pub fn page(&self, cursor: Option<&str>) -> Result<(&[Entry], Option<String>), McpError> {
        let start = match cursor {
            None => 0,
            Some(c) => {
                let after = c.strip_prefix(CURSOR_PREFIX).ok_or_else(|| {
                    McpError::invalid_params(format!("invalid cursor {c:?}"), None)
                })?;
                self.entries.partition_point(|e| e.name.as_str() <= after)
            }
        };
        let end = (start + PAGE_SIZE).min(self.entries.len());
        let page = &self.entries[start..end];
        let next = (end < self.entries.len())
            .then(|| page.last().map(|e| format!("{CURSOR_PREFIX}{}", e.name)))
            .flatten();
        Ok((page, next))
    }
}

/// `skill://<name>/SKILL.md`.
pub fn skill_md_uri(name: &str) -> String {
    format!("{SCHEME}{}/{SKILL_MD}", encode(name))
}

/// The URI of `rel` (`/`-separated, relative to the skill directory) in skill `name`.
fn file_uri(name: &str, rel: &str) -> String {
    let mut uri = format!("{SCHEME}{}", encode(name));
    for seg in rel.split('/').filter(|s| !s.is_empty()) {
        uri.push('/');
        uri.push_str(&encode(seg));
    }
    uri
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn encode(seg: &str) -> String {
    let mut out = String::with_capacity(seg.len());
    for b in seg.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn decode(seg: &str) -> Option<String> {
    let bytes = seg.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = seg.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A `skill://` URI taken apart: the skill name and the path inside its directory.
#[derive(Debug)]
pub struct Target {
    pub name: String,
    /// Decoded, checked segments; empty for the skill directory itself.
    pub segments: Vec<String>,
}

impl Target {
    fn rel(&self) -> String {
        self.segments.join("/")
    }
}

/// Parses a `skill://` URI. `Ok(None)`: not a `skill://` URI at all. `Err`: a `skill://` URI
/// that would leave the skill directory or name something the catalogue never serves (`..`,
/// `.`, dotfiles, encoded separators, a query or fragment).
pub fn parse_uri(uri: &str) -> Result<Option<Target>, McpError> {
    let Some(rest) = uri.strip_prefix(SCHEME) else {
        return Ok(None);
    };
    let refuse = |why: &str| {
        Err(McpError::invalid_params(
            format!("{uri} is refused: {why}"),
            None,
        ))
    };
    if rest.contains(['?', '#']) {
        return refuse("skill file URIs take no query or fragment");
    }
    let mut parts = rest.split('/');
    let Some(name) = parts.next().and_then(decode).filter(|n| !n.is_empty()) else {
        return refuse("no skill name");
    };
    let raw: Vec<&str> = parts.collect();
    let last = raw.len().saturating_sub(1);
    let mut segments = Vec::with_capacity(raw.len());
    for (i, seg) in raw.iter().enumerate() {
        // A trailing slash names the directory.
        if seg.is_empty() && i == last {
            continue;
        }
        let Some(seg) = decode(seg) else {
            return refuse("a path segment is not percent-encoded UTF-8");
        };
        if seg == ".." || seg == "." {
            return refuse("the path must stay inside the skill directory (no `.` or `..`)");
        }
        if seg.is_empty() || seg.contains(['/', '\\', '\0']) {
            return refuse("empty or encoded path separators");
        }
        if seg.starts_with('.') || SKIP_DIRS.contains(&seg.as_str()) {
            return refuse("hidden and tool directories are not part of a skill");
        }
        segments.push(seg);
    }
    Ok(Some(Target { name, segments }))
}

/// Where a target is on disk, after checking it resolves inside the skill directory with no
/// symbolic link on the way (the listing never follows one, so reads do not either).
fn resolve(entry: &Entry, target: &Target, uri: &str) -> Result<PathBuf, McpError> {
    let base = entry
        .dir
        .canonicalize()
        .map_err(|_| McpError::resource_not_found(format!("{uri}: skill directory gone"), None))?;
    let wanted = base.join(target.rel());
    let full = wanted
        .canonicalize()
        .map_err(|_| McpError::resource_not_found(format!("no such skill file {uri}"), None))?;
    if !full.starts_with(&base) {
        return Err(McpError::invalid_params(
            format!("{uri} is refused: it points outside the skill directory"),
            None,
        ));
    }
    if full != wanted {
        return Err(McpError::invalid_params(
            format!("{uri} is refused: it is reached through a symbolic link"),
            None,
        ));
    }
    Ok(full)
}

/// Reads at most `cap` bytes of a regular file; `None` if it is larger or unreadable.
fn read_capped(path: &Path, cap: u64) -> Option<Vec<u8>> {
    // Opened without blocking and checked on the descriptor: a FIFO is refused, not waited on.
    let f = skillsearch_core::fsio::open_regular(path).ok()?;
    let mut bytes = Vec::new();
    f.take(cap + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= cap).then_some(bytes)
}

/// `resources/read` of a `skill://` file: text when the bytes are UTF-8 without NUL, base64
/// otherwise; the bytes are the ones the manifest digests.
pub fn read(cat: &Catalogue, uri: &str) -> Result<ResourceContents, McpError> {
    let target = parse_uri(uri)?
        .ok_or_else(|| McpError::resource_not_found(format!("unknown resource {uri}"), None))?;
    let entry = cat
        .get(&target.name)
        .ok_or_else(|| McpError::resource_not_found(format!("unknown skill in {uri}"), None))?;
    // As deep as the manifest walk goes, and no deeper.
    if target.segments.len() > MAX_DEPTH + 1 {
        return Err(McpError::resource_not_found(
            format!("no such skill file {uri}"),
            None,
        ));
    }
    let full = resolve(entry, &target, uri)?;
    let meta = std::fs::metadata(&full)
        .map_err(|_| McpError::resource_not_found(format!("no such skill file {uri}"), None))?;
    if meta.is_dir() {
        return Err(McpError::invalid_params(
            format!("{uri} is a directory; list it with resources/directory/read"),
            None,
        ));
    }
    if !meta.is_file() {
        return Err(McpError::resource_not_found(
            format!("{uri} is not a regular file"),
            None,
        ));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(McpError::invalid_params(
            format!(
                "{uri} is {} bytes; files up to {MAX_FILE_BYTES} bytes are served",
                meta.len()
            ),
            None,
        ));
    }
    let bytes = read_capped(&full, MAX_FILE_BYTES)
        .ok_or_else(|| McpError::resource_not_found(format!("{uri} cannot be read"), None))?;
    Ok(contents(uri, bytes))
}

fn contents(uri: &str, bytes: Vec<u8>) -> ResourceContents {
    let mime = mime_of(uri);
    let bytes = if bytes.contains(&0) {
        bytes
    } else {
        match String::from_utf8(bytes) {
            Ok(text) => {
                return ResourceContents::text(text, uri)
                    .with_mime_type(mime.unwrap_or("text/plain"));
            }
            Err(e) => e.into_bytes(),
        }
    };
    use base64::Engine as _;
    ResourceContents::blob(
        base64::engine::general_purpose::STANDARD.encode(&bytes),
        uri,
    )
    .with_mime_type(mime.unwrap_or("application/octet-stream"))
}

/// A MIME type from the file extension, for the common files of skills.
fn mime_of(path: &str) -> Option<&'static str> {
    let ext = path.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "md" | "markdown" => "text/markdown",
        "txt" => "text/plain",
        "py" => "text/x-python",
        "sh" | "bash" => "text/x-shellscript",
        "js" | "mjs" | "cjs" => "text/javascript",
        "ts" => "text/x-typescript",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "toml" => "application/toml",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "csv" => "text/csv",
        "xml" => "application/xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "svg" => "image/svg+xml",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        _ => return None,
    })
}

/// Files and subdirectories of one directory that belong to the skill, sorted by name.
fn children(dir: &Path) -> (Vec<(String, u64)>, Vec<String>) {
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return (files, dirs);
    };
    let mut entries: Vec<_> = rd.filter_map(|e| e.ok()).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let Some(name) = e.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if name.starts_with('.') || SKIP_DIRS.contains(&name.as_str()) {
            continue;
        }
        // `DirEntry::file_type` does not follow symbolic links: they are neither files nor dirs.
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            dirs.push(name);
        } else if ft.is_file() {
            let Ok(meta) = e.metadata() else { continue };
            if meta.len() > MAX_FILE_BYTES {
                tracing::debug!(target: "mcp", path = %e.path().display(), size = meta.len(), "skills: file too large to serve; left out");
                continue;
            }
            files.push((name, meta.len()));
        }
    }
    (files, dirs)
}

/// The skill's files (relative, `/`-separated, `SKILL.md` first), or `None` when the tree is
/// larger than a manifest may be.
fn walk(dir: &Path) -> Option<Vec<String>> {
    let mut out = vec![SKILL_MD.to_owned()];
    let mut total = 0u64;
    let mut stack: Vec<(String, usize)> = vec![(String::new(), 0)];
    while let Some((rel, depth)) = stack.pop() {
        let (files, dirs) = children(&dir.join(&rel));
        for (name, size) in files {
            if rel.is_empty() && name == SKILL_MD {
                continue;
            }
            total += size;
            out.push(if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            });
            if out.len() > MAX_SKILL_FILES || total > MAX_SKILL_BYTES {
                return None;
            }
        }
        if depth < MAX_DEPTH {
            for d in dirs.into_iter().rev() {
                let sub = if rel.is_empty() {
                    d
                } else {
                    format!("{rel}/{d}")
                };
                stack.push((sub, depth + 1));
            }
        }
    }
    Some(out)
}

/// The `skills/get` entry of one listed skill: its frontmatter as written and the manifest of
/// its files. `Err` says why it cannot be served (the caller leaves it out).
pub fn skill(entry: &Entry) -> Result<Skill, String> {
    let md = read_capped(&entry.skill_md, MAX_FILE_BYTES)
        .ok_or_else(|| "SKILL.md cannot be read or is too large".to_owned())?;
    let mut fields = frontmatter::fields(&String::from_utf8_lossy(&md));
    match fields.remove("name") {
        Some(Value::String(n)) if n.trim() == entry.name => {}
        _ => {
            return Err(format!(
                "the frontmatter of SKILL.md does not say `name: {}`",
                entry.name
            ));
        }
    }
    let description = match fields.remove("description") {
        Some(Value::String(d)) => d,
        _ => entry.description.clone(),
    };
    let mut front = SkillFrontmatter::new(entry.name.clone(), description);
    front.extra = fields;
    let resources = match walk(&entry.dir) {
        None => {
            tracing::debug!(target: "mcp", id = %entry.id, "skills: tree above {MAX_SKILL_FILES} files or {MAX_SKILL_BYTES} bytes; manifest is dynamic");
            SkillResources::Dynamic
        }
        Some(files) => {
            let mut manifest = vec![SkillResource::from_bytes(entry.uri.clone(), &md)];
            for rel in files.iter().skip(1) {
                // A file that vanished or grew since the walk is left out.
                if let Some(bytes) = read_capped(&entry.dir.join(rel), MAX_FILE_BYTES) {
                    manifest.push(SkillResource::from_bytes(
                        file_uri(&entry.name, rel),
                        &bytes,
                    ));
                }
            }
            SkillResources::Files(manifest)
        }
    };
    let skill = Skill::new(entry.uri.clone(), front, resources);
    skill.validate().map_err(|e| e.to_string())?;
    Ok(skill)
}

/// Entries for a page of the catalogue; a skill that cannot be served is left out and logged.
pub fn skills(entries: &[Entry]) -> Vec<Skill> {
    entries
        .iter()
        .filter_map(|e| match skill(e) {
            Ok(s) => Some(s),
            Err(why) => {
                tracing::debug!(target: "mcp", id = %e.id, why = %why, "skills: not listed");
                None
            }
        })
        .collect()
}

/// `resources/directory/read`: the direct children of a directory of a listed skill.
pub fn read_directory(cat: &Catalogue, uri: &str) -> Result<Vec<Resource>, McpError> {
    let not_dir = || McpError::invalid_params(format!("not a skill directory: {uri}"), None);
    let target = parse_uri(uri)?.ok_or_else(not_dir)?;
    let entry = cat.get(&target.name).ok_or_else(not_dir)?;
    let full = resolve(entry, &target, uri).map_err(|e| {
        if e.code == rmcp::model::ErrorCode::RESOURCE_NOT_FOUND {
            not_dir()
        } else {
            e
        }
    })?;
    if !full.is_dir() {
        return Err(not_dir());
    }
    let rel = target.rel();
    let join = |name: &str| {
        if rel.is_empty() {
            name.to_owned()
        } else {
            format!("{rel}/{name}")
        }
    };
    let (files, dirs) = children(&full);
    let mut out = Vec::new();
    for d in dirs {
        out.push(
            Resource::new(file_uri(&entry.name, &join(&d)), d.clone())
                .with_mime_type(DIRECTORY_MIME_TYPE),
        );
    }
    for (f, size) in files {
        let uri = file_uri(&entry.name, &join(&f));
        let mut r = Resource::new(uri.clone(), f).with_size(size);
        if let Some(m) = mime_of(&uri) {
            r = r.with_mime_type(m);
        }
        out.push(r);
        if out.len() >= MAX_SKILL_FILES {
            break;
        }
    }
    Ok(out)
}

/// `resources/list`: the `SKILL.md` of each skill on a page.
pub fn skill_md_resources(entries: &[Entry]) -> Vec<Resource> {
    entries
        .iter()
        .map(|e| {
            Resource::new(e.uri.clone(), SKILL_MD)
                .with_description(e.description.clone())
                .with_mime_type("text/markdown")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip_and_refuse_escapes() {
        assert_eq!(skill_md_uri("pdf-tables"), "skill://pdf-tables/SKILL.md");
        assert_eq!(
            file_uri("a", "references/my notes.md"),
            "skill://a/references/my%20notes.md"
        );
        let t = parse_uri("skill://a/references/my%20notes.md")
            .unwrap()
            .unwrap();
        assert_eq!(
            (t.name.as_str(), t.rel()),
            ("a", "references/my notes.md".into())
        );
        for bad in [
            "skill://a/../b/SKILL.md",
            "skill://a/%2E%2E/b/SKILL.md",
            "skill://a/refs%2F..%2F..%2Fx",
            "skill://a/./SKILL.md",
            "skill://a//SKILL.md",
            "skill://a/.env",
            "skill://a/node_modules/x.js",
            "skill://a/SKILL.md?x=1",
        ] {
            assert!(parse_uri(bad).is_err(), "{bad}");
        }
        assert!(parse_uri("file:///etc/passwd").unwrap().is_none());
    }
}
