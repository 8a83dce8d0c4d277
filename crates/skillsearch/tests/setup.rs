//! `skillsearch setup` / `doctor` for the command-hook hosts, against an isolated HOME: merge
//! with the user's own entries, idempotence, mode switches, doctor green after setup and red
//! for each gate it knows. The real hosts run these configs in `hosts/*/tests`.

use serde_json::{Value, json};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Home {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    skills: PathBuf,
}

impl Home {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("user");
        let skills = tmp.path().join("skills");
        fs::create_dir_all(&home).unwrap();
        fs::create_dir_all(&skills).unwrap();
        Home {
            _tmp: tmp,
            home,
            skills,
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_skillsearch"))
            .args(args)
            .env("HOME", &self.home)
            .env_remove("SKILLSEARCH_HOME")
            .env_remove("CLAUDE_CONFIG_DIR")
            .env_remove("CODEX_HOME")
            .env_remove("CODEBUDDY_CONFIG_DIR")
            .env_remove("ENABLE_TOOL_SEARCH")
            .output()
            .unwrap()
    }

    fn setup(&self, host: &str, mode: &str) -> String {
        let skills = self.skills.to_string_lossy().into_owned();
        let o = self.run(&["setup", host, "--mode", mode, "--skills", &skills]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    }

    fn doctor(&self, host: &str) -> (bool, Value) {
        let o = self.run(&["doctor", host, "--json"]);
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        (o.status.success(), v)
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.home.join(rel)
    }

    fn json(&self, rel: &str) -> Value {
        serde_json::from_str(&fs::read_to_string(self.path(rel)).unwrap()).unwrap()
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }
}

fn failed(v: &Value) -> Vec<String> {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

fn backups(dir: &Path) -> usize {
    fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .contains("skillsearch-backup")
                })
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn every_host_is_idempotent_green_and_switches_modes() {
    for host in ["claude-code", "codex", "codebuddy"] {
        let h = Home::new();
        let (ok, v) = h.doctor(host);
        assert!(!ok && failed(&v) == ["installed"], "{host}: {v}");
        for mode in ["auto", "on_demand", "auto"] {
            h.setup(host, mode);
            let again = h.setup(host, mode);
            assert!(again.contains("Already set up"), "{host} {mode}: {again}");
            let (ok, v) = h.doctor(host);
            assert!(ok, "{host} {mode}: {v}");
            let names: Vec<&str> = v["checks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["name"].as_str().unwrap())
                .collect();
            let hooked = names.iter().any(|n| n.starts_with("hook"));
            assert_eq!(hooked, mode == "auto", "{host} {mode}: {names:?}");
            assert_eq!(names.contains(&"tool-approval"), mode == "on_demand");
        }
    }
}

#[test]
fn misspelled_mode_is_rejected_naming_the_key() {
    let h = Home::new();
    let o = h.run(&["setup", "codex", "--mode", "atuo"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--mode") && err.contains("atuo"), "{err}");
    assert!(!h.path(".codex").exists(), "nothing may be written");
}

#[test]
fn claude_code_merges_with_the_users_settings() {
    let h = Home::new();
    h.write(
        ".claude/settings.json",
        r#"{"permissions": {"allow": ["Bash(ls)"]}, "hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "mine"}]}]}, "model": "x"}"#,
    );
    h.write(
        ".claude.json",
        r#"{"numStartups": 3, "mcpServers": {"other": {"command": "o"}}}"#,
    );
    let out = h.setup("claude-code", "on_demand");
    assert!(out.contains("+++"), "a diff is printed: {out}");
    let s = h.json(".claude/settings.json");
    assert_eq!(
        s["permissions"]["allow"],
        json!([
            "Bash(ls)",
            "mcp__skillsearch__skill_search",
            "mcp__skillsearch__skill_read"
        ])
    );
    assert_eq!(
        s["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"],
        "mine"
    );
    assert_eq!(s["model"], "x");
    let j = h.json(".claude.json");
    assert_eq!(j["numStartups"], 3);
    assert_eq!(j["mcpServers"]["other"]["command"], "o");
    let args = j["mcpServers"]["skillsearch"]["args"].as_array().unwrap();
    assert!(
        args.contains(&json!("on_demand")) && args.contains(&json!(h.skills.to_string_lossy()))
    );
    assert_eq!(backups(&h.path(".claude")), 1);

    h.setup("claude-code", "auto");
    let s = h.json(".claude/settings.json");
    assert_eq!(s["permissions"]["allow"], json!(["Bash(ls)"]));
    let groups = s["hooks"]["UserPromptSubmit"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    let cmd = groups[1]["hooks"][0]["command"].as_str().unwrap();
    assert!(
        cmd.contains("hook --host claude-code --mode auto --skills"),
        "{cmd}"
    );
    assert!(
        h.json(".claude.json")["mcpServers"]
            .get("skillsearch")
            .is_none()
    );

    // Gates: the binary gone, hooks disabled.
    let mut s2 = s.clone();
    s2["disableAllHooks"] = json!(true);
    h.write(".claude/settings.json", &s2.to_string());
    assert_eq!(failed(&h.doctor("claude-code").1), ["hook"]);
    let gone = s.to_string().replace(
        env!("CARGO_BIN_EXE_skillsearch"),
        "/nonexistent/skillsearch",
    );
    h.write(".claude/settings.json", &gone);
    assert_eq!(failed(&h.doctor("claude-code").1), ["binary"]);
}

#[test]
fn claude_code_doctor_flags_unapproved_tools_and_a_long_deadline() {
    let h = Home::new();
    h.setup("claude-code", "on_demand");
    h.write(".claude/settings.json", "{}");
    assert_eq!(failed(&h.doctor("claude-code").1), ["tool-approval"]);
    h.setup("claude-code", "auto");
    h.write(".skillsearch/config.toml", "deadline_ms = 20000\n");
    let (ok, v) = h.doctor("claude-code");
    assert!(!ok);
    assert_eq!(failed(&v), ["deadline"]);
    let fix = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "deadline")
        .unwrap()["fix"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(fix.contains("deadline_ms = 8000"), "{fix}");
}

#[test]
fn codex_keeps_the_users_toml_and_records_hook_trust() {
    let h = Home::new();
    let mine = "# my settings\nmodel = \"gpt\"\n\n[mcp_servers.other]\ncommand = \"o\" # keep me\n";
    h.write(".codex/config.toml", mine);
    h.setup("codex", "on_demand");
    let text = fs::read_to_string(h.path(".codex/config.toml")).unwrap();
    assert!(text.starts_with(mine), "{text}");
    assert!(text.contains("[mcp_servers.skillsearch]\n"));
    assert!(text.contains("default_tools_approval_mode = \"approve\""));

    h.setup("codex", "auto");
    let text = fs::read_to_string(h.path(".codex/config.toml")).unwrap();
    assert!(
        text.starts_with(mine) && !text.contains("[mcp_servers.skillsearch]"),
        "{text}"
    );
    assert!(text.contains("[hooks.state.") && text.contains("trusted_hash = \"sha256:"));
    assert!(h.doctor("codex").0);

    // An edited hook is no longer trusted.
    let hooks = fs::read_to_string(h.path(".codex/hooks.json")).unwrap();
    h.write(
        ".codex/hooks.json",
        &hooks.replace("--mode auto", "--mode auto "),
    );
    assert_eq!(failed(&h.doctor("codex").1), ["hook-trust"]);
    h.setup("codex", "auto");
    assert!(h.doctor("codex").0);

    // The approval mode removed: the MCP call would fail headless.
    h.setup("codex", "on_demand");
    let text = fs::read_to_string(h.path(".codex/config.toml")).unwrap();
    h.write(
        ".codex/config.toml",
        &text.replace("default_tools_approval_mode = \"approve\"\n", ""),
    );
    assert_eq!(failed(&h.doctor("codex").1), ["tool-approval"]);

    // A config setup cannot merge into is refused, naming the file.
    h.write(
        ".codex/config.toml",
        "mcp_servers = { skillsearch = { command = \"x\" } }\n",
    );
    let o = h.run(&["setup", "codex", "--mode", "on_demand"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("config.toml"));
}

#[test]
fn codebuddy_writes_user_settings_and_mcp_json() {
    let h = Home::new();
    h.write(".codebuddy/settings.json", r#"{"model": "fake-model"}"#);
    h.setup("codebuddy", "auto");
    let s = h.json(".codebuddy/settings.json");
    assert_eq!(s["model"], "fake-model");
    let cmd = s["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap();
    assert!(cmd.contains("--host codebuddy"), "{cmd}");
    h.setup("codebuddy", "on_demand");
    let m = h.json(".codebuddy/.mcp.json");
    assert_eq!(m["mcpServers"]["skillsearch"]["type"], "stdio");
    assert!(h.json(".codebuddy/settings.json").get("hooks").is_none());
    let (ok, v) = h.doctor("codebuddy");
    assert!(ok, "{v}");
}

#[test]
fn dry_run_prints_the_diff_and_writes_nothing() {
    let h = Home::new();
    let o = h.run(&["setup", "codebuddy", "--mode", "auto", "--dry-run"]);
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("+++") && out.contains("Dry run: nothing was written"),
        "{out}"
    );
    assert!(!h.path(".codebuddy").exists());
}

#[test]
fn host_state_dir_variables_are_honoured() {
    let h = Home::new();
    let dir = h.home.join("elsewhere");
    let skills = h.skills.to_string_lossy().into_owned();
    for (var, host, file) in [
        ("CLAUDE_CONFIG_DIR", "claude-code", "settings.json"),
        ("CODEX_HOME", "codex", "hooks.json"),
        ("CODEBUDDY_CONFIG_DIR", "codebuddy", "settings.json"),
    ] {
        let run = |args: &[&str]| {
            Command::new(env!("CARGO_BIN_EXE_skillsearch"))
                .args(args)
                .env("HOME", &h.home)
                .env(var, &dir)
                .output()
                .unwrap()
        };
        let o = run(&["setup", host, "--mode", "auto", "--skills", &skills]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(dir.join(file).is_file(), "{host}: {var}");
        assert!(run(&["doctor", host]).status.success(), "{host}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
