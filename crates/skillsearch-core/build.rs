//! `cfg(has_minilm)` when `MINILM_TEST_MODEL_DIR` names the sentence model, so the tests that
//! need it list as ignored, with the reason, when it is absent (instead of passing unrun).
#![allow(
    clippy::print_stdout,
    reason = "a build script speaks to cargo on stdout"
)]

fn main() {
    println!("cargo::rerun-if-env-changed=MINILM_TEST_MODEL_DIR");
    println!("cargo::rustc-check-cfg=cfg(has_minilm)");
    if std::env::var_os("MINILM_TEST_MODEL_DIR").is_some_and(|v| !v.is_empty()) {
        println!("cargo::rustc-cfg=has_minilm");
    }
}
