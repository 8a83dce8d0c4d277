//! A `cfg` for each test resource named by a variable: `has_minilm` (`MINILM_TEST_MODEL_DIR`,
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

fn main() {
    for (var, cfg) in RESOURCES {
        println!("cargo::rerun-if-env-changed={var}");
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        if std::env::var_os(var).is_some_and(|v| !v.is_empty()) {
            println!("cargo::rustc-cfg={cfg}");
        }
    }
}
