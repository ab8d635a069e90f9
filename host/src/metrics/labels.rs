//! The label sets of the host's metric families (`metrics.rs`).

use prometheus_client::encoding::EncodeLabelSet;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct BackendLabels {
    pub(super) backend: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ToolCallLabels {
    pub(super) backend: String,
    pub(super) tool: String,
    pub(super) code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct StateLabels {
    pub(super) backend: String,
    pub(super) state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ContractLabels {
    pub(super) contract: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ImportLabels {
    pub(super) backend: String,
    pub(super) import: String,
    pub(super) outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct CompileLabels {
    pub(super) backend: String,
    pub(super) cache: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct EventLabels {
    pub(super) backend: String,
    pub(super) event: String,
}
