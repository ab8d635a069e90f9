//! Shell scripts for file operations over `run-command`, and parsing their output. Pure.
//! A path travels inside single quotes, so quotes, spaces, `$()` and newlines are just
//! characters of a name.

/// Exit code: no such file or directory.
pub const EXIT_MISSING: i32 = 113;
/// Exit code: a directory where a file was expected.
pub const EXIT_DIRECTORY: i32 = 114;
/// Exit code: exists but is not a regular file.
pub const EXIT_NOT_REGULAR: i32 = 115;
/// Exit code: not a directory where one was expected.
pub const EXIT_NOT_DIRECTORY: i32 = 116;

/// Largest file `read_file` returns; one byte more is the sentinel that says "too large".
pub const MAX_READ_BYTES: u64 = 4 << 20;
/// Slice size for export (the files route's slice size too).
pub const SLICE_BYTES: u64 = crate::runtime::backend::SLICE_BYTES;
/// Largest piece of content put on a command line when the provider has no stdin.
pub const MAX_ARG_CHUNK: usize = 100 * 1024;

/// `'…'` with embedded quotes escaped; a relative path starting with `-` gets `./`.
pub fn quote_path(path: &str) -> String {
    let path = if path.starts_with('-') {
        format!("./{path}")
    } else {
        path.to_string()
    };
    quote(&path)
}

/// Single-quotes any string for `sh`.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn regular_file_check(p: &str) -> String {
    format!(
        "p={p}; if [ ! -e \"$p\" ] && [ ! -L \"$p\" ]; then exit {EXIT_MISSING}; fi; \
         if [ -d \"$p\" ]; then exit {EXIT_DIRECTORY}; fi; if [ ! -f \"$p\" ]; then exit {EXIT_NOT_REGULAR}; fi; "
    )
}

/// Prints at most `MAX_READ_BYTES + 1` bytes of a regular file.
pub fn read_script(path: &str) -> String {
    format!(
        "{}head -c {} \"$p\"",
        regular_file_check(&quote_path(path)),
        MAX_READ_BYTES + 1
    )
}

/// Prints a regular file's size in bytes.
pub fn size_script(path: &str) -> String {
    format!("{}wc -c < \"$p\"", regular_file_check(&quote_path(path)))
}

/// Prints slice `index` (of `SLICE_BYTES`) of a file.
pub fn slice_script(path: &str, index: u64) -> String {
    format!(
        "{}dd if=\"$p\" bs={SLICE_BYTES} skip={index} count=1 2>/dev/null",
        regular_file_check(&quote_path(path))
    )
}

/// Writes stdin to a file, creating parent directories (`append` adds to it instead).
pub fn write_stdin_script(path: &str, append: bool) -> String {
    let op = if append { ">>" } else { ">" };
    format!(
        "p={}; if [ -d \"$p\" ]; then exit {EXIT_DIRECTORY}; fi; mkdir -p \"$(dirname \"$p\")\" && cat {op} \"$p\"",
        quote_path(path)
    )
}

/// Writes one base64 chunk (no stdin available): `first` truncates, later ones append.
pub fn write_chunk_script(path: &str, chunk_base64: &str, first: bool) -> String {
    let op = if first { ">" } else { ">>" };
    let mkdir = if first {
        "mkdir -p \"$(dirname \"$p\")\" && "
    } else {
        ""
    };
    format!(
        "p={}; if [ -d \"$p\" ]; then exit {EXIT_DIRECTORY}; fi; {mkdir}printf '%s' {} | base64 -d {op} \"$p\"",
        quote_path(path),
        quote(chunk_base64)
    )
}

/// Lists a directory as NUL-separated `kind, size, name` triples.
pub fn list_script(path: &str) -> String {
    format!(
        "d={}; if [ ! -d \"$d\" ]; then if [ -e \"$d\" ]; then exit {EXIT_NOT_DIRECTORY}; fi; exit {EXIT_MISSING}; fi; \
         cd \"$d\" || exit {EXIT_MISSING}; \
         for f in .* *; do \
           if [ \"$f\" = . ] || [ \"$f\" = .. ]; then continue; fi; \
           if [ ! -e \"$f\" ] && [ ! -L \"$f\" ]; then continue; fi; \
           s=0; if [ -L \"$f\" ]; then t=symlink; elif [ -d \"$f\" ]; then t=directory; \
           elif [ -f \"$f\" ]; then t=file; s=$(wc -c < \"$f\"); else t=other; fi; \
           printf '%s\\0%s\\0%s\\0' \"$t\" \"$s\" \"$f\"; \
         done",
        quote_path(path)
    )
}

/// One parsed directory entry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Entry {
    /// File name.
    pub name: String,
    /// `file`, `directory`, `symlink` or `other`.
    pub kind: String,
    /// Size in bytes (files only).
    pub size: u64,
}

/// Parses [`list_script`] output.
pub fn parse_list(output: &[u8]) -> Vec<Entry> {
    let fields: Vec<&[u8]> = output.split(|b| *b == 0).collect();
    fields
        .chunks(3)
        .filter(|c| c.len() == 3 && !c[2].is_empty())
        .map(|c| Entry {
            kind: String::from_utf8_lossy(c[0]).into_owned(),
            size: String::from_utf8_lossy(c[1]).trim().parse().unwrap_or(0),
            name: String::from_utf8_lossy(c[2]).into_owned(),
        })
        .collect()
}

/// Lines `offset..offset+limit` (1-based) of `text`, with the 1-based range returned and
/// the total line count.
pub fn select_lines(
    text: &str,
    offset: Option<u64>,
    limit: Option<u64>,
) -> (String, u64, u64, u64) {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let total = lines.len() as u64;
    let start = offset.unwrap_or(1).max(1);
    let take = limit.unwrap_or(u64::MAX);
    let selected: String = lines
        .iter()
        .skip((start - 1) as usize)
        .take(take.min(total) as usize)
        .copied()
        .collect();
    let shown = selected.split_inclusive('\n').count() as u64;
    let end = if shown == 0 {
        start.saturating_sub(1)
    } else {
        start + shown - 1
    };
    (selected, start, end, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_keeps_hostile_names_literal() {
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("x'; rm -rf / #"), r"'x'\''; rm -rf / #'");
        assert_eq!(quote_path("-rf"), "'./-rf'");
        assert_eq!(quote("$(id)\n"), "'$(id)\n'");
    }

    #[test]
    fn list_output_parses() {
        let out = b"file\x0012\x00a b.txt\x00directory\x000\x00sub\x00symlink\x000\x00l\x00";
        let entries = parse_list(out);
        assert_eq!(entries.len(), 3);
        assert_eq!(
            entries[0],
            Entry {
                name: "a b.txt".into(),
                kind: "file".into(),
                size: 12
            }
        );
        assert_eq!(entries[1].kind, "directory");
        assert!(parse_list(b"").is_empty());
    }

    #[test]
    fn line_ranges_are_one_based() {
        let text = "a\nb\nc\nd\n";
        assert_eq!(select_lines(text, None, None), (text.to_string(), 1, 4, 4));
        assert_eq!(
            select_lines(text, Some(2), Some(2)),
            ("b\nc\n".to_string(), 2, 3, 4)
        );
        assert_eq!(
            select_lines(text, Some(4), Some(10)),
            ("d\n".to_string(), 4, 4, 4)
        );
        assert_eq!(select_lines(text, Some(9), None).0, "");
        assert_eq!(
            select_lines("no newline", None, None),
            ("no newline".to_string(), 1, 1, 1)
        );
    }
}
