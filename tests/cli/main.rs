//! The command line through the real binary: every command, its output and
//! exit statuses, the README's demo, the OpenCrabs http tools and the
//! parent process against a hostile project.

#[path = "../common/mod.rs"]
mod common;
#[path = "../gateway_support/mod.rs"]
mod gateway_support;
#[path = "../stdio_client/mod.rs"]
mod stdio_client;

mod annotations;
mod call;
mod closed_stdout;
mod demo;
mod denials;
mod diagnoses;
mod docs;
mod doctor;
mod exec;
mod gate;
mod http_tools;
mod not_loaded;
mod parent_holds;
mod policy;
mod presets;
mod project_root;
mod quick_start;
mod quiet;
mod repos;
mod same_flags;
mod schema_refs;
mod script;
mod tool_notes;
