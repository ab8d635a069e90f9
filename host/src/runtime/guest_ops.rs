//! The exports a host can call on an instance, as one enum: the backend hooks and the
//! provider contract. [`run_op`] dispatches one to the instance's world.

use crate::runtime::bindings::provider::exports::wharf::plugin::provider as wit_provider;
use crate::runtime::bindings::wit_types;
use crate::runtime::instance_pool::{Exports, Instance};

/// One call into a guest.
pub(crate) enum Op<'a> {
    Call {
        tool: &'a str,
        args: String,
        session: Option<wit_types::SessionInfo>,
    },
    Initialize {
        session_id: &'a str,
        key: &'a str,
        config: String,
    },
    Cleanup(wit_types::SessionInfo),
    Discover(wit_types::SessionInfo),
    Create(wit_provider::SandboxSpec),
    RunCommand {
        sandbox: &'a str,
        request: wit_provider::CommandRequest,
    },
    Destroy(&'a str),
    IsAlive(&'a str),
    ReadFile {
        sandbox: &'a str,
        path: &'a str,
        offset: u64,
        max_bytes: u64,
    },
    WriteFile {
        sandbox: &'a str,
        path: &'a str,
        content: Vec<u8>,
    },
    ListDir {
        sandbox: &'a str,
        path: &'a str,
    },
}

/// What a guest call returned.
pub(crate) enum OpOutput {
    Call(wit_types::ToolOutput),
    Initialize(String),
    Done,
    Discover(wit_types::Discovery),
    Created(String),
    Command(wit_provider::CommandResult),
    Alive(bool),
    Chunk(wit_provider::FileChunk),
    Entries(Vec<wit_provider::DirEntry>),
}

fn wrong_world() -> wasmtime::Error {
    wasmtime::Error::msg("this export does not exist in the component's world")
}

pub(crate) async fn run_op(
    instance: &mut Instance,
    op: Op<'_>,
) -> wasmtime::Result<Result<OpOutput, wit_types::Error>> {
    let store = &mut instance.store;
    match &instance.exports {
        Exports::Backend(b) => {
            let guest = b.wharf_plugin_backend();
            Ok(match op {
                Op::Call {
                    tool,
                    args,
                    session,
                } => guest
                    .call_call(&mut *store, tool, &args, session.as_ref())
                    .await?
                    .map(OpOutput::Call),
                Op::Initialize {
                    session_id,
                    key,
                    config,
                } => guest
                    .call_initialize(&mut *store, session_id, key, &config)
                    .await?
                    .map(OpOutput::Initialize),
                Op::Cleanup(session) => guest
                    .call_cleanup(&mut *store, &session)
                    .await?
                    .map(|()| OpOutput::Done),
                Op::Discover(session) => guest
                    .call_discover(&mut *store, &session)
                    .await?
                    .map(OpOutput::Discover),
                _ => return Err(wrong_world()),
            })
        }
        Exports::Provider(p) => {
            let guest = p.wharf_plugin_provider();
            Ok(match op {
                Op::Create(spec) => guest
                    .call_create(&mut *store, &spec)
                    .await?
                    .map(OpOutput::Created),
                Op::RunCommand { sandbox, request } => guest
                    .call_run_command(&mut *store, sandbox, &request)
                    .await?
                    .map(OpOutput::Command),
                Op::Destroy(sandbox) => guest
                    .call_destroy(&mut *store, sandbox)
                    .await?
                    .map(|()| OpOutput::Done),
                Op::IsAlive(sandbox) => guest
                    .call_is_alive(&mut *store, sandbox)
                    .await?
                    .map(OpOutput::Alive),
                Op::ReadFile {
                    sandbox,
                    path,
                    offset,
                    max_bytes,
                } => guest
                    .call_read_file(&mut *store, sandbox, path, offset, max_bytes)
                    .await?
                    .map(OpOutput::Chunk),
                Op::WriteFile {
                    sandbox,
                    path,
                    content,
                } => guest
                    .call_write_file(&mut *store, sandbox, path, &content)
                    .await?
                    .map(|()| OpOutput::Done),
                Op::ListDir { sandbox, path } => guest
                    .call_list_dir(&mut *store, sandbox, path)
                    .await?
                    .map(OpOutput::Entries),
                _ => return Err(wrong_world()),
            })
        }
    }
}
