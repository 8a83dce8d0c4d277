//! Eligibility gating in OpenClaw's order. Gating depends on the machine (PATH, environment,
//! OS, host config), so it runs when a query is answered, never when the index is built.

use crate::corpus::frontmatter::SkillMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Mutex;

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
    pub host_config: Option<Value>,
    /// Admit every skill (for measuring ranking alone).
    allow_all: bool,
    bins: Mutex<HashMap<String, bool>>,
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
            host_config: None,
            allow_all: false,
            bins: Mutex::default(),
        }
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
            host_config,
            allow_all: false,
            bins: Mutex::default(),
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

    fn config_path(&self, path: &str) -> Option<&Value> {
        let mut cur = self.host_config.as_ref()?;
        for part in path.split('.') {
            cur = cur.get(part)?;
        }
        Some(cur)
    }

    fn entry(&self, key: &str) -> Option<&Value> {
        self.host_config
            .as_ref()?
            .get("skills")?
            .get("entries")?
            .get(key)
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
        let entry = self.entry(key);
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
            if !self.config_path(path).is_some_and(truthy) {
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
}
