//! Progressive disclosure: tokens per task when `skill_search` answers in full, against a
//! catalogue answer followed by one `skill_read`, over labelled tasks (the `shared/eval`
//! format). Each task is a scripted two-call run:
//! - `full`: one `skill_search` (the best `top_k` skills in full);
//! - `catalog, reads #1`: `skill_search` with `detail: "catalog"`, then `skill_read` of the
//!   first entry (a model that trusts the ranking);
//! - `catalog, reads best`: the same, reading the first *relevant* entry when one is listed
//!   (a model that judges the entries perfectly: the catalogue's upper bound).
//!
//! Tokens are o200k counts of the text each call returns. "Delivered" is the share of tasks
//! whose answer put a relevant skill's full text in front of the model.

use anyhow::{Context, Result};
use clap::Args;
use skillsearch_core::config::{self, Detail, Layers};
use skillsearch_core::eval::parse_queries;
use skillsearch_core::index::{IndexConfig, Refresh, SkillIndex};
use skillsearch_core::tokens::TokenCounter;
use skillsearch_core::{EligibilityEnv, Engine, Roots, Turn};
use std::path::PathBuf;

#[derive(Args)]
pub struct DisclosureArgs {
    /// The skill corpus (a root of skill directories)
    #[arg(long, value_name = "DIR")]
    skills: PathBuf,
    /// Labelled tasks (JSONL: id, query, relevant)
    #[arg(long, value_name = "FILE")]
    queries: PathBuf,
    /// Where the index is kept (reused when current)
    #[arg(long, value_name = "DIR")]
    home: PathBuf,
    #[arg(long)]
    json: bool,
}

struct Policy {
    name: &'static str,
    tokens: Vec<usize>,
    delivered: usize,
}

pub fn run(a: &DisclosureArgs) -> Result<()> {
    let text = std::fs::read_to_string(&a.queries)
        .with_context(|| format!("cannot read {}", a.queries.display()))?;
    let queries =
        parse_queries(&text).map_err(|e| anyhow::anyhow!("{}: {e}", a.queries.display()))?;
    let settings =
        config::resolve(&Layers::default()).map_err(|e| anyhow::anyhow!("{}", e.message))?;
    // Ranking alone: every skill is eligible, as in `skillsearch eval`.
    let engine = Engine::new(&settings, &a.home).with_eligibility(EligibilityEnv::allow_all());
    let (idx, _) = SkillIndex::open(
        &Roots::explicit([&a.skills]),
        &IndexConfig::new(a.home.clone()),
        Refresh::Always,
        &|_| {},
    )?;
    let counter = TokenCounter::new();
    let mut policies = [
        Policy {
            name: "full",
            tokens: Vec::new(),
            delivered: 0,
        },
        Policy {
            name: "catalog, reads #1",
            tokens: Vec::new(),
            delivered: 0,
        },
        Policy {
            name: "catalog, reads best",
            tokens: Vec::new(),
            delivered: 0,
        },
    ];
    let turn = |detail| Turn {
        detail: Some(detail),
        ..Turn::default()
    };
    for q in &queries {
        let relevant = |id: &str| q.relevant.contains_key(id);
        let (full, r) = engine.skill_search(&idx, &q.query, &turn(Detail::Full));
        policies[0].tokens.push(counter.count(&full));
        if r.is_some_and(|r| r.hits.iter().any(|h| relevant(&h.id))) {
            policies[0].delivered += 1;
        }
        let (cat, r) = engine.skill_search(&idx, &q.query, &turn(Detail::Catalog));
        let listed = r.map(|r| r.hits).unwrap_or_default();
        let cat_tokens = counter.count(&cat);
        let picks = [
            listed.first(),
            listed.iter().find(|h| relevant(&h.id)).or(listed.first()),
        ];
        for (p, pick) in policies[1..].iter_mut().zip(picks) {
            let read = pick.map_or(0, |h| {
                counter.count(&engine.skill_read(&idx, &h.qualified_id, None, 0, &Turn::default()))
            });
            p.tokens.push(cat_tokens + read);
            if pick.is_some_and(|h| relevant(&h.id)) {
                p.delivered += 1;
            }
        }
    }
    let n = queries.len().max(1);
    let rows: Vec<serde_json::Value> = policies
        .iter_mut()
        .map(|p| {
            p.tokens.sort_unstable();
            let mean = p.tokens.iter().sum::<usize>() as f64 / n as f64;
            serde_json::json!({
                "policy": p.name,
                "tasks": queries.len(),
                "tokens_mean": mean.round(),
                "tokens_median": p.tokens.get(p.tokens.len() / 2).copied().unwrap_or(0),
                "tokens_p90": p.tokens.get(p.tokens.len() * 9 / 10).copied().unwrap_or(0),
                "delivered": p.delivered as f64 / n as f64,
            })
        })
        .collect();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!(
        "{} tasks over {} (top_k {}, catalogue of {} entries)",
        queries.len(),
        a.skills.display(),
        settings.top_k,
        skillsearch_core::turn::tools::CATALOGUE_ENTRIES.max(settings.top_k)
    );
    println!(
        "{:<22} {:>12} {:>14} {:>11} {:>10}",
        "policy", "tokens/task", "median tokens", "p90 tokens", "delivered"
    );
    for r in &rows {
        println!(
            "{:<22} {:>12} {:>14} {:>11} {:>9.1}%",
            r["policy"].as_str().unwrap_or_default(),
            r["tokens_mean"].as_f64().unwrap_or(0.0),
            r["tokens_median"].as_u64().unwrap_or(0),
            r["tokens_p90"].as_u64().unwrap_or(0),
            r["delivered"].as_f64().unwrap_or(0.0) * 100.0
        );
    }
    Ok(())
}
