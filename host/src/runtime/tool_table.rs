//! A backend's tools as the host serves them: their descriptions and argument validators,
//! after the operator's include and exclude patterns. A backend that lists its tools at run
//! time (contract 0.3.0's `tool-listing`) gets a [`ToolPoll`]: the host asks it again on an
//! interval and swaps the whole table when the answer changed, so a call sees one table
//! from its tool lookup to its validation.

use crate::schema_validation::ArgsValidator;
use crate::tool::ToolDescription;
use crate::tool_filter::{CheckedListing, ToolFilter, check_listing};
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The tools served, each with its compiled argument validator.
#[derive(Default)]
pub struct ToolTable {
    tools: Vec<ToolDescription>,
    validators: BTreeMap<String, ArgsValidator>,
}

impl ToolTable {
    /// The fixed tools of `describe` the filter serves; refuses a tool with an invalid
    /// input schema or a name used twice (the backend is then not loaded).
    pub fn described(tools: &[ToolDescription], filter: &ToolFilter) -> Result<Self> {
        let mut table = Self::default();
        for tool in tools.iter().filter(|t| filter.serves(&t.action)) {
            let validator = ArgsValidator::new(&tool.input_schema)
                .with_context(|| format!("tool `{}` has an invalid input schema", tool.action))?;
            if table
                .validators
                .insert(tool.action.clone(), validator)
                .is_some()
            {
                anyhow::bail!(
                    "the backend declares tool `{}` twice; tool names must be unique",
                    tool.action
                );
            }
            table.tools.push(tool.clone());
        }
        Ok(table)
    }

    /// A listing the guest gave at run time, after `check_listing`: a tool whose schema
    /// does not compile is dropped like the others, with its reason. Compiling is CPU work
    /// on hostile schemas, so callers run this on a blocking thread.
    pub fn listed(listed: Vec<ToolDescription>, filter: &ToolFilter) -> (Self, Vec<String>) {
        let CheckedListing { tools, mut dropped } = check_listing(listed, filter);
        let mut table = Self::default();
        for tool in tools {
            match ArgsValidator::new(&tool.input_schema) {
                Ok(validator) => {
                    table.validators.insert(tool.action.clone(), validator);
                    table.tools.push(tool);
                }
                Err(e) => dropped.push(format!(
                    "`{}`: its input schema does not compile: {e}",
                    tool.action
                )),
            }
        }
        (table, dropped)
    }

    /// The tools, in the backend's order.
    pub fn tools(&self) -> &[ToolDescription] {
        &self.tools
    }

    /// The tool named `action`.
    pub fn tool(&self, action: &str) -> Option<&ToolDescription> {
        self.tools.iter().find(|t| t.action == action)
    }

    /// The validator of `action`'s arguments.
    pub fn validator(&self, action: &str) -> Option<&ArgsValidator> {
        self.validators.get(action)
    }

    /// Checks `args` against `action`'s schema (4003 missing field, 4004 otherwise; 4002
    /// for an action `backend` does not serve).
    pub fn validate_args(
        &self,
        backend: &str,
        action: &str,
        args: &serde_json::Value,
    ) -> Result<(), crate::error_code::WharfError> {
        match self.validator(action) {
            Some(v) => v.validate(args),
            None => Err(crate::error_code::WharfError::invalid_request(format!(
                "unknown tool `{backend}:{action}`"
            ))),
        }
    }

    /// Whether `other` serves the same tools, described the same way.
    pub fn same_tools(&self, other: &ToolTable) -> bool {
        self.tools == other.tools
    }
}

/// When a backend that lists its tools is asked again, and whether it is being asked now.
pub struct ToolPoll {
    every: Duration,
    next: Mutex<Instant>,
    busy: AtomicBool,
    /// A digest of the last raw listing, so an unchanged one (hostile or not) is neither
    /// checked nor logged again.
    last_digest: AtomicU64,
}

impl ToolPoll {
    /// Asked every `every`, first after one interval.
    pub fn new(every: Duration) -> Self {
        Self {
            every,
            next: Mutex::new(Instant::now() + every),
            busy: AtomicBool::new(false),
            last_digest: AtomicU64::new(0),
        }
    }

    /// The interval.
    pub fn every(&self) -> Duration {
        self.every
    }

    /// Claims the next listing when it is due and none runs; the claim ends with
    /// [`ToolPoll::finish`].
    pub fn claim(&self, now: Instant) -> bool {
        let Ok(mut next) = self.next.lock() else {
            return false;
        };
        if now < *next || self.busy.swap(true, Ordering::AcqRel) {
            return false;
        }
        *next = now + self.every;
        true
    }

    /// Ends a claimed listing.
    pub fn finish(&self) {
        self.busy.store(false, Ordering::Release);
    }

    /// Records a raw listing's digest; false when it equals the last one.
    pub fn changed(&self, digest: u64) -> bool {
        self.last_digest.swap(digest, Ordering::AcqRel) != digest
    }
}

/// A digest of a raw listing (not a security boundary: it only skips rework).
pub fn listing_digest(listed: &[ToolDescription]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(listed)
        .unwrap_or_default()
        .hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{SessionNeed, ToolAnnotations};
    use serde_json::json;

    fn tool(action: &str, schema: serde_json::Value) -> ToolDescription {
        ToolDescription {
            action: action.into(),
            description: String::new(),
            input_schema: schema,
            output_schema: None,
            session: SessionNeed::None,
            annotations: ToolAnnotations::default(),
        }
    }

    #[test]
    fn described_tools_refuse_bad_schemas_and_listed_ones_drop_them() {
        let bad =
            json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "(?=x)"}}});
        assert!(ToolTable::described(&[tool("a", bad.clone())], &ToolFilter::default()).is_err());
        let (table, dropped) = ToolTable::listed(
            vec![tool("a", bad), tool("b", json!({"type": "object"}))],
            &ToolFilter::default(),
        );
        assert_eq!(table.tools().len(), 1);
        assert!(table.validator("b").is_some() && table.validator("a").is_none());
        assert_eq!(dropped.len(), 1, "{dropped:?}");
    }

    #[test]
    fn a_poll_is_claimed_once_per_interval() {
        let poll = ToolPoll::new(Duration::from_secs(5));
        let now = Instant::now();
        assert!(!poll.claim(now), "not due before one interval");
        let later = now + Duration::from_secs(6);
        assert!(poll.claim(later));
        assert!(
            !poll.claim(later + Duration::from_secs(10)),
            "one at a time"
        );
        poll.finish();
        assert!(poll.claim(later + Duration::from_secs(10)));
        assert!(poll.changed(1) && !poll.changed(1) && poll.changed(2));
    }
}
