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
            .env_remove("DSH_HOME")
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

fn warned(v: &Value) -> Vec<String> {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "warn")
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

/// Settings kept in a dotfiles repository and linked into place: setup writes the file the
/// link points to and leaves the link where it was, for a relative link, an absolute one and a
/// link whose file does not exist yet.
#[cfg(unix)]
#[test]
fn a_symlinked_settings_file_is_written_through_and_the_link_kept() {
    use std::os::unix::fs::symlink;
    let h = Home::new();
    let dotfiles = h.path("dotfiles");
    h.write("dotfiles/claude/settings.json", r#"{"model": "x"}"#);
    fs::create_dir_all(h.path(".claude")).unwrap();
    let relative = Path::new("../dotfiles/claude/settings.json");
    symlink(relative, h.path(".claude/settings.json")).unwrap();
    // Not there yet: the first write creates it at the link's target.
    let state = dotfiles.join("claude.json");
    symlink(&state, h.path(".claude.json")).unwrap();

    let out = h.setup("claude-code", "on_demand");
    let link = h.path(".claude/settings.json");
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link was replaced by a file: {out}"
    );
    assert_eq!(fs::read_link(&link).unwrap(), relative);
    let s: Value =
        serde_json::from_str(&fs::read_to_string(dotfiles.join("claude/settings.json")).unwrap())
            .unwrap();
    assert_eq!(s["model"], "x");
    assert!(
        s["permissions"]["allow"]
            .as_array()
            .unwrap()
            .contains(&json!("mcp__skillsearch__skill_search")),
        "{s}"
    );
    let l = h.path(".claude.json");
    assert!(fs::symlink_metadata(&l).unwrap().file_type().is_symlink());
    assert_eq!(fs::read_link(&l).unwrap(), state);
    let j: Value = serde_json::from_str(&fs::read_to_string(&state).unwrap()).unwrap();
    assert_eq!(j["mcpServers"]["skillsearch"]["type"], "stdio");
    // The backup sits beside the link; the dotfiles directory gets no stray files.
    assert_eq!(backups(&h.path(".claude")), 1);
    assert_eq!(backups(&dotfiles.join("claude")), 0);
    let mut names: Vec<String> = fs::read_dir(&dotfiles)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["claude", "claude.json"]);
    assert!(
        h.setup("claude-code", "on_demand")
            .contains("Already set up")
    );
    assert!(h.doctor("claude-code").0);
}

/// Setups run within one second each keep their own backup: none is overwritten.
#[test]
fn backups_made_within_one_second_are_all_kept() {
    let h = Home::new();
    h.write(".codebuddy/settings.json", r#"{"model": "v0"}"#);
    let mut versions = vec![fs::read_to_string(h.path(".codebuddy/settings.json")).unwrap()];
    for mode in ["auto", "on_demand", "auto", "on_demand"] {
        h.setup("codebuddy", mode);
        versions.push(fs::read_to_string(h.path(".codebuddy/settings.json")).unwrap());
    }
    let dir = h.path(".codebuddy");
    let mut kept: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("settings.json.skillsearch-backup")
        })
        .map(|e| fs::read_to_string(e.path()).unwrap())
        .collect();
    kept.sort();
    let mut expected = versions[..4].to_vec();
    expected.sort();
    assert_eq!(kept, expected, "every replaced version has its own backup");
}

/// The user's own keys in skillsearch's server entry (Codex's `env` table, a timeout; Claude
/// Code's and CodeBuddy's `env`) survive setup rewriting that entry.
#[test]
fn setup_keeps_the_users_keys_in_the_server_entry() {
    let h = Home::new();
    h.write(
        ".codex/config.toml",
        "model = \"gpt\"\n\n[mcp_servers.skillsearch]\ncommand = \"/old/skillsearch\"\nargs = [\"mcp\"]\nstartup_timeout_sec = 30\n\n[mcp_servers.skillsearch.env]\nHF_HOME = \"/data/hf\"\n",
    );
    h.setup("codex", "on_demand");
    let text = fs::read_to_string(h.path(".codex/config.toml")).unwrap();
    let cfg: toml::Table = toml::from_str(&text).unwrap();
    let server = &cfg["mcp_servers"]["skillsearch"];
    assert_eq!(
        server["command"].as_str(),
        Some(env!("CARGO_BIN_EXE_skillsearch")),
        "{text}"
    );
    assert_eq!(
        server["env"]["HF_HOME"].as_str(),
        Some("/data/hf"),
        "{text}"
    );
    assert_eq!(
        server["startup_timeout_sec"].as_integer(),
        Some(30),
        "{text}"
    );
    assert_eq!(
        server["default_tools_approval_mode"].as_str(),
        Some("approve")
    );
    assert!(h.setup("codex", "on_demand").contains("Already set up"));
    assert!(h.doctor("codex").0);

    for (host, rel) in [
        ("claude-code", ".claude.json"),
        ("codebuddy", ".codebuddy/.mcp.json"),
    ] {
        h.write(
            rel,
            r#"{"mcpServers": {"skillsearch": {"type": "stdio", "command": "/old/skillsearch", "args": [], "env": {"HF_HOME": "/data/hf"}, "timeout": 5000}}}"#,
        );
        h.setup(host, "on_demand");
        let server = &h.json(rel)["mcpServers"]["skillsearch"];
        assert_eq!(
            server["command"],
            env!("CARGO_BIN_EXE_skillsearch"),
            "{host}"
        );
        assert_eq!(server["env"], json!({"HF_HOME": "/data/hf"}), "{host}");
        assert_eq!(server["timeout"], 5000, "{host}");
        assert!(
            h.setup(host, "on_demand").contains("Already set up"),
            "{host}"
        );
    }
}

/// A stand-in for `openclaw` whose `plugins install` does what OpenClaw 2026.9's installer does
/// to the config of a context-engine plugin: takes `plugins.slots.contextEngine`.
fn fake_openclaw(h: &Home) -> PathBuf {
    let bin = h.home.join("bin/openclaw");
    h.write(
        "bin/openclaw",
        "#!/usr/bin/env python3\nimport json, os, sys\n\
         if sys.argv[1:] == ['--version']:\n    print('OpenClaw 2026.9.6 (test)'); sys.exit(0)\n\
         p = os.environ['OPENCLAW_CONFIG_PATH']\nc = json.load(open(p))\n\
         c.setdefault('plugins', {}).setdefault('slots', {})['contextEngine'] = 'skillsearch'\n\
         json.dump(c, open(p, 'w'))\n",
    );
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&bin, fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// Another context engine holds OpenClaw's slot: `auto` setup stops and names it, changing
/// nothing; `replace_context_engine=false` keeps it (even though OpenClaw's installer takes the
/// slot, setup puts it back) and doctor names the hook route; `=true` takes it and says what it
/// was; `on_demand` keeps it without asking. A free slot is taken as before.
#[test]
fn openclaw_setup_never_evicts_another_context_engine_silently() {
    let h = Home::new();
    let fake = fake_openclaw(&h);
    let cfg_text = r#"{"plugins": {"slots": {"contextEngine": "lossless-claw"}}}"#;
    h.write(".openclaw/openclaw.json", cfg_text);
    let skills = h.skills.to_string_lossy().into_owned();
    let oc = format!("openclaw={}", fake.display());
    let setup = |mode: &str, extra: &[&str]| {
        let mut a = vec![
            "setup", "openclaw", "--mode", mode, "--skills", &skills, "--set", &oc,
        ];
        a.extend_from_slice(extra);
        h.run(&a)
    };
    let slot = || h.json(".openclaw/openclaw.json")["plugins"]["slots"]["contextEngine"].clone();

    let refused = setup("auto", &[]);
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("`lossless-claw`")
            && err.contains("--set replace_context_engine=true")
            && err.contains("--set replace_context_engine=false"),
        "{err}"
    );
    assert_eq!(
        fs::read_to_string(h.path(".openclaw/openclaw.json")).unwrap(),
        cfg_text,
        "nothing written"
    );

    let kept = setup("auto", &["--set", "replace_context_engine=false"]);
    assert!(
        kept.status.success(),
        "{}",
        String::from_utf8_lossy(&kept.stderr)
    );
    let out = String::from_utf8_lossy(&kept.stdout);
    assert_eq!(slot(), "lossless-claw", "{out}");
    assert!(
        out.contains("Restored plugins.slots.contextEngine = \"lossless-claw\"")
            && out.contains("before_prompt_build hook"),
        "{out}"
    );
    let (_, v) = h.doctor("openclaw");
    let route = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "route")
        .unwrap()
        .clone();
    assert_eq!(route["status"], "warn", "{route}");
    assert!(
        route["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("before_prompt_build")
            || route.to_string().contains("before_prompt_build"),
        "{route}"
    );

    let od = setup("on_demand", &[]);
    assert!(
        od.status.success(),
        "{}",
        String::from_utf8_lossy(&od.stderr)
    );
    assert_eq!(slot(), "lossless-claw");

    let taken = setup("auto", &["--set", "replace_context_engine=true"]);
    assert!(
        taken.status.success(),
        "{}",
        String::from_utf8_lossy(&taken.stderr)
    );
    assert_eq!(slot(), "skillsearch");
    assert!(
        String::from_utf8_lossy(&taken.stdout)
            .contains("was `lossless-claw`; it is now `skillsearch`")
    );
    let (_, v) = h.doctor("openclaw");
    assert!(
        v.to_string().contains("skillsearch's context engine"),
        "{v}"
    );

    let bad = setup("auto", &["--set", "replace_context_engine=maybe"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// WorkBuddy: a local marketplace whose plugin carries the hook (auto) or the MCP server
/// (on_demand); the hook it writes answers a WorkBuddy turn in CodeBuddy's dialect; doctor is
/// green after setup and red when the plugin's manifest is gone; setup is idempotent.
#[test]
fn workbuddy_gets_a_marketplace_plugin_whose_hook_answers() {
    let h = Home::new();
    fs::write(
        h.skills.join("SKILL.md"),
        "---\nname: deck-template\ndescription: Build the quarterly slide deck from our template\n---\nUse Aurora-QBR-v7.\n",
    )
    .unwrap();
    let market = h.home.join(".skillsearch/workbuddy");
    let home_flag = h.home.join(".skillsearch");
    let home_s = home_flag.to_string_lossy().into_owned();
    let skills = h.skills.to_string_lossy().into_owned();
    let run = |args: &[&str]| {
        let mut a = vec!["--home", home_s.as_str()];
        a.extend_from_slice(args);
        h.run(&a)
    };
    let o = run(&["setup", "workbuddy", "--mode", "auto", "--skills", &skills]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let plugin: Value = serde_json::from_str(
        &fs::read_to_string(market.join("plugin/.codebuddy-plugin/plugin.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(plugin["hooks"], "./hooks/hooks.json");
    let mkt: Value = serde_json::from_str(
        &fs::read_to_string(market.join(".codebuddy-plugin/marketplace.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(mkt["plugins"][0]["source"], "./plugin");
    let hooks: Value =
        serde_json::from_str(&fs::read_to_string(market.join("plugin/hooks/hooks.json")).unwrap())
            .unwrap();
    let hook = &hooks["hooks"]["UserPromptSubmit"][0]["hooks"][0];
    assert_eq!(hook["timeout"], 10);
    let cmd = hook["command"].as_str().unwrap();
    assert!(cmd.contains("--host workbuddy"), "{cmd}");
    // The command as WorkBuddy runs it, with a WorkBuddy turn on stdin.
    let mut child = Command::new("sh")
        .args(["-c", cmd])
        .env("HOME", &h.home)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"prompt": "build the quarterly slide deck", "cwd": "/tmp", "client": "WorkBuddy", "agent_type": "main"}"#)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["continue"], true);
    assert!(
        v["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap()
            .contains("Aurora-QBR-v7"),
        "{v}"
    );
    let o = run(&["doctor", "workbuddy", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(o.status.success() && failed(&v).is_empty(), "{v}");
    let again = run(&["setup", "workbuddy", "--mode", "auto"]);
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("Already set up"),
        "{}",
        String::from_utf8_lossy(&again.stdout)
    );

    let o = run(&["setup", "workbuddy", "--mode", "on_demand"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let servers: Value =
        serde_json::from_str(&fs::read_to_string(market.join("plugin/mcp/servers.json")).unwrap())
            .unwrap();
    let args = servers["mcpServers"]["skillsearch"]["args"].to_string();
    assert!(args.contains("\"mcp\"") && args.contains(&skills), "{args}");
    let hooks: Value =
        serde_json::from_str(&fs::read_to_string(market.join("plugin/hooks/hooks.json")).unwrap())
            .unwrap();
    assert_eq!(hooks, json!({}), "no hook in on_demand");

    fs::remove_file(market.join("plugin/.codebuddy-plugin/plugin.json")).unwrap();
    let o = run(&["doctor", "workbuddy", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(failed(&v), ["plugin"], "{v}");
}

#[test]
fn raven_plugin_and_mcp_routes_keep_the_users_config_and_doctor_follows() {
    let h = Home::new();
    let sk = h.skills.to_string_lossy().into_owned();
    let (ok, v) = h.doctor("raven");
    assert!(!ok && failed(&v) == ["config"], "{v}");
    h.write(
        ".raven/config.json",
        r#"{"agents": {"defaults": {"model": "m"}}, "plugins": {"disabled": ["other"]}, "tools": {"mcpServers": {"gh": {"command": "gh-mcp"}}}}"#,
    );
    h.setup("raven", "on_demand");
    assert!(h.setup("raven", "on_demand").contains("Already set up"));
    let cfg = h.json(".raven/config.json");
    assert_eq!(cfg["agents"]["defaults"]["model"], "m");
    assert_eq!(cfg["plugins"]["disabled"], json!(["other"]));
    assert_eq!(cfg["tools"]["mcpServers"]["gh"]["command"], "gh-mcp");
    let section = &cfg["plugins"]["config"]["skillsearch"];
    assert_eq!(section["mode"], "on_demand");
    assert_eq!(section["skills"], json!([sk]));
    for f in [
        "raven-plugin.toml",
        "skillsearch_raven/__init__.py",
        "skillsearch_raven/_engine.py",
    ] {
        assert!(
            h.path(".raven/plugins/skillsearch").join(f).is_file(),
            "{f}"
        );
    }
    let (ok, v) = h.doctor("raven");
    assert!(ok && warned(&v).is_empty(), "{v}");

    // auto: green, but doctor says stock Raven never builds the segment.
    h.setup("raven", "auto");
    let (ok, v) = h.doctor("raven");
    assert!(ok && warned(&v) == ["context-segments"], "{v}");

    // The MCP route: Raven's own client runs `skillsearch mcp`; the plugin is switched off.
    let o = h.run(&["setup", "raven", "--mode", "auto", "--set", "route=mcp"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("route=mcp serves on_demand only"));
    let o = h.run(&[
        "setup",
        "raven",
        "--mode",
        "on_demand",
        "--set",
        "route=mcp",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cfg = h.json(".raven/config.json");
    assert_eq!(cfg["plugins"]["disabled"], json!(["other", "skillsearch"]));
    let args = cfg["tools"]["mcpServers"]["skillsearch"]["args"]
        .as_array()
        .unwrap();
    assert!(
        args.contains(&json!("mcp")) && args.contains(&json!(sk)),
        "{cfg}"
    );
    assert_eq!(cfg["tools"]["mcpServers"]["gh"]["command"], "gh-mcp");
    let (ok, v) = h.doctor("raven");
    assert!(ok, "{v}");
    assert!(
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "mcp-server" && c["status"] == "ok")
    );
    // Without --set route, a second run keeps the route the file has.
    assert!(h.setup("raven", "on_demand").contains("Already set up"));

    // Back to the plugin: the server entry goes, the plugin is enabled again.
    let o = h.run(&["setup", "raven", "--set", "route=plugin"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cfg = h.json(".raven/config.json");
    assert_eq!(cfg["plugins"]["disabled"], json!(["other"]));
    assert!(
        cfg["tools"]["mcpServers"].get("skillsearch").is_none(),
        "{cfg}"
    );

    // A key the plugin's schema does not have: doctor names it.
    let mut cfg = cfg;
    cfg["plugins"]["config"]["skillsearch"]["moode"] = json!("auto");
    h.write(".raven/config.json", &cfg.to_string());
    let (ok, v) = h.doctor("raven");
    assert!(!ok && failed(&v) == ["config"], "{v}");
    assert!(
        v.to_string().contains("plugins.config.skillsearch.moode"),
        "{v}"
    );
}

#[test]
fn dsh_row_joins_the_users_patch_layer_and_doctor_follows() {
    let h = Home::new();
    let (ok, v) = h.doctor("dsh");
    assert!(!ok && failed(&v) == ["patch"], "{v}");
    let mine = "# my layer\n- id: hmr\n  disabled: true\n";
    h.write(".dsh/cordis.patch.yml", mine);
    h.setup("dsh", "on_demand");
    assert!(h.setup("dsh", "on_demand").contains("Already set up"));
    let text = fs::read_to_string(h.path(".dsh/cordis.patch.yml")).unwrap();
    assert!(text.starts_with(mine), "{text}");
    let index = h.path(".skillsearch/dsh/plugin/index.js");
    assert!(
        text.contains(&format!("name: \"{}\"", index.display())),
        "{text}"
    );
    for f in ["index.js", "engine.js", "package.json"] {
        assert!(h.path(".skillsearch/dsh/plugin").join(f).is_file(), "{f}");
    }
    let (ok, v) = h.doctor("dsh");
    assert!(ok && warned(&v).is_empty(), "{v}");

    h.setup("dsh", "auto");
    let text = fs::read_to_string(h.path(".dsh/cordis.patch.yml")).unwrap();
    assert_eq!(text.matches("- id: skillsearch").count(), 1, "{text}");
    assert!(
        text.contains("mode: auto") && text.starts_with(mine),
        "{text}"
    );
    let (ok, v) = h.doctor("dsh");
    assert!(ok, "{v}");

    // A key the plugin's Config does not have: doctor names it.
    h.write(
        ".dsh/cordis.patch.yml",
        &text.replace("deadline_ms: 5000", "deadline: 5000"),
    );
    let (ok, v) = h.doctor("dsh");
    assert!(!ok && failed(&v) == ["config"], "{v}");
    assert!(
        v.to_string().contains("unknown key `skillsearch.deadline`"),
        "{v}"
    );

    // A row the user wrote is never overwritten.
    let other = Home::new();
    other.write(
        ".dsh/cordis.patch.yml",
        "- insert:\n    - id: skillsearch\n      name: ./mine.js\n",
    );
    let o = other.run(&["setup", "dsh"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("already has a `skillsearch` row"));
}
