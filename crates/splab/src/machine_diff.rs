//! `splab machine diff A B`: every parameter of two machines side by side, with the relative
//! difference, e.g. two `splab calibrate` runs on the same host (issue 8: "running it twice
//! gives parameters within 10% of each other; report the spread"). Both machines are rendered
//! as machine files (`Machine::show`, so presets, files and options all work) and compared key
//! by key; `source`, `name` and `description` notes are left out.

use anyhow::{Context, Result};
use splab_sim::hw::Machine;

/// One parameter that differs, or is present in one machine only.
#[derive(Debug, PartialEq)]
pub struct Diff {
    pub key: String,
    pub a: String,
    pub b: String,
    /// |a - b| / max(|a|, |b|), in percent, when both are numbers (sizes such as "32M" count
    /// as numbers of bytes); None for other values.
    pub pct: Option<f64>,
}

/// The parameters of a machine spec, in file order: dotted key (array elements by index) and
/// value as written (strings unquoted).
fn leaves(spec: &str) -> Result<Vec<(String, toml::Value)>> {
    let text = Machine::show(spec)?;
    let v: toml::Table = text
        .parse()
        .with_context(|| format!("machine '{spec}': its file does not parse as TOML"))?;
    let mut out = Vec::new();
    flatten("", &toml::Value::Table(v), &mut out);
    Ok(out)
}

fn flatten(prefix: &str, v: &toml::Value, out: &mut Vec<(String, toml::Value)>) {
    let key = |k: &str| {
        if prefix.is_empty() {
            k.to_string()
        } else {
            format!("{prefix}.{k}")
        }
    };
    match v {
        toml::Value::Table(t) => {
            for (k, v) in t {
                if matches!(k.as_str(), "source" | "name" | "description") && !v.is_table() {
                    continue;
                }
                flatten(&key(k), v, out);
            }
        }
        toml::Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                flatten(&key(&i.to_string()), v, out);
            }
        }
        _ => out.push((prefix.to_string(), v.clone())),
    }
}

/// A value as a number: integers, floats and sizes ("4K", "32M", "1G", "512G").
fn number(v: &toml::Value) -> Option<f64> {
    match v {
        toml::Value::Integer(i) => Some(*i as f64),
        toml::Value::Float(f) => Some(*f),
        toml::Value::String(s) => splab_sim::spec::parse_size(s).map(|b| b as f64),
        _ => None,
    }
}

fn show(v: Option<&toml::Value>) -> String {
    match v {
        None => "-".into(),
        Some(toml::Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    }
}

/// The parameters that differ between machines `a` and `b`, and how many were compared.
pub fn diff(a: &str, b: &str) -> Result<(Vec<Diff>, usize)> {
    let la = leaves(a)?;
    let lb = leaves(b)?;
    let mut keys: Vec<&String> = la.iter().map(|(k, _)| k).collect();
    for (k, _) in &lb {
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let get = |l: &[(String, toml::Value)], k: &str| {
        l.iter().find(|(kk, _)| kk == k).map(|(_, v)| v.clone())
    };
    let mut out = Vec::new();
    for k in &keys {
        let (va, vb) = (get(&la, k), get(&lb, k));
        if va == vb {
            continue;
        }
        let pct = match (va.as_ref().and_then(number), vb.as_ref().and_then(number)) {
            (Some(x), Some(y)) => {
                let m = x.abs().max(y.abs());
                Some(if m == 0.0 {
                    0.0
                } else {
                    100.0 * (x - y).abs() / m
                })
            }
            _ => None,
        };
        out.push(Diff {
            key: k.to_string(),
            a: show(va.as_ref()),
            b: show(vb.as_ref()),
            pct,
        });
    }
    Ok((out, keys.len()))
}

/// For a share of a lifetime curve (`caches.levels.N.lifetime_curve_ns.M.1`: the share of
/// lines of that age gone, from 0 to 1), the absolute difference, printed beside the relative
/// one: a share is a fraction of all the lines, and near none two small shares read far apart
/// relatively (0.001 and 0.004: 75%) where they differ by 0.003 of the lines. The relative
/// difference still decides "beyond"; the spread each share was measured with is in the
/// level's `source` (`splab calibrate` writes each to the decimal its passes' spread reaches).
pub fn share_gap(key: &str, a: &str, b: &str) -> Option<f64> {
    let (head, col) = key.rsplit_once('.')?;
    let (curve, _) = head.rsplit_once('.')?;
    if col != "1" || !curve.ends_with("lifetime_curve_ns") {
        return None;
    }
    let (x, y): (f64, f64) = (a.parse().ok()?, b.parse().ok()?);
    ((0.0..=1.0).contains(&x) && (0.0..=1.0).contains(&y)).then(|| (x - y).abs())
}

/// The table `splab machine diff` prints: a Markdown table of the parameters that differ and a
/// count of those beyond `tolerance` percent (values that are not numbers count as beyond).
pub fn table(a: &str, b: &str, tolerance: f64) -> Result<(String, usize)> {
    use std::fmt::Write as _;
    let (d, n) = diff(a, b)?;
    let mut s = String::new();
    let _ = writeln!(s, "| parameter | {a} | {b} | difference |");
    let _ = writeln!(s, "|---|---|---|---|");
    let mut beyond = 0;
    for r in &d {
        let over = r.pct.is_none_or(|p| p > tolerance);
        beyond += over as usize;
        let _ = writeln!(
            s,
            "| {} | {} | {} | {}{}{} |",
            r.key,
            r.a,
            r.b,
            r.pct
                .map(|p| format!("{p:.1}%"))
                .unwrap_or_else(|| "differs".into()),
            if over { " (beyond)" } else { "" },
            share_gap(&r.key, &r.a, &r.b)
                .map(|g| format!("; {g:.3} of the lines apart"))
                .unwrap_or_default()
        );
    }
    // Values with no percentage count as beyond, but are not "by more than" anything.
    let words = d.iter().filter(|r| r.pct.is_none()).count();
    let words = if words > 0 {
        format!(" and {words} with no percentage (a word, or present on one side only)")
    } else {
        String::new()
    };
    // Of those beyond, the lifetime-curve shares and how far apart they are as shares of the
    // lines (`share_gap`): the relative difference of two shares near none says little.
    let gaps: Vec<f64> = d
        .iter()
        .filter(|r| r.pct.is_some_and(|p| p > tolerance))
        .filter_map(|r| share_gap(&r.key, &r.a, &r.b))
        .collect();
    let shares = if gaps.is_empty() {
        String::new()
    } else {
        format!(
            ", {} of them lifetime-curve shares at most {:.3} of the lines apart",
            gaps.len(),
            gaps.iter().copied().fold(0.0, f64::max)
        )
    };
    let _ = writeln!(
        s,
        "\n{} of {n} parameters differ; {} by more than {tolerance}%{shares}{words} (the difference is |a - b| / max(|a|, |b|)).",
        d.len(),
        d.iter().filter(|r| r.pct.is_some_and(|p| p > tolerance)).count()
    );
    Ok((s, beyond))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_machine_does_not_differ_from_itself() {
        let (d, n) = diff("skylake", "skylake").unwrap();
        assert!(d.is_empty(), "{d:?}");
        assert!(n > 30, "{n} parameters compared");
    }

    #[test]
    fn an_option_shows_as_one_difference_with_its_size() {
        let (d, _) = diff("skylake:mem=4G", "skylake:mem=8G").unwrap();
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].key, "mem");
        assert_eq!(d[0].pct, Some(50.0));
        let (t, beyond) = table("skylake:mem=4G", "skylake:mem=8G", 10.0).unwrap();
        assert_eq!(beyond, 1);
        assert!(t.contains("| mem | 4G | 8G | 50.0% (beyond) |"), "{t}");
    }

    #[test]
    fn a_table_present_in_one_machine_only_is_listed() {
        let (d, _) = diff("skylake", "skylake:nested=4K").unwrap();
        let page = d
            .iter()
            .find(|r| r.key == "nested.page_size")
            .expect("listed");
        assert_eq!(
            (page.a.as_str(), page.b.as_str(), page.pct),
            ("-", "4K", None)
        );
        let (t, beyond) = table("skylake", "skylake:nested=4K", 10.0).unwrap();
        assert_eq!(
            beyond,
            d.len(),
            "a value present on one side counts as beyond"
        );
        // The summary does not call them "by more than 10%": they have no percentage.
        assert!(
            t.contains(&format!(
                "; 0 by more than 10% and {} with no percentage (a word, or present on one side only)",
                d.len()
            )),
            "{t}"
        );
    }

    #[test]
    fn a_lifetime_share_also_shows_its_absolute_difference() {
        let k = "caches.levels.2.lifetime_curve_ns.3.1";
        let g = share_gap(k, "0.001", "0.004").unwrap();
        assert!((g - 0.003).abs() < 1e-12, "{g}");
        // The curve's ages, other keys, and values that are not shares have none.
        assert_eq!(
            share_gap("caches.levels.2.lifetime_curve_ns.3.0", "1", "2"),
            None
        );
        assert_eq!(share_gap("caches.levels.2.latency", "0.1", "0.2"), None);
        assert_eq!(
            share_gap("core.lifetime_curve_ns_x.3.1", "0.1", "0.2"),
            None
        );
        assert_eq!(share_gap(k, "1.5", "0.2"), None);
        assert_eq!(share_gap(k, "-", "0.2"), None);
        // The summary counts the shares among the values beyond and their largest gap.
        let dir = std::env::temp_dir().join(format!("splab-diff-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let base = splab_sim::hw::Machine::show("skylake").unwrap();
        let with = |curve: &str| {
            let t = base.replacen(
                "[[caches.levels]]\nname = \"LLC\"",
                &format!("[[caches.levels]]\nname = \"LLC\"\nlifetime_curve_ns = {curve}"),
                1,
            );
            assert_ne!(t, base, "the LLC table was found");
            t
        };
        let (a, b) = (dir.join("a.toml"), dir.join("b.toml"));
        // Two shares beyond 10% (50% and 20%), one exactly at it (0.0625 / 0.625), not counted.
        std::fs::write(
            &a,
            with("[[1000000, 0.002], [8000000, 0.2], [16000000, 0.625]]"),
        )
        .unwrap();
        std::fs::write(
            &b,
            with("[[1000000, 0.001], [8000000, 0.25], [16000000, 0.5625]]"),
        )
        .unwrap();
        let (t, beyond) = table(
            &format!("file:{}", a.display()),
            &format!("file:{}", b.display()),
            10.0,
        )
        .unwrap();
        assert_eq!(beyond, 2, "{t}");
        assert!(
            t.contains("; 2 by more than 10%, 2 of them lifetime-curve shares at most 0.050 of the lines apart ("),
            "{t}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_bad_machine_is_an_error() {
        assert!(diff("skylake", "no-such-machine").is_err());
    }
}
