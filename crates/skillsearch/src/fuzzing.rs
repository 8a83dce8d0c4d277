//! What the fuzz targets (`fuzz/` at the repository's root) call: the code that reads the
//! surfaces' input, re-exported unchanged. Not an API; nothing else uses it.

/// The hook's input and reply.
pub mod hook {
    pub use crate::hook::{HookHost, Input, MAX_QUERY_CHARS, read_input, reply_line};
}

/// The stdio protocols' line reader and the MCP server's JSON-RPC framing.
pub mod jsonrpc {
    pub use crate::lines::{MAX_LINE_BYTES, read_line_capped};
    pub use crate::mcp::transport::CheckedLines;
}

/// The daemon's request bodies (HTTP and `--stdio`) and its retrieve reply.
pub mod serve {
    pub use crate::serve::reply::{RetrieveReply, Text};
    pub use crate::serve::{
        ApiError, MAX_BODY_BYTES, MAX_HOST_HITS, MAX_HOST_SOURCES, PlanReq, ReadReq, RetrieveReq,
        StdioRequest, WarmReq, host_sources, stdio_reply, stdio_request,
    };
}
