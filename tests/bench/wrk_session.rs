//! One kept-alive connection driven by wrk (`-t1 -c1`), the client the MCP issue measured
//! with: sequential calls, each answer checked in wrk's Lua `response` hook (status 200,
//! the request's own JSON-RPC id, the echoed text, no `isError`), so a fast wrong answer
//! fails the run instead of counting. wrk costs less per call than the reqwest client (the
//! same route answers it faster), so these rows measure the servers more than the client.

/// What one wrk run drives.
pub enum Target<'a> {
    /// `tools/call echo_say {"text":"hi"}` in the MCP session `session` at `url`, a fresh
    /// JSON-RPC id per call.
    Mcp { url: &'a str, session: &'a str },
    /// `POST /v1/call {"tool":"echo:say","args":{"text":"hi"}}` at `url` (the host's root).
    Rest { url: &'a str },
}

/// The Lua for `target`: the request, the answer's check, and the summary line.
fn script(target: &Target<'_>) -> (String, String) {
    let (url, headers, request, check) = match target {
        Target::Mcp { url, session } => (
            (*url).to_string(),
            format!(
                "wrk.headers[\"Content-Type\"] = \"application/json\"\n\
                 wrk.headers[\"Accept\"] = \"application/json, text/event-stream\"\n\
                 wrk.headers[\"Mcp-Session-Id\"] = \"{session}\"\n\
                 wrk.headers[\"Mcp-Protocol-Version\"] = \"{}\"\n",
                wharf_integration_tests::raw_mcp::PROTOCOL
            ),
            "wrk.format(\"POST\", nil, nil, '{\"jsonrpc\":\"2.0\",\"id\":' .. n .. \
             ',\"method\":\"tools/call\",\"params\":{\"name\":\"echo_say\",\"arguments\":{\"text\":\"hi\"}}}')",
            "status == 200 and string.find(body, '\"id\":' .. n .. '[,}]') ~= nil \
             and string.find(body, 'hi', 1, true) ~= nil \
             and string.find(body, '\"isError\":true', 1, true) == nil",
        ),
        Target::Rest { url } => (
            format!("{url}/v1/call"),
            "wrk.headers[\"Content-Type\"] = \"application/json\"\n".to_string(),
            "wrk.format(\"POST\", nil, nil, '{\"tool\":\"echo:say\",\"args\":{\"text\":\"hi\"}}')",
            "status == 200 and string.find(body, '\"code\":0', 1, true) ~= nil \
             and string.find(body, 'hi', 1, true) ~= nil",
        ),
    };
    let lua = format!(
        "{headers}\
         n = 0\nbad = 0\nthreads = {{}}\n\
         setup = function(thread) table.insert(threads, thread) end\n\
         request = function()\n  n = n + 1\n  return {request}\nend\n\
         response = function(status, headers, body)\n  if not ({check}) then\n    bad = bad + 1\n    \
         if bad == 1 then io.stderr:write(\"bad answer: \" .. status .. \" \" .. body .. \"\\n\") end\n  end\nend\n\
         done = function(summary, latency, requests)\n  local b = 0\n  \
         for _, t in ipairs(threads) do b = b + t:get(\"bad\") end\n  \
         io.write(string.format(\"WHARF %f %f %d %d %d\\n\", summary.requests / (summary.duration / 1e6), \
         latency:percentile(50) / 1000, b, summary.errors.status, \
         summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))\nend\n"
    );
    (url, lua)
}

/// Runs wrk on one connection for `seconds`; calls/s and the median latency in ms. Panics
/// when any answer was wrong or any request failed.
pub fn drive(target: &Target<'_>, seconds: u32) -> (f64, f64) {
    let (url, lua) = script(target);
    let (v, text) = wharf_integration_tests::wrk::run(&lua, &url, 1, seconds);
    assert!(v[0] > 0.0, "no calls answered at {url}: {text}");
    assert_eq!(v[2], 0.0, "wrong answers from {url}: {text}");
    assert_eq!(v[3], 0.0, "non-2xx replies from {url}: {text}");
    assert_eq!(v[4], 0.0, "socket errors at {url}: {text}");
    (v[0], v[1])
}
