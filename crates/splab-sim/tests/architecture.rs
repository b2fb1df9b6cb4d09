//! The module dependency arrows point one way (ARCHITECTURE.md, "Architecture invariants"):
//! each module below may not name the modules listed against it. Uses are read from the
//! module's own code (not its unit tests), both as paths (`crate::vm::Os`) and inside grouped
//! imports (`use crate::{policy, vm::Os}`).

use std::collections::BTreeSet;
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

/// The files of a module (a directory, or a file and the directory of its submodules), each
/// cut at its first `#[cfg(test)]`: unit tests may drive the whole engine.
fn module_files(module: &str) -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let path = src.join(module);
    if path.is_dir() {
        sources(&path, &mut files);
    } else {
        files.push((
            path.display().to_string(),
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
        ));
        // `policy.rs` may keep submodules in `policy/`.
        let dir = src.join(module.trim_end_matches(".rs"));
        if dir.is_dir() {
            sources(&dir, &mut files);
        }
    }
    for f in &mut files {
        f.1 = f.1.split("#[cfg(test)]").next().unwrap_or("").to_string();
    }
    files
}

/// The crate's top-level modules a text names through `crate::`: `crate::vm::Os` gives `vm`,
/// `crate::{policy::Policy, units}` gives `policy` and `units`.
fn crate_modules(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut rest = text;
    while let Some(i) = rest.find("crate::") {
        // `splab_crate::` or `my_crate::` are other names.
        let before = rest[..i].chars().next_back();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let t = rest.trim_start();
        if let Some(group) = t.strip_prefix('{') {
            // The top-level items of the group, up to its closing brace.
            let mut depth = 0;
            let mut item_start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if c.is_whitespace() => {}
                    _ if item_start && depth == 0 => {
                        item_start = false;
                        let m = ident(&group[j..]);
                        if !m.is_empty() && m != "self" {
                            out.insert(m);
                        }
                    }
                    _ => {}
                }
            }
        } else {
            let m = ident(t);
            if !m.is_empty() {
                out.insert(m);
            }
        }
    }
    out
}

#[test]
fn crate_modules_reads_paths_and_groups() {
    let text = "use crate::vm::Os;\nuse crate::{policy::{Policy, ListScheme}, units,\n  reserv};\n\
                let x = crate::hw::machine::skylake(); use other_crate::engine::X; use crate::{self};";
    let got: Vec<String> = crate_modules(text).into_iter().collect();
    assert_eq!(got, ["hw", "policy", "reserv", "units", "vm"]);
}

#[test]
fn dependencies_point_one_way() {
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
        (
            "policy.rs",
            &["vm", "reserv", "engine", "workload", "daemon"],
        ),
        ("reserv", &["vm", "engine", "workload", "daemon"]),
        ("vm", &["engine", "workload", "daemon"]),
        // Daemons drive the VM's mechanisms on the engine's clock; they know no workload.
        ("daemon", &["workload"]),
    ];
    let mut checked = 0;
    let mut bad = Vec::new();
    for (module, banned) in rules {
        for (name, text) in &module_files(module) {
            checked += 1;
            let used = crate_modules(text);
            for b in banned.iter() {
                if used.contains(*b) {
                    bad.push(format!("{name} uses crate::{b}"));
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

/// Issue 11: the circle policy -> reserv (ListScheme) -> vm (ObjId) -> policy is gone: a list
/// scheme is a policy choice (`policy::ListScheme`), an object id a unit (`units::ObjId`).
#[test]
fn no_policy_reserv_vm_circle() {
    let uses = |module: &str| -> BTreeSet<String> {
        module_files(module)
            .iter()
            .flat_map(|(_, t)| crate_modules(t))
            .collect()
    };
    let policy = uses("policy.rs");
    let reserv = uses("reserv");
    let vm = uses("vm");
    // What each does use, so that an empty scan cannot pass.
    assert!(
        policy.contains("hw") && policy.contains("units"),
        "{policy:?}"
    );
    assert!(
        reserv.contains("policy") && reserv.contains("units"),
        "{reserv:?}"
    );
    assert!(vm.contains("policy") && vm.contains("reserv"), "{vm:?}");
    for m in ["reserv", "vm"] {
        assert!(!policy.contains(m), "policy uses {m}: {policy:?}");
    }
    assert!(!reserv.contains("vm"), "reserv uses vm: {reserv:?}");
    let units = uses("units.rs");
    assert!(units.iter().all(|m| m == "error"), "units uses {units:?}");
}

/// Mechanisms never read a policy's name (ARCHITECTURE.md): they take its options. The name is
/// for reports; the only readers are the policy module, the run's report and the CLI.
#[test]
fn mechanisms_never_read_a_policy_name() {
    let mut scanned = 0;
    let mut bad = Vec::new();
    for module in [
        "vm",
        "reserv",
        "phys",
        "hw",
        "daemon",
        "workload",
        "engine.rs",
    ] {
        for (name, text) in &module_files(module) {
            scanned += 1;
            if text.contains("policy.name") || text.contains("policy().name") {
                bad.push(name.clone());
            }
        }
    }
    assert!(scanned >= 20, "only {scanned} files scanned");
    assert!(bad.is_empty(), "a policy's name read in: {bad:?}");
}
