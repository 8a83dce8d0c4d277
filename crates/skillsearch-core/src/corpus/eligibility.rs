//! Eligibility gating in OpenClaw's order. Gating depends on the machine (PATH, environment,
//! OS, host config), so it runs when a query is answered, never when the index is built.

use crate::corpus::frontmatter::SkillMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

/// Why a skill is not offered to the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exclusion {
    /// Stable code: `disabled-model-invocation`, `disabled`, `os`, `env`, `config`, `bins`, `any-bins`.
    pub code: String,
    pub reason: String,
}

/// What the gate checks against. [`EligibilityEnv::from_process`] reads the current process.
#[derive(Debug, Default)]
pub struct EligibilityEnv {
    /// OpenClaw platform name: `linux`, `darwin` or `win32`.
    pub os: String,
    /// Environment variables that are set and non-empty.
    pub env: HashSet<String>,
    pub path_dirs: Vec<PathBuf>,
    /// The host's config document, for `requires.config` and `skills.entries`.
    host_config: RwLock<Option<Arc<Value>>>,
    /// Where `host_config` is read from (and re-read when it changes), if from a file.
    file: Option<HostConfigFile>,
    /// Bumped whenever `host_config` changes (answers judged on an older one are stale).
    generation: AtomicU64,
    /// Admit every skill (for measuring ranking alone).
    allow_all: bool,
    bins: Mutex<HashMap<String, bool>>,
}

/// A host config file and what was seen of it last.
#[derive(Debug)]
struct HostConfigFile {
    path: PathBuf,
    /// (modified, length) of the last read; `None`: not read, or missing.
    seen: Mutex<Option<(SystemTime, u64)>>,
    /// Why the last read failed, repeated until a read succeeds.
    broken: Mutex<Option<String>>,
}

/// The most a host config file may hold (OpenClaw's are a few KiB).
const MAX_HOST_CONFIG_BYTES: u64 = 4 << 20;

/// OpenClaw's config file as OpenClaw resolves it: `$OPENCLAW_CONFIG_PATH`, else
/// `$OPENCLAW_STATE_DIR/openclaw.json`, else `~/.openclaw/openclaw.json`. `var` reads a variable.
pub fn openclaw_config_path(var: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let set = |k: &str| var(k).filter(|v| !v.is_empty());
    if let Some(p) = set("OPENCLAW_CONFIG_PATH") {
        return Some(PathBuf::from(p));
    }
    let state = set("OPENCLAW_STATE_DIR")
        .map(PathBuf::from)
        .or_else(|| set("HOME").map(|h| Path::new(&h).join(".openclaw")))?;
    Some(state.join("openclaw.json"))
}

impl EligibilityEnv {
    pub fn from_process() -> Self {
        let os = match std::env::consts::OS {
            "macos" => "darwin",
            "windows" => "win32",
            other => other,
        }
        .to_owned();
        let env = std::env::vars_os()
            .filter(|(_, v)| !v.is_empty())
            .filter_map(|(k, _)| k.into_string().ok())
            .collect();
        let path_dirs = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect())
            .unwrap_or_default();
        EligibilityEnv {
            os,
            env,
            path_dirs,
            ..EligibilityEnv::default()
        }
    }

    /// [`EligibilityEnv::from_process`], judging `requires.config` and `skills.entries` against
    /// the host config the settings name (`host_config`; by default OpenClaw's, see
    /// `openclaw_config_path`), read now and re-read by [`EligibilityEnv::refresh`].
    pub fn for_settings(s: &crate::config::Settings) -> Self {
        use crate::config::HostConfig;
        let path = match &s.host_config {
            HostConfig::Off => None,
            HostConfig::File(p) => Some(p.clone()),
            HostConfig::Default => openclaw_config_path(|k| std::env::var(k).ok()),
        };
        let env = EligibilityEnv::from_process();
        match path {
            Some(p) => env.with_host_config_file(p),
            None => env,
        }
    }

    /// The same env reading the host config from `path` (JSON or JSON5; a missing file is no
    /// config). Read now; [`EligibilityEnv::refresh`] re-reads it when it changed.
    pub fn with_host_config_file(mut self, path: PathBuf) -> Self {
        self.file = Some(HostConfigFile {
            path,
            seen: Mutex::default(),
            broken: Mutex::default(),
        });
        let _ = self.refresh();
        self
    }

    /// Re-reads the host config file when its modification time or length changed. Returns a
    /// diagnostic while the file cannot be used (unreadable, not JSON5, not an object), and
    /// then keeps judging against the last good read.
    pub fn refresh(&self) -> Option<String> {
        let f = self.file.as_ref()?;
        let meta = std::fs::metadata(&f.path).ok();
        let stamp = meta
            .as_ref()
            .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()));
        {
            let mut seen = f.seen.lock().ok()?;
            if *seen == stamp {
                return f.broken.lock().ok()?.clone();
            }
            *seen = stamp;
        }
        let read = match meta {
            None => Ok(None),
            Some(m) if m.len() > MAX_HOST_CONFIG_BYTES => Err(format!(
                "is {} bytes, more than {MAX_HOST_CONFIG_BYTES}",
                m.len()
            )),
            Some(_) => crate::fsio::read_regular_string(&f.path)
                .map_err(|e| e.to_string())
                .and_then(|text| {
                    serde_json::from_str::<Value>(&text)
                        .or_else(|_| json5::from_str::<Value>(&text))
                        .map_err(|e| format!("is not valid JSON5 ({e})"))
                })
                .and_then(|v| {
                    if v.is_object() {
                        Ok(Some(v))
                    } else {
                        Err("does not hold a JSON object".to_owned())
                    }
                }),
        };
        let note = match read {
            Ok(v) => {
                if let Ok(mut cfg) = self.host_config.write() {
                    *cfg = v.map(Arc::new);
                }
                None
            }
            Err(why) => Some(format!(
                "host config {} {why}; `requires.config` and `skills.entries` are judged against its last good read",
                f.path.display()
            )),
        };
        if let Ok(mut b) = f.broken.lock() {
            b.clone_from(&note);
        }
        // Every re-read counts as a change: answers given before it (or before its diagnostic)
        // are stale.
        self.generation.fetch_add(1, Ordering::Relaxed);
        note
    }

    /// Changes whenever the host config file is re-read.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    pub fn new(
        os: &str,
        env: HashSet<String>,
        path_dirs: Vec<PathBuf>,
        host_config: Option<Value>,
    ) -> Self {
        EligibilityEnv {
            os: os.to_owned(),
            env,
            path_dirs,
            host_config: RwLock::new(host_config.map(Arc::new)),
            ..EligibilityEnv::default()
        }
    }

    /// A gate that admits every skill: ranking is measured without this machine's PATH or env.
    pub fn allow_all() -> Self {
        EligibilityEnv {
            allow_all: true,
            ..EligibilityEnv::default()
        }
    }

    fn has_bin(&self, bin: &str) -> bool {
        if let Some(hit) = self.bins.lock().ok().and_then(|m| m.get(bin).copied()) {
            return hit;
        }
        let found = !bin.contains('/')
            && self.path_dirs.iter().any(|d| {
                use std::os::unix::fs::PermissionsExt;
                std::fs::metadata(d.join(bin))
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            });
        if let Ok(mut m) = self.bins.lock() {
            m.insert(bin.to_owned(), found);
        }
        found
    }

    /// Checks one skill; `Ok(())` means eligible.
    pub fn check(&self, meta: &SkillMeta) -> Result<(), Exclusion> {
        if self.allow_all {
            return Ok(());
        }
        let ex = |code: &str, reason: String| {
            Err(Exclusion {
                code: code.to_owned(),
                reason,
            })
        };
        if meta.disable_model_invocation {
            return ex(
                "disabled-model-invocation",
                "`disable-model-invocation: true`: the skill is for users only".into(),
            );
        }
        let oc = &meta.openclaw;
        let key = oc.skill_key.as_deref().unwrap_or(&meta.name);
        let host_config = self.host_config.read().ok().and_then(|c| c.clone());
        let host_config = host_config.as_deref();
        let entry = host_config
            .and_then(|c| c.get("skills"))
            .and_then(|s| s.get("entries"))
            .and_then(|e| e.get(key));
        if entry.and_then(|e| e.get("enabled")) == Some(&Value::Bool(false)) {
            return ex(
                "disabled",
                format!("`skills.entries.{key}.enabled` is false in the host config"),
            );
        }
        if !oc.os.is_empty() && !oc.os.iter().any(|o| normalise_os(o) == self.os) {
            return ex(
                "os",
                format!(
                    "runs on {} only; this machine is {}",
                    oc.os.join(", "),
                    self.os
                ),
            );
        }
        if oc.always {
            return Ok(());
        }
        for var in &oc.requires.env {
            let in_entry = entry
                .and_then(|e| e.get("env"))
                .and_then(|e| e.get(var))
                .is_some_and(truthy);
            let api_key = oc.primary_env.as_deref() == Some(var.as_str())
                && entry.and_then(|e| e.get("apiKey")).is_some_and(truthy);
            if !self.env.contains(var) && !in_entry && !api_key {
                return ex(
                    "env",
                    format!("requires environment variable `{var}`, which is not set"),
                );
            }
        }
        for path in &oc.requires.config {
            let value =
                host_config.and_then(|c| path.split('.').try_fold(c, |cur, part| cur.get(part)));
            if !value.is_some_and(truthy) {
                return ex("config", format!("requires host config `{path}` to be set"));
            }
        }
        let missing: Vec<&str> = oc
            .requires
            .bins
            .iter()
            .filter(|b| !self.has_bin(b))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return ex(
                "bins",
                format!("requires `{}` on PATH", missing.join("`, `")),
            );
        }
        if !oc.requires.any_bins.is_empty() && !oc.requires.any_bins.iter().any(|b| self.has_bin(b))
        {
            return ex(
                "any-bins",
                format!(
                    "requires one of `{}` on PATH",
                    oc.requires.any_bins.join("`, `")
                ),
            );
        }
        Ok(())
    }
}

fn normalise_os(os: &str) -> &str {
    match os.trim() {
        "macos" | "mac" | "osx" => "darwin",
        "windows" | "win" => "win32",
        other => other,
    }
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::frontmatter::{OpenClawMeta, Requires};

    fn meta(oc: OpenClawMeta) -> SkillMeta {
        SkillMeta {
            name: "s".into(),
            description: String::new(),
            disable_model_invocation: false,
            openclaw: oc,
        }
    }

    fn env_with_bin(bin: &str) -> (tempfile::TempDir, EligibilityEnv) {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join(bin);
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        let env = EligibilityEnv::new(
            "linux",
            HashSet::from(["HAVE".to_owned()]),
            vec![tmp.path().to_path_buf()],
            None,
        );
        (tmp, env)
    }

    #[test]
    fn order_and_reasons() {
        let (_t, env) = env_with_bin("present");
        let req = |r: Requires| {
            meta(OpenClawMeta {
                requires: r,
                ..Default::default()
            })
        };
        assert_eq!(
            env.check(&req(Requires {
                bins: vec!["present".into()],
                ..Default::default()
            })),
            Ok(())
        );
        assert_eq!(
            env.check(&req(Requires {
                bins: vec!["absent".into()],
                ..Default::default()
            }))
            .unwrap_err()
            .code,
            "bins"
        );
        assert_eq!(
            env.check(&req(Requires {
                any_bins: vec!["absent".into(), "present".into()],
                ..Default::default()
            })),
            Ok(())
        );
        assert_eq!(
            env.check(&req(Requires {
                any_bins: vec!["absent".into()],
                ..Default::default()
            }))
            .unwrap_err()
            .code,
            "any-bins"
        );
        assert_eq!(
            env.check(&req(Requires {
                env: vec!["HAVE".into()],
                ..Default::default()
            })),
            Ok(())
        );
        // env is checked before bins
        let both = Requires {
            env: vec!["MISSING".into()],
            bins: vec!["absent".into()],
            ..Default::default()
        };
        let e = env.check(&req(both.clone())).unwrap_err();
        assert_eq!(e.code, "env");
        assert!(e.reason.contains("`MISSING`"));
        // os is a hard filter even for always
        let m = meta(OpenClawMeta {
            os: vec!["darwin".into()],
            always: true,
            ..Default::default()
        });
        assert_eq!(env.check(&m).unwrap_err().code, "os");
        // always skips requires
        let m = meta(OpenClawMeta {
            always: true,
            requires: both,
            ..Default::default()
        });
        assert_eq!(env.check(&m), Ok(()));
        let mut m = meta(OpenClawMeta::default());
        m.disable_model_invocation = true;
        assert_eq!(env.check(&m).unwrap_err().code, "disabled-model-invocation");
    }

    #[test]
    fn host_config_entries_and_config_paths() {
        let cfg = serde_json::json!({
            "plugins": {"entries": {"big": {"enabled": true}}},
            "skills": {"entries": {"s": {"apiKey": "k"}, "off": {"enabled": false}}}
        });
        let env = EligibilityEnv::new("linux", HashSet::new(), vec![], Some(cfg));
        let m = meta(OpenClawMeta {
            primary_env: Some("KEY".into()),
            requires: Requires {
                env: vec!["KEY".into()],
                config: vec!["plugins.entries.big.enabled".into()],
                ..Default::default()
            },
            ..Default::default()
        });
        assert_eq!(env.check(&m), Ok(()));
        let m2 = meta(OpenClawMeta {
            requires: Requires {
                config: vec!["plugins.entries.small.enabled".into()],
                ..Default::default()
            },
            ..Default::default()
        });
        assert_eq!(env.check(&m2).unwrap_err().code, "config");
        let mut off = meta(OpenClawMeta::default());
        off.name = "off".into();
        assert_eq!(env.check(&off).unwrap_err().code, "disabled");
    }

    #[test]
    fn the_host_config_file_is_read_and_re_read_when_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("openclaw.json");
        let m = meta(OpenClawMeta {
            requires: Requires {
                config: vec!["plugins.entries.big.enabled".into()],
                ..Default::default()
            },
            ..Default::default()
        });
        let env = EligibilityEnv::new("linux", HashSet::new(), vec![], None)
            .with_host_config_file(path.clone());
        assert_eq!(
            env.check(&m).unwrap_err().code,
            "config",
            "no file: no config"
        );
        let g0 = env.generation();
        // JSON5, as OpenClaw writes it by hand.
        std::fs::write(
            &path,
            "{plugins: {entries: {big: {enabled: true}}}, // on\n}",
        )
        .unwrap();
        assert_eq!(env.refresh(), None);
        assert_eq!(env.check(&m), Ok(()));
        assert!(env.generation() > g0);
        let g1 = env.generation();
        assert_eq!(env.refresh(), None, "unchanged: not re-read");
        assert_eq!(env.generation(), g1);
        // Broken: a diagnostic every turn, judged on the last good read.
        std::fs::write(&path, "{plugins: ").unwrap();
        let note = env.refresh().unwrap();
        assert!(
            note.contains("openclaw.json") && note.contains("not valid JSON5"),
            "{note}"
        );
        assert!(env.refresh().is_some());
        assert_eq!(env.check(&m), Ok(()));
        std::fs::write(&path, "[1]").unwrap();
        assert!(
            env.refresh()
                .unwrap()
                .contains("does not hold a JSON object")
        );
        // Removed: no config any more.
        std::fs::remove_file(&path).unwrap();
        assert_eq!(env.refresh(), None);
        assert_eq!(env.check(&m).unwrap_err().code, "config");
    }

    #[test]
    fn openclaw_finds_its_config_like_openclaw() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            openclaw_config_path(vars(&[("OPENCLAW_CONFIG_PATH", "/c.json"), ("HOME", "/h")])),
            Some(PathBuf::from("/c.json"))
        );
        assert_eq!(
            openclaw_config_path(vars(&[("OPENCLAW_STATE_DIR", "/s"), ("HOME", "/h")])),
            Some(PathBuf::from("/s/openclaw.json"))
        );
        assert_eq!(
            openclaw_config_path(vars(&[("OPENCLAW_CONFIG_PATH", ""), ("HOME", "/h")])),
            Some(PathBuf::from("/h/.openclaw/openclaw.json"))
        );
        assert_eq!(openclaw_config_path(vars(&[])), None);
    }
}
