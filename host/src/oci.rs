//! Backends from OCI registries (ARCHITECTURE.md, "Backends from OCI registries"): pull a
//! Wasm component artifact by `oci://` reference, keep its blobs by digest in the data dir,
//! check every blob against its digest, check a cosign-compatible signature when one is
//! required, and push and sign artifacts for `wharf push` / `wharf sign`.
//!
//! A tag is resolved to a manifest digest at every load; when the registry cannot be
//! reached, the digest the tag last resolved to is served from the cache. A reference by
//! digest is served from the cache without asking the registry at all.

mod artifact;
mod cache;
mod client;
mod manifest_get;
mod reference;
pub mod signature;

pub use artifact::{WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE};
pub use cache::sha256_digest;
pub use reference::OciRef;

use crate::config::{OciSettings, OciSource};
use anyhow::{Context, Result};
use artifact::{component_layer, config_blob, parse_manifest};
use cache::BlobCache;
use client::Transport;
use oci_client::client::{Config, ImageLayer};
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use p256::ecdsa::{SigningKey, VerifyingKey};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// Why a pull failed.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum OciError {
    /// The registry could not be reached (or failed) and nothing usable is cached: retried.
    #[error("registry unavailable: {0}")]
    Unavailable(String),
    /// The registry says the reference does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The artifact was refused: a digest mismatch, a wrong layout, a missing or bad
    /// signature, a bad reference.
    #[error("{0}")]
    Refused(String),
}

impl OciError {
    /// Whether trying again later may succeed.
    pub fn is_retryable(&self) -> bool {
        !matches!(self, OciError::Refused(_))
    }
}

/// A pulled component.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The component's bytes (checked against the layer digest).
    pub wasm: Arc<Vec<u8>>,
    /// Where it came from.
    pub source: OciSource,
}

/// Registries, the blob cache and the signature keys.
pub struct Registry {
    keys: Vec<VerifyingKey>,
    cache: BlobCache,
    transport: Transport,
}

fn cache_error(e: anyhow::Error) -> OciError {
    OciError::Unavailable(format!("the OCI cache: {e:#}"))
}

impl Registry {
    /// A registry client with its cache at `cache_dir`; refuses unreadable keys.
    pub fn new(settings: &OciSettings, cache_dir: &Path) -> Result<Self> {
        let keys = settings
            .key_pems()?
            .iter()
            .enumerate()
            .map(|(i, pem)| {
                signature::public_key_from_pem(pem)
                    .with_context(|| format!("oci.signature_keys[{i}]"))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            keys,
            cache: BlobCache::open(cache_dir)?,
            transport: Transport::new(settings.clone()),
        })
    }

    /// The manifest `reference` names: by digest from the cache first; by tag from the
    /// registry, else (unreachable) the digest the tag last resolved to.
    async fn manifest(&self, reference: &OciRef) -> Result<(String, Vec<u8>, bool), OciError> {
        if let Some(digest) = reference.digest() {
            if let Some(bytes) = self.cache.read(digest) {
                return Ok((digest.to_string(), bytes, true));
            }
            let bytes = self.transport.manifest(reference).await?;
            let actual = sha256_digest(&bytes);
            if actual != digest {
                return Err(OciError::Refused(format!(
                    "digest mismatch: {reference} sent a manifest whose digest is {actual}"
                )));
            }
            self.cache.write(&bytes).map_err(cache_error)?;
            return Ok((actual, bytes, false));
        }
        let key = reference.to_string();
        match self.transport.manifest(reference).await {
            Ok(bytes) => {
                let digest = self.cache.write(&bytes).map_err(cache_error)?;
                self.cache.set_tag(&key, &digest).map_err(cache_error)?;
                Ok((digest, bytes, false))
            }
            Err(OciError::Unavailable(why)) => {
                let cached = self
                    .cache
                    .tag(&key)
                    .and_then(|d| self.cache.read(&d).map(|bytes| (d, bytes)));
                match cached {
                    Some((digest, bytes)) => {
                        tracing::warn!(%reference, %digest, "registry unreachable: serving the digest the tag last resolved to ({why})");
                        Ok((digest, bytes, true))
                    }
                    None => Err(OciError::Unavailable(format!(
                        "{why}; nothing is cached for it"
                    ))),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// The blob `descriptor` names, from the cache or the registry, checked against its
    /// digest and size.
    async fn blob(
        &self,
        reference: &OciRef,
        descriptor: &OciDescriptor,
        limit: i64,
    ) -> Result<(Vec<u8>, bool), OciError> {
        if let Some(bytes) = self.cache.read(&descriptor.digest) {
            return Ok((bytes, true));
        }
        let bytes = self.transport.blob(reference, descriptor, limit).await?;
        let actual = sha256_digest(&bytes);
        if actual != descriptor.digest {
            return Err(OciError::Refused(format!(
                "digest mismatch: the blob {} of {reference} arrived with digest {actual}; refused",
                descriptor.digest
            )));
        }
        if bytes.len() as i64 != descriptor.size {
            return Err(OciError::Refused(format!(
                "size mismatch: the blob {} of {reference} is {} bytes, its manifest says {}",
                descriptor.digest,
                bytes.len(),
                descriptor.size
            )));
        }
        self.cache.write(&bytes).map_err(cache_error)?;
        Ok((bytes, false))
    }

    /// Pulls (or reads from the cache) the component `reference` names; with
    /// `require_signature`, refuses it unless a signature by a configured key holds.
    pub async fn fetch(
        &self,
        reference: &str,
        require_signature: bool,
    ) -> Result<Fetched, OciError> {
        let parsed = OciRef::parse(reference)?;
        let (digest, manifest_bytes, manifest_cached) = self.manifest(&parsed).await?;
        let what = parsed.to_string();
        let manifest = parse_manifest(&manifest_bytes, &what)?;
        let layer = component_layer(&manifest, &what)?;
        let (wasm, layer_cached) = self
            .blob(&parsed, layer, artifact::MAX_COMPONENT_BYTES)
            .await?;
        if require_signature {
            self.check_signature(&parsed, &digest).await?;
        }
        Ok(Fetched {
            wasm: Arc::new(wasm),
            source: OciSource {
                reference: reference.to_string(),
                resolved: parsed.at_digest(&digest).to_string(),
                digest,
                signature_verified: require_signature,
                from_cache: manifest_cached && layer_cached,
            },
        })
    }

    /// Checks the cosign signature of `manifest_digest`, naming why it does not hold:
    /// unsigned (no signature tag), or wrongly signed.
    async fn check_signature(
        &self,
        reference: &OciRef,
        manifest_digest: &str,
    ) -> Result<(), OciError> {
        if self.keys.is_empty() {
            return Err(OciError::Refused(
                "a signature is required but no key is configured ([oci] signature_keys)"
                    .to_string(),
            ));
        }
        let signature_ref = reference.at_tag(&signature::signature_tag(manifest_digest));
        let (_, bytes, _) = match self.manifest(&signature_ref).await {
            Ok(found) => found,
            Err(OciError::NotFound(_)) => {
                return Err(OciError::Refused(format!(
                    "unsigned: {reference}@{manifest_digest} has no signature ({signature_ref} does not exist) and a signature is required"
                )));
            }
            Err(OciError::Unavailable(why)) => {
                return Err(OciError::Unavailable(format!(
                    "the signature could not be checked: {why}"
                )));
            }
            Err(e) => return Err(e),
        };
        let manifest = parse_manifest(&bytes, &signature_ref.to_string())?;
        let mut why = "the signature manifest has no simple-signing layer".to_string();
        for layer in manifest
            .layers
            .iter()
            .filter(|l| l.media_type == signature::SIMPLE_SIGNING_MEDIA_TYPE)
        {
            let Some(sig) = layer
                .annotations
                .as_ref()
                .and_then(|a| a.get(signature::SIGNATURE_ANNOTATION))
            else {
                why = "a signature layer has no signature annotation".to_string();
                continue;
            };
            let (payload, _) = self
                .blob(&signature_ref, layer, signature::MAX_PAYLOAD_BYTES)
                .await?;
            match signature::verify(&self.keys, &payload, sig, manifest_digest) {
                Ok(()) => return Ok(()),
                Err(e) => why = e,
            }
        }
        Err(OciError::Refused(format!(
            "wrongly signed: {reference}@{manifest_digest}: {why}"
        )))
    }

    /// Pushes `wasm` to `reference` (a tag) as a Wasm component artifact; returns the
    /// manifest digest.
    pub async fn push(&self, wasm: Vec<u8>, reference: &str) -> Result<String, OciError> {
        let parsed = OciRef::parse(reference)?;
        if parsed.digest().is_some() {
            return Err(OciError::Refused(
                "push to a tag (oci://registry/repository:tag), not a digest".to_string(),
            ));
        }
        let layer = ImageLayer::new(wasm, WASM_LAYER_MEDIA_TYPE.to_string(), None);
        let config = Config::new(
            config_blob(&layer.sha256_digest()),
            WASM_CONFIG_MEDIA_TYPE.to_string(),
            None,
        );
        let layers = [layer];
        let manifest = OciImageManifest::build(&layers, &config, None);
        self.transport
            .push(&parsed, &layers, config, manifest)
            .await?;
        let bytes = self.transport.manifest(&parsed).await?;
        Ok(sha256_digest(&bytes))
    }

    /// Signs the manifest `reference` resolves to with `key` and pushes the signature to
    /// its `sha256-HEX.sig` tag. Returns (manifest digest, signature reference).
    pub async fn sign(
        &self,
        reference: &str,
        key: &SigningKey,
    ) -> Result<(String, String), OciError> {
        let parsed = OciRef::parse(reference)?;
        let bytes = self.transport.manifest(&parsed).await?;
        let digest = sha256_digest(&bytes);
        let payload = signature::payload(&parsed.repository_path(), &digest);
        let annotations = BTreeMap::from([(
            signature::SIGNATURE_ANNOTATION.to_string(),
            signature::sign(key, &payload),
        )]);
        let layer = ImageLayer::new(
            payload,
            signature::SIMPLE_SIGNING_MEDIA_TYPE.to_string(),
            Some(annotations),
        );
        // What cosign writes as the signature image's config.
        let config_json = serde_json::json!({
            "architecture": "", "os": "", "config": {},
            "rootfs": { "type": "layers", "diff_ids": [layer.sha256_digest()] },
        });
        let config = Config::oci_v1(config_json.to_string().into_bytes(), None);
        let layers = [layer];
        let manifest = OciImageManifest::build(&layers, &config, None);
        let signature_ref = parsed.at_tag(&signature::signature_tag(&digest));
        self.transport
            .push(&signature_ref, &layers, config, manifest)
            .await?;
        Ok((digest, signature_ref.to_string()))
    }
}
