//! MCP over stdio: one client, newline-delimited JSON-RPC on stdin/stdout.
//! Nothing but MCP goes to stdout (logs go to stderr).
//!
//! Bad input (what rmcp's `AsyncRwTransport` does, verified in
//! `tests/mcp_stdio.rs`): a line over `max_message_bytes` is dropped without
//! buffering it; unparsable JSON and invalid UTF-8 are ignored (there is no
//! id to answer); well-formed JSON of the wrong shape gets an Invalid
//! Request error; an unknown method gets Method not found. The server keeps
//! serving after each.
//!
//! Deviation from JSON-RPC 2.0 (section 5.1), kept from rmcp on purpose:
//! unparsable input gets no -32700 Parse error reply (rmcp avoids error
//! storms with a peer that echoes), and an oversized line gets no reply.

use super::McpServer;
use rmcp::ServiceExt;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::{AsyncRead, AsyncWrite};

/// Serve one client on this process's stdin/stdout until stdin closes.
pub async fn serve_stdio(server: McpServer) -> anyhow::Result<()> {
    let (read, write) = rmcp::transport::stdio_pipes();
    serve_io(server, read, write).await
}

/// Serve one client over any byte stream pair (tests use a duplex pipe).
pub async fn serve_io<R, W>(server: McpServer, read: R, write: W) -> anyhow::Result<()>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let max = server.shared.config.max_message_bytes;
    let transport = AsyncRwTransport::new_server(read, write).with_max_line_length(max);
    let running = server
        .serve(transport)
        .await
        .map_err(|e| anyhow::anyhow!("MCP initialization failed: {e}"))?;
    let reason = running.waiting().await?;
    tracing::info!("stdio client gone: {reason:?}");
    Ok(())
}
