//! Which of a backend's tools the host serves: the operator's include and exclude patterns
//! (`[backends.NAME.tools] include` / `exclude`), and the checks a tool list read
//! from a running guest (contract 0.3.0's `tool-listing`) passes before the host serves
//! it. A listed tool comes from a guest, and through the MCP bridge from any MCP server, so
//! it is hostile input: a bad name, an oversized or invalid schema or a duplicate drops
//! that one tool (the rest are served) and the list itself is bounded. Pure logic.

use crate::tool::ToolDescription;

/// The most tools one backend's listing may serve; the rest are dropped.
pub const MAX_LISTED_TOOLS: usize = 256;
/// The longest action name a listing may carry (MCP clients take at most 64 characters
/// for the whole `backend_action` name).
pub const MAX_ACTION_CHARS: usize = 64;
/// The largest input or output schema of a listed tool, as JSON text.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// A listed tool's description is cut to this many characters.
pub const MAX_DESCRIPTION_CHARS: usize = 4096;
/// The most include or exclude patterns, and the longest one.
const MAX_PATTERNS: usize = 64;
const MAX_PATTERN_CHARS: usize = 128;

/// The operator's patterns: a tool is served when it matches an include pattern (or there
/// are none) and no exclude pattern. `*` matches any run of characters, `?` one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFilter {
    /// Patterns of the actions served; empty serves every action.
    pub include: Vec<String>,
    /// Patterns of the actions never served.
    pub exclude: Vec<String>,
}

impl ToolFilter {
    /// Refuses more than 64 patterns or a pattern longer than 128 characters.
    pub fn check(&self) -> Result<(), String> {
        for (what, list) in [("include", &self.include), ("exclude", &self.exclude)] {
            if list.len() > MAX_PATTERNS {
                return Err(format!(
                    "tools.{what} has {} patterns; at most {MAX_PATTERNS}",
                    list.len()
                ));
            }
            if let Some(p) = list
                .iter()
                .find(|p| p.chars().count() > MAX_PATTERN_CHARS || p.is_empty())
            {
                return Err(format!(
                    "tools.{what} pattern {p:?} must be 1 to {MAX_PATTERN_CHARS} characters"
                ));
            }
        }
        Ok(())
    }

    /// Whether the action is served.
    pub fn serves(&self, action: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|p| wildcard_match(p, action)))
            && !self.exclude.iter().any(|p| wildcard_match(p, action))
    }
}

/// `*` and `?` wildcards, iterative with one backtrack point: linear in practice and never
/// worse than pattern × text (both bounded).
fn wildcard_match(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// Whether `action` is a name the host serves from a listing: 1–64 of `A-Z a-z 0-9 _ - .`.
pub fn valid_action(action: &str) -> bool {
    !action.is_empty()
        && action.len() <= MAX_ACTION_CHARS
        && action
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// A listing after the checks: the tools served, and why each other one was dropped.
#[derive(Debug, Default)]
pub struct CheckedListing {
    /// The tools served, in the listing's order.
    pub tools: Vec<ToolDescription>,
    /// One line per dropped tool (names shown escaped and cut, as they are hostile).
    pub dropped: Vec<String>,
}

/// A hostile name as it may appear in a log line: escaped and cut to 80 characters.
fn shown(name: &str) -> String {
    let escaped: String = name.escape_debug().collect();
    escaped.chars().take(80).collect()
}

/// Checks a listed tool set: names, schema sizes and shapes, duplicates, the count; cuts
/// descriptions; then applies `filter`. Validators are compiled by the caller, which drops
/// a tool whose schema does not compile the same way.
pub fn check_listing(listed: Vec<ToolDescription>, filter: &ToolFilter) -> CheckedListing {
    let mut out = CheckedListing::default();
    let mut seen = std::collections::HashSet::new();
    for mut tool in listed {
        let name = shown(&tool.action);
        let schema_bytes =
            |v: &serde_json::Value| serde_json::to_string(v).map_or(usize::MAX, |s| s.len());
        if !valid_action(&tool.action) {
            out.dropped.push(format!(
                "`{name}`: a tool name is 1 to {MAX_ACTION_CHARS} of A-Z a-z 0-9 _ - ."
            ));
        } else if !seen.insert(tool.action.clone()) {
            out.dropped.push(format!("`{name}`: listed twice"));
        } else if !tool.input_schema.is_object() {
            out.dropped
                .push(format!("`{name}`: its input schema is not a JSON object"));
        } else if schema_bytes(&tool.input_schema) > MAX_SCHEMA_BYTES {
            out.dropped.push(format!(
                "`{name}`: its input schema is larger than {MAX_SCHEMA_BYTES} bytes"
            ));
        } else if !filter.serves(&tool.action) {
            // The operator's choice, not a fault: not reported.
        } else if out.tools.len() >= MAX_LISTED_TOOLS {
            out.dropped.push(format!(
                "`{name}`: past the {MAX_LISTED_TOOLS} tools a backend may list"
            ));
        } else {
            if tool
                .output_schema
                .as_ref()
                .is_some_and(|s| !s.is_object() || schema_bytes(s) > MAX_SCHEMA_BYTES)
            {
                out.dropped.push(format!("`{name}`: its output schema was dropped (not an object, or larger than {MAX_SCHEMA_BYTES} bytes)"));
                tool.output_schema = None;
            }
            if tool.description.chars().count() > MAX_DESCRIPTION_CHARS {
                tool.description = tool
                    .description
                    .chars()
                    .take(MAX_DESCRIPTION_CHARS)
                    .collect();
            }
            out.tools.push(tool);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{SessionNeed, ToolAnnotations};
    use serde_json::json;

    fn tool(action: &str, schema: serde_json::Value) -> ToolDescription {
        ToolDescription {
            action: action.into(),
            description: "d".into(),
            input_schema: schema,
            output_schema: None,
            session: SessionNeed::None,
            annotations: ToolAnnotations::default(),
        }
    }

    #[test]
    fn wildcards_match_like_shell_globs() {
        assert!(wildcard_match("*", ""));
        assert!(wildcard_match("git_*", "git_status"));
        assert!(!wildcard_match("git_*", "gh_status"));
        assert!(wildcard_match("*_admin", "drop_admin"));
        assert!(wildcard_match("a?c", "abc"));
        assert!(!wildcard_match("a?c", "ac"));
        assert!(wildcard_match("*a*b*", "xxaxxbxx"));
        assert!(!wildcard_match("*a*b", "xxaxxbxxc"));
        // The worst case stays quick: a long text against many stars.
        let text = "a".repeat(4096);
        assert!(!wildcard_match(
            &"*a".repeat(64).to_string().replace("a", "ab"),
            &text
        ));
    }

    #[test]
    fn include_then_exclude() {
        let f = ToolFilter {
            include: vec!["read_*".into(), "list".into()],
            exclude: vec!["*_secret".into()],
        };
        assert!(f.serves("read_file"));
        assert!(f.serves("list"));
        assert!(!f.serves("write_file"));
        assert!(!f.serves("read_secret"));
        assert!(ToolFilter::default().serves("anything"));
        let bad = ToolFilter {
            include: vec![String::new()],
            exclude: vec![],
        };
        assert!(bad.check().is_err());
        let many = ToolFilter {
            include: vec!["a".into(); 65],
            exclude: vec![],
        };
        assert!(many.check().is_err());
    }

    #[test]
    fn hostile_tools_are_dropped_one_by_one() {
        let obj = json!({"type": "object"});
        let huge = json!({"type": "object", "description": "x".repeat(MAX_SCHEMA_BYTES)});
        let listed = vec![
            tool("ok", obj.clone()),
            tool("../../etc", obj.clone()),
            tool("a b", obj.clone()),
            tool("<script>", obj.clone()),
            tool(&"n".repeat(65), obj.clone()),
            tool("nul\0", obj.clone()),
            tool("ok", obj.clone()),
            tool("big", huge),
            tool("notobject", json!(true)),
        ];
        let checked = check_listing(listed, &ToolFilter::default());
        let names: Vec<_> = checked.tools.iter().map(|t| t.action.as_str()).collect();
        assert_eq!(names, ["ok"]);
        assert_eq!(checked.dropped.len(), 8, "{:?}", checked.dropped);
        assert!(
            checked.dropped.iter().any(|d| d.contains("nul\\0")),
            "{:?}",
            checked.dropped
        );
    }

    #[test]
    fn a_listing_is_bounded_and_descriptions_cut() {
        let mut listed: Vec<_> = (0..300)
            .map(|i| tool(&format!("t{i}"), json!({"type": "object"})))
            .collect();
        listed[0].description = "é".repeat(MAX_DESCRIPTION_CHARS + 10);
        let checked = check_listing(listed, &ToolFilter::default());
        assert_eq!(checked.tools.len(), MAX_LISTED_TOOLS);
        assert_eq!(checked.dropped.len(), 300 - MAX_LISTED_TOOLS);
        assert_eq!(
            checked.tools[0].description.chars().count(),
            MAX_DESCRIPTION_CHARS
        );
    }

    #[test]
    fn the_operator_filter_applies_before_the_bound() {
        let listed: Vec<_> = (0..300)
            .map(|i| tool(&format!("t{i}"), json!({"type": "object"})))
            .collect();
        let f = ToolFilter {
            include: vec!["t1*".into()],
            exclude: vec!["t10".into()],
        };
        let checked = check_listing(listed, &f);
        assert!(checked.dropped.is_empty());
        assert!(
            checked
                .tools
                .iter()
                .all(|t| t.action.starts_with("t1") && t.action != "t10")
        );
        assert_eq!(checked.tools.len(), 1 + 10 - 1 + 100);
    }
}
