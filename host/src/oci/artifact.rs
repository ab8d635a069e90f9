//! The CNCF Wasm OCI artifact layout: an image manifest whose config is
//! `application/vnd.wasm.config.v0+json` and whose one layer is the component,
//! `application/wasm`. Anything else is refused before a byte of the layer is fetched.

use super::OciError;
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use serde_json::json;

/// The config media type of a Wasm artifact.
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The layer media type of a Wasm component.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The OCI image manifest media type.
pub const OCI_MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// Largest component pulled (the admin upload's limit).
pub const MAX_COMPONENT_BYTES: i64 = crate::bounded::MAX_COMPONENT_BYTES as i64;
/// Largest manifest accepted.
pub const MAX_MANIFEST_BYTES: usize = 4 << 20;

/// Parses a manifest's bytes.
pub fn parse_manifest(bytes: &[u8], what: &str) -> Result<OciImageManifest, OciError> {
    if bytes.len() > MAX_MANIFEST_BYTES {
        return Err(OciError::Refused(format!(
            "{what}: the manifest is over {MAX_MANIFEST_BYTES} bytes"
        )));
    }
    serde_json::from_slice(bytes)
        .map_err(|e| OciError::Refused(format!("{what}: not an OCI image manifest: {e}")))
}

/// The component layer of a Wasm artifact's manifest.
pub fn component_layer<'m>(
    manifest: &'m OciImageManifest,
    what: &str,
) -> Result<&'m OciDescriptor, OciError> {
    let refuse = |why: String| {
        OciError::Refused(format!(
            "{what} is not a Wasm component artifact: {why} (expected config {WASM_CONFIG_MEDIA_TYPE} and one {WASM_LAYER_MEDIA_TYPE} layer)"
        ))
    };
    if manifest.config.media_type != WASM_CONFIG_MEDIA_TYPE {
        return Err(refuse(format!(
            "its config is {}",
            manifest.config.media_type
        )));
    }
    let [layer] = manifest.layers.as_slice() else {
        return Err(refuse(format!("it has {} layers", manifest.layers.len())));
    };
    if layer.media_type != WASM_LAYER_MEDIA_TYPE {
        return Err(refuse(format!("its layer is {}", layer.media_type)));
    }
    if !super::cache::is_sha256_digest(&layer.digest) {
        return Err(refuse("its layer's digest is not sha256".to_string()));
    }
    if !(0..=MAX_COMPONENT_BYTES).contains(&layer.size) {
        return Err(refuse(format!(
            "its layer is {} bytes (at most {MAX_COMPONENT_BYTES})",
            layer.size
        )));
    }
    Ok(layer)
}

/// The config blob of a Wasm artifact holding `layer_digest`.
pub fn config_blob(layer_digest: &str) -> Vec<u8> {
    json!({
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer_digest],
    })
    .to_string()
    .into_bytes()
}
