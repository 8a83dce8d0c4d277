//! One `skillsearch hub serve` child for the hub benchmarks (`hub-load`, `hub-write`,
//! `hub-vectors`): started on a free loopback port with the read rate limit off, its address read
//! from the line it prints, killed when dropped.

use anyhow::{Context, Result};
use serde_json::Value;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

pub(crate) struct HubChild {
    pub child: Child,
    /// `host:port`.
    pub addr: String,
    /// When the process was started.
    pub started: Instant,
    /// Seconds from the start to the printed address (the index built or opened).
    pub ready_s: f64,
}

impl HubChild {
    /// `bin --home <home> hub serve --listen 127.0.0.1:0 --rate-read 0 <args>`, with `envs`;
    /// its stderr goes to `log` (discarded when `None`).
    pub fn start<A: AsRef<OsStr>>(
        bin: &Path,
        home: &Path,
        args: &[A],
        envs: &[(&str, &OsStr)],
        log: Option<&Path>,
    ) -> Result<HubChild> {
        let started = Instant::now();
        let stderr = match log {
            Some(l) => Stdio::from(
                std::fs::File::create(l)
                    .with_context(|| format!("cannot create {}", l.display()))?,
            ),
            None => Stdio::null(),
        };
        let mut child = Command::new(bin)
            .arg("--home")
            .arg(home)
            .args([
                "hub",
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--rate-read",
                "0",
            ])
            .args(args)
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("cannot start {}", bin.display()))?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().context("no stdout")?).read_line(&mut line)?;
        let see = log.map_or(String::new(), |l| format!("; see {}", l.display()));
        let addr = serde_json::from_str::<Value>(&line)
            .ok()
            .and_then(|v| v["listening"].as_str().map(str::to_owned))
            .map(|a| a.trim_start_matches("http://").to_owned());
        let Some(addr) = addr else {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!("the hub printed {line:?} instead of its address{see}");
        };
        Ok(HubChild {
            child,
            addr,
            started,
            ready_s: started.elapsed().as_secs_f64(),
        })
    }
}

impl Drop for HubChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
