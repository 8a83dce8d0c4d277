//! What must not be written as it came: credentials in text the engine records (queries, plans,
//! model replies) and in URLs it shows, and files that hold them.
//!
//! Redaction goes by structure, not by a list of words alone: URL user info
//! (`postgres://admin:pw@db`), the shapes of known keys (OpenAI, GitHub, GitLab, Slack, Stripe,
//! AWS, Google, JWTs), authorization headers (`Bearer`, `Basic`), `key = value` and
//! "my password is …" phrasing, and any long high-entropy token (a random string of 24+
//! characters mixing upper case, lower case and digits).

use regex::Regex;
use std::io::Write;
use std::path::Path;
use std::sync::LazyLock;

/// Whether two secrets are equal, in time that depends on their length only (token checks).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// What a redacted credential reads as.
pub const MARK: &str = "[redacted]";

/// Known key shapes, whole.
static KEYS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"\b(?:",
        r"sk-[A-Za-z0-9_-]{12,}",                  // OpenAI-style
        r"|gh[pousr]_[A-Za-z0-9]{20,}",            // GitHub
        r"|github_pat_[A-Za-z0-9_]{20,}",          // GitHub fine-grained
        r"|glpat-[A-Za-z0-9_-]{20,}",              // GitLab
        r"|xox[abpr]-[A-Za-z0-9-]{10,}",           // Slack
        r"|[rsp]k_(?:live|test)_[A-Za-z0-9]{16,}", // Stripe
        r"|(?:AKIA|ASIA)[0-9A-Z]{16}",             // AWS access key id
        r"|AIza[0-9A-Za-z_-]{30,}",                // Google
        r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", // JWT
        r")",
    ))
    .expect("valid regex")
});

/// A credential after a label: an authorization scheme, `key = value`, "password is …".
static LABELLED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i)(\b(?:bearer|basic)\s+)[A-Za-z0-9._~+/-]{8,}=*",
        r"|(\b(?:api[_-]?key|access[_-]?key|secret[_-]?access[_-]?key|client[_-]?secret|token|secret|password|passwd|pwd|passphrase)",
        r"(?:\s*[:=]\s*|\s+is\s+|\s+was\s+))[^\s,;]{4,}",
    ))
    .expect("valid regex")
});

/// `scheme://user:password@`: the password part.
static USERINFO: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/:@]*:)[^\s/@]+@").expect("valid regex")
});

/// Candidates for a random token.
static TOKEN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[A-Za-z0-9+/=_-]{24,}").expect("valid regex"));

/// Whether `t` looks random: upper case, lower case and digits all present, and at least 3.5
/// bits of entropy a character (English words and identifiers stay well below).
fn looks_random(t: &str) -> bool {
    let has = |f: fn(&u8) -> bool| t.as_bytes().iter().any(f);
    if !(has(u8::is_ascii_uppercase) && has(u8::is_ascii_lowercase) && has(u8::is_ascii_digit)) {
        return false;
    }
    let mut counts = [0u32; 256];
    for b in t.bytes() {
        counts[b as usize] += 1;
    }
    let n = t.len() as f64;
    let bits: f64 = counts
        .iter()
        .filter(|c| **c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum();
    bits >= 3.5
}

/// Literals one of which every [`KEYS`] match contains.
const KEY_PREFIXES: [&str; 14] = [
    "sk-",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xox",
    "k_live_",
    "k_test_",
    "AKIA",
    "ASIA",
    "AIza",
];
/// Words one of which every [`LABELLED`] match contains, in lower case.
const LABELS: [&str; 7] = ["bearer", "basic", "key", "token", "secret", "pass", "pwd"];

/// `s` with every credential it seems to hold replaced by [`MARK`] (labels and URL parts kept).
///
/// An expression runs only on text holding one of the literals all its matches hold, so most
/// text never compiles it: compiling the three with Unicode classes took ~1 ms and a megabyte, a
/// cost every fresh process (the hook on each turn) paid for a prompt with nothing to redact.
/// Case-insensitive labels are looked for in ASCII text only; other text always runs them
/// (Unicode case folding maps a few non-ASCII letters onto ASCII ones).
pub fn redact(s: &str) -> String {
    let s = redact_url_userinfo(s);
    let s = if KEY_PREFIXES.iter().any(|p| s.contains(p)) || s.contains("eyJ") {
        KEYS.replace_all(&s, MARK).into_owned()
    } else {
        s
    };
    let labelled = !s.is_ascii() || {
        let lower = s.to_ascii_lowercase();
        LABELS.iter().any(|w| lower.contains(w))
    };
    let s = if labelled {
        LABELLED
            .replace_all(&s, |c: &regex::Captures<'_>| {
                let keep = c.get(1).or_else(|| c.get(2)).map_or("", |m| m.as_str());
                format!("{keep}{MARK}")
            })
            .into_owned()
    } else {
        s
    };
    TOKEN
        .replace_all(&s, |c: &regex::Captures<'_>| {
            let t = c.get(0).map_or("", |m| m.as_str());
            if looks_random(t) {
                MARK.to_owned()
            } else {
                t.to_owned()
            }
        })
        .into_owned()
}

/// `s` with the password of any `scheme://user:password@host` replaced by [`MARK`].
pub fn redact_url_userinfo(s: &str) -> String {
    if !s.contains("://") {
        return s.to_owned();
    }
    USERINFO
        .replace_all(s, |c: &regex::Captures<'_>| format!("{}{MARK}@", &c[1]))
        .into_owned()
}

/// Appends `bytes` to `path`, creating it (and its directory) readable by its owner only; a
/// file an older version left readable by others is narrowed first. Only a regular file is
/// written: the open never blocks, so a FIFO put where the log was (which would hold a plain
/// open until some reader came) is an error saying so.
pub fn append_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use rustix::fs::{FileType, Mode, OFlags};
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let not_regular = |kind: &str| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} is not a regular file (it is a {kind})", path.display()),
        )
    };
    let flags = OFlags::WRONLY
        | OFlags::APPEND
        | OFlags::CREATE
        | OFlags::NONBLOCK
        | OFlags::NOCTTY
        | OFlags::CLOEXEC;
    let fd = match rustix::fs::open(path, flags, Mode::from_raw_mode(0o600)) {
        Ok(fd) => fd,
        // A FIFO nobody reads refuses a non-blocking open for writing.
        Err(rustix::io::Errno::NXIO) => return Err(not_regular("FIFO")),
        Err(e) => return Err(e.into()),
    };
    let st = rustix::fs::fstat(&fd)?;
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => {}
        FileType::Fifo => return Err(not_regular("FIFO")),
        _ => return Err(not_regular("special file")),
    }
    let now = rustix::fs::fcntl_getfl(&fd)?;
    rustix::fs::fcntl_setfl(&fd, now - OFlags::NONBLOCK)?;
    let mut f = std::fs::File::from(fd);
    if st.st_mode & 0o077 != 0 {
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    f.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_of_every_shape_are_redacted() {
        let cases = [
            (
                "use key sk-abcdefghijklmnop1234 now",
                "use key [redacted] now",
            ),
            (
                "Authorization: Bearer abc.def-ghi_jkl123",
                "Authorization: Bearer [redacted]",
            ),
            (
                "Authorization: Basic YWRtaW46aHVudGVyMg==",
                "Authorization: Basic [redacted]",
            ),
            (
                "api_key=supersecretvalue and more",
                "api_key=[redacted] and more",
            ),
            (
                "connect to postgres://admin:pw1@db.internal:5432/app",
                "connect to postgres://admin:[redacted]@db.internal:5432/app",
            ),
            (
                "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "aws_secret_access_key = [redacted]",
            ),
            (
                "the key is wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY ok",
                "the key is [redacted] ok",
            ),
            (
                "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                "jwt [redacted]",
            ),
            (
                "token glpat-abcdefghij0123456789 here",
                "token [redacted] here",
            ),
            ("stripe sk_live_51Habcdefghijklmnop", "stripe [redacted]"),
            ("my password is hunter22!", "my password is [redacted]"),
            ("AKIAIOSFODNN7EXAMPLE in the env", "[redacted] in the env"),
        ];
        for (input, want) in cases {
            assert_eq!(redact(input), want, "{input}");
        }
    }

    #[test]
    fn ordinary_prompts_are_left_alone() {
        for s in [
            "extract tables from a PDF",
            "Rename src/components/ButtonGroupController.tsx to the new layout",
            "deploy to https://example.com/docs/getting-started and check the pass rate",
            "use the AcroFormFieldExtractorConfiguration class",
            "checksum 0123456789abcdef0123456789abcdef", // no upper case: a hash, not a key
        ] {
            assert_eq!(redact(s), s);
        }
    }

    /// The literal checks skip an expression only where it cannot match: on random text made
    /// of credential shapes, labels, URLs, non-ASCII letters that fold onto ASCII ones (the
    /// Kelvin sign, the long s) and filler, `redact` equals running every expression.
    #[test]
    fn the_literal_checks_change_no_answer() {
        let everything = |s: &str| {
            let s = USERINFO
                .replace_all(s, |c: &regex::Captures<'_>| format!("{}{MARK}@", &c[1]))
                .into_owned();
            let s = KEYS.replace_all(&s, MARK).into_owned();
            let s = LABELLED
                .replace_all(&s, |c: &regex::Captures<'_>| {
                    let keep = c.get(1).or_else(|| c.get(2)).map_or("", |m| m.as_str());
                    format!("{keep}{MARK}")
                })
                .into_owned();
            TOKEN
                .replace_all(&s, |c: &regex::Captures<'_>| {
                    let t = c.get(0).map_or("", |m| m.as_str());
                    if looks_random(t) {
                        MARK.to_owned()
                    } else {
                        t.to_owned()
                    }
                })
                .into_owned()
        };
        let parts = [
            "sk-abcdefghijklmnop1234",
            "ghp_abcdefghijklmnopqrstu1",
            "xoxb-1234567890ab",
            "AKIAIOSFODNN7EXAMPLE",
            "eyJhbGciOi.eyJzdWIiOi.dozjgNryP4",
            "glpat-abcdefghij0123456789",
            "sk_live_51Habcdefghijklmnop",
            "AIzaSyA1234567890abcdefghijklmnopqrs",
            "Bearer ",
            "BASIC ",
            "api_key=",
            "Token: ",
            "password is ",
            "\u{212A}ey = ",
            "\u{17F}ecret: ",
            "postgres://u:",
            "pw1@db",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "hunter22",
            " ",
            "the ",
            "é",
            "日本",
            ".",
            "=",
            "\n",
        ];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            let mut s = String::new();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            for _ in 0..(seed % 8) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                s.push_str(parts[(seed % parts.len() as u64) as usize]);
            }
            assert_eq!(redact(&s), everything(&s), "{s:?}");
        }
    }

    #[test]
    fn private_files_are_owner_only_even_when_they_were_not() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("logs/d.jsonl");
        append_private(&p, b"a\n").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&p), 0o600);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        append_private(&p, b"b\n").unwrap();
        assert_eq!(mode(&p), 0o600);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a\nb\n");
    }
}
