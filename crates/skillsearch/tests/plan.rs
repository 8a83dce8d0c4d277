//! `skillsearch plan`: tool visibility from `activates.plugins`, end to end.

use serde_json::{Value, json};
use skillsearch_testkit::write_file;
use std::fs;
use std::process::Command;

#[test]
fn data_turns_see_plugin_tools_and_small_talk_does_not() {
    let tmp = tempfile::tempdir().unwrap();
    let (skills, plugins, home) = (
        tmp.path().join("skills"),
        tmp.path().join("plugins"),
        tmp.path().join("home"),
    );
    write_file(
        &skills.join("data-analyst/SKILL.md"),
        "---\nname: data-analyst\ndescription: Query and analyze data from the big data platform\nmetadata:\n  openclaw:\n    activates:\n      plugins: [\"bigdata-platform\", \"chart-generator\", \"ghost-plugin\"]\n---\nSee {plugins.bigdata-platform}/docs/query.md\n",
    );
    write_file(
        &skills.join("jokes/SKILL.md"),
        "---\nname: jokes\ndescription: Tell a light-hearted joke\n---\nKeep it short.\n",
    );
    write_file(
        &plugins.join("bigdata/openclaw.plugin.json"),
        r#"{"id":"bigdata-platform","contracts":{"tools":["bd_query","bd_schema"]}}"#,
    );
    write_file(
        &plugins.join("charts/openclaw.plugin.json"),
        r#"{"id":"chart-generator","contracts":{"tools":["chart_make"]}}"#,
    );
    write_file(&plugins.join("broken/openclaw.plugin.json"), "{oops");
    let tools = tmp.path().join("tools.json");
    let schema = |n: &str| json!({"type": "function", "function": {"name": n, "description": format!("{n} does work"), "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}});
    fs::write(
        &tools,
        serde_json::to_vec(&json!([
            schema("read"),
            schema("exec"),
            schema("bd_query"),
            schema("bd_schema"),
            schema("chart_make"),
            "",
            "read"
        ]))
        .unwrap(),
    )
    .unwrap();
    let plan = |prompt: &str| -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_skillsearch"))
            .arg("--home")
            .arg(&home)
            .args(["plan", "--json", "--prompt", prompt, "--skills"])
            .arg(&skills)
            .arg("--plugins")
            .arg(&plugins)
            .arg("--tools")
            .arg(&tools)
            .env_remove("SKILLSEARCH_HOME")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let v = plan("query the big data platform for last week's sales");
    assert_eq!(v["matched_skills"][0], "local/data-analyst");
    assert_eq!(
        v["visible_tools"],
        json!(["read", "exec", "bd_query", "bd_schema", "chart_make"])
    );
    assert_eq!(v["hidden_tools"], json!([]));
    assert_eq!(
        v["activated_plugins"],
        json!(["bigdata-platform", "chart-generator"])
    );
    let codes: Vec<&str> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    for c in [
        "plugin-not-installed",
        "plugin-manifest-invalid",
        "tool-empty-name",
        "tool-duplicate",
    ] {
        assert!(codes.contains(&c), "{c} missing from {codes:?}");
    }
    let v = plan("hello, how are you today?");
    assert_eq!(v["visible_tools"], json!(["read", "exec"]));
    assert_eq!(
        v["hidden_tools"],
        json!(["bd_query", "bd_schema", "chart_make"])
    );
    assert_eq!(
        v["managed_plugins"],
        json!(["bigdata-platform", "chart-generator", "ghost-plugin"])
    );
    let (shown, hidden) = (
        v["tokens"]["shown"].as_u64().unwrap(),
        v["tokens"]["hidden"].as_u64().unwrap(),
    );
    assert!(shown > 0 && hidden > shown, "{shown} {hidden}");
    assert!(
        v["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["subject"] == "bd_query" && r["decision"] == "hidden")
    );
}
