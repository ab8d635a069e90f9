//! The operation table `/openapi.json` is built from: each route with the request types its
//! handler parses, its parameters, what it answers with, and the codes the handler itself
//! can answer (the refusals every route shares, such as 4030 at the edge or 4150 for a body
//! of another type, are added by the builder).

mod operations;
mod shared;

use crate::config::TokenScope;
use crate::error_code::Code::{self, Success};
use schemars::{JsonSchema, Schema, SchemaGenerator};

pub(super) use operations::OPERATIONS;

/// One documented operation.
pub(super) struct Operation {
    pub(super) method: &'static str,
    pub(super) path: &'static str,
    pub(super) summary: &'static str,
    /// `None`: open to anyone; else the scope a token needs (when tokens are configured).
    pub(super) scope: Option<TokenScope>,
    pub(super) body: Body,
    pub(super) query: &'static [Param],
    pub(super) headers: &'static [Param],
    pub(super) reply: Reply,
    /// The codes the handler answers (success included).
    pub(super) codes: &'static [Code],
    /// The schema of a success's `data`, when the handler answers a reply type.
    pub(super) data: Option<fn(&mut SchemaGenerator) -> Schema>,
    /// Served only with `[auth.oauth]`.
    pub(super) oauth_only: bool,
}

impl Operation {
    const fn new(method: &'static str, path: &'static str, summary: &'static str) -> Self {
        Self {
            method,
            path,
            summary,
            scope: None,
            body: Body::None,
            query: &[],
            headers: &[],
            reply: Reply::Envelope,
            codes: &[Success],
            data: None,
            oauth_only: false,
        }
    }
    const fn oauth_only(mut self) -> Self {
        self.oauth_only = true;
        self
    }
    const fn data<T: JsonSchema>(mut self) -> Self {
        self.data = Some(json::<T>);
        self
    }
    const fn scope(mut self, scope: TokenScope) -> Self {
        self.scope = Some(scope);
        self
    }
    const fn body(mut self, body: Body) -> Self {
        self.body = body;
        self
    }
    const fn query(mut self, query: &'static [Param]) -> Self {
        self.query = query;
        self
    }
    const fn headers(mut self, headers: &'static [Param]) -> Self {
        self.headers = headers;
        self
    }
    const fn reply(mut self, reply: Reply) -> Self {
        self.reply = reply;
        self
    }
    const fn codes(mut self, codes: &'static [Code]) -> Self {
        self.codes = codes;
        self
    }
}

const fn get(path: &'static str, summary: &'static str) -> Operation {
    Operation::new("get", path, summary)
}
const fn post(path: &'static str, summary: &'static str) -> Operation {
    Operation::new("post", path, summary)
}
const fn put(path: &'static str, summary: &'static str) -> Operation {
    Operation::new("put", path, summary)
}
const fn delete(path: &'static str, summary: &'static str) -> Operation {
    Operation::new("delete", path, summary)
}

/// A query or header parameter.
pub(super) struct Param {
    pub(super) name: &'static str,
    pub(super) required: bool,
    pub(super) description: &'static str,
    /// What its value is.
    pub(super) kind: ParamKind,
}

/// The value a parameter takes.
#[derive(Clone, Copy)]
pub(super) enum ParamKind {
    /// Any text.
    Text,
    /// Text of at most this many characters.
    TextUpTo(u64),
    /// A whole number in this range.
    Integer { min: u64, max: u64 },
}

/// What a request carries.
pub(super) enum Body {
    None,
    /// A JSON object of the handler's request type; `required: false` when an empty body
    /// is read as `{}`.
    Json {
        schema: fn(&mut SchemaGenerator) -> Schema,
        required: bool,
    },
    /// Raw bytes (`application/octet-stream`, `application/wasm`, or untyped).
    Bytes,
    /// A file's bytes, or a directory's tar stream (`application/x-tar`).
    FileOrTar,
    /// A JSON-RPC message (MCP).
    JsonRpc,
}

/// What a success answers with.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Reply {
    /// The envelope, JSON.
    Envelope,
    /// The envelope, or (asked with `Accept: application/x-ndjson`) the call's output as
    /// JSON lines ending with the envelope.
    EnvelopeOrLines,
    /// This document.
    Document,
    /// OpenMetrics text.
    Metrics,
    /// A file's bytes, or a directory's tar stream.
    FileOrTar,
    /// Newline-delimited JSON (a watch's changes).
    Lines,
    /// MCP's streamable HTTP: a JSON-RPC answer as JSON or as an event stream.
    Mcp,
    /// An upgrade to a WebSocket (101); a request that is not one gets the envelope.
    WebSocket,
}

fn json<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

const fn body<T: JsonSchema>(required: bool) -> Body {
    Body::Json {
        schema: json::<T>,
        required,
    }
}

const fn param(name: &'static str, required: bool, description: &'static str) -> Param {
    Param {
        name,
        required,
        description,
        kind: ParamKind::Text,
    }
}

impl Param {
    const fn kind(mut self, kind: ParamKind) -> Self {
        self.kind = kind;
        self
    }
}
