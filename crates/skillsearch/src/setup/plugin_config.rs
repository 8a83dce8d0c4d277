//! The settings the plugin hosts' plugins (Hermes, Raven, DeepSeek Harness) read: the same five
//! keys under a host-specific place in the host's own config file. Setup writes them and doctor
//! reads them back the way each plugin does; where the plugins differ (a `null` value, a lone
//! string for `skills`, empty or non-string entries), the difference is a [`Dialect`] field, not
//! a copy of the reader.

use serde_json::{Map, Value, json};
use skillsearch_core::config::MODES;
use std::path::Path;

/// The keys every plugin accepts, in the order setup writes them.
pub const KEYS: &[&str] = &["binary", "mode", "skills", "home", "deadline_ms"];
/// The plugins' deadline for one engine call unless `--set deadline_ms=N`.
pub const DEFAULT_DEADLINE_MS: u64 = 5000;

/// One plugin's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginConfig {
    pub binary: String,
    pub mode: String,
    pub skills: Vec<String>,
    pub home: String,
    pub deadline_ms: u64,
}

/// How one plugin reads its settings where the plugins differ.
#[derive(Debug, Clone, Copy)]
pub struct Dialect {
    /// A key set to `null` counts as absent (else it is an error).
    pub null_is_absent: bool,
    /// `skills` may be one string instead of a list.
    pub skills_may_be_string: bool,
    /// Entries of `skills` must be non-empty.
    pub skills_non_empty: bool,
    /// `binary` and `home`, when present, must be strings (else any other value reads as "").
    pub strings_typed: bool,
}

impl PluginConfig {
    pub fn json(&self) -> Value {
        json!({
            "binary": self.binary,
            "mode": self.mode,
            "skills": self.skills,
            "home": self.home,
            "deadline_ms": self.deadline_ms,
        })
    }

    /// The settings in `obj` as a plugin of `dialect` reads them, or the message naming the key
    /// at fault; `at` is where the settings live, as messages name it (`plugins.skillsearch`).
    pub fn read(
        obj: &Map<String, Value>,
        at: &str,
        path: &Path,
        dialect: Dialect,
    ) -> Result<PluginConfig, String> {
        let file = path.display();
        if let Some(k) = obj.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(format!(
                "unknown key `{at}.{k}` in {file}; accepted: {}",
                KEYS.join(", ")
            ));
        }
        let get = |k: &str| {
            obj.get(k)
                .filter(|v| !(dialect.null_is_absent && v.is_null()))
        };
        let mode = match get("mode") {
            None => "on_demand".to_owned(),
            Some(Value::String(m)) if MODES.contains(&m.as_str()) => m.clone(),
            Some(other) => {
                return Err(format!(
                    "`{at}.mode` in {file}: {other} is not one of {}",
                    MODES.join(", ")
                ));
            }
        };
        let deadline_ms = match get("deadline_ms") {
            None => DEFAULT_DEADLINE_MS,
            Some(v) => v.as_u64().filter(|ms| *ms > 0).ok_or_else(|| {
                format!("`{at}.deadline_ms` in {file}: {v} is not a whole number of milliseconds")
            })?,
        };
        let entry_ok = |s: &Value| {
            s.as_str()
                .is_some_and(|s| !(dialect.skills_non_empty && s.is_empty()))
        };
        let skills = match get("skills") {
            None => Vec::new(),
            Some(Value::String(s)) if dialect.skills_may_be_string => vec![s.clone()],
            Some(Value::Array(a)) if a.iter().all(entry_ok) => a
                .iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect(),
            Some(_) => {
                return Err(format!(
                    "`{at}.skills` in {file} must be a list of directories"
                ));
            }
        };
        if dialect.strings_typed {
            for k in ["binary", "home"] {
                if get(k).is_some_and(|v| !v.is_string()) {
                    return Err(format!("`{at}.{k}` in {file} must be a string"));
                }
            }
        }
        let s = |k: &str| get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        Ok(PluginConfig {
            binary: s("binary"),
            mode,
            skills,
            home: s("home"),
            deadline_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRICT: Dialect = Dialect {
        null_is_absent: false,
        skills_may_be_string: false,
        skills_non_empty: false,
        strings_typed: true,
    };
    const LENIENT: Dialect = Dialect {
        null_is_absent: true,
        skills_may_be_string: true,
        skills_non_empty: true,
        strings_typed: false,
    };

    fn read(v: Value, d: Dialect) -> Result<PluginConfig, String> {
        PluginConfig::read(v.as_object().unwrap(), "p.s", Path::new("/c.json"), d)
    }

    #[test]
    fn settings_round_trip_through_json() {
        let c = PluginConfig {
            binary: "/bin/skillsearch".into(),
            mode: "auto".into(),
            skills: vec!["/s".into()],
            home: "/h".into(),
            deadline_ms: 700,
        };
        assert_eq!(read(c.json(), STRICT).unwrap(), c);
        assert_eq!(read(c.json(), LENIENT).unwrap(), c);
    }

    #[test]
    fn defaults_and_the_dialects_differences() {
        let empty = read(json!({}), STRICT).unwrap();
        assert_eq!(
            (empty.mode.as_str(), empty.deadline_ms, empty.skills.len()),
            ("on_demand", DEFAULT_DEADLINE_MS, 0)
        );
        let nulls = json!({"mode": null, "skills": null, "deadline_ms": null, "home": null});
        assert_eq!(read(nulls.clone(), LENIENT).unwrap(), empty);
        let err = read(nulls, STRICT).unwrap_err();
        assert!(err.contains("`p.s.mode` in /c.json: null"), "{err}");
        assert_eq!(
            read(json!({"skills": "/s"}), LENIENT).unwrap().skills,
            ["/s"]
        );
        let err = read(json!({"skills": "/s"}), STRICT).unwrap_err();
        assert!(
            err.contains("`p.s.skills` in /c.json must be a list"),
            "{err}"
        );
        assert!(read(json!({"skills": [""]}), STRICT).is_ok());
        assert!(read(json!({"skills": [""]}), LENIENT).is_err());
        let err = read(json!({"home": 5}), STRICT).unwrap_err();
        assert_eq!(err, "`p.s.home` in /c.json must be a string");
        assert_eq!(read(json!({"home": 5}), LENIENT).unwrap().home, "");
    }

    #[test]
    fn bad_values_name_the_key_and_what_is_accepted() {
        let err = read(json!({"colour": 1}), STRICT).unwrap_err();
        assert!(
            err.starts_with("unknown key `p.s.colour` in /c.json; accepted: binary, mode"),
            "{err}"
        );
        let err = read(json!({"mode": "loud"}), LENIENT).unwrap_err();
        assert!(err.contains("\"loud\" is not one of"), "{err}");
        for bad in [json!(0), json!(-5), json!("5000"), json!(1.5)] {
            let err = read(json!({"deadline_ms": bad}), LENIENT).unwrap_err();
            assert!(
                err.contains("is not a whole number of milliseconds"),
                "{err}"
            );
        }
    }
}
