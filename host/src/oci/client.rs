//! Talking to registries through `oci-client`: one client for HTTPS and one for plain HTTP
//! (loopback registries and the configured insecure ones only), credentials from the
//! config or the Docker `config.json`, and the client's errors sorted into "not there",
//! "not reachable" and "refused". Manifests are read by the host itself
//! ([`super::manifest_get`]), under their cap while they arrive.

use super::OciError;
use super::artifact::{MAX_MANIFEST_BYTES, OCI_MANIFEST_MEDIA_TYPE};
use super::manifest_get::{self, Credentials};
use super::reference::OciRef;
use crate::config::OciSettings;
use futures::StreamExt;
use oci_client::Client;
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use std::sync::OnceLock;
use std::time::Duration;

/// The Docker schema 2 manifest type (same shape as the OCI one; cosign may write it).
const DOCKER_MANIFEST_MEDIA_TYPE: &str = "application/vnd.docker.distribution.manifest.v2+json";

/// Clients and credentials.
pub struct Transport {
    settings: OciSettings,
    manifests: OnceLock<reqwest::Client>,
    https: OnceLock<Client>,
    http: OnceLock<Client>,
}

/// The longest a manifest may take to arrive, all of it.
const MANIFEST_DEADLINE: Duration = Duration::from_secs(30);

/// The longest a component's layer may take to arrive, all of it.
const BLOB_DEADLINE: Duration = Duration::from_secs(300);

fn client(protocol: ClientProtocol) -> Client {
    Client::new(ClientConfig {
        protocol,
        // Multi-platform indexes are for container images; a component is one manifest.
        platform_resolver: None,
        connect_timeout: Some(Duration::from_secs(5)),
        read_timeout: Some(Duration::from_secs(60)),
        ..ClientConfig::default()
    })
}

/// Sorts a client error: absent (404), refused (integrity), or unreachable (the rest,
/// retried later).
/// What went wrong, in the host's words: a registry's own answer body never goes into a
/// message (`/v1/backends` shows refusals to readers), only its status or error codes.
fn describe(e: &OciDistributionError) -> String {
    const MOST: usize = 200;
    match e {
        OciDistributionError::ServerError { code, .. } => {
            format!("the registry answered HTTP {code}")
        }
        OciDistributionError::RegistryError { envelope, .. } => {
            let codes: Vec<String> = envelope
                .errors
                .iter()
                .take(5)
                .map(|err| format!("{:?}", err.code))
                .collect();
            format!("the registry refused: {}", codes.join(", "))
        }
        other => {
            let text = crate::redact::one_line(&other.to_string());
            match text.char_indices().nth(MOST) {
                Some((cut, _)) => format!("{}…", &text[..cut]),
                None => text,
            }
        }
    }
}

fn classify(reference: &OciRef, e: OciDistributionError) -> OciError {
    let what = format!("{reference}: {}", describe(&e));
    match &e {
        OciDistributionError::ImageManifestNotFoundError(_) => OciError::NotFound(what),
        OciDistributionError::ServerError { code: 404, .. } => OciError::NotFound(what),
        OciDistributionError::RegistryError { envelope, .. }
            if envelope.errors.iter().any(|err| {
                matches!(
                    err.code,
                    OciErrorCode::ManifestUnknown
                        | OciErrorCode::NameUnknown
                        | OciErrorCode::NotFound
                        | OciErrorCode::BlobUnknown
                )
            }) =>
        {
            OciError::NotFound(what)
        }
        OciDistributionError::DigestError(_) => {
            OciError::Refused(format!("digest mismatch: {what}"))
        }
        _ => OciError::Unavailable(what),
    }
}

impl Transport {
    /// Clients are made on first use.
    pub fn new(settings: OciSettings) -> Self {
        Self {
            settings,
            manifests: OnceLock::new(),
            https: OnceLock::new(),
            http: OnceLock::new(),
        }
    }

    /// Whether `reference`'s registry is spoken to over plain HTTP.
    fn plain(&self, reference: &OciRef) -> bool {
        reference.is_loopback()
            || self
                .settings
                .insecure_registries
                .iter()
                .any(|r| r == reference.registry())
    }

    fn client_for(&self, reference: &OciRef) -> &Client {
        if self.plain(reference) {
            self.http.get_or_init(|| client(ClientProtocol::Http))
        } else {
            self.https.get_or_init(|| client(ClientProtocol::Https))
        }
    }

    /// Credentials for the reference's registry: the config's, else the Docker
    /// `config.json`'s, else anonymous.
    async fn auth(&self, reference: &OciRef) -> RegistryAuth {
        let registry = reference.registry().to_string();
        if let Some(c) = self.settings.auth.iter().find(|c| c.registry == registry) {
            return RegistryAuth::Basic(c.username.clone(), c.password.clone());
        }
        // A credential helper is a process: keep it off the async workers.
        let found =
            tokio::task::spawn_blocking(move || docker_credential::get_credential(&registry)).await;
        match found {
            Ok(Ok(docker_credential::DockerCredential::UsernamePassword(user, password))) => {
                RegistryAuth::Basic(user, password)
            }
            Ok(Ok(docker_credential::DockerCredential::IdentityToken(token))) => {
                RegistryAuth::Bearer(token)
            }
            _ => RegistryAuth::Anonymous,
        }
    }

    async fn ready(&self, reference: &OciRef) -> &Client {
        let client = self.client_for(reference);
        let auth = self.auth(reference).await;
        client
            .store_auth_if_needed(reference.client_ref().resolve_registry(), &auth)
            .await;
        client
    }

    /// The raw manifest `reference` names (checked against its digest when it has one),
    /// within [`MANIFEST_DEADLINE`] in all: a registry that trickles its answer (the
    /// client's own timeout is per read) is unreachable, not waited for.
    pub async fn manifest(&self, reference: &OciRef) -> Result<Vec<u8>, OciError> {
        tokio::time::timeout(MANIFEST_DEADLINE, self.manifest_now(reference))
            .await
            .unwrap_or_else(|_| {
                Err(OciError::Unavailable(format!(
                    "{reference}: the manifest did not arrive within {} s",
                    MANIFEST_DEADLINE.as_secs()
                )))
            })
    }

    async fn manifest_now(&self, reference: &OciRef) -> Result<Vec<u8>, OciError> {
        let client = self.client_for(reference);
        let auth = self.auth(reference).await;
        let token = client
            .auth(
                reference.client_ref(),
                &auth,
                oci_client::RegistryOperation::Pull,
            )
            .await
            .map_err(|e| classify(reference, e))?;
        let credentials = match (token, auth) {
            (Some(token), _) => Credentials::Bearer(token),
            (None, RegistryAuth::Basic(user, password)) => Credentials::Basic(user, password),
            (None, RegistryAuth::Bearer(token)) => Credentials::Bearer(token),
            (None, _) => Credentials::Anonymous,
        };
        let scheme = if self.plain(reference) {
            "http"
        } else {
            "https"
        };
        manifest_get::get(
            self.manifests.get_or_init(manifest_get::http_client),
            reference,
            scheme,
            credentials,
            &format!("{OCI_MANIFEST_MEDIA_TYPE}, {DOCKER_MANIFEST_MEDIA_TYPE}"),
            MAX_MANIFEST_BYTES,
        )
        .await
    }

    /// The blob `descriptor` names, refusing more than `limit` bytes, within
    /// [`BLOB_DEADLINE`] in all. Not yet checked against its digest: the caller does that.
    pub async fn blob(
        &self,
        reference: &OciRef,
        descriptor: &OciDescriptor,
        limit: i64,
    ) -> Result<Vec<u8>, OciError> {
        tokio::time::timeout(BLOB_DEADLINE, self.blob_now(reference, descriptor, limit))
            .await
            .unwrap_or_else(|_| {
                Err(OciError::Unavailable(format!(
                    "{reference}: blob {} did not arrive within {} s",
                    descriptor.digest,
                    BLOB_DEADLINE.as_secs()
                )))
            })
    }

    async fn blob_now(
        &self,
        reference: &OciRef,
        descriptor: &OciDescriptor,
        limit: i64,
    ) -> Result<Vec<u8>, OciError> {
        let client = self.ready(reference).await;
        let mut stream = client
            .pull_blob_stream(reference.client_ref(), descriptor)
            .await
            .map_err(|e| classify(reference, e))?;
        let too_large = || {
            OciError::Refused(format!(
                "{reference}: blob {} is over {limit} bytes",
                descriptor.digest
            ))
        };
        if stream.content_length.is_some_and(|n| n > limit as u64) {
            return Err(too_large());
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                // The client checks the digest as the stream ends.
                let digest = e
                    .get_ref()
                    .is_some_and(|inner| inner.is::<oci_client::errors::DigestError>());
                if digest {
                    OciError::Refused(format!("digest mismatch: {reference}: {e}"))
                } else {
                    OciError::Unavailable(format!("{reference}: {e}"))
                }
            })?;
            bytes.extend_from_slice(&chunk);
            if bytes.len() as i64 > limit {
                return Err(too_large());
            }
        }
        Ok(bytes)
    }

    /// Pushes `layers` and `config` with `manifest` to `reference` (a tag).
    pub async fn push(
        &self,
        reference: &OciRef,
        layers: &[ImageLayer],
        config: Config,
        manifest: OciImageManifest,
    ) -> Result<(), OciError> {
        let client = self.ready(reference).await;
        client
            .push(
                reference.client_ref(),
                layers,
                config,
                &RegistryAuth::Anonymous,
                Some(manifest),
            )
            .await
            .map_err(|e| classify(reference, e))?;
        Ok(())
    }
}
