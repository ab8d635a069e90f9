//! `wharf pull`, `wharf push`, `wharf sign`, `wharf keygen`: components in OCI registries
//! (ARCHITECTURE.md, "Backends from OCI registries").

use crate::config::{OciSettings, WharfConfig};
use crate::oci::{Registry, signature};
use anyhow::{Context, Result, bail};
use clap::Args;
use std::path::{Path, PathBuf};

/// Where the `[oci]` settings come from.
#[derive(Debug, Args)]
pub struct OciOptions {
    /// The config file whose `[oci]` table (insecure registries, credentials, keys) applies.
    #[arg(long, env = "WHARF_CONFIG")]
    config: Option<PathBuf>,
}

impl OciOptions {
    fn settings(&self) -> Result<(OciSettings, PathBuf)> {
        match &self.config {
            Some(path) => {
                let config = WharfConfig::load(path)?;
                Ok((config.server.oci, config.server.data_dir))
            }
            None => Ok((OciSettings::default(), PathBuf::from(".wharf"))),
        }
    }
}

/// `wharf pull`.
#[derive(Debug, Args)]
pub struct PullArgs {
    /// `oci://registry/repository:tag` or `@sha256:…`.
    reference: String,
    /// Data directory whose cache receives the blobs (overrides the config).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Refuse it unless a signature by one of the config's `[oci] signature_keys` holds.
    #[arg(long)]
    require_signature: bool,
    /// Also write the component here.
    #[arg(long, short)]
    output: Option<PathBuf>,
    #[command(flatten)]
    oci: OciOptions,
}

/// `wharf push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The component (`.wasm`).
    file: PathBuf,
    /// `oci://registry/repository:tag`.
    reference: String,
    #[command(flatten)]
    oci: OciOptions,
}

/// `wharf sign`.
#[derive(Debug, Args)]
pub struct SignArgs {
    /// The private key (PEM, ECDSA P-256, unencrypted: `wharf keygen` writes one).
    #[arg(long)]
    key: PathBuf,
    /// `oci://registry/repository:tag` or `@sha256:…`.
    reference: String,
    #[command(flatten)]
    oci: OciOptions,
}

/// `wharf keygen`.
#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Writes `PREFIX.key` (private, mode 0600) and `PREFIX.pub`.
    #[arg(default_value = "wharf")]
    prefix: PathBuf,
}

fn registry(settings: &OciSettings, data_dir: &Path) -> Result<Registry> {
    crate::private_files::create_private_dir(data_dir)?;
    Registry::new(settings, &data_dir.join("oci-cache"))
}

/// Pulls a component into the cache and prints its digest.
pub async fn pull(args: PullArgs) -> Result<()> {
    let (settings, data_dir) = args.oci.settings()?;
    let data_dir = args.data_dir.unwrap_or(data_dir);
    let registry = registry(&settings, &data_dir)?;
    let require = args.require_signature || settings.require_signature;
    let fetched = registry.fetch(&args.reference, require).await?;
    if let Some(out) = &args.output {
        std::fs::write(out, fetched.wasm.as_slice())
            .with_context(|| format!("writing {}", out.display()))?;
    }
    println!("{}", fetched.source.resolved);
    eprintln!(
        "wharf: pulled {} ({} bytes{}{})",
        args.reference,
        fetched.wasm.len(),
        if fetched.source.signature_verified {
            ", signature verified"
        } else {
            ""
        },
        if fetched.source.from_cache {
            ", from the cache"
        } else {
            ""
        },
    );
    Ok(())
}

/// Pushes a component as a Wasm OCI artifact and prints the pinned reference.
pub async fn push(args: PushArgs) -> Result<()> {
    let (settings, _) = args.oci.settings()?;
    let wasm =
        std::fs::read(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    if !wasm.starts_with(b"\0asm") {
        bail!("{} is not a WebAssembly file", args.file.display());
    }
    // Pushing reads nothing back from the cache: a throwaway one keeps the data dir clean.
    let scratch = tempfile::tempdir()?;
    let registry = Registry::new(&settings, scratch.path())?;
    let digest = registry.push(wasm, &args.reference).await?;
    let pinned = crate::oci::OciRef::parse(&args.reference)?.at_digest(&digest);
    println!("{pinned}");
    Ok(())
}

/// Signs what a reference resolves to and pushes the signature beside it.
pub async fn sign(args: SignArgs) -> Result<()> {
    let (settings, _) = args.oci.settings()?;
    let pem = std::fs::read_to_string(&args.key)
        .with_context(|| format!("reading {}", args.key.display()))?;
    let key = signature::private_key_from_pem(&pem)?;
    let scratch = tempfile::tempdir()?;
    let registry = Registry::new(&settings, scratch.path())?;
    let (digest, at) = registry.sign(&args.reference, &key).await?;
    println!("{at}");
    eprintln!("wharf: signed {digest}");
    Ok(())
}

/// Writes a new key pair.
pub fn keygen(args: KeygenArgs) -> Result<()> {
    let (private, public) = signature::keygen()?;
    let private_path = args.prefix.with_extension("key");
    let public_path = args.prefix.with_extension("pub");
    for path in [&private_path, &public_path] {
        if path.exists() {
            bail!("{} exists: not overwritten", path.display());
        }
    }
    crate::private_files::write_private(&private_path, private.as_bytes())?;
    std::fs::write(&public_path, public)
        .with_context(|| format!("writing {}", public_path.display()))?;
    eprintln!(
        "wharf: wrote {} (keep it secret) and {} (list it in [oci] signature_keys)",
        private_path.display(),
        public_path.display()
    );
    Ok(())
}
