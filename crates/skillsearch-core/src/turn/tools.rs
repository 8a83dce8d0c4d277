//! The two tools offered in `on_demand` mode, `skill_search` and `skill_read`: their names,
//! descriptions, input schemas and every fixed reply. A model reads each of these strings, so
//! each is one constant pinned by a golden test, and every host gets the same text.

use super::placeholders::Places;
use super::render::{self, RenderSkill};
use super::{Engine, Retrieval, Turn, pipeline};
use crate::config::Detail;
use crate::corpus;
use crate::index::SkillIndex;
use crate::remote::Remote;
use crate::remote::source::Source;
use crate::tokens::TokenCounter;
use serde_json::{Value, json};
use std::io::Read;
use std::path::{Component, Path};

pub const SKILL_SEARCH: &str = "skill_search";
pub const SKILL_READ: &str = "skill_read";

/// Four parts, one per paragraph: what the tool does; what a skill is; when to reach for it
/// (the third bullet — internal conventions — is load-bearing); how to query and what an empty
/// result means.
pub const SKILL_SEARCH_DESCRIPTION: &str = "Search the skill library for a procedure that fits the task: get the best-matching skills in full, or a catalogue of them to read with skill_read.
A skill is a written workflow for one specific job (filling a PDF form, building a slide deck, migrating a database schema), with the exact commands, files and in-house conventions to follow.
Reach for it when:
- the task is a multi-step procedure you would otherwise improvise;
- the task names a format, tool or workflow whose details you would have to guess;
- the user asks about an internal convention, template, standard or \"our\" way of doing something: search before answering that you do not know.
Search with the task's own words; names, descriptions and instructions are matched. An empty result is a normal answer: no skill applies, so proceed on your own.";

pub const SKILL_SEARCH_QUERY_DESCRIPTION: &str = "What you need to do, in the task's own words, e.g. \"extract tables from a scanned PDF invoice\".";

pub const SKILL_SEARCH_DETAIL_DESCRIPTION: &str = "Optional: \"full\" returns the best-matching skills in full; \"catalog\" lists the matching skills (id, name, description, why each matched, size in tokens) so that you read only the one that fits, with skill_read. Default: the server's setting (full unless configured otherwise).";

/// The first lines of a catalogue answer (`detail: "catalog"`).
pub const CATALOGUE_HEADING: &str = "# Skills: catalogue";
pub const CATALOGUE_NOTE: &str = "These skills match the task, best first. Read the one that fits in full with skill_read and its id before you follow it; if none fits, proceed without one.";
/// Most skills a catalogue lists (or `top_k`, when larger).
pub const CATALOGUE_ENTRIES: usize = 5;

pub const SKILL_READ_DESCRIPTION: &str = "Read one skill from the library in full: its instructions, its directory, and the files it ships (references/, scripts/, assets/).
Pass the id shown in a skill_search result, e.g. \"local/pdf-tables\". Add `path` to read one of the skill's files instead, relative to its directory, e.g. \"references/forms.md\". A long text comes in parts: a part ends by naming the `offset` that reads on.";

pub const SKILL_READ_ID_DESCRIPTION: &str =
    "A skill id from a skill_search result, e.g. \"local/pdf-tables\".";
pub const SKILL_READ_PATH_DESCRIPTION: &str =
    "Optional: a file inside the skill directory, relative to it, e.g. \"references/forms.md\".";
pub const SKILL_READ_OFFSET_DESCRIPTION: &str =
    "Optional: where to read on in a long text, as the end of the previous part names it.";

/// Reply to a blank query.
pub const EMPTY_QUERY_REPLY: &str = "skill_search needs a query describing the task.";
/// Reply when search fails or runs out of time; never a tool error.
pub const UNAVAILABLE_REPLY: &str =
    "Skill search is unavailable right now. Proceed without a skill.";
/// Reply to `skill_read` without an id.
pub const EMPTY_ID_REPLY: &str = "skill_read needs the id of a skill from a skill_search result.";

/// Reply when nothing matches.
pub fn miss_reply(query: &str) -> String {
    format!(
        "No skill in the library matches \"{}\". Proceed without one.",
        query.trim()
    )
}

/// Reply to a `detail` that is neither `full` nor `catalog`.
pub fn bad_detail_reply(detail: &str) -> String {
    format!(
        "skill_search's detail must be \"full\" or \"catalog\", not \"{}\".",
        render::one_line(detail)
    )
}

/// Reply to an id the library does not hold.
pub fn unknown_id_reply(id: &str) -> String {
    format!("No skill with id \"{id}\" in the library. Use an id from a skill_search result.")
}

/// Reply to a `path` that cannot be read.
pub fn bad_path_reply(id: &str, path: &str, why: &str) -> String {
    format!("Cannot read \"{path}\" of skill \"{id}\": {why}.")
}

/// The line that ends one part of a long text: characters `from..to` of `total` were shown and
/// `"offset": to` reads on.
pub fn continuation_note(from: usize, to: usize, total: usize) -> String {
    format!(
        "[Part of a long text: characters {from}–{to} of {total}. Call skill_read again with the same id and path and \"offset\": {to} to read on.]"
    )
}

/// Reply to an `offset` at or past the end of the text.
pub fn offset_past_end_reply(offset: usize, total: usize) -> String {
    format!("Nothing to read at offset {offset}: the text has {total} characters.")
}

/// Most tokens (o200k) one `skill_read` reply carries; a longer text comes in parts.
pub const MAX_READ_TOKENS: usize = 10_000;

/// Largest skill file `skill_read` returns.
pub const MAX_READ_BYTES: u64 = 256 * 1024;
/// Most files listed for one skill.
pub const MAX_LISTED_FILES: usize = 200;
/// Folders whose files `skill_read` lists.
pub const LISTED_DIRS: &[&str] = &["references", "scripts", "assets", "examples"];

/// Both tools as hosts that take plain definitions want them (`name`, `description`,
/// `parameters`), plus `unavailable`: the reply a host adapter gives when it cannot reach the
/// engine.
pub fn tool_definitions() -> Value {
    json!([
        {"name": SKILL_SEARCH, "description": SKILL_SEARCH_DESCRIPTION, "parameters": skill_search_schema(), "unavailable": UNAVAILABLE_REPLY},
        {"name": SKILL_READ, "description": SKILL_READ_DESCRIPTION, "parameters": skill_read_schema(), "unavailable": UNAVAILABLE_REPLY},
    ])
}

/// `{"type":"object","properties":{"query":…},"required":["query"],"additionalProperties":false}`.
pub fn skill_search_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": SKILL_SEARCH_QUERY_DESCRIPTION},
            "detail": {"type": "string", "enum": crate::config::DETAILS, "description": SKILL_SEARCH_DETAIL_DESCRIPTION}
        },
        "required": ["query"],
        "additionalProperties": false
    })
}

pub fn skill_read_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": SKILL_READ_ID_DESCRIPTION},
            "path": {"type": "string", "description": SKILL_READ_PATH_DESCRIPTION},
            "offset": {"type": "integer", "minimum": 0, "description": SKILL_READ_OFFSET_DESCRIPTION}
        },
        "required": ["id"],
        "additionalProperties": false
    })
}

/// Both tools as bare OpenAI-style function schemas `{"name", "description", "parameters"}`, for
/// host plugins that register the tools themselves (the daemon's `tools` method serves these).
pub fn function_schemas() -> Vec<Value> {
    vec![
        json!({"name": SKILL_SEARCH, "description": SKILL_SEARCH_DESCRIPTION, "parameters": skill_search_schema()}),
        json!({"name": SKILL_READ, "description": SKILL_READ_DESCRIPTION, "parameters": skill_read_schema()}),
    ]
}

/// The text a `skill_search` call returns, and the retrieval behind it (for the decision log).
pub(super) fn skill_search(
    engine: &Engine,
    index: &SkillIndex,
    query: &str,
    turn: &Turn,
) -> (String, Option<Retrieval>) {
    if query.trim().is_empty() {
        return (EMPTY_QUERY_REPLY.to_owned(), None);
    }
    let detail = turn.detail.unwrap_or(engine.settings().search_answer);
    // The model asked: give it the best matches, however weak (no relevance guard); it judges
    // them. A catalogue lists more of them: an entry costs a few dozen tokens.
    let top_k = match detail {
        Detail::Full => turn.top_k,
        Detail::Catalog => Some(
            turn.top_k
                .unwrap_or(engine.settings().top_k)
                .max(CATALOGUE_ENTRIES),
        ),
    };
    let opts = engine.search_options(top_k);
    match pipeline::run(
        engine,
        index,
        query,
        &opts,
        turn,
        false,
        &|_| Ok(Vec::new()),
        None,
    ) {
        Ok(r) if r.text.is_empty() => (miss_reply(query), Some(r)),
        Ok(r) if detail == Detail::Catalog => (catalogue(query, &r, engine.counter()), Some(r)),
        Ok(r) => (r.text.clone(), Some(r)),
        Err(e) => {
            tracing::warn!(target: "tools", error = %e, "skill_search failed");
            (UNAVAILABLE_REPLY.to_owned(), None)
        }
    }
}

/// A catalogue of the skills `r` rendered: per skill its id, name, description, the words of
/// its name and description that the query shares, and the tokens its full text costs.
pub fn catalogue(query: &str, r: &Retrieval, counter: &TokenCounter) -> String {
    let wanted: std::collections::HashSet<String> =
        crate::index::analyzer::terms(query).into_iter().collect();
    let mut out = format!("{CATALOGUE_HEADING}\n\n{CATALOGUE_NOTE}\n");
    let heading_len = r.text.len() - r.piece_bytes.iter().sum::<usize>();
    let mut at = heading_len;
    for (i, (hit, len)) in r.hits.iter().zip(&r.piece_bytes).enumerate() {
        let piece = r.text.get(at..at + len).unwrap_or_default();
        at += len;
        let mut why: Vec<&str> = Vec::new();
        let hay = format!("{} {}", hit.name, hit.description);
        for word in hay
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            let matched = crate::index::analyzer::terms(word)
                .iter()
                .any(|t| wanted.contains(t));
            if matched && !why.iter().any(|w| w.eq_ignore_ascii_case(word)) && why.len() < 8 {
                why.push(word);
            }
        }
        let why = if why.is_empty() {
            "its instructions (no word of its name or description)".to_owned()
        } else {
            why.join(", ")
        };
        out.push_str(&format!(
            "\n{}. `{}` — {} (about {} tokens)\n   {}\n   Matched on: {}\n",
            i + 1,
            render::one_line(&hit.qualified_id),
            render::one_line(&hit.name),
            counter.count(piece.trim()),
            render::one_line(hit.description.trim()),
            why
        ));
    }
    out
}

/// The text a `skill_read` call returns (before paging). Never fails: problems are fixed
/// replies.
fn skill_read(
    index: &SkillIndex,
    id: &str,
    path: Option<&str>,
    heading: &str,
    places: Option<&Places>,
) -> String {
    let id = id.trim();
    if id.is_empty() {
        return EMPTY_ID_REPLY.to_owned();
    }
    let hit = match index.get(id) {
        Ok(Some(hit)) => hit,
        Ok(None) => return unknown_id_reply(id),
        Err(e) => {
            tracing::warn!(target: "tools", error = %e, "skill_read failed");
            return UNAVAILABLE_REPLY.to_owned();
        }
    };
    read_skill_at(
        &hit.name,
        &hit.qualified_id,
        &hit.path,
        &hit.skill_dir,
        path,
        heading,
        places,
    )
}

/// [`skill_read`] for any id a `skill_search` may have returned, the part of it at `offset`
/// (at most [`MAX_READ_TOKENS`]): a hub skill (`hub/<id>`) is read from its installed bundle,
/// installed first when the cache does not hold it yet.
pub(super) fn skill_read_any(
    engine: &Engine,
    index: &SkillIndex,
    id: &str,
    path: Option<&str>,
    offset: usize,
    turn: &Turn,
) -> String {
    let places = engine.places(index, turn);
    let text = read_whole(
        index,
        engine.remote(),
        id,
        path,
        &engine.settings().heading,
        turn,
        places.as_ref(),
    );
    part(&text, offset, MAX_READ_TOKENS, &TokenCounter::new())
}

/// The part of `text` that starts at character `offset` and holds at most `budget` tokens, cut
/// after a line end when one falls in its second half; a part that is not the last ends with
/// the [`continuation_note`]. A text that fits is returned whole.
fn part(text: &str, offset: usize, budget: usize, counter: &TokenCounter) -> String {
    // Whole when it fits; a text of more than 16 bytes a token is not counted (no o200k text
    // comes near that, and counting megabytes would cost the turn).
    if offset == 0 && text.len() <= budget * 16 && counter.fits(text, budget) {
        return text.to_owned();
    }
    let total = text.chars().count();
    if offset >= total {
        return offset_past_end_reply(offset, total);
    }
    let rest: Vec<char> = text.chars().skip(offset).collect();
    // The note's own tokens come out of the budget.
    let budget = budget.saturating_sub(64).max(1);
    // Start from ~4 characters a token and shrink until the chunk fits.
    let mut take = rest.len().min(budget * 4);
    let mut chunk: String = rest[..take].iter().collect();
    while take > 1 && !counter.fits(&chunk, budget) {
        take = (take * 3 / 4).max(1);
        chunk = rest[..take].iter().collect();
    }
    if take < rest.len()
        && let Some(nl) = chunk.rfind('\n')
        && chunk[..nl].chars().count() >= take / 2
    {
        chunk.truncate(nl + 1);
        take = chunk.chars().count();
    }
    if take >= rest.len() {
        return chunk;
    }
    let end = offset + take;
    format!("{chunk}\n{}", continuation_note(offset, end, total))
}

/// The whole text a `skill_read` of `id` (and `path`) returns.
fn read_whole(
    index: &SkillIndex,
    remote: &Remote,
    id: &str,
    path: Option<&str>,
    heading: &str,
    turn: &Turn,
    places: Option<&Places>,
) -> String {
    let id = id.trim();
    let Some((src, rest)) = remote.source_of(id) else {
        return skill_read(index, id, path, heading, places);
    };
    if rest.is_empty() {
        return unknown_id_reply(id);
    }
    let until = turn.deadline_for(src.download_timeout());
    let installed = match src {
        Source::Hub(hub) => hub.client().install(rest, None, until),
        Source::Market(m) => m.read(rest, until),
    };
    // A marketplace's skills are never trusted with placeholders.
    let places = places.filter(|_| src.trusted());
    match installed {
        Ok(inst) => {
            let name = corpus::load(&inst.skill_md, corpus::DEFAULT_MAX_FILE_BYTES)
                .meta
                .name;
            read_skill_at(&name, id, &inst.skill_md, &inst.dir, path, heading, places)
        }
        Err(
            crate::Error::HubStatus { status: 404, .. }
            | crate::Error::Market {
                status: Some(404), ..
            },
        ) => unknown_id_reply(id),
        Err(e) => {
            tracing::warn!(target: "tools", error = %e, id, source = src.label(), "skill_read of a remote skill failed");
            UNAVAILABLE_REPLY.to_owned()
        }
    }
}

/// A skill whose `SKILL.md` is `skill_md`: the rendered body and the files beside it, or the
/// file `path` under its directory.
fn read_skill_at(
    name: &str,
    qualified_id: &str,
    skill_md: &Path,
    dir: &Path,
    path: Option<&str>,
    heading: &str,
    places: Option<&Places>,
) -> String {
    if let Some(rel) = path.map(str::trim).filter(|p| !p.is_empty()) {
        return read_file(dir, qualified_id, rel);
    }
    let mut body = corpus::load(skill_md, corpus::DEFAULT_MAX_FILE_BYTES).body;
    if let Some(places) = places {
        let (expanded, unresolved) = places.expand(&body, Some(dir));
        for u in &unresolved {
            tracing::warn!(target: "tools", id = qualified_id, placeholder = %u.placeholder,
                why = u.why, "placeholder left as written");
        }
        if let std::borrow::Cow::Owned(text) = expanded {
            body = text;
        }
    }
    let skill = RenderSkill {
        name: name.to_owned(),
        qualified_id: qualified_id.to_owned(),
        skill_dir: Some(dir.to_path_buf()),
        body: body.into(),
    };
    let mut text = render::render(&[skill], heading, None, &TokenCounter::new()).text;
    let files = list_files(dir);
    if !files.is_empty() {
        text.push_str("\n\nFiles in the skill directory (read one with `path`):\n");
        for f in &files {
            text.push_str(&format!("- {}\n", render::one_line(f)));
        }
        if files.len() == MAX_LISTED_FILES {
            text.push_str(&format!("(only the first {MAX_LISTED_FILES} are listed)\n"));
        }
    }
    text
}

/// Files under the listed folders, relative to `dir`, sorted; symlinks and dotfiles are left out.
fn list_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack: Vec<std::path::PathBuf> =
        LISTED_DIRS.iter().map(|d| dir.join(d)).rev().collect();
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut entries: Vec<_> = rd.filter_map(|e| e.ok()).collect();
        entries.sort_by_key(|e| e.file_name());
        let mut subdirs = Vec::new();
        for e in entries {
            if e.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                subdirs.push(e.path());
            } else if ft.is_file() {
                if let Ok(rel) = e.path().strip_prefix(dir) {
                    out.push(rel.to_string_lossy().into_owned());
                }
                if out.len() == MAX_LISTED_FILES {
                    return out;
                }
            }
        }
        stack.extend(subdirs.into_iter().rev());
    }
    out
}

/// Why a hidden file is refused.
const HIDDEN: &str = "hidden files and directories (a name starting with `.`) are not served";

/// Whether a relative path names or passes through a hidden file or directory (`.env`,
/// `.git/config`): they hold secrets and tool state, never a skill's content.
fn is_hidden(rel: &Path) -> bool {
    rel.components().any(|c| match c {
        Component::Normal(name) => name.as_encoded_bytes().first() == Some(&b'.'),
        _ => false,
    })
}

/// Reads one file of a skill: relative, not hidden, inside the directory after symlinks are
/// resolved (and not hidden there either), a regular text file, at most [`MAX_READ_BYTES`].
fn read_file(dir: &Path, id: &str, rel: &str) -> String {
    let p = Path::new(rel);
    if p.is_absolute()
        || p.components().any(|c| {
            matches!(
                c,
                Component::ParentDir | Component::RootDir | Component::Prefix(_)
            )
        })
    {
        return bad_path_reply(
            id,
            rel,
            "the path must be relative to the skill directory, without `..`",
        );
    }
    if is_hidden(p) {
        return bad_path_reply(id, rel, HIDDEN);
    }
    let (Ok(base), Ok(full)) = (dir.canonicalize(), dir.join(p).canonicalize()) else {
        return bad_path_reply(id, rel, "no such file");
    };
    let Ok(inside) = full.strip_prefix(&base) else {
        return bad_path_reply(id, rel, "it points outside the skill directory");
    };
    // A link may lead to a hidden file (`notes.md -> .env`).
    if is_hidden(inside) {
        return bad_path_reply(id, rel, HIDDEN);
    }
    // Checked on the opened file, opened without blocking: a FIFO is refused, not waited on.
    let file = match crate::fsio::open_regular(&full) {
        Ok(f) => f,
        Err(e) if crate::fsio::is_not_regular(&e) => {
            return bad_path_reply(id, rel, "it is not a file");
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return bad_path_reply(id, rel, "no such file");
        }
        Err(_) => return bad_path_reply(id, rel, "it cannot be read"),
    };
    let Ok(meta) = file.metadata() else {
        return bad_path_reply(id, rel, "it cannot be read");
    };
    if meta.len() > MAX_READ_BYTES {
        return bad_path_reply(
            id,
            rel,
            &format!(
                "it is {} bytes; files up to {MAX_READ_BYTES} bytes are returned",
                meta.len()
            ),
        );
    }
    let mut bytes = Vec::new();
    if file.take(MAX_READ_BYTES).read_to_end(&mut bytes).is_err() {
        return bad_path_reply(id, rel, "it cannot be read");
    }
    if bytes.contains(&0) {
        return bad_path_reply(id, rel, "it is a binary file");
    }
    match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(_) => bad_path_reply(id, rel, "it is not UTF-8 text"),
    }
}
