//! The build's identity for `--version` (`BUILD_ID_FOR_VERSION`: the git commit), and a `cfg` for
//! each test resource named by a variable: `has_minilm` (`MINILM_TEST_MODEL_DIR`,
//! the sentence model) and `has_mcp_clients` (`MCP_CLIENT_TESTS`, the real MCP clients). The
//! tests that need one list as ignored, with the reason, when it is absent.
#![allow(
    clippy::print_stdout,
    reason = "a build script speaks to cargo on stdout"
)]

const RESOURCES: [(&str, &str); 2] = [
    ("MINILM_TEST_MODEL_DIR", "has_minilm"),
    ("MCP_CLIENT_TESTS", "has_mcp_clients"),
];

/// `BUILD_ID_FOR_VERSION` for `--version`: `commit <12 hex>[, modified], <profile> build`
/// (`modified`: tracked files differed from the commit when the build script last ran), or
/// `no git commit, <profile> build` outside a git checkout (a crates.io or tarball build). Not
/// named `SKILLSEARCH_*`: cargo also sets it when it runs the binary, and skillsearch refuses
/// unknown `SKILLSEARCH_*` variables.
fn build_id() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let profile = std::env::var("PROFILE").unwrap_or_default();
    match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(commit) if !commit.is_empty() => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            let modified = if dirty { ", modified" } else { "" };
            format!("commit {commit}{modified}, {profile} build")
        }
        _ => format!("no git commit, {profile} build"),
    }
}

fn main() {
    println!("cargo::rustc-env=BUILD_ID_FOR_VERSION={}", build_id());
    // A new commit (HEAD or the branch it names moving) rebuilds the version string.
    let git_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.git");
    println!("cargo::rerun-if-changed={git_dir}/HEAD");
    if let Ok(head) = std::fs::read_to_string(format!("{git_dir}/HEAD"))
        && let Some(r) = head.trim().strip_prefix("ref: ")
    {
        println!("cargo::rerun-if-changed={git_dir}/{r}");
    }
    for (var, cfg) in RESOURCES {
        println!("cargo::rerun-if-env-changed={var}");
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        if std::env::var_os(var).is_some_and(|v| !v.is_empty()) {
            println!("cargo::rustc-cfg={cfg}");
        }
    }
}
