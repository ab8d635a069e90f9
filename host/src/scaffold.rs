//! `wharf new`: scaffolds a backend that builds with one command and passes its own unit
//! tests natively: a Rust crate (`cargo build --release --target wasm32-wasip2`) or, with
//! `--lang python`, a Python package (`wharf-py build app.py -o NAME.wasm`).

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};

/// The SDK this binary was built from: the default `wharf-sdk` path of a new crate.
pub const DEFAULT_SDK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sdk");
/// The Python SDK this binary was built beside: what a new Python package installs.
pub const DEFAULT_PYTHON_SDK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sdk/python");

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
    /// The SDK to use, by path: the `wharf-sdk` crate, or `sdk/python` for Python.
    pub sdk: PathBuf,
    /// The language.
    pub lang: Lang,
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

fn render(template: &str, opts: &NewOptions, sdk: &Path) -> String {
    let kind = if opts.provider {
        "sandbox provider"
    } else {
        "resource backend"
    };
    let suffix = if opts.provider { "Provider" } else { "Backend" };
    let sdk = toml::Value::String(sdk.display().to_string()).to_string();
    template
        .replace("{{name}}", &opts.name)
        .replace("{{crate}}", &opts.name.replace('-', "_"))
        .replace("{{Type}}", &format!("{}{suffix}", camel(&opts.name)))
        .replace("{{kind}}", kind)
        .replace("{{sdk}}", &sdk)
}

/// Creates `PARENT/NAME/` with `Cargo.toml`, `.cargo/config.toml`, `src/lib.rs` and
/// `README.md` (for Python: `app.py`, `test_app.py` and `README.md`); returns the new
/// directory. Refuses an invalid name, an existing directory
/// and an SDK path that is not a crate.
pub fn scaffold(opts: &NewOptions) -> Result<PathBuf> {
    validate_name(&opts.name)?;
    let dir = opts.parent.join(&opts.name);
    if dir.exists() {
        bail!("`{}` already exists", dir.display());
    }
    let sdk = std::fs::canonicalize(&opts.sdk)
        .with_context(|| format!("the SDK path `{}` does not exist", opts.sdk.display()))?;
    let manifest = match opts.lang {
        Lang::Rust => "Cargo.toml",
        Lang::Python => "pyproject.toml",
    };
    if !sdk.join(manifest).is_file() {
        bail!("`{}` is not the SDK (no {manifest})", sdk.display());
    }
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
}
