//! `text-index`: a shared resource (an inverted index) built once per instance in `warmup`
//! and searched by every call.

use std::collections::HashMap;
use wharf_sdk::{
    Backend, BackendInfo, Call, Deserialize, JsonSchema, NoArgs, Serialize, ToolError, Tools, Value,
};

/// Documents indexed when the operator gives none.
const BUILT_IN: &[(&str, &str)] = &[
    (
        "wasmtime",
        "Wasmtime is a fast and secure runtime for WebAssembly components and modules",
    ),
    (
        "docker",
        "Docker runs containers from images; a container is an isolated process tree",
    ),
    (
        "wharf",
        "Wharf loads backends shipped as WebAssembly components and serves their tools to agents",
    ),
    (
        "mcp",
        "The Model Context Protocol lets agents list tools and call them over streamable HTTP",
    ),
    (
        "sqlite",
        "SQLite is an embedded database engine stored in a single file",
    ),
    (
        "postgres",
        "PostgreSQL is a database server that several processes and nodes can share",
    ),
];

/// Operator config: extra documents to index.
#[derive(Deserialize, JsonSchema, Default)]
struct Config {
    #[serde(default)]
    documents: Vec<Document>,
}

#[derive(Deserialize, Serialize, JsonSchema, Clone)]
struct Document {
    id: String,
    text: String,
}

#[derive(Default)]
struct TextIndex {
    docs: Vec<Document>,
    /// term → (doc index, term frequency)
    postings: HashMap<String, Vec<(usize, u32)>>,
    warmed: bool,
}

fn terms(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
}

impl TextIndex {
    fn add(&mut self, doc: Document) {
        let n = self.docs.len();
        let mut tf: HashMap<String, u32> = HashMap::new();
        for t in terms(&doc.text) {
            *tf.entry(t).or_default() += 1;
        }
        for (t, f) in tf {
            self.postings.entry(t).or_default().push((n, f));
        }
        self.docs.push(doc);
    }

    fn search(&self, query: &str, top_k: usize) -> Vec<Hit> {
        let n = self.docs.len() as f64;
        let mut scores: HashMap<usize, f64> = HashMap::new();
        for t in terms(query) {
            if let Some(list) = self.postings.get(&t) {
                let idf = (1.0 + n / list.len() as f64).ln();
                for &(d, f) in list {
                    *scores.entry(d).or_default() += f as f64 * idf;
                }
            }
        }
        let mut hits: Vec<Hit> = scores
            .into_iter()
            .map(|(d, score)| Hit {
                id: self.docs[d].id.clone(),
                text: self.docs[d].text.clone(),
                score,
            })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
        hits.truncate(top_k);
        hits
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    /// Words to look for.
    query: String,
    /// How many hits to return (1–50).
    #[serde(default = "ten")]
    #[schemars(range(min = 1, max = 50))]
    top_k: u32,
}

fn ten() -> u32 {
    10
}

#[derive(Serialize, JsonSchema)]
struct Hit {
    id: String,
    text: String,
    score: f64,
}

#[derive(Serialize, JsonSchema)]
struct Stats {
    documents: usize,
    terms: usize,
}

impl Backend for TextIndex {
    fn new() -> Self {
        Self::default()
    }

    fn info() -> BackendInfo {
        BackendInfo::new(
            "text-index",
            "0.1.0",
            "A small full-text index built at warmup and searched per call.",
        )
        .config::<Config>()
    }

    fn warmup(&mut self, config: Value) -> Result<(), ToolError> {
        let config: Config = if config.is_null() {
            Config::default()
        } else {
            serde_json::from_value(config)?
        };
        *self = Self::default();
        for (id, text) in BUILT_IN {
            self.add(Document {
                id: (*id).into(),
                text: (*text).into(),
            });
        }
        for doc in config.documents {
            self.add(doc);
        }
        self.warmed = true;
        wharf_sdk::host::log::info(&format!("indexed {} documents", self.docs.len()));
        Ok(())
    }

    fn tools() -> Tools<Self> {
        Tools::new()
            .tool(
                "search",
                "Search the index; hits ranked by TF-IDF.",
                |idx: &mut Self, a: SearchArgs, _: &mut Call| {
                    if !idx.warmed {
                        return Err(ToolError::execution(
                            "the index was not built: warmup did not run",
                        ));
                    }
                    let hits = idx.search(&a.query, a.top_k as usize);
                    if hits.is_empty() {
                        return Err(ToolError::no_results(format!(
                            "nothing matches `{}`",
                            a.query
                        )));
                    }
                    Ok(hits)
                },
            )
            .read_only()
            .tool(
                "stats",
                "Number of documents and distinct terms.",
                |idx: &mut Self, _: NoArgs, _: &mut Call| {
                    Ok(Stats {
                        documents: idx.docs.len(),
                        terms: idx.postings.len(),
                    })
                },
            )
            .read_only()
    }
}

wharf_sdk::export_backend!(TextIndex);
