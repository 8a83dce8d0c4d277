//! Golden files for every string a model reads from the tools, and the tools' behaviour on a
//! real index. `UPDATE_GOLDEN=1 cargo test` rewrites the golden files after a deliberate change.

use skillsearch_core::config::{self, Layers};
use skillsearch_core::index::{IndexConfig, Refresh, SkillIndex};
use skillsearch_core::turn::tools::*;
use skillsearch_core::{EligibilityEnv, Engine, Roots, SearchOptions, Turn};
use skillsearch_testkit::golden;
use std::fs;
use std::path::PathBuf;

#[test]
fn tool_strings_match_their_golden_files() {
    golden("skill_search.description.txt", SKILL_SEARCH_DESCRIPTION);
    golden(
        "skill_search.schema.json",
        &serde_json::to_string_pretty(&skill_search_schema()).unwrap(),
    );
    golden("skill_read.description.txt", SKILL_READ_DESCRIPTION);
    golden(
        "skill_read.schema.json",
        &serde_json::to_string_pretty(&skill_read_schema()).unwrap(),
    );
    let replies = [
        EMPTY_QUERY_REPLY.to_owned(),
        miss_reply("  make a sandwich "),
        UNAVAILABLE_REPLY.to_owned(),
        EMPTY_ID_REPLY.to_owned(),
        unknown_id_reply("local/nope"),
        bad_path_reply(
            "local/x",
            "../etc/passwd",
            "the path must be relative to the skill directory, without `..`",
        ),
        continuation_note(0, 38_412, 181_890),
        offset_past_end_reply(200_000, 181_890),
        bad_detail_reply("summary"),
    ]
    .join("\n");
    golden("replies.txt", &replies);
    golden(
        "context_preamble.txt",
        skillsearch_core::turn::CONTEXT_PREAMBLE,
    );
}

#[test]
fn description_keeps_its_four_parts_and_the_convention_clause() {
    let paragraphs: Vec<&str> = SKILL_SEARCH_DESCRIPTION.split('\n').collect();
    assert!(paragraphs.len() >= 4, "newline-joined parts");
    assert!(
        SKILL_SEARCH_DESCRIPTION.contains("internal convention, template, standard or \"our\" way")
    );
    assert!(SKILL_SEARCH_DESCRIPTION.contains("An empty result is a normal answer"));
    let schema = skill_search_schema();
    assert_eq!(schema["required"], serde_json::json!(["query"]));
    assert_eq!(schema["additionalProperties"], false);
}

struct Lib {
    _tmp: tempfile::TempDir,
    idx: SkillIndex,
    root: PathBuf,
}

fn library() -> Lib {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("skills");
    let dir = root.join("pdf-tables");
    fs::create_dir_all(dir.join("references/deep")).unwrap();
    fs::create_dir_all(dir.join("scripts")).unwrap();
    fs::write(dir.join("SKILL.md"), "---\nname: pdf-tables\ndescription: Extract tables from PDF files\n---\n\nRun `{baseDir}/scripts/x.py`.\n").unwrap();
    fs::write(dir.join("scripts/x.py"), "print('x')\n").unwrap();
    fs::write(
        dir.join("references/forms.md"),
        "# Forms\nAcroForm notes.\n",
    )
    .unwrap();
    fs::write(dir.join("references/deep/more.md"), "more\n").unwrap();
    fs::write(dir.join("references/.hidden"), "h").unwrap();
    fs::write(dir.join(".env"), "API_KEY=sk-secret").unwrap();
    fs::create_dir_all(dir.join(".git")).unwrap();
    fs::write(dir.join(".git/config"), "[remote]").unwrap();
    std::os::unix::fs::symlink(dir.join(".env"), dir.join("references/notes.md")).unwrap();
    // A long reference: 3,000 numbered lines (~30,000 tokens).
    let long: String = (0..3000)
        .map(|i| format!("Line {i}: step {i} of the long procedure, with its details.\n"))
        .collect();
    fs::write(dir.join("references/long.md"), long).unwrap();
    fs::write(dir.join("references/blob.bin"), b"\x00\x01\x02").unwrap();
    fs::write(dir.join("references/big.md"), "x".repeat(300 * 1024)).unwrap();
    fs::write(tmp.path().join("secret.txt"), "top secret").unwrap();
    std::os::unix::fs::symlink(
        tmp.path().join("secret.txt"),
        dir.join("references/escape.md"),
    )
    .unwrap();
    let roots = Roots::explicit([&root]);
    let (idx, _) = SkillIndex::open(
        &roots,
        &IndexConfig::new(tmp.path().join("home")),
        Refresh::Always,
        &|_| {},
    )
    .unwrap();
    Lib {
        _tmp: tmp,
        idx,
        root,
    }
}

/// The engine of the default settings (heading `# Skills`, budget 8000, nothing remote),
/// every skill eligible.
fn engine() -> Engine {
    let s = config::resolve(&Layers::default()).unwrap();
    Engine::new(&s, std::path::Path::new("/nonexistent"))
        .with_eligibility(EligibilityEnv::allow_all())
        .with_search_options(SearchOptions::default())
}

fn search(lib: &Lib, q: &str) -> String {
    engine().skill_search(&lib.idx, q, &Turn::default()).0
}

fn skill_read(idx: &SkillIndex, id: &str, path: Option<&str>) -> String {
    engine().skill_read(idx, id, path, 0, &Turn::default())
}

#[test]
fn skill_search_replies() {
    let lib = library();
    assert_eq!(search(&lib, "   "), EMPTY_QUERY_REPLY);
    assert_eq!(search(&lib, "bake bread"), miss_reply("bake bread"));
    let hit = search(&lib, "extract pdf tables");
    let dir = lib.root.join("pdf-tables");
    assert!(
        hit.starts_with("# Skills\n\n### Skill: pdf-tables  [local/pdf-tables]\n"),
        "{hit}"
    );
    assert!(
        hit.contains(&format!("Run `{}/scripts/x.py`.", dir.display())),
        "{hit}"
    );
}

#[test]
fn skill_read_lists_files_and_reads_one_safely() {
    let lib = library();
    let full = skill_read(&lib.idx, "local/pdf-tables", None);
    assert!(full.contains("### Skill: pdf-tables  [local/pdf-tables]"));
    assert!(full.ends_with("Files in the skill directory (read one with `path`):\n- references/big.md\n- references/blob.bin\n- references/forms.md\n- references/long.md\n- references/deep/more.md\n- scripts/x.py\n"), "{full}");
    assert_eq!(
        skill_read(&lib.idx, "pdf-tables", Some("references/forms.md")),
        "# Forms\nAcroForm notes.\n"
    );
    assert_eq!(skill_read(&lib.idx, " ", None), EMPTY_ID_REPLY);
    assert_eq!(
        skill_read(&lib.idx, "local/nope", None),
        unknown_id_reply("local/nope")
    );
    let id = "local/pdf-tables";
    let r = |p: &str| skill_read(&lib.idx, id, Some(p));
    assert_eq!(
        r("../secret.txt"),
        bad_path_reply(
            id,
            "../secret.txt",
            "the path must be relative to the skill directory, without `..`"
        )
    );
    assert_eq!(
        r("/etc/passwd"),
        bad_path_reply(
            id,
            "/etc/passwd",
            "the path must be relative to the skill directory, without `..`"
        )
    );
    assert_eq!(
        r("references/escape.md"),
        bad_path_reply(
            id,
            "references/escape.md",
            "it points outside the skill directory"
        )
    );
    assert_eq!(
        r("references/blob.bin"),
        bad_path_reply(id, "references/blob.bin", "it is a binary file")
    );
    assert!(r("references/big.md").contains("it is 307200 bytes"));
    assert_eq!(
        r("references/none.md"),
        bad_path_reply(id, "references/none.md", "no such file")
    );
    assert_eq!(
        r("references"),
        bad_path_reply(id, "references", "it is not a file")
    );
}

#[test]
fn skill_read_refuses_hidden_files_however_they_are_named() {
    let lib = library();
    let id = "local/pdf-tables";
    let hidden = "hidden files and directories (a name starting with `.`) are not served";
    for p in [".env", ".git/config", "references/.hidden", "./.env"] {
        assert_eq!(
            skill_read(&lib.idx, id, Some(p)),
            bad_path_reply(id, p, hidden),
            "{p}"
        );
    }
    // Through a link with an innocent name.
    assert_eq!(
        skill_read(&lib.idx, id, Some("references/notes.md")),
        bad_path_reply(id, "references/notes.md", hidden)
    );
}

#[test]
fn a_long_file_comes_in_parts_that_join_up_to_the_whole() {
    let lib = library();
    let id = "local/pdf-tables";
    let whole = fs::read_to_string(lib.root.join("pdf-tables/references/long.md")).unwrap();
    let total = whole.chars().count();
    let counter = skillsearch_core::tokens::TokenCounter::new();
    let mut joined = String::new();
    let mut offset = 0;
    let mut parts = 0;
    loop {
        let reply = engine().skill_read(
            &lib.idx,
            id,
            Some("references/long.md"),
            offset,
            &Turn::default(),
        );
        assert!(counter.count(&reply) <= MAX_READ_TOKENS, "part {parts}");
        parts += 1;
        let Some((text, note)) = reply.rsplit_once("\n[Part of a long text") else {
            joined.push_str(&reply);
            break;
        };
        let next: usize = note
            .rsplit_once("\"offset\": ")
            .unwrap()
            .1
            .trim_end_matches(" to read on.]")
            .parse()
            .unwrap();
        assert!(note.contains(&format!("of {total}")), "{note}");
        // Parts end at a line end.
        assert!(text.ends_with('\n'), "{:?}", &text[text.len() - 20..]);
        joined.push_str(text);
        offset = next;
        assert!(parts < 20, "no progress");
    }
    assert!(parts >= 3, "{parts} parts");
    assert_eq!(joined, whole);
    // Past the end, and a short file read whole whatever the budget.
    assert_eq!(
        engine().skill_read(
            &lib.idx,
            id,
            Some("references/long.md"),
            total,
            &Turn::default()
        ),
        offset_past_end_reply(total, total)
    );
    assert_eq!(
        skill_read(&lib.idx, id, Some("references/forms.md")),
        "# Forms\nAcroForm notes.\n"
    );
}

/// #21 item 12: a FIFO where a skill's file was (swapped in after indexing, so the walk never
/// saw it) is refused at once; opening it for reading would block until some writer came.
#[test]
fn a_fifo_in_a_skill_never_blocks_skill_read() {
    use skillsearch_testkit::sys;
    let lib = library();
    let dir = lib.root.join("pdf-tables");
    sys::mkfifo(&dir.join("references/pipe.md"));
    sys::mkfifo(&dir.join("SKILL.md"));
    let limit = std::time::Duration::from_secs(10);
    let id = "local/pdf-tables";
    let (reply, listing) = sys::within(limit, "skill_read of a FIFO", move || {
        let r = skill_read(&lib.idx, id, Some("references/pipe.md"));
        let l = skill_read(&lib.idx, id, None);
        (r, l)
    });
    assert_eq!(
        reply,
        bad_path_reply(id, "references/pipe.md", "it is not a file")
    );
    assert!(!listing.contains("Run `"), "{listing}");
}

/// `detail: "catalog"`: the matching skills, best first, each with its id, name, description,
/// the words of its name and description the query shares and what its full text costs; no
/// body. The answer is a golden file (the ids' directory differs run by run, so it is left out).
#[test]
fn a_catalogue_lists_the_matches_without_their_bodies() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("skills");
    for (dir, name, desc, body) in [
        (
            "pdf-tables",
            "pdf-tables",
            "Extract tables from scanned PDF invoices",
            "SECRET-BODY-1 ".repeat(200),
        ),
        (
            "pdf-forms",
            "pdf-forms",
            "Fill PDF forms and flatten them",
            "SECRET-BODY-2 ".repeat(20),
        ),
        (
            "csv-clean",
            "csv-clean",
            "Clean CSV files exported from invoices",
            "Uses tables of PDF origin. SECRET-BODY-3".into(),
        ),
        (
            "git-bisect",
            "git-bisect",
            "Find the commit that broke a build",
            "x".into(),
        ),
    ] {
        skillsearch_testkit::write_skill(&root, dir, name, desc, &body);
    }
    let (idx, _) = SkillIndex::open(
        &Roots::explicit([&root]),
        &IndexConfig::new(tmp.path().join("home")),
        Refresh::Always,
        &|_| {},
    )
    .unwrap();
    let turn = Turn {
        detail: Some(config::Detail::Catalog),
        ..Turn::default()
    };
    let (text, r) =
        engine().skill_search(&idx, "extract the tables from scanned PDF invoices", &turn);
    assert!(!text.contains("SECRET-BODY"), "{text}");
    assert_eq!(r.unwrap().hits.len(), 3, "{text}");
    // A skill's cost includes its directory line, whose temporary path varies run by run.
    let sizes = regex::Regex::new(r"about (\d+) tokens").unwrap();
    let costs: Vec<usize> = sizes
        .captures_iter(&text)
        .map(|c| c[1].parse().unwrap())
        .collect();
    assert!(
        costs[0] > 1000 && costs[1] < 200 && costs[2] < 300,
        "{costs:?}"
    );
    golden("catalogue.txt", &sizes.replace_all(&text, "about N tokens"));
    // The full answer, asked per call, still carries the bodies.
    let full = Turn {
        detail: Some(config::Detail::Full),
        ..Turn::default()
    };
    let (text, _) =
        engine().skill_search(&idx, "extract the tables from scanned PDF invoices", &full);
    assert!(text.contains("SECRET-BODY-1"), "{text}");
}
