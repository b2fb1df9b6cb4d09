//! The repository's documents name each other and the sources cite them: every `docs/...` path
//! mentioned in a source file or a document exists (issue 9: design.md was cited but absent).

use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if p.is_dir() {
            if name != "target" && !name.starts_with('.') {
                files(&p, out);
            }
        } else if name.ends_with(".rs") || name.ends_with(".md") || name.ends_with(".sh") {
            out.push(p);
        }
    }
}

#[test]
fn every_cited_docs_path_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut all = Vec::new();
    files(&root, &mut all);
    let mut cited = 0;
    let mut missing = Vec::new();
    for f in &all {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        let mut rest = text.as_str();
        while let Some(i) = rest.find("docs/") {
            // Only a path at a word start, not one inside another path (`../shared/docs/...`).
            let before = rest[..i].chars().last();
            let tail = &rest[i..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || "/._-".contains(c)))
                .unwrap_or(tail.len());
            let path = tail[..end].trim_end_matches('.');
            rest = &tail[end.max(5)..];
            if matches!(before, Some(c) if c.is_ascii_alphanumeric() || "/._-".contains(c)) {
                continue;
            }
            if !(path.ends_with(".md") || path.ends_with(".json")) {
                continue;
            }
            cited += 1;
            if !root.join(path).exists() {
                missing.push(format!("{} cites {path}", f.display()));
            }
        }
    }
    assert!(
        cited > 10,
        "only {cited} citations found: the scan is broken"
    );
    assert!(
        missing.is_empty(),
        "missing documents:\n{}",
        missing.join("\n")
    );
}
