//! `${secret:NAME}` in a configured value (an HTTP header, a stdio server's environment
//! variable): parsed into pieces once, filled with the secrets' values when they are used.
//! An error names the value and the secret, never a secret's value.

use wharf_sdk::ToolError;

const SECRET_OPEN: &str = "${secret:";

/// One piece of a header or env value: literal text or a secret's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Sent as written.
    Text(String),
    /// Replaced by the secret granted under this name.
    Secret(String),
}

fn is_secret_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// Splits `value` into text and `${secret:NAME}` pieces; `what` names the value in errors
/// (e.g. "header `X`").
pub fn parse_template(what: &str, value: &str) -> Result<Vec<Piece>, ToolError> {
    let mut pieces = Vec::new();
    let mut rest = value;
    while let Some(start) = rest.find(SECRET_OPEN) {
        if start > 0 {
            pieces.push(Piece::Text(rest[..start].to_string()));
        }
        let after = &rest[start + SECRET_OPEN.len()..];
        let Some(end) = after.find('}') else {
            return Err(ToolError::invalid_input(format!(
                "{what}: `${{secret:` without its closing `}}`"
            )));
        };
        let secret = &after[..end];
        if !is_secret_name(secret) {
            return Err(ToolError::invalid_input(format!(
                "{what}: `{}` is not a secret name (1-64 of A-Z a-z 0-9 _ . -)",
                secret.escape_debug()
            )));
        }
        pieces.push(Piece::Secret(secret.to_string()));
        rest = &after[end + 1..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Text(rest.to_string()));
    }
    Ok(pieces)
}

/// `pieces` with their secrets read through `secret`; `what` names the value in errors,
/// and a secret value that `valid` refuses is a 4000 saying `why` (never the value).
pub fn fill(
    what: &str,
    pieces: &[Piece],
    secret: &mut dyn FnMut(&str) -> Result<String, ToolError>,
    valid: fn(&str) -> bool,
    why: &str,
) -> Result<String, ToolError> {
    let mut value = String::new();
    for piece in pieces {
        match piece {
            Piece::Text(text) => value.push_str(text),
            Piece::Secret(name) => {
                let got = secret(name).map_err(|e| {
                    ToolError::new(e.code, format!("{what}: secret `{name}`: {}", e.message))
                })?;
                if !valid(&got) {
                    return Err(ToolError::invalid_input(format!(
                        "{what}: secret `{name}` {why}"
                    )));
                }
                value.push_str(&got);
            }
        }
    }
    Ok(value)
}

/// The secret names the pieces of `values` use.
pub fn secret_names<'a>(values: impl IntoIterator<Item = &'a [Piece]>) -> Vec<&'a str> {
    values
        .into_iter()
        .flatten()
        .filter_map(|p| match p {
            Piece::Secret(name) => Some(name.as_str()),
            Piece::Text(_) => None,
        })
        .collect()
}
