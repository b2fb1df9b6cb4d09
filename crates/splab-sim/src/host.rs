//! Facts about the machine splab itself runs on (not the modelled one): what a run may ask of
//! the host (workload/kv.rs's bound on its records) and what `splab calibrate` reads.

/// A /proc/meminfo field (`key` with its colon, `"MemTotal:"`) in kB; `None` where the host has
/// no such file or field.
pub fn meminfo_kb(key: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(key))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_reads_a_field() {
        if !std::path::Path::new("/proc/meminfo").exists() {
            return;
        }
        let total = meminfo_kb("MemTotal:").expect("Linux has MemTotal");
        assert!(total > 64 << 10, "{total} kB");
        assert_eq!(meminfo_kb("NoSuchField:"), None);
    }
}
