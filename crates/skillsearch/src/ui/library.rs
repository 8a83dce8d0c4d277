//! The library as the page shows it: skills per root, those held back on this machine and why,
//! shadowed copies, every diagnostic, the skills no recent turn found, and what listing them
//! all (OpenClaw's catalogue) costs a turn.

use serde::Serialize;
use skillsearch_core::index::Collision;
use skillsearch_core::tokens::{self, CatalogCost, TokenCounter};
use skillsearch_core::{Diagnostic, EligibilityEnv, Hit, Roots, SkillIndex};
use std::collections::HashSet;
use std::path::PathBuf;

/// Skills listed by name at most in `never_found`.
const MAX_LISTED: usize = 500;

#[derive(Debug, Serialize)]
pub(crate) struct Library {
    pub index: PathBuf,
    /// What went wrong with the index's last refresh, if anything.
    pub problem: Option<String>,
    /// `SKILL.md` files found, valid or not.
    pub files: usize,
    /// Valid skills, shadowed copies included.
    pub skills: usize,
    /// Skills a turn may be given: not shadowed, eligible here.
    pub eligible: usize,
    pub roots: Vec<RootRow>,
    pub held_back: Vec<HeldBack>,
    pub shadowed: Vec<Collision>,
    pub diagnostics: Vec<Diagnostic>,
    /// `None` when the decision log is off.
    pub never_found: Option<NeverFound>,
    pub catalogue: CatalogCost,
}

#[derive(Debug, Serialize)]
pub(crate) struct RootRow {
    pub path: PathBuf,
    pub exists: bool,
    pub skills: usize,
    /// Of those, copies whose name an earlier root took.
    pub shadowed: usize,
}

/// A skill this machine cannot run (OpenClaw's eligibility).
#[derive(Debug, Serialize)]
pub(crate) struct HeldBack {
    pub id: String,
    pub name: String,
    pub root: PathBuf,
    pub code: String,
    pub reason: String,
}

#[derive(Debug, Serialize)]
pub(crate) struct NeverFound {
    /// Turns looked at (the last ones of the log).
    pub recent_turns: usize,
    /// Eligible skills none of them found.
    pub count: usize,
    /// Their ids, at most [`MAX_LISTED`].
    pub skills: Vec<String>,
}

/// The skills a turn may be given: not shadowed, eligible on this machine.
fn offered<'a>(skills: &'a [(Hit, bool)], gate: &EligibilityEnv) -> Vec<&'a Hit> {
    skills
        .iter()
        .filter(|(h, shadowed)| !shadowed && gate.check(&h.meta).is_ok())
        .map(|(h, _)| h)
        .collect()
}

/// What OpenClaw's catalogue of the eligible skills costs a turn.
pub(crate) fn catalogue(
    idx: &SkillIndex,
    gate: &EligibilityEnv,
    counter: &TokenCounter,
) -> skillsearch_core::Result<CatalogCost> {
    let skills = idx.skills()?;
    let eligible = offered(&skills, gate);
    let paths: Vec<String> = eligible
        .iter()
        .map(|h| h.path.to_string_lossy().into_owned())
        .collect();
    let entries: Vec<(&str, &str, &str)> = eligible
        .iter()
        .zip(&paths)
        .map(|(h, p)| (h.name.as_str(), h.description.as_str(), p.as_str()))
        .collect();
    Ok(tokens::openclaw_catalog_cost(&entries, counter))
}

/// The page's library report; `found`: the ids the last turns found and how many turns.
pub(crate) fn report(
    idx: &SkillIndex,
    roots: &Roots,
    gate: &EligibilityEnv,
    found: Option<(HashSet<String>, usize)>,
    catalogue: CatalogCost,
    problem: Option<String>,
) -> skillsearch_core::Result<Library> {
    let skills = idx.skills()?;
    let keys = idx.doc_keys()?;
    let mut rows: Vec<RootRow> = roots
        .0
        .iter()
        .map(|r| RootRow {
            path: r.path.clone(),
            exists: r.path.is_dir(),
            skills: 0,
            shadowed: 0,
        })
        .collect();
    let mut held_back = Vec::new();
    for (h, shadowed) in &skills {
        if let Some(row) = rows.get_mut(h.root) {
            row.skills += 1;
            row.shadowed += usize::from(*shadowed);
        }
        if *shadowed {
            continue;
        }
        if let Err(e) = gate.check(&h.meta) {
            held_back.push(HeldBack {
                id: h.id.clone(),
                name: h.name.clone(),
                root: roots
                    .0
                    .get(h.root)
                    .map(|r| r.path.clone())
                    .unwrap_or_default(),
                code: e.code,
                reason: e.reason,
            });
        }
    }
    let eligible = offered(&skills, gate);
    let never_found = found.map(|(found, recent_turns)| {
        let mut never: Vec<String> = eligible
            .iter()
            .filter(|h| !found.contains(&h.id))
            .map(|h| h.id.clone())
            .collect();
        never.sort();
        let count = never.len();
        never.truncate(MAX_LISTED);
        NeverFound {
            recent_turns,
            count,
            skills: never,
        }
    });
    Ok(Library {
        index: idx.dir().to_path_buf(),
        problem,
        files: keys.len(),
        skills: skills.len(),
        eligible: eligible.len(),
        roots: rows,
        held_back,
        shadowed: idx
            .collisions()?
            .into_iter()
            .filter(|c| !c.shadowed.is_empty())
            .collect(),
        diagnostics: idx.diagnostics()?,
        never_found,
        catalogue,
    })
}
