//! `skillsearch setup hermes` and `skillsearch doctor hermes` on a scratch `HERMES_HOME`.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn run(hermes: &Path, home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skillsearch"))
        .arg("--home")
        .arg(home)
        .args(args)
        .env("HERMES_HOME", hermes)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn doctor(hermes: &Path, home: &Path) -> (i32, Value) {
    let o = run(hermes, home, &["doctor", "hermes", "--json"]);
    (
        o.status.code().unwrap(),
        serde_json::from_slice(&o.stdout).unwrap(),
    )
}

fn failed(v: &Value) -> Vec<String> {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] != "ok")
        .map(|c| format!("{}: {}", c["name"], c["detail"]))
        .collect()
}

#[test]
fn setup_is_idempotent_keeps_user_keys_and_doctor_is_green() {
    let t = tempfile::tempdir().unwrap();
    let (hermes, home, skills) = (t.path().join("h"), t.path().join("ss"), t.path().join("sk"));
    std::fs::create_dir_all(&hermes).unwrap();
    std::fs::create_dir_all(&skills).unwrap();
    let cfg = hermes.join("config.yaml");
    std::fs::write(
        &cfg,
        "# mine\nmodel:\n  default: fake-model\nmemory:\n  provider: ''\n  memory_enabled: true\n",
    )
    .unwrap();
    let (code, v) = doctor(&hermes, &home);
    assert_eq!(code, 1, "{v}");
    let sk = skills.to_str().unwrap();
    let o = run(
        &hermes,
        &home,
        &[
            "setup",
            "hermes",
            "--skills",
            sk,
            "--mode",
            "auto",
            "--dry-run",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("+  provider: skillsearch"),
        "{}",
        text(&o)
    );
    assert!(!hermes.join("plugins").exists(), "dry run wrote");
    let o = run(
        &hermes,
        &home,
        &["setup", "hermes", "--skills", sk, "--mode", "auto"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let after = std::fs::read_to_string(&cfg).unwrap();
    assert!(
        after.starts_with("# mine\nmodel:\n  default: fake-model\n"),
        "{after}"
    );
    assert!(after.contains("  memory_enabled: true\n") && after.contains("mode: auto"));
    assert!(hermes.join("plugins/skillsearch/__init__.py").is_file());
    let (code, v) = doctor(&hermes, &home);
    assert_eq!(code, 0, "{:?}", failed(&v));
    assert!(failed(&v).is_empty(), "{:?}", failed(&v));
    let o = run(
        &hermes,
        &home,
        &["setup", "hermes", "--skills", sk, "--mode", "auto"],
    );
    assert!(text(&o).contains("Already set up"), "{}", text(&o));
    // An edited plugin file and an over-long deadline are found, each with a fix.
    std::fs::write(hermes.join("plugins/skillsearch/plugin.yaml"), "name: x\n").unwrap();
    std::fs::write(
        &cfg,
        after.replace("deadline_ms: 5000", "deadline_ms: 9000"),
    )
    .unwrap();
    let (code, v) = doctor(&hermes, &home);
    assert_eq!(code, 1);
    let bad = failed(&v).join("\n");
    assert!(
        bad.contains("plugin-files") && bad.contains("deadline"),
        "{bad}"
    );
    std::fs::write(
        &cfg,
        after.replace("deadline_ms: 5000", "deadline_ms: 7000"),
    )
    .unwrap();
    let (_, v) = doctor(&hermes, &home);
    let deadline = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "deadline")
        .unwrap();
    assert_eq!(deadline["status"], "warn");
}

#[test]
fn setup_refuses_another_provider_and_a_misspelled_mode() {
    let t = tempfile::tempdir().unwrap();
    let (hermes, home) = (t.path().join("h"), t.path().join("ss"));
    std::fs::create_dir_all(&hermes).unwrap();
    let cfg = hermes.join("config.yaml");
    std::fs::write(&cfg, "memory:\n  provider: mem0\n").unwrap();
    let o = run(&hermes, &home, &["setup", "hermes"]);
    assert_eq!(o.status.code(), Some(2));
    let msg = text(&o);
    assert!(
        msg.contains("`mem0`") && msg.contains("--set replace_memory_provider=true"),
        "{msg}"
    );
    assert_eq!(
        std::fs::read_to_string(&cfg).unwrap(),
        "memory:\n  provider: mem0\n"
    );
    let (_, v) = doctor(&hermes, &home);
    assert!(failed(&v).join("\n").contains("mem0"), "{v}");
    let o = run(&hermes, &home, &["setup", "hermes", "--mode", "atuo"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("--mode") && text(&o).contains("atuo"),
        "{}",
        text(&o)
    );
    let o = run(
        &hermes,
        &home,
        &["setup", "hermes", "--set", "replace_memory_provider=true"],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        std::fs::read_to_string(&cfg)
            .unwrap()
            .contains("provider: skillsearch")
    );
    std::fs::write(
        &cfg,
        std::fs::read_to_string(&cfg)
            .unwrap()
            .replace("mode: on_demand", "mode: atuo"),
    )
    .unwrap();
    let (code, v) = doctor(&hermes, &home);
    assert_eq!(code, 1);
    assert!(
        failed(&v).join("\n").contains("plugins.skillsearch.mode"),
        "{v}"
    );
    // on_demand with the memory toolset off for the CLI: a warning naming the key.
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("mode: atuo", "mode: on_demand");
    std::fs::write(
        &cfg,
        format!("{text}platform_toolsets:\n  cli: [web, terminal]\n"),
    )
    .unwrap();
    let (_, v) = doctor(&hermes, &home);
    assert!(
        failed(&v).join("\n").contains("platform_toolsets.cli"),
        "{v}"
    );
}
