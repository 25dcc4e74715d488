//! The MCP server: the protocol over stdio and streamable HTTP against a
//! fake host, the server over the real engine, `toolcage serve` as a
//! process (bounds, authentication, the HTTP service, interrupted calls).

#[path = "../common/mod.rs"]
mod common;
#[path = "../mcp_support/mod.rs"]
mod mcp_support;
#[path = "../stdio_client/mod.rs"]
mod stdio_client;
#[path = "../store_support/mod.rs"]
mod store_support;

mod bounded_server;
mod engine;
mod http_auth;
mod http_server;
mod http_service;
mod interrupted_calls;
mod serve_http;
mod serve_pool;
mod serve_process;
mod stdio;
