//! `skillsearch setup <host>` and `skillsearch doctor <host>`: wiring skillsearch into a host's own
//! configuration, and finding every gate that would leave that wiring silently inert.
//!
//! Each host is one module that *plans* file changes ([`FileChange`]) and *checks* gates
//! ([`Check`]). This module applies a plan the same way for every host: a unified diff on stdout,
//! a timestamped backup of every file it replaces, an atomic write, `--dry-run`, and nothing
//! written when nothing changes (so running setup twice is a no-op).

use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

use crate::output::Out;

pub mod claude_code;
pub mod codebuddy;
pub mod codex;
pub mod doctor;
pub mod dsh;
pub mod hermes;
pub mod openclaw;
mod openclaw_runtime;
pub mod plugin_config;
pub mod raven;
pub mod wiring;
pub mod workbuddy;

/// The hosts `setup` and `doctor` know.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Host {
    /// OpenClaw 2026.8+ (context engine, hook, tools) and ≤ 2026.7 (hook, tools)
    Openclaw,
    /// Claude Code: UserPromptSubmit hook (auto) or MCP server (on_demand) in the user settings
    ClaudeCode,
    /// Codex CLI: hooks.json + recorded trust (auto) or config.toml MCP server (on_demand)
    Codex,
    /// CodeBuddy Code / WorkBuddy engine: settings.json hook (auto) or .mcp.json server (on_demand)
    Codebuddy,
    /// Hermes Agent 0.19+ (memory-provider plugin: prefetch in auto, tools in on_demand)
    Hermes,
    /// WorkBuddy desktop: a local marketplace with the skillsearch plugin (hook in auto, MCP
    /// server in on_demand) to install from WorkBuddy's plugin settings
    Workbuddy,
    /// Raven (EverMind-AI/Raven 0.1.9): a user plugin (tools in on_demand; a context segment in
    /// auto, which stock Raven never builds), or `--set route=mcp` for its MCP client
    Raven,
    /// DeepSeek Harness (dsh 0.1.x): a Cordis plugin row in $DSH_HOME/cordis.patch.yml (tools in
    /// on_demand, the agent pre-step in auto)
    Dsh,
}

/// Plans the host's changes and applies them.
pub fn run_setup(out: &mut Out, host: Host, req: &SetupRequest, dry_run: bool) -> Result<u8> {
    let plan = match host {
        Host::Openclaw => openclaw::setup(req)?,
        Host::ClaudeCode => claude_code::setup(req)?,
        Host::Codex => codex::setup(req)?,
        Host::Codebuddy => codebuddy::setup(req)?,
        Host::Hermes => hermes::setup(req)?,
        Host::Workbuddy => workbuddy::setup(req)?,
        Host::Raven => raven::setup(req)?,
        Host::Dsh => dsh::setup(req)?,
    };
    apply(out, &plan, dry_run)?;
    Ok(0)
}

/// Checks every gate of the host's integration.
pub fn run_doctor(out: &mut Out, host: Host, home: &Path, json: bool) -> Result<u8> {
    let checks = match host {
        Host::Openclaw => openclaw::doctor(home)?,
        Host::ClaudeCode => claude_code::doctor(home)?,
        Host::Codex => codex::doctor(home)?,
        Host::Codebuddy => codebuddy::doctor(home)?,
        Host::Hermes => hermes::doctor(home)?,
        Host::Workbuddy => workbuddy::doctor(home)?,
        Host::Raven => raven::doctor(home)?,
        Host::Dsh => dsh::doctor(home)?,
    };
    report(out, host, &checks, json)
}

/// What every host's setup is given.
pub struct SetupRequest {
    /// Skill roots the user named; empty means the host's own roots.
    pub skills: Vec<PathBuf>,
    /// `auto` or `on_demand`, already validated; `None` keeps what the host has, else the default.
    pub mode: Option<String>,
    /// skillsearch's home (indexes, config).
    pub home: PathBuf,
    /// The binary hosts should run: this executable, made absolute.
    pub binary: PathBuf,
    /// Host-specific options given as `--set KEY=VALUE`.
    pub options: Vec<(String, String)>,
}

/// One file a setup writes. `before` is `None` when the file does not exist yet.
#[derive(Debug, Clone)]
pub struct FileChange {
    pub path: PathBuf,
    pub before: Option<String>,
    pub after: String,
    /// Unix permission bits for a new file (scripts), if not the default.
    pub executable: bool,
}

impl FileChange {
    /// A change to `path` whose new content is `after`; reads the current content.
    pub fn to(path: impl Into<PathBuf>, after: String) -> Result<Self> {
        let path = path.into();
        let before = read_optional(&path)?;
        Ok(FileChange {
            path,
            before,
            after,
            executable: false,
        })
    }

    pub fn changes(&self) -> bool {
        self.before.as_deref() != Some(self.after.as_str())
    }
}

/// A host command a setup runs after writing its files (the host's own installer, say).
#[derive(Debug, Clone)]
pub struct Command {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Why it runs, printed beside it.
    pub why: String,
}

impl Command {
    fn display(&self) -> String {
        let mut s = self.program.display().to_string();
        for a in &self.args {
            s.push(' ');
            s.push_str(a);
        }
        s
    }
}

/// A setup plan: the files, and what a person should know afterwards.
#[derive(Default)]
pub struct SetupPlan {
    pub changes: Vec<FileChange>,
    /// Run in order after the files are written; skipped (and printed) on a dry run.
    pub commands: Vec<Command>,
    /// Lines printed after the diff (what was chosen and why, what to run next).
    pub notes: Vec<String>,
    /// Values a command may overwrite that must hold afterwards, restored after the commands
    /// run (OpenClaw's installer takes the context-engine slot for any context-engine plugin).
    pub pins: Vec<Pin>,
}

/// A value at a key path of a JSON file (JSON5 read) that setup decided on.
#[derive(Debug, Clone)]
pub struct Pin {
    pub file: PathBuf,
    pub path: Vec<String>,
    pub value: Value,
}

impl Pin {
    /// Puts the value back when a command changed it; says so. Nothing when it held.
    fn restore(&self, stamp: &str) -> Result<Option<String>> {
        let Some(text) = read_optional(&self.file)? else {
            return Ok(None);
        };
        let mut doc: Value = serde_json::from_str(&text)
            .or_else(|_| json5::from_str(&text))
            .with_context(|| {
                format!(
                    "{} is not valid JSON5 after the host's command",
                    self.file.display()
                )
            })?;
        let keys: Vec<&str> = self.path.iter().map(String::as_str).collect();
        let was = get_path(&doc, &keys).cloned();
        if was.as_ref() == Some(&self.value) {
            return Ok(None);
        }
        set_path(&mut doc, &keys, self.value.clone())?;
        write_change(
            &FileChange {
                path: self.file.clone(),
                before: Some(text),
                after: to_json_text(&doc),
                executable: false,
            },
            stamp,
        )?;
        Ok(Some(format!(
            "Restored {} = {} in {} (the host's command had set it to {})",
            self.path.join("."),
            self.value,
            self.file.display(),
            was.map_or_else(|| "nothing".to_owned(), |v| v.to_string())
        )))
    }
}

/// Reads a file that may not exist yet.
pub fn read_optional(path: &Path) -> Result<Option<String>> {
    match skillsearch_core::fsio::read_regular_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Doctor's `binary` check of the skillsearch binary a plugin runs: `configured`, else
/// `skillsearch` on PATH; pushes the check and returns the binary when it is executable.
/// `unnamed` says where the binary would have been named (e.g. `no plugins.skillsearch.binary`),
/// `host` who runs it.
pub fn binary_check(
    checks: &mut Vec<Check>,
    configured: &str,
    unnamed: &str,
    host: &str,
    fix: &str,
) -> Option<PathBuf> {
    let binary = if configured.is_empty() {
        on_path("skillsearch")
    } else {
        Some(PathBuf::from(configured))
    };
    match binary {
        Some(b) if is_executable(&b) => {
            checks.push(Check::ok("binary", b.display().to_string()));
            Some(b)
        }
        other => {
            let what = other.map_or_else(
                || format!("{unnamed} and no skillsearch on PATH"),
                |b| format!("{} is not an executable file", b.display()),
            );
            checks.push(Check::fail(
                "binary",
                what,
                format!("{fix} (run it with the skillsearch binary {host} should use)"),
            ));
            None
        }
    }
}

/// Doctor's `skill-roots` check: a warning naming each root that is not a directory.
pub fn roots_check(roots: &[String], fix: &str) -> Check {
    let absent: Vec<&str> = roots
        .iter()
        .map(String::as_str)
        .filter(|r| !Path::new(r).is_dir())
        .collect();
    if absent.is_empty() {
        Check::ok("skill-roots", roots.join(", "))
    } else {
        Check::warn(
            "skill-roots",
            format!("not a directory: {}", absent.join(", ")),
            format!("create it, or {fix} --skills DIR"),
        )
    }
}

/// Doctor's `plugin-files` check of a plugin the binary embeds: every file of `files` is in
/// `dir` with the embedded text (missing and changed files named), else `fix`.
pub fn plugin_files_check(dir: &Path, files: &[(&str, &str)], fix: &str) -> Result<Check> {
    let mut missing = Vec::new();
    let mut stale = Vec::new();
    for (file, want) in files {
        match read_optional(&dir.join(file))? {
            None => missing.push(*file),
            Some(t) if t != *want => stale.push(*file),
            Some(_) => {}
        }
    }
    Ok(if !missing.is_empty() {
        Check::fail(
            "plugin-files",
            format!("missing in {}: {}", dir.display(), missing.join(", ")),
            fix,
        )
    } else if !stale.is_empty() {
        Check::fail(
            "plugin-files",
            format!(
                "{} differ from this binary's plugin (outdated or edited): {}",
                dir.display(),
                stale.join(", ")
            ),
            fix,
        )
    } else {
        Check::ok("plugin-files", format!("{} is current", dir.display()))
    })
}

/// Shows the plan as a diff and, unless `dry_run`, writes it: every replaced file is first copied
/// to `<file>.skillsearch-backup-<UTC timestamp>` (`-2`, `-3`, … when that name is taken: a
/// backup is never overwritten), and every write is atomic (temp file + rename). A file that is
/// a symbolic link (settings kept in a dotfiles repository) is written where the link points;
/// the link stays.
pub fn apply(out: &mut Out, plan: &SetupPlan, dry_run: bool) -> Result<()> {
    let pending: Vec<&FileChange> = plan.changes.iter().filter(|c| c.changes()).collect();
    if pending.is_empty() {
        out.line("Already set up: nothing to change.")?;
    }
    let stamp = timestamp();
    for c in &pending {
        out.line(&unified_diff(c))?;
    }
    let mut written = Vec::new();
    if !dry_run {
        for c in &pending {
            written.push(write_change(c, &stamp)?);
        }
    }
    if !pending.is_empty() {
        let verb = if dry_run { "Would write" } else { "Wrote" };
        for (i, c) in pending.iter().enumerate() {
            let mut line = format!("{verb} {}", c.path.display());
            if let Some(w) = written.get(i) {
                if w.target != c.path {
                    line.push_str(&format!(" (through the link to {})", w.target.display()));
                }
                if let Some(b) = &w.backup {
                    line.push_str(&format!(" (backup: {})", b.display()));
                }
            }
            out.line(&line)?;
        }
    }
    for c in &plan.commands {
        if dry_run {
            out.line(&format!("Would run: {} ({})", c.display(), c.why))?;
            continue;
        }
        out.line(&format!("Running: {} ({})", c.display(), c.why))?;
        let res = std::process::Command::new(&c.program)
            .args(&c.args)
            .envs(c.env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::null())
            .output()
            .with_context(|| format!("cannot run {}", c.program.display()))?;
        if !res.status.success() {
            bail!(
                "`{}` failed ({}): {}{}",
                c.display(),
                res.status,
                String::from_utf8_lossy(&res.stderr).trim(),
                String::from_utf8_lossy(&res.stdout).trim()
            );
        }
    }
    if !dry_run && !plan.commands.is_empty() {
        for pin in &plan.pins {
            if let Some(line) = pin.restore(&stamp)? {
                out.line(&line)?;
            }
        }
    }
    if dry_run && (!pending.is_empty() || !plan.commands.is_empty()) {
        out.line("Dry run: nothing was written or run.")?;
    }
    for n in &plan.notes {
        out.line(n)?;
    }
    Ok(())
}

/// Where one [`FileChange`] went.
struct Written {
    /// The file written: the change's path, or the file its symbolic link points to.
    target: PathBuf,
    /// The copy of the replaced file, beside the change's path.
    backup: Option<PathBuf>,
}

/// `<file>.skillsearch-backup-<stamp>`, then `-2`, `-3`, … for the `n`th of one stamp.
fn backup_path(path: &Path, stamp: &str, n: u32) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".skillsearch-backup-{stamp}"));
    if n > 1 {
        name.push(format!("-{n}"));
    }
    path.with_file_name(name)
}

/// Copies `path` (through any link) to a backup name not taken yet, created exclusively so no
/// earlier backup (one made within the same second, say) is ever overwritten; the copy keeps the
/// file's permission bits.
fn back_up(path: &Path, stamp: &str) -> Result<PathBuf> {
    let mut src = std::fs::File::open(path)
        .with_context(|| format!("cannot read {} to back it up", path.display()))?;
    for n in 1..=1000 {
        let b = backup_path(path, stamp, n);
        let mut dst = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&b)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("cannot back up {} to {}", path.display(), b.display())
                });
            }
        };
        std::io::copy(&mut src, &mut dst)
            .with_context(|| format!("cannot back up {} to {}", path.display(), b.display()))?;
        #[cfg(unix)]
        if let Ok(m) = src.metadata() {
            std::fs::set_permissions(&b, m.permissions()).with_context(|| {
                format!("cannot set the permissions of the backup {}", b.display())
            })?;
        }
        return Ok(b);
    }
    bail!(
        "cannot back up {}: 1000 backups named {} exist; remove old ones and run setup again",
        path.display(),
        backup_path(path, stamp, 1).display()
    )
}

/// The file a write to `path` lands in: `path`, or, when `path` is a symbolic link, the file it
/// points to (link by link, a relative target read against its link's directory), which need
/// not exist yet. Writing there leaves the link in place.
fn link_target(path: &Path) -> Result<PathBuf> {
    let mut cur = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&cur)
                    .with_context(|| format!("cannot read the symbolic link {}", cur.display()))?;
                cur = match cur.parent() {
                    Some(dir) => dir.join(to),
                    None => to,
                };
            }
            Ok(_) => return Ok(cur),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(cur),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", cur.display())),
        }
    }
    bail!(
        "{} is a chain of more than 40 symbolic links (a loop?); point it at a regular file and run setup again",
        path.display()
    )
}

fn write_change(c: &FileChange, stamp: &str) -> Result<Written> {
    let target = link_target(&c.path)?;
    let dir = target
        .parent()
        .with_context(|| format!("{} has no parent directory", target.display()))?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let backup = match c.before {
        Some(_) => Some(back_up(&c.path, stamp)?),
        None => None,
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    std::io::Write::write_all(&mut tmp, c.after.as_bytes())
        .with_context(|| format!("cannot write {}", target.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = if c.executable { 0o755 } else { 0o644 };
        let mode = match std::fs::metadata(&target) {
            Ok(m) if !c.executable => m.permissions().mode() & 0o7777,
            _ => mode,
        };
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(mode))?;
    }
    tmp.persist(&target)
        .with_context(|| format!("cannot replace {}", target.display()))?;
    Ok(Written { target, backup })
}

/// `YYYYMMDDTHHMMSSZ`, UTC, from the system clock.
fn timestamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn unified_diff(c: &FileChange) -> String {
    let before = c.before.as_deref().unwrap_or("");
    let old = if c.before.is_some() {
        c.path.display().to_string()
    } else {
        "/dev/null".to_string()
    };
    similar::TextDiff::from_lines(before, c.after.as_str())
        .unified_diff()
        .context_radius(3)
        .header(&old, &c.path.display().to_string())
        .to_string()
}

/// Sets `value` at a dotted path of object keys, creating objects on the way. Fails when a
/// non-object sits on the path (the user's config is not what we expect; say where).
pub fn set_path(root: &mut Value, path: &[&str], value: Value) -> Result<()> {
    let (last, parents) = path.split_last().context("empty config path")?;
    let mut cur = root;
    for (i, key) in parents.iter().enumerate() {
        if !cur.is_object() {
            bail!("`{}` is not an object", path[..i].join("."));
        }
        cur = cur
            .as_object_mut()
            .expect("checked")
            .entry(key.to_string())
            .or_insert_with(|| Value::Object(Default::default()));
    }
    match cur.as_object_mut() {
        Some(o) => {
            o.insert(last.to_string(), value);
            Ok(())
        }
        None => bail!("`{}` is not an object", parents.join(".")),
    }
}

/// Sets the keys of the object `owned` on the object at a dotted path, keeping every other key
/// found there (the user's own: `env`, timeouts, …); creates the object when missing or not an
/// object.
pub fn merge_keys(root: &mut Value, path: &[&str], owned: Value) -> Result<()> {
    let Value::Object(owned) = owned else {
        bail!("`{}`: setup's own entry is not an object", path.join("."));
    };
    let existing = path
        .iter()
        .try_fold(&mut *root, |v, k| v.get_mut(*k))
        .and_then(Value::as_object_mut);
    match existing {
        Some(o) => {
            o.extend(owned);
            Ok(())
        }
        None => set_path(root, path, Value::Object(owned)),
    }
}

/// The value at a dotted path of object keys, if every step exists.
pub fn get_path<'a>(root: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(root, |v, k| v.get(*k))
}

/// Pretty JSON with a trailing newline, the way hosts' own tools write their configs.
pub fn to_json_text(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("a Value always serialises");
    s.push('\n');
    s
}

/// One gate `doctor` checked.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// Short name of the gate, stable for scripts.
    pub name: &'static str,
    pub status: Status,
    /// What was found, naming the file or key.
    pub detail: String,
    /// One line that fixes it, when not `ok`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

impl Check {
    pub fn ok(name: &'static str, detail: impl Into<String>) -> Self {
        Check {
            name,
            status: Status::Ok,
            detail: detail.into(),
            fix: None,
        }
    }
    pub fn warn(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Check {
            name,
            status: Status::Warn,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
    pub fn fail(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Check {
            name,
            status: Status::Fail,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

/// Prints the checks; exit code 0 when none failed, 1 otherwise (warnings do not fail).
pub fn report(out: &mut Out, host: Host, checks: &[Check], json: bool) -> Result<u8> {
    let failed = checks.iter().any(|c| c.status == Status::Fail);
    if json {
        out.json(&serde_json::json!({
            "host": host,
            "ok": !failed,
            "checks": checks,
        }))?;
    } else {
        for c in checks {
            let tag = match c.status {
                Status::Ok => "ok  ",
                Status::Warn => "warn",
                Status::Fail => "FAIL",
            };
            out.line(&format!("{tag}  {:<28} {}", c.name, c.detail))?;
            if let Some(fix) = &c.fix {
                out.line(&format!("      {:<28} fix: {fix}", ""))?;
            }
        }
        let (w, f) = checks.iter().fold((0, 0), |(w, f), c| match c.status {
            Status::Warn => (w + 1, f),
            Status::Fail => (w, f + 1),
            Status::Ok => (w, f),
        });
        out.line(&format!(
            "{} checks: {} failed, {} warnings",
            checks.len(),
            f,
            w
        ))?;
    }
    Ok(u8::from(failed))
}

/// This executable as an absolute path, for hosts that run it.
pub fn this_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find the path of this skillsearch binary")?;
    Ok(exe.canonicalize().unwrap_or(exe))
}

/// Finds `name` on `PATH`, as a host would.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

pub fn is_executable(p: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p)
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    }
    #[cfg(not(unix))]
    {
        p.is_file()
    }
}

/// Starts the engine exactly as a host plugin does (`serve --stdio`) and asks it for its tools: catches a broken
/// skillsearch configuration (config.toml, SKILLSEARCH_* variables) that would keep it down.
pub(crate) fn probe_engine(
    binary: &Path,
    home: &str,
    mode: &str,
    deadline_ms: u64,
    roots: &[String],
    host: &str,
) -> Check {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut cmd = Command::new(binary);
    if !home.is_empty() {
        cmd.arg("--home").arg(home);
    }
    cmd.args(["serve", "--stdio", "--mode", mode]);
    for r in roots {
        cmd.arg("--skills").arg(r);
    }
    cmd.env("SKILLSEARCH_DEADLINE_MS", deadline_ms.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let fix =
        format!("run the command shown with -v to see why, fix it, then skillsearch doctor {host}");
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return Check::fail(
                "engine",
                format!("cannot start {}: {e}", binary.display()),
                fix,
            );
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(b"{\"id\":1,\"method\":\"tools\"}\n");
    }
    let out = match child.wait_with_output() {
        Ok(o) => o,
        Err(e) => return Check::fail("engine", format!("engine did not run: {e}"), fix),
    };
    let reply: Option<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .and_then(|l| serde_json::from_str(l).ok());
    let tools = reply
        .as_ref()
        .and_then(|r| r.get("result"))
        .and_then(|r| r.get("tools"))
        .and_then(Value::as_array)
        .map(Vec::len);
    match tools {
        Some(n) => Check::ok(
            "engine",
            format!("serve --stdio answers in {} mode ({n} tools offered)", mode),
        ),
        None => {
            let err = String::from_utf8_lossy(&out.stderr);
            let last = err
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            Check::fail(
                "engine",
                format!("the engine does not start: {last}"),
                format!(
                    "fix the skillsearch configuration it names (skillsearch config show), then skillsearch doctor {host}"
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn set_path_creates_objects_and_refuses_scalars() {
        let mut v = json!({"plugins": {"entries": {}}});
        set_path(&mut v, &["plugins", "entries", "x", "enabled"], json!(true)).unwrap();
        assert_eq!(v["plugins"]["entries"]["x"]["enabled"], json!(true));
        let mut bad = json!({"plugins": 3});
        let err = set_path(&mut bad, &["plugins", "slots", "a"], json!(1)).unwrap_err();
        assert!(
            err.to_string().contains("`plugins` is not an object"),
            "{err}"
        );
    }

    #[test]
    fn backups_of_one_second_never_overwrite_each_other() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cfg.json");
        std::fs::write(&p, "v1").unwrap();
        let stamp = "20261204T000000Z";
        let mut backups = Vec::new();
        for next in ["v2", "v3", "v4"] {
            let c = FileChange::to(&p, next.into()).unwrap();
            backups.push(write_change(&c, stamp).unwrap().backup.unwrap());
        }
        let kept: Vec<String> = backups
            .iter()
            .map(|b| std::fs::read_to_string(b).unwrap())
            .collect();
        assert_eq!(kept, ["v1", "v2", "v3"]);
        assert_eq!(
            backups[0],
            dir.path()
                .join(format!("cfg.json.skillsearch-backup-{stamp}"))
        );
        assert_eq!(
            backups[1],
            dir.path()
                .join(format!("cfg.json.skillsearch-backup-{stamp}-2"))
        );
    }

    #[test]
    fn timestamps_are_civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_788), (2026, 12, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn apply_backs_up_writes_and_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cfg.json");
        std::fs::write(&p, "{}\n").unwrap();
        let plan = SetupPlan {
            changes: vec![FileChange::to(&p, "{\"a\": 1}\n".into()).unwrap()],
            ..Default::default()
        };
        let mut out = Out::sink();
        apply(&mut out, &plan, true).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "{}\n",
            "dry run wrote"
        );
        apply(&mut out, &plan, false).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{\"a\": 1}\n");
        let backups: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .contains("skillsearch-backup")
            })
            .collect();
        assert_eq!(backups.len(), 1);
        assert_eq!(std::fs::read_to_string(backups[0].path()).unwrap(), "{}\n");
        let again = SetupPlan {
            changes: vec![FileChange::to(&p, "{\"a\": 1}\n".into()).unwrap()],
            ..Default::default()
        };
        assert!(!again.changes[0].changes());
    }
}
