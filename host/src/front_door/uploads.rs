//! Admin uploads that last: an uploaded component is kept content-addressed in the data
//! dir (`uploads/blobs/HEX.wasm`) with a record per name (`uploads/NAME.json`), and loaded
//! again at the next start, after the configured backends (an upload replaced the
//! configured version, so it replaces it again). Unloading through the admin route removes
//! the record (and the blob when no other name uses it).

use super::{Deployment, Wharf};
use crate::config::BackendConfig;
use crate::error_code::WharfError;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// What is kept of one upload.
#[derive(Debug, Serialize, Deserialize)]
struct UploadRecord {
    /// sha256 (hex) of the component.
    sha256: String,
}

/// A name that is safe as a file name (what a backend name may be anyway).
fn safe_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

impl Wharf {
    fn uploads_dir(&self) -> PathBuf {
        self.server.data_dir.join("uploads")
    }

    fn upload_blob(&self, sha256: &str) -> PathBuf {
        self.uploads_dir()
            .join("blobs")
            .join(format!("{sha256}.wasm"))
    }

    fn keep_upload(&self, name: &str, sha256: &str, wasm: &[u8]) -> Result<()> {
        anyhow::ensure!(safe_name(name), "backend name `{name}` is not a file name");
        crate::private_files::create_private_dir(&self.uploads_dir().join("blobs"))?;
        let blob = self.upload_blob(sha256);
        if !blob.exists() {
            crate::private_files::write_private(&blob, wasm)?;
        }
        let record = serde_json::to_vec(&UploadRecord {
            sha256: sha256.to_string(),
        })?;
        crate::private_files::write_private(
            &self.uploads_dir().join(format!("{name}.json")),
            &record,
        )
    }

    fn upload_records(&self) -> BTreeMap<String, UploadRecord> {
        let Ok(entries) = std::fs::read_dir(self.uploads_dir()) else {
            return BTreeMap::new();
        };
        entries
            .flatten()
            .filter_map(|e| {
                let path = e.path();
                (path.extension()? == "json").then_some(())?;
                let name = path.file_stem()?.to_str()?.to_string();
                let record = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
                safe_name(&name).then_some((name, record))
            })
            .collect()
    }

    /// Loads or replaces backend `name` from an admin's upload (REST or the console),
    /// keeping the backend's current settings (or none for a new name). A pin in them was
    /// for the file the backend was loaded from, so the upload is checked against
    /// `sha256` only.
    pub async fn upload_backend(
        &self,
        name: &str,
        wasm: Vec<u8>,
        sha256: Option<String>,
    ) -> Result<Deployment, WharfError> {
        let mut config = self
            .backend_config(name)
            .unwrap_or_else(|| BackendConfig::at(format!("upload:{name}")));
        config.sha256 = sha256;
        config.oci_source = None;
        self.deploy_upload(name, Arc::new(wasm), config).await
    }

    /// Deploys an admin upload ([`Wharf::deploy`]) and keeps it for the next start once
    /// it serves.
    async fn deploy_upload(
        &self,
        name: &str,
        wasm: Arc<Vec<u8>>,
        config: BackendConfig,
    ) -> Result<Deployment, WharfError> {
        let deployed = self.deploy(name, wasm.clone(), config).await?;
        let sha256 = hex::encode(Sha256::digest(wasm.as_slice()));
        if let Deployment::Active(_) = &deployed {
            self.keep_upload(name, &sha256, &wasm)
                .map_err(|e| WharfError::internal(format!("keeping the upload: {e:#}")))?;
        } else {
            // Kept now, recorded when approved.
            crate::private_files::create_private_dir(&self.uploads_dir().join("blobs"))
                .and_then(|()| {
                    crate::private_files::write_private(&self.upload_blob(&sha256), &wasm)
                })
                .map_err(|e| WharfError::internal(format!("keeping the upload: {e:#}")))?;
        }
        Ok(deployed)
    }

    /// After an approval: if the approved version was uploaded, keep it for the next start.
    pub(super) fn keep_approved_upload(&self, name: &str, sha256: &str) {
        let blob = self.upload_blob(sha256);
        if let Ok(wasm) = std::fs::read(&blob)
            && let Err(e) = self.keep_upload(name, sha256, &wasm)
        {
            tracing::warn!(backend = name, "keeping the approved upload: {e:#}");
        }
    }

    /// Forgets the upload of `name` (its record, and its blob when no other name uses it).
    pub(super) fn forget_upload(&self, name: &str) {
        if !safe_name(name) {
            return;
        }
        let record_path = self.uploads_dir().join(format!("{name}.json"));
        let Some(record) = std::fs::read(&record_path)
            .ok()
            .and_then(|b| serde_json::from_slice::<UploadRecord>(&b).ok())
        else {
            return;
        };
        let _ = std::fs::remove_file(&record_path);
        let still_used = self
            .upload_records()
            .values()
            .any(|r| r.sha256 == record.sha256);
        if !still_used {
            let _ = std::fs::remove_file(self.upload_blob(&record.sha256));
        }
    }

    /// Loads the kept uploads (at start), with the settings `configured` has for the name.
    pub(super) async fn restore_uploads(&self, configured: &BTreeMap<String, BackendConfig>) {
        for (name, record) in self.upload_records() {
            let loaded = async {
                let wasm = std::fs::read(self.upload_blob(&record.sha256))
                    .with_context(|| format!("reading the kept upload of `{name}`"))?;
                let mut config = configured
                    .get(&name)
                    .cloned()
                    .unwrap_or_else(|| BackendConfig::at(format!("upload:{name}")));
                // Checked against what was uploaded: a changed blob is refused.
                config.sha256 = Some(record.sha256.clone());
                config.oci_source = None;
                self.load_backend_bytes(&name, Arc::new(wasm), config).await
            }
            .await;
            match loaded {
                Ok(_) => tracing::info!(backend = %name, "kept upload loaded"),
                Err(e) => tracing::warn!(backend = %name, "kept upload not loaded: {e:#}"),
            }
        }
    }
}
