//! Config values that look like secrets are shown as `***` in `/v1/backends` and logs.

use serde_json::Value;

const SECRET_WORDS: &[&str] = &[
    "secret",
    "token",
    "password",
    "passwd",
    "api_key",
    "apikey",
    "key",
    "credential",
    "auth",
];

/// Whether a config key names a secret.
pub fn looks_secret(key: &str) -> bool {
    let k = key.to_ascii_lowercase().replace('-', "_");
    SECRET_WORDS.iter().any(|w| {
        k == *w
            || k.ends_with(&format!("_{w}"))
            || k.starts_with(&format!("{w}_"))
            || k.contains(w) && *w != "key"
    })
}

/// A copy of `value` with secret-looking entries replaced.
pub fn redact(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = if looks_secret(k) && !v.is_object() {
                        Value::String("***".into())
                    } else {
                        redact(v)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(redact).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn redacts_secret_looking_keys_only() {
        let v = json!({"api_key": "a", "token": "b", "db": {"password": "c"}, "documents": [{"id": "x"}], "keyboard": "k", "monkey": 1});
        let r = redact(&v);
        assert_eq!(r["api_key"], "***");
        assert_eq!(r["token"], "***");
        assert_eq!(r["db"]["password"], "***");
        assert_eq!(r["documents"][0]["id"], "x");
        assert_eq!(r["keyboard"], "k");
        assert_eq!(r["monkey"], 1);
    }
}
