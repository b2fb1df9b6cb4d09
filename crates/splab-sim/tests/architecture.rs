//! The module dependency arrows point one way (ARCHITECTURE.md, "Architecture invariants"):
//! each module below may not name the modules listed against it.

use std::path::Path;

fn sources(dir: &Path, out: &mut Vec<(String, String)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push((
                p.display().to_string(),
                std::fs::read_to_string(&p).unwrap(),
            ));
        }
    }
}

#[test]
fn dependencies_point_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    // (module directory or file, modules it must not use)
    let rules: &[(&str, &[&str])] = &[
        (
            "hw",
            &["vm", "policy", "reserv", "engine", "workload", "phys"],
        ),
        (
            "phys",
            &["vm", "policy", "reserv", "engine", "workload", "hw"],
        ),
        ("policy.rs", &["vm", "reserv", "engine", "workload"]),
        ("reserv", &["vm", "engine", "workload"]),
        ("vm", &["engine", "workload", "daemon"]),
        // Daemons drive the VM's mechanisms on the engine's clock; they know no workload.
        ("daemon", &["workload"]),
    ];
    let mut checked = 0;
    let mut bad = Vec::new();
    for (module, banned) in rules {
        let path = src.join(module);
        let mut files = Vec::new();
        if path.is_dir() {
            sources(&path, &mut files);
        } else {
            files.push((
                path.display().to_string(),
                std::fs::read_to_string(&path).unwrap(),
            ));
        }
        for (name, text) in &files {
            checked += 1;
            // Unit tests may drive the whole engine: only the module's own code counts.
            let text = text.split("#[cfg(test)]").next().unwrap_or("");
            for b in banned.iter() {
                for pat in [
                    format!("crate::{b}::"),
                    format!("crate::{b};"),
                    format!("crate::{b}}}"),
                ] {
                    if text.contains(pat.as_str()) {
                        bad.push(format!("{name} uses crate::{b}"));
                    }
                }
            }
        }
    }
    assert!(checked >= 10, "only {checked} files scanned");
    assert!(
        bad.is_empty(),
        "dependency arrows broken:\n{}",
        bad.join("\n")
    );
}
