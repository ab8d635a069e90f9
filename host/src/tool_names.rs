//! Tool names: `backend:action`, with `.`, `_` and `-` accepted as the separator, and short
//! names (just the action) when exactly one backend has that action. Pure logic.

/// A tool's identity: the operator's backend name and the backend's action name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolName {
    /// The backend's name as loaded.
    pub backend: String,
    /// The action within the backend.
    pub action: String,
}

impl ToolName {
    /// The canonical form `backend:action`.
    pub fn canonical(&self) -> String {
        format!("{}:{}", self.backend, self.action)
    }
    /// Whether `name` is this tool's canonical name, without building it.
    pub fn is_canonical(&self, name: &str) -> bool {
        name.strip_prefix(self.backend.as_str())
            .and_then(|rest| rest.strip_prefix(':'))
            .is_some_and(|action| action == self.action)
    }
    /// A name matching `^[a-zA-Z0-9_-]{1,64}$`, for MCP clients.
    pub fn mcp_name(&self) -> String {
        let raw = format!("{}_{}", self.backend, self.action);
        raw.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect()
    }
}

/// How a requested name resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// Exactly one tool.
    Found(ToolName),
    /// No tool has that name.
    Unknown,
    /// Several tools match; the candidates in canonical form.
    Ambiguous(Vec<String>),
}

/// The tool names of every loaded backend, with a fast path for exact canonical names.
#[derive(Debug, Default, Clone)]
pub struct ToolIndex {
    names: Vec<ToolName>,
    /// Filled from the loaded backends only (a caller's name is only looked up), so
    /// foldhash rather than SipHash on this per-call lookup.
    exact: hashbrown::HashMap<String, usize>,
}

impl ToolIndex {
    /// An index over `names`.
    pub fn new(names: Vec<ToolName>) -> Self {
        let exact = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.canonical(), i))
            .collect();
        Self { names, exact }
    }
    /// Resolves a requested name (see [`resolve`]).
    pub fn resolve(&self, requested: &str) -> Resolution {
        match self.exact.get(requested) {
            Some(&i) => Resolution::Found(self.names[i].clone()),
            None => resolve(requested, &self.names),
        }
    }
}

/// Resolves `requested` among `tools`. Exact `backend:action` wins; otherwise every split
/// at a `:`, `.`, `_` or `-` is tried (backend names may themselves contain `-` or `_`),
/// and finally a bare action name that only one backend has.
pub fn resolve<'a>(
    requested: &str,
    tools: impl IntoIterator<Item = &'a ToolName> + Clone,
) -> Resolution {
    let requested = requested.trim();
    if requested.is_empty() {
        return Resolution::Unknown;
    }
    let mut matches: Vec<&ToolName> = Vec::new();
    for tool in tools.clone() {
        if tool.is_canonical(requested) {
            return Resolution::Found(tool.clone());
        }
    }
    for (i, c) in requested.char_indices() {
        if matches!(c, ':' | '.' | '_' | '-') {
            let (backend, action) = (&requested[..i], &requested[i + 1..]);
            for tool in tools.clone() {
                if tool.backend == backend && tool.action == action && !matches.contains(&tool) {
                    matches.push(tool);
                }
            }
        }
    }
    if matches.is_empty() {
        matches = tools
            .clone()
            .into_iter()
            .filter(|t| t.action == requested)
            .collect();
    }
    if matches.is_empty() {
        // An MCP-style name may have had other characters replaced.
        matches = tools
            .into_iter()
            .filter(|t| t.mcp_name() == requested)
            .collect();
    }
    match matches.len() {
        0 => Resolution::Unknown,
        1 => Resolution::Found(matches[0].clone()),
        _ => {
            let mut names: Vec<String> = matches.iter().map(|t| t.canonical()).collect();
            names.sort();
            names.dedup();
            Resolution::Ambiguous(names)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(b: &str, a: &str) -> ToolName {
        ToolName {
            backend: b.into(),
            action: a.into(),
        }
    }

    #[test]
    fn aliases_resolve_to_the_same_tool() {
        let tools = [t("echo", "say"), t("text-index", "search")];
        for name in ["echo:say", "echo.say", "echo_say", "echo-say", "say"] {
            assert_eq!(
                resolve(name, &tools),
                Resolution::Found(t("echo", "say")),
                "{name}"
            );
        }
        for name in [
            "text-index:search",
            "text-index.search",
            "text-index_search",
            "text-index-search",
        ] {
            assert_eq!(
                resolve(name, &tools),
                Resolution::Found(t("text-index", "search")),
                "{name}"
            );
        }
    }

    #[test]
    fn short_names_shared_by_two_backends_are_ambiguous() {
        let tools = [t("a", "ping"), t("b", "ping")];
        assert_eq!(
            resolve("ping", &tools),
            Resolution::Ambiguous(vec!["a:ping".into(), "b:ping".into()])
        );
        assert_eq!(resolve("b.ping", &tools), Resolution::Found(t("b", "ping")));
        assert_eq!(resolve("c:ping", &tools), Resolution::Unknown);
        assert_eq!(resolve("", &tools), Resolution::Unknown);
    }

    #[test]
    fn canonical_names_are_recognised_without_building_them() {
        let tool = t("echo", "say");
        assert!(tool.is_canonical("echo:say"));
        for other in [
            "echo:sa",
            "echo:sayy",
            "echo_say",
            "echosay",
            "ech:say",
            ":say",
            "echo:",
        ] {
            assert!(!tool.is_canonical(other), "{other}");
        }
        // A backend whose name holds a `:`-free prefix of another's must not match it.
        assert!(!t("echo", "x:say").is_canonical("echo:say"));
        assert!(t("echo", "x:say").is_canonical("echo:x:say"));
    }

    #[test]
    fn mcp_names_are_restricted() {
        assert_eq!(t("text-index", "search").mcp_name(), "text-index_search");
        assert_eq!(t("a.b", "c d").mcp_name(), "a_b_c_d");
        assert!(t(&"x".repeat(80), "y").mcp_name().len() <= 64);
    }
}
