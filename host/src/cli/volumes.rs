//! `wharf volumes create|list|delete`: the caller's named volumes on a running server, over
//! its REST API.

use super::sessions::{ok_data, print_listing};
use super::{http_json, with_token};
use anyhow::{Context, Result};
use clap::Subcommand;
use serde_json::json;

/// What to do with volumes.
#[derive(Debug, Subcommand)]
pub enum VolumesCommand {
    /// Create a volume; prints its id.
    Create {
        /// Its name, unique within the caller's tenant.
        name: String,
        /// Let sandboxes of several sessions mount it at once.
        #[arg(long)]
        shared: bool,
    },
    /// List volumes: one line each, `ID NAME BYTES SHARED`.
    List {
        /// Print the server's JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// Delete a volume and its files (refused while a sandbox mounts it).
    Delete {
        /// Its id, or its name.
        volume: String,
    },
}

/// `URL/v1/volumes[/VOLUME]`, the volume one path segment whatever it holds.
fn volumes_url(url: &str, volume: Option<&str>) -> Result<reqwest::Url> {
    let mut at = reqwest::Url::parse(url).with_context(|| format!("`{url}` is not a URL"))?;
    at.path_segments_mut()
        .map_err(|()| anyhow::anyhow!("`{url}` cannot take a path"))?
        .pop_if_empty()
        .extend(["v1", "volumes"])
        .extend(volume);
    Ok(at)
}

/// Runs one `volumes` subcommand against the server at `url`.
pub async fn run(command: VolumesCommand, url: &str, token: Option<String>) -> Result<()> {
    let client = reqwest::Client::new();
    match command {
        VolumesCommand::Create { name, shared } => {
            let body = json!({ "name": name, "shared": shared });
            let at = volumes_url(url, None)?;
            let reply = http_json(with_token(client.post(at).json(&body), token)).await?;
            println!("{}", ok_data(&reply)?["id"].as_str().unwrap_or_default());
        }
        VolumesCommand::List { json } => {
            let at = volumes_url(url, None)?;
            let reply = http_json(with_token(client.get(at), token)).await?;
            print_listing(ok_data(&reply)?, "volumes", json, |v| {
                format!(
                    "{}  {}  {}  {}",
                    v["id"].as_str().unwrap_or_default(),
                    v["name"].as_str().unwrap_or_default(),
                    v["bytes"].as_u64().unwrap_or_default(),
                    if v["shared"] == json!(true) {
                        "shared"
                    } else {
                        "one-at-a-time"
                    },
                )
            })?;
        }
        VolumesCommand::Delete { volume } => {
            let at = volumes_url(url, Some(&volume))?;
            let reply = http_json(with_token(client.delete(at), token)).await?;
            ok_data(&reply)?;
            eprintln!("wharf: deleted volume `{volume}`");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_volume_is_one_path_segment_whatever_it_holds() -> Result<()> {
        let at = volumes_url("http://127.0.0.1:7420/", Some("../admin x"))?;
        assert_eq!(
            at.as_str(),
            "http://127.0.0.1:7420/v1/volumes/..%2Fadmin%20x"
        );
        assert_eq!(
            volumes_url("http://h:1", None)?.as_str(),
            "http://h:1/v1/volumes"
        );
        Ok(())
    }
}
