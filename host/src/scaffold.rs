//! `wharf new`: scaffolds a backend that builds with one command and passes its own unit
//! tests natively: a Rust crate (`cargo build --release --target wasm32-wasip2`) or, with
//! `--lang python`, a Python package (`wharf-py build app.py -o NAME.wasm`).

mod bundled_sdk;

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};

const CARGO_TOML: &str = include_str!("../templates/Cargo.toml.tmpl");
const CARGO_CONFIG: &str = include_str!("../templates/cargo-config.toml.tmpl");
const README: &str = include_str!("../templates/README.md.tmpl");
const BACKEND_LIB: &str = include_str!("../templates/backend.rs.tmpl");
const PROVIDER_LIB: &str = include_str!("../templates/provider.rs.tmpl");
const PY_APP: &str = include_str!("../templates/python/app.py.tmpl");
const PY_TEST: &str = include_str!("../templates/python/test_app.py.tmpl");
const PY_README: &str = include_str!("../templates/python/README.md.tmpl");

/// The language of a new backend.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// A Rust crate built with cargo.
    #[default]
    Rust,
    /// A Python package built with `wharf-py build`.
    Python,
}

/// What to scaffold.
#[derive(Debug, Clone)]
pub struct NewOptions {
    /// The crate name (also the backend's name).
    pub name: String,
    /// A sandbox provider instead of a resource backend.
    pub provider: bool,
    /// The directory the crate directory is created in.
    pub parent: PathBuf,
    /// Where the SDK comes from.
    pub sdk: SdkSource,
    /// The language.
    pub lang: Lang,
}

/// Where a new backend gets its SDK from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SdkSource {
    /// The SDK this binary carries, written into the new backend's `vendor/` (the contract
    /// the binary serves, offline, nothing from the repository).
    Bundled,
    /// The registry: `wharf-sdk = "0.1"` (this binary's minor version; Rust only until the
    /// Python SDK is on PyPI).
    Registry,
    /// A local checkout of the crate (`sdk/`) or, for Python, of `sdk/python`.
    Path(PathBuf),
    /// A git repository holding the `wharf-sdk` crate (Rust only).
    Git(String),
}

impl Default for SdkSource {
    /// The registry once the SDK is published there, the bundled copy until then.
    fn default() -> Self {
        if bundled_sdk::PUBLISHED {
            Self::Registry
        } else {
            Self::Bundled
        }
    }
}

/// The version requirement a new crate puts on `wharf-sdk`: `0.MINOR` before 1.0, else
/// `MAJOR`, so any compatible release of the SDK matches.
pub fn sdk_requirement(version: &str) -> String {
    let mut parts = version.split('.');
    match (parts.next(), parts.next()) {
        (Some("0"), Some(minor)) => format!("0.{minor}"),
        (Some(major), _) => major.to_string(),
        (None, _) => version.to_string(),
    }
}

/// The right-hand side of `wharf-sdk = …` in a new `Cargo.toml`, or the argument of
/// `pip install` in a Python README.
fn sdk_dependency(source: &SdkSource, lang: Lang) -> Result<String> {
    let quoted = |s: &str| toml::Value::String(s.to_string()).to_string();
    let checked_path = |path: &Path| -> Result<String> {
        let manifest = match lang {
            Lang::Rust => "Cargo.toml",
            Lang::Python => "pyproject.toml",
        };
        let sdk = std::fs::canonicalize(path)
            .with_context(|| format!("the SDK path `{}` does not exist", path.display()))?;
        if !sdk.join(manifest).is_file() {
            bail!("`{}` is not the SDK (no {manifest})", sdk.display());
        }
        Ok(quoted(&sdk.display().to_string()))
    };
    let vendored = format!("{}/wharf-sdk", bundled_sdk::VENDOR_DIR);
    match (lang, source) {
        (Lang::Rust, SdkSource::Bundled) => Ok(format!("{{ path = {} }}", quoted(&vendored))),
        (Lang::Python, SdkSource::Bundled) => Ok(format!("./{vendored}")),
        (Lang::Rust, SdkSource::Registry) => {
            Ok(quoted(&sdk_requirement(env!("CARGO_PKG_VERSION"))))
        }
        (Lang::Rust, SdkSource::Path(path)) => Ok(format!("{{ path = {} }}", checked_path(path)?)),
        (Lang::Rust, SdkSource::Git(url)) => {
            if url.trim().is_empty() || url.contains(['"', '\n', '\r']) {
                bail!("`{url}` is not a git URL");
            }
            Ok(format!("{{ git = {} }}", quoted(url)))
        }
        (Lang::Python, SdkSource::Registry) => Ok("wharf-sdk".into()),
        (Lang::Python, SdkSource::Path(path)) => checked_path(path),
        (Lang::Python, SdkSource::Git(_)) => {
            bail!("`--sdk-git` is for Rust; give a Python backend `--sdk-path DIR/sdk/python`")
        }
    }
}

const RESERVED: &[&str] = &[
    "as",
    "async",
    "await",
    "break",
    "const",
    "continue",
    "crate",
    "dyn",
    "else",
    "enum",
    "extern",
    "false",
    "fn",
    "for",
    "if",
    "impl",
    "in",
    "let",
    "loop",
    "match",
    "mod",
    "move",
    "mut",
    "pub",
    "ref",
    "return",
    "self",
    "static",
    "struct",
    "super",
    "trait",
    "true",
    "type",
    "unsafe",
    "use",
    "where",
    "while",
    "abstract",
    "become",
    "box",
    "do",
    "final",
    "gen",
    "macro",
    "override",
    "priv",
    "try",
    "typeof",
    "unsized",
    "virtual",
    "yield",
    "core",
    "std",
    "alloc",
    "proc_macro",
    "proc-macro",
    "test",
    "wharf_sdk",
    "wharf-sdk",
    "serde",
    "serde_json",
    "schemars",
];

/// Checks that `name` is a usable crate name: ASCII letters, digits, `-` and `_`, starting
/// with a letter, at most 64 characters, and not a Rust keyword or a name the crate needs.
pub fn validate_name(name: &str) -> Result<()> {
    let Some(first) = name.chars().next() else {
        bail!("the crate name is empty");
    };
    if !first.is_ascii_alphabetic() {
        bail!("`{name}` is not a valid crate name: it must start with an ASCII letter");
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        bail!(
            "`{name}` is not a valid crate name: `{bad}` is not allowed (use letters, digits, `-`, `_`)"
        );
    }
    if name.len() > 64 {
        bail!("`{name}` is not a valid crate name: longer than 64 characters");
    }
    if RESERVED.contains(&name) || RESERVED.contains(&name.replace('-', "_").as_str()) {
        bail!("`{name}` is not a valid crate name: it is reserved");
    }
    Ok(())
}

/// `my-tool` → `MyTool`.
fn camel(name: &str) -> String {
    name.split(['-', '_'])
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(c) => c.to_ascii_uppercase().to_string() + chars.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

fn render(template: &str, opts: &NewOptions, sdk: &str) -> String {
    let kind = if opts.provider {
        "sandbox provider"
    } else {
        "resource backend"
    };
    let suffix = if opts.provider { "Provider" } else { "Backend" };
    template
        .replace("{{name}}", &opts.name)
        .replace("{{crate}}", &opts.name.replace('-', "_"))
        .replace("{{Type}}", &format!("{}{suffix}", camel(&opts.name)))
        .replace("{{kind}}", kind)
        .replace("{{sdk}}", sdk)
        .replace(
            "{{contract}}",
            &crate::runtime::world::ContractVersion::CURRENT.to_string(),
        )
}

/// Creates `PARENT/NAME/` with `Cargo.toml`, `.cargo/config.toml`, `src/lib.rs` and
/// `README.md` (for Python: `app.py`, `test_app.py` and `README.md`), and with the bundled
/// SDK under `vendor/` unless another source is asked for; returns the new directory. Refuses an invalid name, an existing directory, an SDK path that is not the
/// SDK and a git URL that cannot be written into `Cargo.toml`.
pub fn scaffold(opts: &NewOptions) -> Result<PathBuf> {
    validate_name(&opts.name)?;
    let dir = opts.parent.join(&opts.name);
    if dir.exists() {
        bail!("`{}` already exists", dir.display());
    }
    let sdk = sdk_dependency(&opts.sdk, opts.lang)?;
    if opts.lang == Lang::Python && opts.provider {
        bail!(
            "`--provider` scaffolds Rust only; a Python provider subclasses `wharf_sdk.Provider` (see sdk/python/README.md)"
        );
    }
    std::fs::create_dir_all(&opts.parent)
        .with_context(|| format!("cannot create `{}`", opts.parent.display()))?;
    // `create_dir` (not `_all`) so a directory that appeared meanwhile is refused too.
    std::fs::create_dir(&dir).with_context(|| format!("cannot create `{}`", dir.display()))?;
    let lib = if opts.provider {
        PROVIDER_LIB
    } else {
        BACKEND_LIB
    };
    let files: &[(&str, &str)] = match opts.lang {
        Lang::Rust => &[
            ("Cargo.toml", CARGO_TOML),
            (".cargo/config.toml", CARGO_CONFIG),
            ("src/lib.rs", lib),
            ("README.md", README),
        ],
        Lang::Python => &[
            ("app.py", PY_APP),
            ("test_app.py", PY_TEST),
            ("README.md", PY_README),
        ],
    };
    for &(path, template) in files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create `{}`", parent.display()))?;
        }
        std::fs::write(&path, render(template, opts, &sdk))
            .with_context(|| format!("cannot write `{}`", path.display()))?;
    }
    if opts.sdk == SdkSource::Bundled {
        let vendor = dir.join(bundled_sdk::VENDOR_DIR);
        match opts.lang {
            Lang::Rust => bundled_sdk::write_rust(&vendor)?,
            Lang::Python => bundled_sdk::write_python(&vendor.join("wharf-sdk"))?,
        }
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for good in ["greeter", "my-tool", "a_1"] {
            assert!(validate_name(good).is_ok(), "{good}");
        }
        for bad in ["", "1bad", "-x", "a b", "fn", "std", "ü"] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
        assert_eq!(camel("my-tool_x"), "MyToolX");
    }

    #[test]
    fn the_registry_requirement_follows_the_version() {
        assert_eq!(sdk_requirement("0.1.0"), "0.1");
        assert_eq!(sdk_requirement("0.2.7"), "0.2");
        assert_eq!(sdk_requirement("1.4.0"), "1");
        assert_eq!(
            sdk_dependency(&SdkSource::Registry, Lang::Rust).unwrap(),
            format!("\"{}\"", sdk_requirement(env!("CARGO_PKG_VERSION")))
        );
    }

    #[test]
    fn the_bundled_sdk_is_a_relative_path() {
        assert_eq!(
            sdk_dependency(&SdkSource::Bundled, Lang::Rust).unwrap(),
            r#"{ path = "vendor/wharf-sdk" }"#
        );
        assert_eq!(
            sdk_dependency(&SdkSource::Bundled, Lang::Python).unwrap(),
            "./vendor/wharf-sdk"
        );
        assert_eq!(SdkSource::default(), SdkSource::Bundled);
    }

    #[test]
    fn a_git_url_cannot_break_out_of_the_manifest() {
        let evil = SdkSource::Git("https://x\"\n[patch.crates-io]".into());
        assert!(sdk_dependency(&evil, Lang::Rust).is_err());
        let ok = SdkSource::Git("https://example.invalid/wharf.git".into());
        assert_eq!(
            sdk_dependency(&ok, Lang::Rust).unwrap(),
            r#"{ git = "https://example.invalid/wharf.git" }"#
        );
        assert!(sdk_dependency(&ok, Lang::Python).is_err());
    }
}
