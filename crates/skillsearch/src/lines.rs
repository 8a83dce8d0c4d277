//! Newline-delimited input with a cap on a line's length, shared by the two stdio protocols
//! (`serve --stdio`, `mcp`): a line over the cap is read to its end and dropped, never held whole,
//! and the caller answers it with an error.

/// Longest line either stdio protocol reads (the HTTP body limit of `serve`).
pub const MAX_LINE_BYTES: usize = 1024 * 1024;

/// One line of at most `cap` bytes from `r`, without its newline: `Ok(None)` at the end of the
/// input, `Ok(Some(Err(n)))` for a line of `n` bytes over the cap (read to its end and dropped,
/// never held whole).
///
/// Not cancel-safe: a partly read line is lost if the future is dropped, so a caller reads in a
/// loop of its own, never inside a `select!`.
pub async fn read_line_capped(
    r: &mut (impl tokio::io::AsyncBufRead + Unpin),
    cap: usize,
) -> std::io::Result<Option<Result<Vec<u8>, usize>>> {
    use tokio::io::AsyncBufReadExt;
    let mut line = Vec::new();
    let mut seen = 0usize;
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return Ok(match (seen, seen > cap) {
                (0, _) => None,
                (n, true) => Some(Err(n)),
                _ => Some(Ok(line)),
            });
        }
        let (chunk, done) = match buf.iter().position(|&c| c == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        seen += chunk.len();
        if seen <= cap {
            line.extend_from_slice(chunk);
        } else {
            line = Vec::new();
        }
        let used = done.unwrap_or(buf.len());
        r.consume(used);
        if done.is_some() {
            return Ok(Some(if seen > cap { Err(seen) } else { Ok(line) }));
        }
    }
}
