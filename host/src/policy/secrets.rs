//! `[backends.NAME.grants.secrets]`: which secrets a backend is handed, by name, and where
//! the host reads each (`env:VARIABLE` or `file:/absolute/path`). Pure: the names, the
//! sources and their rules; reading a value is the `secrets` import's.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Longest secret name, bytes.
pub const MAX_SECRET_NAME_BYTES: usize = 64;
/// Largest secret value the host reads, bytes.
pub const MAX_SECRET_BYTES: u64 = 64 * 1024;
/// Most secrets one backend may be granted.
pub const MAX_SECRETS: usize = 256;

/// Where the host reads one secret's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    /// An environment variable of the Wharf process.
    Env(String),
    /// A file (symbolic links followed: orchestrators mount secrets through them).
    File(PathBuf),
}

/// The secrets granted to one backend: name → source. Empty by default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "BTreeMap<String, String>")]
pub struct SecretGrants(BTreeMap<String, SecretSource>);

impl SecretGrants {
    /// Where the secret `name` is read from, when it is granted.
    pub fn source(&self, name: &str) -> Option<&SecretSource> {
        self.0.get(name)
    }

    /// The granted names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}

impl TryFrom<BTreeMap<String, String>> for SecretGrants {
    type Error = String;

    fn try_from(table: BTreeMap<String, String>) -> Result<Self, String> {
        if table.len() > MAX_SECRETS {
            return Err(format!(
                "grants.secrets holds {} secrets; at most {MAX_SECRETS}",
                table.len()
            ));
        }
        let mut grants = BTreeMap::new();
        for (name, source) in table {
            check_secret_name(&name)?;
            let parsed =
                parse_source(&source).map_err(|why| format!("grants.secrets.{name}: {why}"))?;
            grants.insert(name, parsed);
        }
        Ok(Self(grants))
    }
}

/// Ok for 1–[`MAX_SECRET_NAME_BYTES`] bytes of `A-Z a-z 0-9 _ . -`; else why not (the name
/// itself is not repeated: it may be anything a guest sent).
pub fn check_secret_name(name: &str) -> Result<(), String> {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-');
    if name.is_empty() || name.len() > MAX_SECRET_NAME_BYTES || !name.bytes().all(allowed) {
        return Err(format!(
            "a secret name is 1–{MAX_SECRET_NAME_BYTES} bytes of A-Z a-z 0-9 _ . -"
        ));
    }
    Ok(())
}

fn parse_source(text: &str) -> Result<SecretSource, String> {
    if let Some(variable) = text.strip_prefix("env:") {
        let mut bytes = variable.bytes();
        let valid = bytes
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && variable.len() <= 256;
        return if valid {
            Ok(SecretSource::Env(variable.to_string()))
        } else {
            Err("`env:` names an environment variable ([A-Za-z_][A-Za-z0-9_]*)".to_string())
        };
    }
    if let Some(path) = text.strip_prefix("file:") {
        let path = PathBuf::from(path);
        return if path.is_absolute() && path.as_os_str().len() <= 4096 {
            Ok(SecretSource::File(path))
        } else {
            Err("`file:` takes an absolute path".to_string())
        };
    }
    Err("a source is `env:VARIABLE` or `file:/absolute/path`".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants(pairs: &[(&str, &str)]) -> Result<SecretGrants, String> {
        SecretGrants::try_from(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        )
    }

    #[test]
    fn sources_parse_and_names_sort() {
        let g = grants(&[("b.key", "file:/run/secrets/b"), ("a_key", "env:A_KEY")]).unwrap();
        assert_eq!(g.names().collect::<Vec<_>>(), ["a_key", "b.key"]);
        assert_eq!(g.source("a_key"), Some(&SecretSource::Env("A_KEY".into())));
        assert_eq!(
            g.source("b.key"),
            Some(&SecretSource::File("/run/secrets/b".into()))
        );
        assert_eq!(g.source("c"), None);
    }

    #[test]
    fn hostile_names_and_sources_are_refused() {
        for bad in ["", "a/b", "a b", "ü", &"x".repeat(65)] {
            assert!(grants(&[(bad, "env:X")]).is_err(), "{bad:?}");
            assert!(check_secret_name(bad).is_err(), "{bad:?}");
        }
        for bad in [
            "X",
            "env:",
            "env:1X",
            "env:A-B",
            "file:relative",
            "file:",
            "vault:x",
        ] {
            let err = grants(&[("k", bad)]).unwrap_err();
            assert!(err.starts_with("grants.secrets.k: "), "{err}");
        }
        let many: Vec<(String, String)> = (0..=MAX_SECRETS)
            .map(|i| (format!("k{i}"), "env:X".to_string()))
            .collect();
        assert!(SecretGrants::try_from(many.into_iter().collect::<BTreeMap<_, _>>()).is_err());
    }

    #[test]
    fn a_table_in_toml_is_the_grant() {
        #[derive(Deserialize)]
        struct Wrapper {
            secrets: SecretGrants,
        }
        let w: Wrapper = toml::from_str("[secrets]\napi = \"env:API\"\n").unwrap();
        assert_eq!(
            w.secrets.source("api"),
            Some(&SecretSource::Env("API".into()))
        );
        assert!(toml::from_str::<Wrapper>("[secrets]\napi = \"nope\"\n").is_err());
        assert!(toml::from_str::<Wrapper>("[secrets]\napi = 5\n").is_err());
    }
}
