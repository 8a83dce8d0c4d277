//! Synthetic corpora: skill `i` is source skill `i mod n` with a new name (`<name>-v<i>`), the
//! description kept, and the body's paragraphs shuffled by a seeded PRNG. Deterministic for a
//! given source corpus, count and seed.

use anyhow::{Context, Result, bail};
use skillsearch_core::corpus::SKILL_FILE;
use skillsearch_core::corpus::frontmatter;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The marker written last; a run with the same count and seed finds it and does nothing.
const MARKER: &str = ".complete";

/// SplitMix64: a tiny, good-enough PRNG for shuffling paragraphs.
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform-enough in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

struct Source {
    name: String,
    description: String,
    paragraphs: Vec<String>,
}

/// Paragraphs: runs of non-blank lines.
fn paragraphs(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Vec<&str> = Vec::new();
    for line in body.lines() {
        if line.trim().is_empty() {
            if !cur.is_empty() {
                out.push(cur.join("\n"));
                cur.clear();
            }
        } else {
            cur.push(line);
        }
    }
    if !cur.is_empty() {
        out.push(cur.join("\n"));
    }
    out
}

/// A name safe to write unquoted in YAML, else JSON-quoted.
fn yaml_name(name: &str) -> String {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with(['-', '.']);
    if plain {
        name.to_owned()
    } else {
        serde_json::to_string(name).unwrap_or_default()
    }
}

fn render(src: &Source, i: usize, seed: u64) -> String {
    let mut rng = SplitMix64::new(seed ^ (i as u64).wrapping_mul(0xD1B5_4A32_D192_ED03));
    let mut order: Vec<&str> = src.paragraphs.iter().map(String::as_str).collect();
    rng.shuffle(&mut order);
    let name = yaml_name(&format!("{}-v{i}", src.name));
    let description = serde_json::to_string(&src.description).unwrap_or_default();
    format!(
        "---\nname: {name}\ndescription: {description}\n---\n\n{}\n",
        order.join("\n\n")
    )
}

fn skill_dir(out: &Path, i: usize) -> PathBuf {
    out.join(format!("s{i:06}"))
}

/// Reads the usable source skills, in byte order of their directory names.
fn load_sources(from: &Path) -> Result<(Vec<Source>, usize, usize)> {
    if !from.is_dir() {
        bail!("cannot list {}: not a directory", from.display());
    }
    // Every skill below `from`, at any depth (the 64K pool nests its sources), in id order.
    let (files, _) =
        skillsearch_core::corpus::discover(&skillsearch_core::corpus::Roots::explicit([
            from.to_path_buf()
        ]));
    let mut dirs: Vec<PathBuf> = files
        .iter()
        .filter_map(|f| f.path.parent().map(Path::to_path_buf))
        .collect();
    dirs.sort();
    let (mut sources, mut non_utf8, mut missing) = (Vec::new(), 0, 0);
    for dir in dirs {
        let Ok(bytes) = std::fs::read(dir.join(SKILL_FILE)) else {
            missing += 1;
            continue;
        };
        let Ok(text) = String::from_utf8(bytes) else {
            non_utf8 += 1;
            continue;
        };
        let dir_name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let parsed = frontmatter::parse(&text, &dir_name);
        sources.push(Source {
            name: parsed.meta.name,
            description: parsed.meta.description,
            paragraphs: paragraphs(&parsed.body),
        });
    }
    Ok((sources, non_utf8, missing))
}

/// Removes `s<digits>` directories at or beyond `count` left by an earlier, larger run.
fn remove_stale(out: &Path, count: usize) -> Result<usize> {
    let mut removed = 0;
    for entry in std::fs::read_dir(out).with_context(|| format!("cannot list {}", out.display()))? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(num) = name
            .to_str()
            .and_then(|n| n.strip_prefix('s'))
            .filter(|n| n.len() >= 6 && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        if num >= count {
            std::fs::remove_dir_all(entry.path())
                .with_context(|| format!("cannot remove {}", entry.path().display()))?;
            removed += 1;
        }
    }
    Ok(removed)
}

pub fn build(from: &Path, out: &Path, count: usize, seed: u64) -> Result<()> {
    let marker = out.join(MARKER);
    if let Ok(text) = std::fs::read_to_string(&marker)
        && let Ok(v) = serde_json::from_str::<serde_json::Value>(&text)
        && v["count"].as_u64() == Some(count as u64)
        && v["seed"].as_u64() == Some(seed)
    {
        println!(
            "{}: already holds {count} synthetic skills (seed {seed}); nothing to do",
            out.display()
        );
        return Ok(());
    }
    let started = Instant::now();
    let (sources, non_utf8, missing) = load_sources(from)?;
    if sources.is_empty() {
        bail!(
            "{} holds no readable UTF-8 {SKILL_FILE} in its subdirectories",
            from.display()
        );
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    match std::fs::remove_file(&marker) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot remove {}", marker.display())),
    }
    let stale = remove_stale(out, count)?;
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4);
    let results: Vec<Result<u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let sources = &sources;
                s.spawn(move || -> Result<u64> {
                    let mut bytes = 0u64;
                    for i in (w..count).step_by(workers) {
                        let text = render(&sources[i % sources.len()], i, seed);
                        let dir = skill_dir(out, i);
                        std::fs::create_dir_all(&dir)
                            .with_context(|| format!("cannot create {}", dir.display()))?;
                        let path = dir.join(SKILL_FILE);
                        // Leave an identical file alone so its mtime (and any index) stays valid.
                        if std::fs::read(&path).is_ok_and(|old| old == text.as_bytes()) {
                            bytes += text.len() as u64;
                            continue;
                        }
                        std::fs::write(&path, &text)
                            .with_context(|| format!("cannot write {}", path.display()))?;
                        bytes += text.len() as u64;
                    }
                    Ok(bytes)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("writer thread panicked")))
            })
            .collect()
    });
    let mut bytes = 0u64;
    for r in results {
        bytes += r?;
    }
    let info = serde_json::json!({
        "count": count,
        "seed": seed,
        "from": from,
        "sources": sources.len(),
        "skipped_non_utf8": non_utf8,
        "skipped_missing": missing,
        "bytes": bytes,
    });
    std::fs::write(&marker, serde_json::to_vec_pretty(&info)?)
        .with_context(|| format!("cannot write {}", marker.display()))?;
    println!(
        "{}: {count} synthetic skills ({:.1} MB) from {} sources in {} ({non_utf8} non-UTF-8 and {missing} without {SKILL_FILE} skipped{}) in {:.1} s",
        out.display(),
        bytes as f64 / 1e6,
        sources.len(),
        from.display(),
        if stale > 0 {
            format!("; {stale} stale dirs removed")
        } else {
            String::new()
        },
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffle_is_deterministic_and_a_permutation() {
        let mut a: Vec<u32> = (0..20).collect();
        let mut b = a.clone();
        SplitMix64::new(7).shuffle(&mut a);
        SplitMix64::new(7).shuffle(&mut b);
        assert_eq!(a, b);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..20).collect::<Vec<_>>());
        assert_ne!(a, sorted);
    }

    #[test]
    fn rendered_skill_parses_back() {
        let src = Source {
            name: "pdf-tools".into(),
            description: "Use when: \"quotes\"\nand lines".into(),
            paragraphs: paragraphs("# T\n\nfirst para\nline two\n\n\nsecond"),
        };
        assert_eq!(src.paragraphs.len(), 3);
        let text = render(&src, 42, 1);
        let p = frontmatter::parse(&text, "s000042");
        assert_eq!(p.meta.name, "pdf-tools-v42");
        assert_eq!(p.meta.description, src.description);
        assert!(p.problems.is_empty(), "{:?}", p.problems);
        assert_eq!(paragraphs(&p.body).len(), 3);
    }
}
