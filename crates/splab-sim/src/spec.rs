//! Parsing of `NAME:key=value,key=value` specifications (machines, policies, workloads).
//!
//! Every error names the offending token and, where the set is closed, the valid choices, so that
//! the CLI can print one actionable line.

use crate::error::{Result, SimError};

/// A parsed `NAME:key=value,...` spec. Keys are consumed with the `take_*` methods; `finish`
/// rejects any key left over, naming it and the keys that are accepted.
#[derive(Debug, Clone)]
pub struct Spec {
    /// What kind of thing this names ("workload", "policy", "machine"), for error messages.
    pub what: &'static str,
    pub name: String,
    params: Vec<(String, String)>,
    accepted: Vec<&'static str>,
}

impl Spec {
    pub fn parse(what: &'static str, text: &str) -> Result<Spec> {
        let text = text.trim();
        let (name, rest) = match text.split_once(':') {
            Some((n, r)) => (n, Some(r)),
            None => (text, None),
        };
        if name.is_empty() {
            return Err(SimError::BadInput(format!("empty {what} name in '{text}'")));
        }
        Spec::with_params(what, name, rest.unwrap_or(""))
    }

    /// The `key=value,...` parameters `rest` of a thing called `name` (which may itself hold a
    /// ':', as a policy file's path does).
    /// An empty piece (`size=16M,,updates=10`, or a comma at either end) is bad input, as an
    /// empty policy in `-p base,,navarro` is: a typo, often of a parameter meant to be there.
    /// Only no parameters at all (`gups`, `gups:`) is not.
    pub fn with_params(what: &'static str, name: &str, rest: &str) -> Result<Spec> {
        let mut params = Vec::new();
        if rest.trim().is_empty() {
            return Ok(Spec {
                what,
                name: name.to_string(),
                params,
                accepted: Vec::new(),
            });
        }
        for kv in rest.split(',') {
            if kv.trim().is_empty() {
                return Err(SimError::BadInput(format!(
                    "{what} '{name}': empty parameter in '{rest}' (two commas in a row, or a \
                     comma at the start or end): give key=value pairs separated by single commas"
                )));
            }
            let Some((k, v)) = kv.split_once('=') else {
                return Err(SimError::BadInput(format!(
                    "{what} '{name}': parameter '{kv}' is not of the form key=value"
                )));
            };
            let k = k.trim();
            if k.is_empty() {
                return Err(SimError::BadInput(format!(
                    "{what} '{name}': parameter '{kv}' has no key before '='"
                )));
            }
            if params.iter().any(|(pk, _)| pk == k) {
                return Err(SimError::BadInput(format!(
                    "{what} '{name}': parameter '{k}' given twice"
                )));
            }
            params.push((k.to_string(), v.trim().to_string()));
        }
        Ok(Spec {
            what,
            name: name.to_string(),
            params,
            accepted: Vec::new(),
        })
    }

    /// The keys given and not yet taken, in the order given.
    pub fn keys(&self) -> Vec<String> {
        self.params.iter().map(|(k, _)| k.clone()).collect()
    }

    fn take(&mut self, key: &'static str) -> Option<String> {
        self.accepted.push(key);
        let pos = self.params.iter().position(|(k, _)| k == key)?;
        Some(self.params.remove(pos).1)
    }

    fn bad(&self, key: &str, value: &str, expected: &str) -> SimError {
        SimError::BadInput(format!(
            "{} '{}': bad value '{}' for '{}': expected {}",
            self.what, self.name, value, key, expected
        ))
    }

    /// A byte size with an optional K/M/G/T suffix (binary), in `[min, max]`.
    pub fn take_size(
        &mut self,
        key: &'static str,
        default: u64,
        min: u64,
        max: u64,
    ) -> Result<u64> {
        match self.take(key) {
            None => Ok(default),
            Some(v) => {
                let n = parse_size(&v)
                    .ok_or_else(|| self.bad(key, &v, "a size such as 4096, 64K, 1G"))?;
                if n < min || n > max {
                    return Err(self.bad(
                        key,
                        &v,
                        &format!(
                            "a size from {} to {}",
                            crate::units::fmt_size(min),
                            crate::units::fmt_size(max)
                        ),
                    ));
                }
                Ok(n)
            }
        }
    }

    /// A count with an optional K/M/G suffix (decimal: 1M = 1,000,000), in `[min, max]`.
    pub fn take_count(
        &mut self,
        key: &'static str,
        default: u64,
        min: u64,
        max: u64,
    ) -> Result<u64> {
        match self.take(key) {
            None => Ok(default),
            Some(v) => {
                let n = parse_count(&v)
                    .ok_or_else(|| self.bad(key, &v, "a count such as 1000, 10K, 100M"))?;
                if n < min || n > max {
                    return Err(self.bad(key, &v, &format!("a count from {min} to {max}")));
                }
                Ok(n)
            }
        }
    }

    /// One of a closed set of words.
    pub fn take_choice(
        &mut self,
        key: &'static str,
        default: &'static str,
        choices: &[&'static str],
    ) -> Result<&'static str> {
        match self.take(key) {
            None => Ok(default),
            Some(v) => choices
                .iter()
                .find(|c| **c == v)
                .copied()
                .ok_or_else(|| self.bad(key, &v, &format!("one of {}", choices.join(", ")))),
        }
    }

    /// A raw string value (e.g. a path, or a list the caller parses itself).
    pub fn take_str(&mut self, key: &'static str) -> Option<String> {
        self.take(key)
    }

    /// A boolean: true/false/yes/no/1/0.
    pub fn take_bool(&mut self, key: &'static str, default: bool) -> Result<bool> {
        match self.take(key) {
            None => Ok(default),
            Some(v) => match v.as_str() {
                "true" | "yes" | "1" | "on" => Ok(true),
                "false" | "no" | "0" | "off" => Ok(false),
                _ => Err(self.bad(key, &v, "true or false")),
            },
        }
    }

    /// Rejects any parameter that no `take_*` call consumed.
    pub fn finish(self) -> Result<()> {
        if let Some((k, _)) = self.params.first() {
            let valid = if self.accepted.is_empty() {
                "none".to_string()
            } else {
                self.accepted.join(", ")
            };
            return Err(SimError::BadInput(format!(
                "{} '{}': unknown parameter '{}' (valid parameters: {})",
                self.what, self.name, k, valid
            )));
        }
        Ok(())
    }

    /// Error for an unknown name, listing the valid ones.
    pub fn unknown_name(&self, valid: &[&str]) -> SimError {
        SimError::BadInput(format!(
            "unknown {} '{}' (valid: {})",
            self.what,
            self.name,
            valid.join(", ")
        ))
    }
}

fn split_suffix(s: &str) -> (&str, Option<char>) {
    match s.chars().last() {
        Some(c) if c.is_ascii_alphabetic() => (&s[..s.len() - 1], Some(c.to_ascii_uppercase())),
        _ => (s, None),
    }
}

/// Parses "4096", "64K", "2M", "1G", "1T" (binary multiples; a trailing "B" is allowed: "64KB").
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let s = s
        .strip_suffix(['B', 'b'])
        .filter(|r| r.chars().last().is_some_and(|c| c.is_ascii_alphabetic()))
        .unwrap_or(s);
    let (num, suffix) = split_suffix(s);
    let mult: u64 = match suffix {
        None => 1,
        Some('K') => 1 << 10,
        Some('M') => 1 << 20,
        Some('G') => 1 << 30,
        Some('T') => 1 << 40,
        _ => return None,
    };
    let n: u64 = num.parse().ok()?;
    n.checked_mul(mult)
}

/// Parses "1000", "10K", "100M", "2G" (decimal multiples).
pub fn parse_count(s: &str) -> Option<u64> {
    let (num, suffix) = split_suffix(s.trim());
    let mult: u64 = match suffix {
        None => 1,
        Some('K') => 1_000,
        Some('M') => 1_000_000,
        Some('G') => 1_000_000_000,
        _ => return None,
    };
    let n: u64 = num.parse().ok()?;
    n.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_counts() {
        assert_eq!(parse_size("64K"), Some(65536));
        assert_eq!(parse_size("64KB"), Some(65536));
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size("12"), Some(12));
        assert_eq!(parse_size("1X"), None);
        assert_eq!(parse_size("-1"), None);
        assert_eq!(parse_count("100M"), Some(100_000_000));
        assert_eq!(parse_size("99999999999T"), None);
    }

    #[test]
    fn spec_rejects_unknown_and_malformed() {
        let mut s = Spec::parse("workload", "seq:size=1G,op=write").unwrap();
        assert_eq!(s.take_size("size", 0, 1, u64::MAX).unwrap(), 1 << 30);
        assert_eq!(
            s.take_choice("op", "read", &["read", "write", "rw"])
                .unwrap(),
            "write"
        );
        s.finish().unwrap();

        let mut s = Spec::parse("workload", "seq:sise=1G").unwrap();
        s.take_size("size", 0, 1, u64::MAX).unwrap();
        let e = s.finish().unwrap_err().to_string();
        assert!(e.contains("'sise'") && e.contains("size"), "{e}");

        assert!(Spec::parse("workload", "seq:size").is_err());
        // Empty pieces are typos, not "no parameter here".
        for bad in [
            "gups:size=16M,,updates=1000",
            "gups:size=16M,",
            "gups:,size=16M",
            "gups:size=16M, ,updates=1",
            "gups:=16M",
        ] {
            let e = Spec::parse("workload", bad).unwrap_err().to_string();
            assert!(e.contains("gups") && e.contains("parameter"), "{bad}: {e}");
        }
        let e = Spec::parse("workload", "gups:size=16M,,updates=1000")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("empty parameter in 'size=16M,,updates=1000'"),
            "{e}"
        );
        for ok in ["gups", "gups:", "gups: "] {
            Spec::parse("workload", ok).unwrap().finish().unwrap();
        }
        let mut s = Spec::parse("workload", "seq:op=jump").unwrap();
        let e = s
            .take_choice("op", "read", &["read", "write"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("'jump'") && e.contains("read, write"), "{e}");
    }
}
