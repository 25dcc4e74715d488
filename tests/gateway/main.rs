//! `toolcage serve` driven as an MCP client would over stdio: upstream
//! servers through the gateway (`upstreams`) and the management tools
//! (`manage_tools`). `tests/unprivileged.sh` runs `upstreams` as an
//! ordinary user too.

#[path = "../gateway_support/mod.rs"]
mod gateway_support;
#[path = "../manage_support/mod.rs"]
mod manage_support;
#[path = "../stdio_client/mod.rs"]
mod stdio_client;

mod manage_tools;
mod prompts;
mod resources;
mod self_entry;
mod unprefixed;
mod upstreams;
