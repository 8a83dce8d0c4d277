//! The persistent index against real files: incremental refresh, collisions, gating, corruption.

use skillsearch_core::index::{IndexConfig, Refresh, SkillIndex};
use skillsearch_core::{EligibilityEnv, Roots, SearchOptions};
use skillsearch_testkit::{write_file, write_skill};
use std::fs;
use std::path::Path;

fn open(
    home: &Path,
    roots: &Roots,
    refresh: Refresh,
) -> (SkillIndex, Option<skillsearch_core::RefreshReport>) {
    SkillIndex::open(roots, &IndexConfig::new(home), refresh, &|_| {}).unwrap()
}

fn ids(idx: &SkillIndex, q: &str) -> Vec<String> {
    let opts = SearchOptions {
        top_k: 10,
        ..SearchOptions::default()
    };
    idx.search(q, &opts, &EligibilityEnv::allow_all())
        .unwrap()
        .hits
        .into_iter()
        .map(|h| h.id)
        .collect()
}

#[test]
fn incremental_add_edit_delete_rename() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, root) = (tmp.path().join("home"), tmp.path().join("skills"));
    write_skill(
        &root,
        "pdf",
        "pdf-tables",
        "Extract tables from PDF files",
        "Use pdftk.",
    );
    write_skill(
        &root,
        "git",
        "git-bisect",
        "Find the commit that broke a test",
        "git bisect run",
    );
    let roots = Roots::explicit([&root]);
    let (idx, report) = open(&home, &roots, Refresh::Always);
    let r = report.unwrap();
    assert_eq!((r.added, r.updated, r.removed), (2, 0, 0));
    assert_eq!(ids(&idx, "pdf tables"), ["pdf"]);
    drop(idx);

    // Unchanged: a fresh open reads nothing.
    let (_, report) = open(&home, &roots, Refresh::Always);
    let r = report.unwrap();
    assert_eq!((r.added, r.updated, r.removed, r.unchanged), (0, 0, 0, 2));

    // Add, edit, delete, rename in one go.
    write_skill(
        &root,
        "k8s",
        "kubernetes-deploy",
        "Deploy to a Kubernetes cluster",
        "kubectl rollout",
    );
    std::thread::sleep(std::time::Duration::from_millis(10));
    write_skill(
        &root,
        "pdf",
        "pdf-tables",
        "Extract tables from scanned invoices",
        "Use OCR first, then pdftk.",
    );
    fs::remove_dir_all(root.join("git")).unwrap();
    write_skill(
        &root,
        "csv",
        "csv-cleanup",
        "Clean messy CSV",
        "strip cells",
    );
    fs::rename(root.join("csv"), root.join("tabular-cleanup")).unwrap();
    let (idx, report) = open(&home, &roots, Refresh::Always);
    let r = report.unwrap();
    assert_eq!(
        (r.added, r.updated, r.removed, r.unchanged),
        (2, 1, 1, 0),
        "{r:?}"
    );
    assert_eq!(ids(&idx, "kubernetes"), ["k8s"]);
    assert_eq!(ids(&idx, "invoices"), ["pdf"]);
    assert!(ids(&idx, "bisect commit").is_empty());
    assert_eq!(ids(&idx, "csv"), ["tabular-cleanup"]);

    // Refresh::Never serves the index as it is, even when the disk changed.
    fs::remove_dir_all(root.join("k8s")).unwrap();
    let (idx, report) = open(&home, &roots, Refresh::Never);
    assert!(report.is_none());
    assert_eq!(ids(&idx, "kubernetes"), ["k8s"]);
}

#[test]
fn first_root_wins_a_name_collision_and_same_root_duplicates_are_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, a, b) = (
        tmp.path().join("home"),
        tmp.path().join("a"),
        tmp.path().join("b"),
    );
    write_skill(
        &a,
        "deploy",
        "deploy",
        "Deploy the web app",
        "workspace copy",
    );
    write_skill(
        &b,
        "deploy",
        "deploy",
        "Deploy the web app to staging",
        "managed copy",
    );
    write_skill(&b, "other", "deploy-helper", "Deploy helper", "x");
    write_skill(&a, "v1", "resnet", "image classifier resnet", "x");
    write_skill(&a, "v2", "resnet", "image classifier resnet variant", "x");
    let roots = Roots::explicit([&a, &b]);
    let (idx, _) = open(&home, &roots, Refresh::Always);
    let opts = SearchOptions {
        top_k: 10,
        ..SearchOptions::default()
    };
    let r = idx
        .search("deploy staging", &opts, &EligibilityEnv::allow_all())
        .unwrap();
    let hits: Vec<_> = r.hits.iter().map(|h| (h.root, h.id.as_str())).collect();
    assert!(hits.contains(&(0, "deploy")));
    assert!(
        !hits.contains(&(1, "deploy")),
        "shadowed copy must not be offered: {hits:?}"
    );
    assert!(r.dropped.iter().any(|d| d.exclusion.code == "shadowed"));
    let mut resnet = ids(&idx, "resnet classifier");
    resnet.sort();
    assert_eq!(resnet, ["v1", "v2"]);
    let diags = idx.diagnostics().unwrap();
    assert!(
        diags
            .iter()
            .any(|d| d.code == "name-collision" && d.path == b.join("deploy/SKILL.md")),
        "{diags:?}"
    );
    assert!(
        diags
            .iter()
            .any(|d| d.code == "duplicate-name" && d.path == a.join("v2/SKILL.md")),
        "{diags:?}"
    );
    let why = r
        .dropped
        .iter()
        .find(|d| d.exclusion.code == "shadowed")
        .unwrap();
    assert_eq!((why.root, why.id.as_str()), (1, "deploy"));
    assert!(why.exclusion.reason.contains("`deploy`"), "{why:?}");

    // The winner removed (its document is deleted, not yet merged away) and the loser edited:
    // the loser is offered, with what its file says now, not what an earlier search read.
    std::fs::remove_dir_all(a.join("deploy")).unwrap();
    write_skill(
        &b,
        "deploy",
        "deploy",
        "Deploy the web app to staging and production",
        "managed copy",
    );
    idx.refresh(&|_| {}).unwrap();
    let r = idx
        .search("deploy staging", &opts, &EligibilityEnv::allow_all())
        .unwrap();
    let hit = r.hits.iter().find(|h| h.id == "deploy").unwrap();
    assert_eq!(hit.root, 1, "{:?}", r.hits);
    assert_eq!(
        hit.meta.description,
        "Deploy the web app to staging and production"
    );
    assert!(r.dropped.iter().all(|d| d.exclusion.code != "shadowed"));
}

#[test]
fn gating_drops_ineligible_hits_with_reasons_and_refills_from_lower_ranks() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, root) = (tmp.path().join("home"), tmp.path().join("skills"));
    write_file(
        &root.join("needs-bin/SKILL.md"),
        "---\nname: needs-bin\ndescription: convert video video video\nmetadata: {\"openclaw\":{\"requires\":{\"bins\":[\"no-such-binary-xyz\"]}}}\n---\nbody",
    );
    write_skill(&root, "plain", "plain", "convert video files", "ffmpeg");
    let (idx, _) = open(&home, &Roots::explicit([&root]), Refresh::Always);
    let opts = SearchOptions {
        top_k: 1,
        ..SearchOptions::default()
    };
    let r = idx
        .search("convert video", &opts, &EligibilityEnv::from_process())
        .unwrap();
    assert_eq!(r.hits.len(), 1);
    assert_eq!(r.hits[0].id, "plain");
    assert_eq!(r.dropped.len(), 1);
    assert_eq!(r.dropped[0].exclusion.code, "bins");
    assert!(r.dropped[0].exclusion.reason.contains("no-such-binary-xyz"));
}

#[test]
fn corpus_stopwords_and_deterministic_ties() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, root) = (tmp.path().join("home"), tmp.path().join("skills"));
    for i in 0..12 {
        write_skill(
            &root,
            &format!("s{i:02}"),
            &format!("skill-{i:02}"),
            "handles widget case",
            "same body",
        );
    }
    let (idx, _) = open(&home, &Roots::explicit([&root]), Refresh::Always);
    let r = idx
        .search(
            "widget",
            &SearchOptions::default(),
            &EligibilityEnv::allow_all(),
        )
        .unwrap();
    assert!(
        r.hits.is_empty(),
        "a term in every document carries no signal"
    );
    assert!(r.stopwords.contains(&"widget".to_owned()));
    // Equal scores: order by id, every time.
    let first = idx
        .search(
            "skill 03 07",
            &SearchOptions::default(),
            &EligibilityEnv::allow_all(),
        )
        .unwrap();
    let ids1: Vec<_> = first.hits.iter().map(|h| h.id.clone()).collect();
    assert_eq!(ids1, ["s03", "s07"]);
}

#[test]
fn corrupted_index_is_detected_rebuilt_and_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, root) = (tmp.path().join("home"), tmp.path().join("skills"));
    write_skill(
        &root,
        "pdf",
        "pdf-tables",
        "Extract tables from PDF files",
        "Use pdftk.",
    );
    let roots = Roots::explicit([&root]);
    let (idx, _) = open(&home, &roots, Refresh::Always);
    let dir = idx.dir().to_path_buf();
    drop(idx);
    // Truncate every segment file.
    for e in fs::read_dir(dir.join("tantivy")).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with('.') && name != "meta.json" {
            fs::write(&p, b"").unwrap();
        }
    }
    let (idx, report) = open(&home, &roots, Refresh::Never);
    let r = report.expect("a rebuild always reports");
    assert!(
        r.rebuilt.as_deref().unwrap_or("").contains("unusable"),
        "{r:?}"
    );
    assert!(r.diagnostics.iter().any(|d| d.code == "index-rebuilt"));
    assert_eq!(ids(&idx, "pdf"), ["pdf"]);
    drop(idx);

    // A garbage meta.json is caught too.
    fs::write(dir.join("tantivy/meta.json"), b"{not json").unwrap();
    let (idx, report) = open(&home, &roots, Refresh::Never);
    assert!(report.unwrap().rebuilt.is_some());
    assert_eq!(ids(&idx, "pdf"), ["pdf"]);
    drop(idx);

    // And a corrupt state file.
    fs::write(dir.join("state.json"), b"\x00\x01").unwrap();
    let (idx, report) = open(&home, &roots, Refresh::Never);
    assert!(report.unwrap().rebuilt.is_some());
    assert_eq!(ids(&idx, "pdf"), ["pdf"]);
}

#[test]
fn ties_break_by_id_across_segments_whatever_the_insertion_order() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, root) = (tmp.path().join("home"), tmp.path().join("skills"));
    let same = |rel: &str| {
        write_skill(
            &root,
            rel,
            &format!("copy-{rel}"),
            "render invoices as pdf",
            "same body",
        )
    };
    same("s05");
    same("s07");
    let roots = Roots::explicit([&root]);
    let _ = open(&home, &roots, Refresh::Always);
    // Added later: these land in a newer segment, after the first two in index order.
    same("s01");
    same("s03");
    for i in 0..12 {
        write_skill(
            &root,
            &format!("other{i:02}"),
            &format!("other-{i}"),
            "unrelated",
            "x",
        );
    }
    let (idx, _) = open(&home, &roots, Refresh::Always);
    let opts = SearchOptions {
        top_k: 2,
        ..SearchOptions::default()
    };
    let r = idx
        .search("invoices pdf", &opts, &EligibilityEnv::allow_all())
        .unwrap();
    let got: Vec<_> = r.hits.iter().map(|h| h.id.as_str()).collect();
    assert_eq!(got, ["s01", "s03"]);
    assert_eq!(ids(&idx, "invoices pdf"), ["s01", "s03", "s05", "s07"]);
}

#[test]
fn max_query_terms_keeps_the_most_important_terms() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, root) = (tmp.path().join("home"), tmp.path().join("skills"));
    // "report" is in every skill, "chart" in two, "invoice" in one.
    write_skill(&root, "a", "invoices", "Read an invoice report", "x");
    write_skill(&root, "b", "charts", "Draw a chart for a report", "x");
    write_skill(
        &root,
        "c",
        "dashboards",
        "A chart and report dashboard",
        "x",
    );
    write_skill(&root, "d", "mail", "Mail a report", "x");
    let (idx, _) = open(&home, &Roots::explicit([&root]), Refresh::Always);
    let search = |max_query_terms| {
        let opts = SearchOptions {
            top_k: 10,
            max_query_terms,
            ..SearchOptions::default()
        };
        idx.search("report chart invoice", &opts, &EligibilityEnv::allow_all())
            .unwrap()
    };
    let all = search(0);
    assert_eq!(all.terms, ["chart", "invoic", "report"]);
    assert!(all.omitted.is_empty());
    let capped = search(2);
    assert_eq!(capped.terms, ["chart", "invoic"]);
    assert_eq!(capped.omitted, ["report"]);
    let ids: Vec<&str> = capped.hits.iter().map(|h| h.id.as_str()).collect();
    assert!(!ids.contains(&"d"), "only `report` matches d: {ids:?}");
    assert_eq!(search(1).terms, ["invoic"]);
}

fn search_with(idx: &SkillIndex, q: &str, opts: SearchOptions) -> skillsearch_core::SearchResult {
    idx.search(q, &opts, &EligibilityEnv::allow_all()).unwrap()
}

fn top10() -> SearchOptions {
    SearchOptions {
        top_k: 10,
        retriever: skillsearch_core::config::Retriever::Lexical,
        ..SearchOptions::default()
    }
}

#[test]
fn a_word_the_prompt_repeats_outweighs_one_it_mentions_once() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, root) = (tmp.path().join("home"), tmp.path().join("skills"));
    write_skill(&root, "a", "invoices", "Read an invoice", "x");
    write_skill(&root, "b", "charts", "Draw a chart", "x");
    let (idx, _) = open(&home, &Roots::explicit([&root]), Refresh::Always);
    // Equally rare words: only the repeats can put `b` (whose id loses a tie) first.
    for q in [
        "chart the invoice, then file the chart and mail the chart",
        "chart invoice chart",
    ] {
        let hits: Vec<String> = search_with(&idx, q, top10())
            .hits
            .into_iter()
            .map(|h| h.id)
            .collect();
        assert_eq!(hits, ["b", "a"], "{q}");
    }
    // Repeats saturate: said 50 times, a word weighs less than three words said once each
    // (at most k3 + 1 = 2.2 times one mention).
    write_skill(&root, "c", "table-sheet-grid", "Table, sheet and grid", "x");
    let (idx, _) = open(&home, &Roots::explicit([&root]), Refresh::Always);
    let q = format!("{} table sheet grid", "invoice ".repeat(50));
    let hits = search_with(&idx, &q, top10()).hits;
    assert_eq!(hits[0].id, "c");
}

/// A word made of letters only, one per `i` (`qzab` for 1): `tag(i)` is in skill `i` alone.
fn tag(i: usize) -> String {
    let digits: String = i
        .to_string()
        .bytes()
        .map(|b| char::from(b'a' + (b - b'0')))
        .collect();
    format!("qz{digits}")
}

/// 40 skills: `pdf` in 12 of them, each `tag(i)` in one, `common` words in 15.
fn long_prompt_corpus(root: &Path) {
    for i in 0..40 {
        let mut d = format!("Skill {}", tag(i));
        if i % 10 < 3 {
            d.push_str(" for pdf files");
        }
        if i % 8 < 3 {
            d.push_str(" common shared usual");
        }
        write_skill(root, &format!("s{i:02}"), &format!("skill-{i}"), &d, "x");
    }
}

#[test]
fn a_file_type_in_a_long_prompt_is_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, root) = (tmp.path().join("home"), tmp.path().join("skills"));
    long_prompt_corpus(&root);
    let (idx, _) = open(&home, &Roots::explicit([&root]), Refresh::Always);
    let words: Vec<String> = (0..30).map(tag).collect();
    let opts = || SearchOptions {
        query_term_share: 0.5,
        ..top10()
    };
    // As a plain word, `pdf` is common and weighs little: a long prompt drops it...
    let plain = search_with(&idx, &format!("{} pdf", words.join(" ")), opts());
    assert!(plain.omitted.contains(&"pdf".to_owned()), "{plain:?}");
    // ...but as a file's extension it is kept.
    for named in ["/root/report.pdf", "all .pdf files", "*.PDF"] {
        let r = search_with(&idx, &format!("{} {named}", words.join(" ")), opts());
        assert!(
            r.terms.contains(&"pdf".to_owned()),
            "{named}: {:?}",
            r.terms
        );
        assert!(!r.omitted.is_empty(), "{named}");
    }
}

#[test]
fn a_prompt_of_a_hundred_thousand_words_answers() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, root) = (tmp.path().join("home"), tmp.path().join("skills"));
    long_prompt_corpus(&root);
    let (idx, _) = open(&home, &Roots::explicit([&root]), Refresh::Always);
    let mut q = String::new();
    for i in 0..100_000 {
        q.push_str(&format!("filler{} ", i % 7919));
        if i % 1000 == 0 {
            q.push_str(&tag(7));
            q.push(' ');
        }
    }
    let r = search_with(&idx, &q, SearchOptions::default());
    assert_eq!(r.hits[0].id, "s07");
    assert!(r.terms.len() <= 64, "{}", r.terms.len());
}

#[test]
fn a_prompt_of_only_stopwords_and_punctuation_answers_empty() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, root) = (tmp.path().join("home"), tmp.path().join("skills"));
    long_prompt_corpus(&root);
    let (idx, _) = open(&home, &Roots::explicit([&root]), Refresh::Always);
    for q in [
        "",
        "   ",
        "the and of, to be or not to be?!",
        "... --- !!! ??? ``` /// *** ;;; (((",
    ] {
        let r = search_with(&idx, q, top10());
        assert!(r.hits.is_empty(), "{q:?}: {:?}", r.hits);
        assert!(r.terms.is_empty(), "{q:?}");
    }
}

/// CJK and mixed-script prompts (#20 bad input): CJK text is searched as character bigrams, so
/// a Chinese prompt finds a Chinese description; a prompt mixing Cyrillic, Arabic digits, CJK
/// and a path answers; one made only of code finds the skill its identifiers name.
#[test]
fn cjk_mixed_script_and_code_prompts_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, root) = (tmp.path().join("home"), tmp.path().join("skills"));
    write_skill(
        &root,
        "pdf",
        "pdf-tables",
        "提取扫描PDF文件中的表格",
        "body",
    );
    write_skill(
        &root,
        "git",
        "git-bisect",
        "用 git bisect 找到坏提交",
        "body",
    );
    write_skill(
        &root,
        "csv",
        "csv-merge",
        "Merge CSV files with pandas",
        "Call pandas.read_csv then DataFrame.merge.",
    );
    let (idx, _) = open(&home, &Roots::explicit([&root]), Refresh::Always);
    let first = |q: &str| {
        search_with(&idx, q, top10())
            .hits
            .first()
            .map(|h| h.id.clone())
            .unwrap_or_default()
    };
    assert_eq!(first("从扫描的PDF中提取表格"), "pdf");
    assert_eq!(first("提取表格"), "pdf");
    assert_eq!(first("git 坏提交"), "git");
    assert_eq!(first("Таблицы ١٢٣ 表格 /tmp/отчёт.pdf"), "pdf");
    assert_eq!(
        first("df = pandas.read_csv('a.csv'); df.merge(other, on='id')"),
        "csv"
    );
    // Scripts with no word in the corpus answer empty, not an error.
    assert!(
        search_with(&idx, "Привет мир ٣٤٥ שלום", top10())
            .hits
            .is_empty()
    );
}

/// #21 item 10: a segment file that is gone (here every `.pos`) is found when the index is
/// opened, and the index is rebuilt, not left failing every search.
#[test]
fn a_missing_segment_file_is_detected_and_the_index_rebuilt() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, root) = (tmp.path().join("home"), tmp.path().join("skills"));
    write_skill(
        &root,
        "pdf",
        "pdf-tables",
        "Extract tables from PDF files",
        "Use pdftk.",
    );
    let roots = Roots::explicit([&root]);
    let (idx, _) = open(&home, &roots, Refresh::Always);
    let dir = idx.dir().to_path_buf();
    drop(idx);
    let mut gone = 0;
    for e in fs::read_dir(dir.join("tantivy")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "pos") {
            fs::remove_file(&p).unwrap();
            gone += 1;
        }
    }
    assert!(gone > 0, "the index has a positions file to remove");
    let (idx, report) = open(&home, &roots, Refresh::Never);
    let r = report.expect("a rebuild always reports");
    assert!(
        r.rebuilt.as_deref().unwrap_or("").contains("unusable"),
        "{r:?}"
    );
    assert!(r.diagnostics.iter().any(|d| d.code == "index-rebuilt"));
    assert_eq!(ids(&idx, "pdf tables"), ["pdf"]);
}

/// Segment files whose times changed but whose bytes did not (a home copied without times, a
/// backup restored) pass the checksum check once; their new stamps are saved, so later opens
/// do not read every file again.
#[test]
fn segment_files_with_new_times_are_checked_once_and_restamped() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, root) = (tmp.path().join("home"), tmp.path().join("skills"));
    write_skill(
        &root,
        "pdf",
        "pdf-tables",
        "Extract tables from PDF files",
        "x",
    );
    let roots = Roots::explicit([&root]);
    let (idx, _) = open(&home, &roots, Refresh::Always);
    let dir = idx.dir().to_path_buf();
    drop(idx);
    let stamps = |dir: &Path| -> serde_json::Value {
        let v: serde_json::Value =
            serde_json::from_slice(&fs::read(dir.join("state.json")).unwrap()).unwrap();
        v["files"].clone()
    };
    let before = stamps(&dir);
    assert!(
        before.as_object().is_some_and(|m| !m.is_empty()),
        "{before}"
    );
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
    for name in before.as_object().unwrap().keys() {
        let f = fs::File::options()
            .write(true)
            .open(dir.join("tantivy").join(name))
            .unwrap();
        f.set_modified(later).unwrap();
    }
    let (idx, report) = open(&home, &roots, Refresh::Never);
    assert!(report.is_none(), "{report:?}");
    assert_eq!(ids(&idx, "pdf tables"), ["pdf"]);
    let after = stamps(&dir);
    assert_ne!(after, before);
    assert_eq!(
        after.as_object().unwrap().len(),
        before.as_object().unwrap().len()
    );
    for (_, v) in after.as_object().unwrap() {
        let ns = v[1].as_i64().unwrap();
        let secs = later
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        assert_eq!(ns / 1_000_000_000, secs, "{after}");
    }
}

/// #21 item 12: a FIFO swapped in for a `SKILL.md` after the walk saw a file is refused by the
/// reader at once (it would block until a writer came), with the walk's own diagnostic.
#[test]
fn loading_a_fifo_never_blocks() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("pipe/SKILL.md");
    skillsearch_testkit::sys::mkfifo(&fifo);
    let path = fifo.clone();
    let loaded = skillsearch_testkit::sys::within(
        std::time::Duration::from_secs(10),
        "loading a FIFO SKILL.md",
        move || skillsearch_core::corpus::load(&path, 1 << 20),
    );
    assert!(!loaded.valid);
    assert_eq!(loaded.diagnostics.len(), 1, "{:?}", loaded.diagnostics);
    let d = &loaded.diagnostics[0];
    assert_eq!((d.code.as_str(), &d.path), ("not-a-file", &fifo), "{d:?}");
    assert!(d.message.contains("FIFO"), "{d:?}");
}

/// What the index holds, comparable across indexes: (root, id, path, name, valid) per document.
fn held(idx: &SkillIndex) -> Vec<(usize, String, std::path::PathBuf, String, bool)> {
    idx.doc_keys()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k.root,
                k.rel.clone(),
                k.path.clone(),
                k.name.clone(),
                k.valid,
            )
        })
        .collect()
}

#[test]
fn refreshing_named_directories_looks_at_them_and_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, root) = (tmp.path().join("home"), tmp.path().join("skills"));
    write_skill(
        &root,
        "alpha",
        "alpha",
        "Rotate the vault credentials",
        "v1",
    );
    write_skill(&root, "beta", "beta", "Compress images for the web", "v1");
    write_skill(&root, "team/gamma", "gamma", "Render charts from CSV", "v1");
    let roots = Roots::explicit([&root]);
    let (idx, _) = open(&home, &roots, Refresh::Always);
    let verified = idx.verified_at_ms();
    std::thread::sleep(std::time::Duration::from_millis(10));

    // Both change on disk; only alpha is named.
    write_skill(
        &root,
        "alpha",
        "alpha",
        "Rotate the database passwords",
        "v2",
    );
    write_skill(&root, "beta", "beta", "Transcode videos to webm", "v2");
    let r = idx.refresh_dirs(&[root.join("alpha")], &|_| {}).unwrap();
    assert_eq!((r.added, r.updated, r.removed, r.unchanged), (0, 1, 0, 0));
    assert_eq!(ids(&idx, "database passwords"), ["alpha"]);
    assert!(
        ids(&idx, "transcode videos").is_empty(),
        "beta was not named"
    );
    assert_eq!(ids(&idx, "compress images"), ["beta"]);
    assert_eq!(idx.verified_at_ms(), verified, "not a check of every root");

    // A `SKILL.md` path names its directory.
    let r = idx
        .refresh_dirs(&[root.join("beta/SKILL.md")], &|_| {})
        .unwrap();
    assert_eq!(r.updated, 1);
    assert_eq!(ids(&idx, "transcode videos"), ["beta"]);

    // Added and removed directories; a group directory covers what is below it.
    write_skill(
        &root,
        "team/delta",
        "delta",
        "Deploy the billing service",
        "v1",
    );
    fs::remove_dir_all(root.join("alpha")).unwrap();
    let generation = idx.generation();
    let r = idx
        .refresh_dirs(
            &[
                root.join("alpha"),
                root.join("team"),
                root.join("team/delta"),
            ],
            &|_| {},
        )
        .unwrap();
    assert_eq!((r.added, r.updated, r.removed, r.unchanged), (1, 0, 1, 1));
    assert_ne!(idx.generation(), generation);
    assert_eq!(ids(&idx, "billing service"), ["team/delta"]);
    assert!(ids(&idx, "database passwords").is_empty());

    // Nothing new under a directory: nothing is written.
    let generation = idx.generation();
    let r = idx.refresh_dirs(&[root.join("beta")], &|_| {}).unwrap();
    assert_eq!((r.added, r.updated, r.removed, r.unchanged), (0, 0, 0, 1));
    assert_eq!(idx.generation(), generation);

    // The walk's rules hold from the root down: nothing below a skill, nothing in a skipped
    // directory, nothing deeper than discovery goes.
    write_skill(&root, "beta/sub", "beta-sub", "Nested below a skill", "x");
    write_skill(&root, "node_modules/pkg", "pkg", "Inside node_modules", "x");
    write_skill(&root, "a/b/c/d/e/f/g", "deep", "Seven levels down", "x");
    let r = idx
        .refresh_dirs(
            &[
                root.join("beta/sub"),
                root.join("node_modules/pkg"),
                root.join("a/b/c/d/e/f/g"),
                tmp.path().join("elsewhere"),
            ],
            &|_| {},
        )
        .unwrap();
    assert_eq!((r.added, r.updated, r.removed), (0, 0, 0));
    // beta's SKILL.md gone: its directory is a group now, and what is below it shows.
    fs::remove_file(root.join("beta/SKILL.md")).unwrap();
    let r = idx
        .refresh_dirs(&[root.join("beta/SKILL.md")], &|_| {})
        .unwrap();
    assert_eq!((r.added, r.removed), (1, 1));
    assert_eq!(ids(&idx, "nested below a skill"), ["beta/sub"]);

    // The named refreshes leave the index as a full build from the same files would.
    let fresh = open(&tmp.path().join("home2"), &roots, Refresh::Always).0;
    assert_eq!(held(&idx), held(&fresh));
    let r = idx.refresh(&|_| {}).unwrap();
    assert_eq!((r.added, r.updated, r.removed), (0, 0, 0), "{r:?}");
}

#[test]
fn a_named_refresh_replaces_the_walk_findings_under_it_only() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, root) = (tmp.path().join("home"), tmp.path().join("skills"));
    write_skill(&root, "ok", "ok", "A fine skill", "x");
    let secret = write_file(&tmp.path().join("secret.txt"), "not a skill");
    for dir in ["one", "two"] {
        fs::create_dir_all(root.join(dir)).unwrap();
        std::os::unix::fs::symlink(&secret, root.join(dir).join("SKILL.md")).unwrap();
    }
    let roots = Roots::explicit([&root]);
    let (idx, _) = open(&home, &roots, Refresh::Always);
    let outside = |idx: &SkillIndex| -> Vec<String> {
        let mut v: Vec<String> = idx
            .walk_diagnostics()
            .iter()
            .filter(|d| d.code == "outside-skill")
            .map(|d| {
                d.path
                    .parent()
                    .unwrap()
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(outside(&idx), ["one", "two"]);
    fs::remove_file(root.join("one/SKILL.md")).unwrap();
    write_skill(&root, "one", "one", "Fixed now", "x");
    let r = idx.refresh_dirs(&[root.join("one")], &|_| {}).unwrap();
    assert_eq!(r.added, 1);
    assert_eq!(outside(&idx), ["two"]);
    // Kept across a re-open: the state was saved.
    drop(idx);
    let (idx, _) = open(&home, &roots, Refresh::Never);
    assert_eq!(outside(&idx), ["two"]);
}

#[test]
fn a_named_directory_inside_nested_roots_falls_back_to_a_full_refresh() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, root) = (tmp.path().join("home"), tmp.path().join("skills"));
    let inner = root.join("inner");
    write_skill(&inner, "x", "x", "Zebra crossings", "x");
    let roots = Roots::explicit([&root, &inner]);
    let (idx, _) = open(&home, &roots, Refresh::Always);
    write_skill(&root, "y", "y", "Walrus colonies", "y");
    // `inner/x` is inside both roots: a full refresh, which also finds `y`.
    let r = idx.refresh_dirs(&[inner.join("x")], &|_| {}).unwrap();
    assert_eq!(r.added, 1, "{r:?}");
    assert_eq!(ids(&idx, "walrus colonies"), ["y"]);
}
