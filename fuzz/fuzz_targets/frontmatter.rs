//! `SKILL.md` parsing (`corpus::frontmatter`), as indexing reads a file: any bytes, decoded as
//! `corpus::load` decodes them.
//!
//! Properties: parsing never panics; the name is never empty and both name
//! and description are trimmed; the body is the tail of the file; without a NUL byte or a `\`
//! (YAML or JSON escapes) in the file, neither name nor description holds a NUL; every problem
//! has a known code; the metadata round-trips through the JSON the index stores; the embedded
//! text starts with the name; `fields` (the author's fields, for the MCP Skills extension)
//! is empty without frontmatter and holds the name parsing read.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skillsearch_core::corpus::frontmatter::{SkillMeta, fields, parse};
use skillsearch_core::corpus::{embed_text, text_hash};

const CODES: &[&str] = &[
    "frontmatter-missing",
    "frontmatter-unclosed",
    "frontmatter-fence-indented",
    "yaml-fallback",
    "yaml-not-mapping",
    "activates-not-list",
    "activates-invalid",
];

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let parsed = parse(&text, "dir");
    let meta = &parsed.meta;
    assert!(!meta.name.is_empty());
    assert_eq!(meta.name, meta.name.trim(), "name {:?}", meta.name);
    assert_eq!(meta.description, meta.description.trim());
    let unbommed = text.strip_prefix('\u{feff}').unwrap_or(&text);
    assert!(
        unbommed.ends_with(&parsed.body),
        "the body is the file's tail"
    );
    if !text.contains(['\0', '\\']) {
        assert!(!meta.name.contains('\0'), "NUL in name {:?}", meta.name);
        assert!(!meta.description.contains('\0'), "NUL in description");
    }
    for (code, message) in &parsed.problems {
        assert!(CODES.contains(code), "unknown problem code {code}");
        assert!(!message.is_empty());
    }
    let yaml_failed = parsed
        .problems
        .iter()
        .any(|(code, _)| code.starts_with("yaml-"));
    if !unbommed.starts_with("---") {
        assert!(fields(&text).is_empty(), "fields without frontmatter");
    } else if !yaml_failed {
        // The fields as written: the name parsing read is among them.
        let f = fields(&text);
        if let Some(serde_json::Value::String(name)) = f.get("name")
            && !name.trim().is_empty()
        {
            assert_eq!(name.trim(), meta.name);
        }
    }
    // What the index stores and reads back.
    let json = serde_json::to_string(meta).expect("metadata serialises");
    let back: SkillMeta = serde_json::from_str(&json).expect("stored metadata reads back");
    assert_eq!(&back, meta, "metadata round-trips through the index's JSON");
    let embedded = embed_text(meta, &parsed.body);
    assert!(embedded.starts_with(meta.name.trim()));
    assert_ne!(text_hash(&embedded), 0);
});
