//! `skillsearch explain`: the engine's [`Explanation`] as text a person reads top to bottom
//! (the JSON form is the struct itself). Every name, id, term and note from a skill file or the
//! query goes through [`shown`]: one line, no control characters.

use crate::output::shown;
use skillsearch_core::retrieve::explain::{
    Explanation, LexicalPart, SkillExplanation, Status, TurnSummary,
};

/// The text form, one line per string.
pub fn text(ex: &Explanation) -> Vec<String> {
    let mut out = Vec::new();
    out.push(format!("query: {}", shown(&ex.query)));
    if ex.searched != ex.query {
        out.push(format!("searched (rewritten): {}", shown(&ex.searched)));
    }
    out.push(format!("ranking: {}", ranking(ex)));
    out.push(format!("second stage: none ({})", ex.second_stage.note));
    if !ex.terms.is_empty() {
        let terms: Vec<String> = ex
            .terms
            .iter()
            .map(|t| {
                let fields: Vec<String> = t
                    .fields
                    .iter()
                    .map(|f| format!("{} ×{} df {}", f.field, num(f.weight), f.df))
                    .collect();
                format!("{} ({})", shown(&t.term), fields.join(", "))
            })
            .collect();
        out.push(format!("terms: {}", terms.join("; ")));
    } else {
        out.push("terms: none the index holds".into());
    }
    if !ex.stopwords.is_empty() {
        out.push(format!(
            "too common to count: {}",
            shown(&ex.stopwords.join(", "))
        ));
    }
    if !ex.omitted.is_empty() {
        out.push(format!(
            "left out of a long query: {}",
            shown(&ex.omitted.join(", "))
        ));
    }
    for n in &ex.notes {
        out.push(format!("note: {}", shown(n)));
    }
    let hits: Vec<&SkillExplanation> = ex
        .skills
        .iter()
        .filter(|s| s.status == Status::Hit)
        .collect();
    out.push(String::new());
    if hits.is_empty() {
        out.push("no hits".into());
    } else {
        out.push(format!("hits (top {}):", ex.top_k));
    }
    for s in hits {
        skill(&mut out, ex, s);
    }
    let held: Vec<&SkillExplanation> = ex
        .skills
        .iter()
        .filter(|s| s.status == Status::HeldBack && !s.asked)
        .collect();
    if !held.is_empty() {
        out.push(String::new());
        out.push("matches held back:".into());
        for s in held {
            skill(&mut out, ex, s);
        }
    }
    let asked: Vec<&SkillExplanation> = ex
        .skills
        .iter()
        .filter(|s| s.asked && s.status != Status::Hit)
        .collect();
    if !asked.is_empty() {
        out.push(String::new());
        out.push("asked for:".into());
        for s in asked {
            skill(&mut out, ex, s);
        }
    }
    out.push(String::new());
    out.push(format!("injected turn: {}", turn(&ex.turn)));
    out
}

/// How the scores were made, in one line.
fn ranking(ex: &Explanation) -> String {
    let f = &ex.ranking.fields;
    let bm25 = format!(
        "BM25 over name ×{}, description ×{}, body ×{}",
        num(f.name),
        num(f.description),
        num(f.body)
    );
    match (ex.ranking.method, &ex.ranking.weights, ex.ranking.rrf_k) {
        ("rrf", Some(w), Some(k)) => format!(
            "weighted reciprocal-rank fusion, score = Σ weight / (k + rank), k {}: lexical ({bm25}) ×{}, semantic (cosine) ×{}, the top {} of each",
            num(k),
            num(w.lexical),
            num(w.semantic),
            ex.depth
        ),
        ("bm25", ..) => format!("lexical alone: {bm25}"),
        ("cosine", ..) => "semantic alone: cosine of the query's vector and the skill's (a long query's: its nearest passage's)".into(),
        _ => "nothing ranked".into(),
    }
}

/// One skill's block: a heading, then a line per part.
fn skill(out: &mut Vec<String>, ex: &Explanation, s: &SkillExplanation) {
    let head = match (s.status, s.rank, s.score) {
        (Status::Hit, Some(rank), Some(score)) => format!(
            "{rank}. {}  [{}]  score {}",
            shown(&s.name),
            shown(&s.qualified_id),
            score4(score)
        ),
        (Status::NotInIndex, ..) => format!("- {}", shown(&s.id)),
        (_, _, Some(score)) => format!(
            "- {}  [{}]  score {}",
            shown(&s.name),
            shown(&s.qualified_id),
            score4(score)
        ),
        _ => format!("- {}  [{}]", shown(&s.name), shown(&s.qualified_id)),
    };
    out.push(format!("  {head}"));
    let why = |code: &str, reason: &str| format!("{code}: {}", shown(reason));
    match s.status {
        Status::Hit => {}
        Status::HeldBack => {
            if let Some(e) = &s.held_back {
                out.push(format!("     held back: {}", why(&e.code, &e.reason)));
            }
        }
        Status::NotReached => {
            out.push(format!(
                "     not reached: ranked below the top {} hits",
                ex.top_k
            ));
            if let Some(e) = &s.held_back {
                out.push(format!("     and would be held back: {}", why(&e.code, &e.reason)));
            }
        }
        Status::NoMatch => {
            out.push("     matched nothing: no query term is in it".into());
            if let Some(e) = &s.held_back {
                out.push(format!("     and would be held back: {}", why(&e.code, &e.reason)));
            }
        }
        Status::Invalid => out.push(
            "     not a usable skill: its SKILL.md is indexed with a problem (see `skillsearch index`)"
                .into(),
        ),
        Status::NotInIndex => out.push("     not in the index: no skill has this id".into()),
    }
    if let Some(l) = &s.lexical {
        lexical(out, ex, l);
    }
    if let Some(m) = &s.semantic {
        let rank = m.rank.map_or("-".into(), |r| r.to_string());
        let beyond = if m.considered {
            String::new()
        } else {
            format!(" (below the top {} the search fused)", ex.depth)
        };
        out.push(format!(
            "     semantic: rank {rank}, cosine {}{beyond}",
            score4(m.score)
        ));
    }
    if let Some(f) = &s.fusion {
        let claims: Vec<String> = f
            .claims
            .iter()
            .map(|c| {
                format!(
                    "{} {}/({}+{}) = {:.6}",
                    c.retriever,
                    num(c.weight as f32),
                    num(f.k),
                    c.rank,
                    c.value
                )
            })
            .collect();
        out.push(format!(
            "     fusion: {} → {:.6}",
            claims.join(" + "),
            f.score
        ));
    }
    if let Some(t) = &s.turn {
        let line = if t.injected {
            "injected".to_owned()
        } else if t.relevance_guard.as_ref().is_some_and(|g| !g.passed) {
            let g = t.relevance_guard.as_ref().expect("checked");
            format!(
                "held back by the relevance guard: its name and description share {} of the {} query words it needs{}",
                g.matched.len(),
                g.required,
                if g.matched.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", shown(&g.matched.join(", ")))
                }
            )
        } else if t.over_budget {
            format!(
                "left out to fit the token budget ({} tokens)",
                ex.turn.token_budget.map_or("no".into(), |b| b.to_string())
            )
        } else {
            "not injected".to_owned()
        };
        out.push(format!("     injected turn: {line}"));
    }
}

/// The lexical part: rank and score, then each matching clause.
fn lexical(out: &mut Vec<String>, ex: &Explanation, l: &LexicalPart) {
    if l.matches.is_empty() {
        out.push("     lexical: no query term matched".into());
        return;
    }
    let rank = l.rank.map_or("-".into(), |r| r.to_string());
    let beyond = if l.considered {
        String::new()
    } else {
        format!(" (below the top {} the search ranked)", ex.depth)
    };
    out.push(format!(
        "     lexical: rank {rank}, BM25 {}{beyond}",
        score4(l.score)
    ));
    for m in &l.matches {
        out.push(format!(
            "       {:<12} in {:<11} ×{}  {}",
            shown(&m.term),
            m.field,
            m.tf,
            score4(m.score)
        ));
    }
}

/// What the injected turn did, in one line.
fn turn(t: &TurnSummary) -> String {
    let mut parts = Vec::new();
    if t.injected.is_empty() {
        parts.push("nothing injected".to_owned());
    } else {
        parts.push(format!("injects {}", shown(&t.injected.join(", "))));
    }
    if !t.off_topic.is_empty() {
        parts.push(format!(
            "the relevance guard held back {}",
            shown(&t.off_topic.join(", "))
        ));
    }
    if !t.over_budget.is_empty() {
        parts.push(format!(
            "the token budget left out {}",
            shown(&t.over_budget.join(", "))
        ));
    }
    if t.gate_decided {
        parts.push("a chat model's gate picked the hits".into());
    }
    parts.join("; ")
}

/// A weight as written (`2`, `0.9`).
fn num(x: f32) -> String {
    format!("{x}")
}

/// A score to four decimals.
fn score4(x: f32) -> String {
    format!("{x:.4}")
}
