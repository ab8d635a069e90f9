//! The console's Processes page (`/console/sessions/processes?id=`): what the sandbox
//! agent of a session started — pid, command, running or its exit code, when, on a
//! terminal or not, output written and dropped — newest first. For the same viewers as the
//! Files page; the commands are the sandbox's text, shown escaped.

use super::Console;
use super::pages::{html, layout, span};
use super::sandbox_access::{SandboxPage, SessionQuery, failed};
use crate::clock::now_ms;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use std::sync::Arc;
use wharf_sandbox_protocol::ProcessInfo;

/// `GET /console/sessions/processes?id=`.
pub async fn page(
    State(console): State<Arc<Console>>,
    SandboxPage { viewer, query: q }: SandboxPage<SessionQuery>,
) -> Response {
    let list = match console
        .wharf
        .sandbox_processes(viewer.caller.session_tenant(), &q.id)
        .await
    {
        Ok(list) => list,
        Err(e) => return failed(&e),
    };
    let body = processes_markup(&q.id, &list, now_ms());
    html(StatusCode::OK, layout("Processes", Some(&viewer), body))
}

fn processes_markup(id: &str, list: &[ProcessInfo], now: u64) -> Markup {
    html! {
        h1 { "Processes " span.count { "(" (list.len()) ")" } }
        p { "Session " code { (id) } ": the processes its sandbox agent started (commands run to completion through "
            code { "run_command" } " are not kept), newest first." }
        @if list.is_empty() {
            p.empty { "No process." }
        } @else {
            table.processes {
                thead { tr {
                    th { "pid" } th { "Command" } th { "State" } th { "Started" } th { "Terminal" } th { "Output" }
                } }
                tbody {
                    @for p in list {
                        tr data-pid=(p.pid) {
                            td.pid { (p.pid) }
                            td.command { code { (p.command) } }
                            td.state {
                                @if p.running { "running" }
                                @else { "exited " (p.exit_code.map_or_else(|| "?".to_string(), |c| c.to_string())) }
                            }
                            td.started { (span(now.saturating_sub(p.started_at_ms))) " ago" }
                            td.terminal { @if p.terminal { "yes" } @else { "no" } }
                            td.output {
                                (p.output_bytes) " bytes"
                                @if p.dropped_bytes > 0 { " (" (p.dropped_bytes) " dropped)" }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_text_and_states_read_plainly() {
        let list = [
            ProcessInfo {
                pid: 7,
                command: "sh -c <script>alert(1)</script>".into(),
                running: false,
                exit_code: Some(137),
                started_at_ms: 1_000,
                terminal: false,
                output_bytes: 10,
                dropped_bytes: 2,
            },
            ProcessInfo {
                pid: 9,
                command: "bash".into(),
                running: true,
                exit_code: None,
                started_at_ms: 5_000,
                terminal: true,
                output_bytes: 0,
                dropped_bytes: 0,
            },
        ];
        let m = processes_markup("s1", &list, 65_000).into_string();
        assert!(!m.contains("<script>alert"), "{m}");
        assert!(m.contains("exited 137"), "{m}");
        assert!(m.contains("(2 dropped)"), "{m}");
        assert!(m.contains("1m 0s ago"), "{m}");
    }
}
