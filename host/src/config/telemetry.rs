//! `[telemetry]`: OpenTelemetry traces exported over OTLP/HTTP (ARCHITECTURE.md, "Traces").
//! Off unless `otlp_endpoint` is set.

use anyhow::{Result, bail};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// `[telemetry]`.
#[derive(Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// The collector's OTLP/HTTP base URL (`http://collector:4318`); spans go to its
    /// `/v1/traces`. A URL whose path already ends in `/v1/traces` is used as written.
    pub otlp_endpoint: Option<String>,
    /// `service.name` on every span.
    pub service_name: String,
    /// How often a batch of spans is sent, in ms.
    pub export_interval_ms: u64,
    /// Spans held for export at most; past it, new spans are dropped, never waited for.
    pub max_queue_spans: usize,
    /// How long one export may take, in ms.
    pub export_timeout_ms: u64,
    /// Headers sent with every export (a collector's API key: use `${VAR}`).
    pub headers: BTreeMap<String, String>,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            otlp_endpoint: None,
            service_name: "wharf".to_string(),
            export_interval_ms: 1_000,
            max_queue_spans: 4_096,
            export_timeout_ms: 5_000,
            headers: BTreeMap::new(),
        }
    }
}

impl std::fmt::Debug for TelemetryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelemetryConfig")
            .field("otlp_endpoint", &self.otlp_endpoint)
            .field("service_name", &self.service_name)
            .field("export_interval_ms", &self.export_interval_ms)
            .field("max_queue_spans", &self.max_queue_spans)
            .field("export_timeout_ms", &self.export_timeout_ms)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .finish()
    }
}

const INTERVAL_MS: std::ops::RangeInclusive<u64> = 10..=60_000;
const QUEUE_SPANS: std::ops::RangeInclusive<usize> = 1..=1_000_000;
const TIMEOUT_MS: std::ops::RangeInclusive<u64> = 100..=60_000;

impl TelemetryConfig {
    /// Checks every field; the error names the key.
    pub fn validate(&self) -> Result<()> {
        if let Some(endpoint) = &self.otlp_endpoint {
            traces_url(endpoint)?;
        }
        let name = self.service_name.trim();
        if name.is_empty() || name.len() > 255 || name.chars().any(char::is_control) {
            bail!("telemetry.service_name: 1 to 255 printable characters");
        }
        if !INTERVAL_MS.contains(&self.export_interval_ms) {
            bail!(
                "telemetry.export_interval_ms = {}: must be between {} and {}",
                self.export_interval_ms,
                INTERVAL_MS.start(),
                INTERVAL_MS.end()
            );
        }
        if !QUEUE_SPANS.contains(&self.max_queue_spans) {
            bail!(
                "telemetry.max_queue_spans = {}: must be between {} and {}",
                self.max_queue_spans,
                QUEUE_SPANS.start(),
                QUEUE_SPANS.end()
            );
        }
        if !TIMEOUT_MS.contains(&self.export_timeout_ms) {
            bail!(
                "telemetry.export_timeout_ms = {}: must be between {} and {}",
                self.export_timeout_ms,
                TIMEOUT_MS.start(),
                TIMEOUT_MS.end()
            );
        }
        for (name, value) in &self.headers {
            if http::HeaderName::from_bytes(name.as_bytes()).is_err()
                || http::HeaderValue::from_str(value).is_err()
            {
                bail!("telemetry.headers: `{name}` is not a valid HTTP header name and value");
            }
        }
        Ok(())
    }

    /// Where spans are posted, when export is on.
    pub fn traces_url(&self) -> Result<Option<String>> {
        self.otlp_endpoint.as_deref().map(traces_url).transpose()
    }

    /// The batch interval.
    pub fn export_interval(&self) -> Duration {
        Duration::from_millis(self.export_interval_ms)
    }

    /// The export timeout.
    pub fn export_timeout(&self) -> Duration {
        Duration::from_millis(self.export_timeout_ms)
    }
}

/// The OTLP/HTTP traces URL of a base endpoint (the spec's `OTEL_EXPORTER_OTLP_ENDPOINT` rule).
fn traces_url(endpoint: &str) -> Result<String> {
    let url = url::Url::parse(endpoint)
        .map_err(|e| anyhow::anyhow!("telemetry.otlp_endpoint `{endpoint}`: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        bail!("telemetry.otlp_endpoint `{endpoint}`: must be an http:// or https:// URL");
    }
    if url.query().is_some() || url.fragment().is_some() {
        bail!("telemetry.otlp_endpoint `{endpoint}`: no query or fragment");
    }
    let path = url.path().trim_end_matches('/');
    if path.ends_with("/v1/traces") {
        return Ok(url.to_string());
    }
    let mut with_path = url.clone();
    with_path.set_path(&format!("{path}/v1/traces"));
    Ok(with_path.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_endpoint(endpoint: &str) -> TelemetryConfig {
        TelemetryConfig {
            otlp_endpoint: Some(endpoint.to_string()),
            ..TelemetryConfig::default()
        }
    }

    #[test]
    fn a_base_endpoint_gains_the_traces_path_once() {
        for (given, want) in [
            ("http://c:4318", "http://c:4318/v1/traces"),
            ("http://c:4318/", "http://c:4318/v1/traces"),
            ("https://c/otlp", "https://c/otlp/v1/traces"),
            ("http://c:4318/v1/traces", "http://c:4318/v1/traces"),
        ] {
            assert_eq!(
                with_endpoint(given).traces_url().ok().flatten().as_deref(),
                Some(want)
            );
        }
        assert_eq!(TelemetryConfig::default().traces_url().ok(), Some(None));
    }

    #[test]
    fn hostile_settings_fail_naming_the_key() {
        for bad in ["ftp://c", "not a url", "http://c/?x=1", "unix:///tmp/s"] {
            let err = with_endpoint(bad).validate().err().map(|e| e.to_string());
            assert!(
                err.as_deref()
                    .is_some_and(|e| e.contains("telemetry.otlp_endpoint")),
                "{bad}: {err:?}"
            );
        }
        let cases: [(TelemetryConfig, &str); 5] = [
            (
                TelemetryConfig {
                    export_interval_ms: 0,
                    ..Default::default()
                },
                "export_interval_ms",
            ),
            (
                TelemetryConfig {
                    max_queue_spans: 0,
                    ..Default::default()
                },
                "max_queue_spans",
            ),
            (
                TelemetryConfig {
                    export_timeout_ms: u64::MAX,
                    ..Default::default()
                },
                "export_timeout_ms",
            ),
            (
                TelemetryConfig {
                    service_name: " ".into(),
                    ..Default::default()
                },
                "service_name",
            ),
            (
                TelemetryConfig {
                    headers: [("bad name".to_string(), "v".to_string())].into(),
                    ..Default::default()
                },
                "headers",
            ),
        ];
        for (config, key) in cases {
            let err = config.validate().err().map(|e| e.to_string());
            assert!(err.as_deref().is_some_and(|e| e.contains(key)), "{err:?}");
        }
    }

    #[test]
    fn headers_never_show_in_debug() {
        let config = TelemetryConfig {
            headers: [("x-api-key".to_string(), "s3cret".to_string())].into(),
            ..TelemetryConfig::default()
        };
        assert!(!format!("{config:?}").contains("s3cret"));
    }
}
