//! The HTTP interfaces: the envelope every reply uses, and the REST routes.

pub mod admin;
pub mod auth;
pub mod backends;
pub mod call_request;
pub mod call_stream;
pub mod compat;
pub mod console;
pub mod edge;
pub mod envelope;
pub mod files;
pub mod json_body;
pub mod mcp;
pub mod metrics;
pub mod openapi;
pub mod preview;
pub mod preview_links;
pub mod quotas;
pub mod rest;
pub mod route_answer;
pub mod session_access;
pub mod session_pauses;
pub mod session_reply;
pub mod snapshots;
pub mod terminal;
pub mod volumes;

pub use rest::router;
