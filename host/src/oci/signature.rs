//! Cosign-compatible keyed signatures (ARCHITECTURE.md, "Backends from OCI registries"):
//! the signature of the manifest `sha256:HEX` is the manifest at tag `sha256-HEX.sig` in the
//! same repository; each layer of it (`application/vnd.dev.cosign.simplesigning.v1+json`)
//! is a simple-signing payload naming the manifest digest, and its annotation
//! `dev.cosignproject.cosign/signature` is the base64 ECDSA P-256 / SHA-256 signature of
//! the payload's bytes. Keys are PEM public keys (what `cosign generate-key-pair` and
//! `wharf keygen` write).

use anyhow::{Context, Result, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use p256::ecdsa::signature::{Signer, Verifier};
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use p256::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use serde_json::{Value, json};

/// The media type of a signature layer.
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The annotation holding a layer's signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The `critical.type` of a cosign payload.
pub const PAYLOAD_TYPE: &str = "cosign container image signature";
/// Largest payload read (a payload is a few hundred bytes).
pub const MAX_PAYLOAD_BYTES: i64 = 64 * 1024;

/// The tag holding the signatures of `manifest_digest` (`sha256:HEX` → `sha256-HEX.sig`).
pub fn signature_tag(manifest_digest: &str) -> String {
    format!("{}.sig", manifest_digest.replacen(':', "-", 1))
}

/// The simple-signing payload for `manifest_digest` in `repository` (`registry/repo`).
pub fn payload(repository: &str, manifest_digest: &str) -> Vec<u8> {
    let value = json!({
        "critical": {
            "identity": { "docker-reference": repository },
            "image": { "docker-manifest-digest": manifest_digest },
            "type": PAYLOAD_TYPE,
        },
        "optional": null,
    });
    value.to_string().into_bytes()
}

/// The base64 DER signature of `payload`, as cosign writes it.
pub fn sign(key: &SigningKey, payload: &[u8]) -> String {
    let signature: Signature = key.sign(payload);
    BASE64.encode(signature.to_der().as_bytes())
}

/// Checks one signature layer: the payload names `manifest_digest` and `signature_b64`
/// verifies under one of `keys`. The error says which part failed.
pub fn verify(
    keys: &[VerifyingKey],
    payload: &[u8],
    signature_b64: &str,
    manifest_digest: &str,
) -> Result<(), String> {
    let parsed: Value = serde_json::from_slice(payload)
        .map_err(|e| format!("the signature payload is not JSON: {e}"))?;
    let critical = &parsed["critical"];
    if critical["type"].as_str() != Some(PAYLOAD_TYPE) {
        return Err(format!(
            "the signature payload's critical.type is not `{PAYLOAD_TYPE}`"
        ));
    }
    let signed = critical["image"]["docker-manifest-digest"].as_str();
    if signed != Some(manifest_digest) {
        return Err(format!(
            "the signature is for {}, not for {manifest_digest}",
            signed.unwrap_or("no digest")
        ));
    }
    let raw = BASE64
        .decode(signature_b64.trim())
        .map_err(|_| "the signature annotation is not base64".to_string())?;
    let signature = Signature::from_der(&raw)
        .or_else(|_| Signature::from_slice(&raw))
        .map_err(|_| "the signature is not an ECDSA P-256 signature".to_string())?;
    if keys.iter().any(|k| k.verify(payload, &signature).is_ok()) {
        Ok(())
    } else {
        Err("the signature does not verify under any configured key".to_string())
    }
}

/// Reads a PEM public key (`PUBLIC KEY`, P-256).
pub fn public_key_from_pem(pem: &str) -> Result<VerifyingKey> {
    VerifyingKey::from_public_key_pem(pem.trim())
        .context("not a PEM ECDSA P-256 public key (-----BEGIN PUBLIC KEY-----)")
}

/// Reads a PEM private key: PKCS#8 (`PRIVATE KEY`) or SEC1 (`EC PRIVATE KEY`), P-256,
/// unencrypted. Cosign's own encrypted key files are not read: sign with cosign then.
pub fn private_key_from_pem(pem: &str) -> Result<SigningKey> {
    let pem = pem.trim();
    if pem.contains("ENCRYPTED") {
        bail!(
            "encrypted keys (cosign.key) are not read: sign with `cosign sign --key cosign.key`, or use a key from `wharf keygen`"
        );
    }
    if let Ok(key) = SigningKey::from_pkcs8_pem(pem) {
        return Ok(key);
    }
    let secret = p256::SecretKey::from_sec1_pem(pem)
        .context("not a PEM ECDSA P-256 private key (PKCS#8 or SEC1)")?;
    Ok(SigningKey::from(secret))
}

/// A new key pair: (private PKCS#8 PEM, public PEM).
pub fn keygen() -> Result<(String, String)> {
    let key = SigningKey::random(&mut rand_core::OsRng);
    let private = key
        .to_pkcs8_pem(p256::pkcs8::LineEnding::LF)
        .context("encoding the private key")?
        .to_string();
    let public = key
        .verifying_key()
        .to_public_key_pem(p256::pkcs8::LineEnding::LF)
        .context("encoding the public key")?;
    Ok((private, public))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_only_for_its_digest_and_key() {
        let (private, public) = keygen().unwrap();
        let key = private_key_from_pem(&private).unwrap();
        let keys = vec![public_key_from_pem(&public).unwrap()];
        let digest = format!("sha256:{}", "b".repeat(64));
        let body = payload("localhost:5000/echo", &digest);
        let sig = sign(&key, &body);
        assert_eq!(verify(&keys, &body, &sig, &digest), Ok(()));
        let other = format!("sha256:{}", "c".repeat(64));
        assert!(
            verify(&keys, &body, &sig, &other)
                .unwrap_err()
                .contains("not for")
        );
        let (_, stranger) = keygen().unwrap();
        let strangers = vec![public_key_from_pem(&stranger).unwrap()];
        assert!(
            verify(&strangers, &body, &sig, &digest)
                .unwrap_err()
                .contains("any configured key")
        );
        let mut forged = body.clone();
        forged.push(b' ');
        assert!(verify(&keys, &forged, &sig, &digest).is_err());
        assert!(verify(&keys, &body, "!!", &digest).is_err());
        assert_eq!(
            signature_tag(&digest),
            format!("sha256-{}.sig", "b".repeat(64))
        );
    }
}
