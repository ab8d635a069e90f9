//! `[oci]`: registries backends are pulled from (ARCHITECTURE.md, "Backends from OCI
//! registries"): which may be spoken to over plain HTTP, credentials, the public keys that
//! sign components, and whether a signature is required.

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `[oci]` (also accepted as `[server.oci]`).
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct OciSettings {
    /// Registries (`host[:port]`) spoken to over plain HTTP; loopback registries always are.
    pub insecure_registries: Vec<String>,
    /// Refuse every `oci://` backend without a valid signature by one of `signature_keys`.
    pub require_signature: bool,
    /// PEM public keys (ECDSA P-256, as `cosign generate-key-pair` or `wharf keygen` write
    /// them): inline PEM text or a file path.
    pub signature_keys: Vec<String>,
    /// Registry credentials; a registry not listed here uses the Docker `config.json`
    /// (`$DOCKER_CONFIG` or `~/.docker`), else anonymous access.
    pub auth: Vec<RegistryCredentials>,
    /// How often a backend whose registry was unreachable is tried again, in s.
    pub retry_seconds: u64,
}

/// Credentials for one registry.
#[derive(Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RegistryCredentials {
    /// `host[:port]` as written in references.
    pub registry: String,
    /// User name.
    pub username: String,
    /// Password or token (use `${VAR}`).
    pub password: String,
}

impl std::fmt::Debug for RegistryCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryCredentials")
            .field("registry", &self.registry)
            .field("username", &self.username)
            .field("password", &"***")
            .finish()
    }
}

/// The default of `retry_seconds`.
pub const DEFAULT_RETRY_SECONDS: u64 = 30;

impl OciSettings {
    /// The retry period, at least a second.
    pub fn retry_interval(&self) -> std::time::Duration {
        let seconds = match self.retry_seconds {
            0 => DEFAULT_RETRY_SECONDS,
            n => n.min(86_400),
        };
        std::time::Duration::from_secs(seconds)
    }

    /// The PEM text of each key (`signature_keys` entries are PEM or a file path).
    pub fn key_pems(&self) -> Result<Vec<String>> {
        self.signature_keys
            .iter()
            .map(|key| {
                if key.contains("-----BEGIN") {
                    return Ok(key.clone());
                }
                match std::fs::read_to_string(PathBuf::from(key)) {
                    Ok(text) => Ok(text),
                    Err(e) => bail!("oci.signature_keys: reading {key}: {e}"),
                }
            })
            .collect()
    }
}

/// Where an `oci://` backend came from, as `/v1/backends` shows it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OciSource {
    /// The reference as configured (a tag or a digest).
    pub reference: String,
    /// The same reference pinned to the manifest digest it resolved to.
    pub resolved: String,
    /// The manifest digest (`sha256:…`).
    pub digest: String,
    /// Whether a signature was checked and held.
    pub signature_verified: bool,
    /// Whether it was served from the local cache (registry not asked or not reachable).
    pub from_cache: bool,
}

#[cfg(test)]
mod tests {
    use crate::config::WharfConfig;

    #[test]
    fn key_files_are_relative_to_the_config_and_references_are_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wharf.toml");
        std::fs::write(
            &path,
            "[oci]\nsignature_keys = [\"keys/ops.pub\", \"-----BEGIN PUBLIC KEY-----\\nx\"]\n\n[backends.echo]\npath = \"oci://localhost:5000/echo:1\"\nrequire_signature = true\n",
        )
        .unwrap();
        let config = WharfConfig::load(&path).unwrap();
        let keys = &config.server.oci.signature_keys;
        assert_eq!(
            keys[0],
            dir.path().join("keys/ops.pub").display().to_string()
        );
        assert!(keys[1].starts_with("-----BEGIN"));
        let echo = &config.backends["echo"];
        assert_eq!(echo.path, "oci://localhost:5000/echo:1");
        assert!(echo.is_oci() && echo.require_signature);
    }
}
