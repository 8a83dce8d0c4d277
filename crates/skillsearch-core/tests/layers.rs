//! The engine's modules form no circle, point down through fixed layers, and nothing below
//! `turn/` names it (ARCHITECTURE.md, "Layers point down"). Read from the sources: a module
//! depends on another when its code (tests and doc links left out) names `crate::<other>`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level module → the top-level modules its code names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(&src).unwrap();
            let top = rel
                .components()
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_owned();
            if top == "lib" {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text
                .split("#[cfg(test)]\nmod tests")
                .next()
                .unwrap_or_default();
            let deps = g.entry(top.clone()).or_default();
            for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
                for part in line.split("crate::").skip(1) {
                    let name: String = part
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                        .collect();
                    if !name.is_empty() && name != top {
                        deps.insert(name);
                    }
                }
                // `use crate::{a, b::C}`
                if let Some(rest) = line.trim().strip_prefix("use crate::{") {
                    for item in rest.trim_end_matches("};").split(',') {
                        let name = item.trim().split("::").next().unwrap_or_default();
                        if name.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                            && !name.is_empty()
                            && name != top
                        {
                            deps.insert(name.to_owned());
                        }
                    }
                }
            }
        }
    }
    let known: BTreeSet<String> = g.keys().cloned().collect();
    for deps in g.values_mut() {
        deps.retain(|d| known.contains(d));
    }
    g
}

/// A path of modules from `from` back to itself, if there is one.
fn circle_through(g: &BTreeMap<String, BTreeSet<String>>, from: &str) -> Option<Vec<String>> {
    let mut stack = vec![(from.to_owned(), vec![from.to_owned()])];
    let mut seen = BTreeSet::new();
    while let Some((node, path)) = stack.pop() {
        for next in g.get(&node).into_iter().flatten() {
            if next == from {
                let mut p = path.clone();
                p.push(next.clone());
                return Some(p);
            }
            if seen.insert(next.clone()) {
                let mut p = path.clone();
                p.push(next.clone());
                stack.push((next.clone(), p));
            }
        }
    }
    None
}

#[test]
fn no_module_of_the_engine_depends_on_itself_through_others() {
    let g = graph();
    assert!(g.contains_key("turn") && g.contains_key("index"), "{g:?}");
    let circles: Vec<String> = g
        .keys()
        .filter_map(|m| circle_through(&g, m))
        .map(|p| p.join(" -> "))
        .collect();
    assert!(circles.is_empty(), "circles between modules: {circles:#?}");
}

#[test]
fn nothing_below_turn_names_it() {
    let g = graph();
    let above: Vec<&String> = g
        .iter()
        .filter(|(m, deps)| *m != "turn" && deps.contains("turn"))
        .map(|(m, _)| m)
        .collect();
    assert!(above.is_empty(), "modules that depend on turn/: {above:?}");
}

/// The engine's folders, lowest first (ARCHITECTURE.md, "Code map"). A module may name only
/// modules of a lower layer.
const LAYERS: &[&[&str]] = &[
    &["error", "tokens", "eval", "secrets", "fsio"],
    &["config"],
    &["corpus"],
    &["index"],
    &["retrieve"],
    &["remote", "plan", "registry"],
    &["turn"],
];

#[test]
fn every_module_names_only_lower_layers() {
    let g = graph();
    let layer = |m: &str| LAYERS.iter().position(|l| l.contains(&m));
    let unplaced: Vec<&String> = g.keys().filter(|m| layer(m).is_none()).collect();
    assert!(unplaced.is_empty(), "modules not in LAYERS: {unplaced:?}");
    let upward: Vec<String> = g
        .iter()
        .flat_map(|(m, deps)| {
            deps.iter()
                .filter(|d| layer(d) >= layer(m))
                .map(move |d| format!("{m} -> {d}"))
        })
        .collect();
    assert!(
        upward.is_empty(),
        "dependencies that do not point down: {upward:?}"
    );
}

/// `unsafe` is denied in the workspace and allowed in one file, the int8 SIMD kernel; any other
/// file that opts out fails here.
#[test]
fn only_the_int8_kernel_allows_unsafe_code() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut allowed = Vec::new();
    let mut stack = vec![root.join("crates")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).unwrap();
                if text.contains(&["allow(", "unsafe_code)"].concat()) {
                    allowed.push(p.strip_prefix(&root).unwrap().display().to_string());
                }
            }
        }
    }
    assert_eq!(
        allowed,
        ["crates/skillsearch-core/src/retrieve/embed/qgemm.rs"],
        "files that allow unsafe code"
    );
}
