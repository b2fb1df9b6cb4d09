//! Version-2 traces (written before the address prediction of version 3) still read.
//!
//! `tests/fixtures/v2-synthetic.spt` was written by splab-trace's version-2 code (commit
//! c2d73d7, with `fixtures/make_v2_fixture.rs.txt`): two processes, runs up and down, every
//! access kind, dep/ipa pairs with escapes, an odd size and addresses far apart. Its `.txt` is
//! the version-2 `trace cat` of it.

use std::path::PathBuf;

use splab_trace::*;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

#[test]
fn v2_synthetic_reads_as_version_2_wrote_it() {
    let r = TraceReader::open(&fixture("v2-synthetic.spt")).unwrap();
    assert_eq!(r.version(), 2);
    let text: Vec<String> = r.map(|e| e.unwrap().to_string()).collect();
    let want: Vec<String> = std::fs::read_to_string(fixture("v2-synthetic.txt"))
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(text, want);
}

#[test]
fn v2_traces_survive_damage() {
    // The version-2 decoding path under flipped and cut bytes: events or an error, no panic.
    let bytes = std::fs::read(fixture("v2-synthetic.spt")).unwrap();
    let mut x: u64 = 0x9e3779b97f4a7c15;
    let mut errors = 0;
    for _ in 0..2000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut b = bytes.clone();
        let i = 10 + (x as usize) % (b.len() - 10);
        b[i] ^= (x >> 32) as u8 | 1;
        let cut = 10 + (x >> 40) as usize % (b.len() - 10);
        for data in [&b[..], &bytes[..cut]] {
            match TraceReader::new(data) {
                Err(_) => errors += 1,
                Ok(r) => {
                    for e in r {
                        if e.is_err() {
                            errors += 1;
                            break;
                        }
                    }
                }
            }
        }
    }
    // Every cut trace lacks its trailer and every flipped byte breaks a CRC or a field.
    assert!(
        errors >= 3900,
        "only {errors} of 4000 damaged traces were reported"
    );
}
