//! Test helpers shared by the skillsearch crates (a dev-dependency only): one fake HTTP server
//! for the model, embeddings and hub endpoints ([`Fake`]), a temporary home and skill library
//! ([`Env`]), skill files ([`write_skill`]), golden files ([`golden`]) and zip bundles
//! ([`zip_of`]), the means to test file-system faults ([`sys`]: FIFOs, read-only homes, a small
//! full file system, operations that must not hang), a real daemon to fault ([`daemon`]), a
//! real PostgreSQL for the hub store ([`pg`]), and a real browser to click through a page
//! ([`browser`]: headless Chromium over the DevTools protocol).

pub mod browser;
pub mod daemon;
mod fake;
mod files;
pub mod pg;
pub mod sys;

pub use fake::{
    BOW_DIM, Fake, Reply, Req, Responder, bag_of_words, bow_reply, chat_reply, dead_base,
    dead_openai_base, hub_ok, vectors, zip_reply,
};
pub use files::{
    Env, command, files_under, golden, golden_file, write_file, write_skill, write_titled_skill,
    zip_of,
};
