//! Does `record` capture what small C programs with known behaviour do?
//!
//! Each test compiles a program with the system's `cc`, records it with splab's Valgrind tool
//! (or lackey, for the fallback test), and checks the events. Without valgrind (or without the
//! tool, or `cc`), the tests print a notice and pass.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use splab_trace::*;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("splab-trace-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn have(cmd: &str) -> bool {
    Command::new(cmd)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// None (after printing why) when this machine cannot run the test.
fn setup(name: &str, backend: Backend) -> Option<PathBuf> {
    if !have("valgrind") || !have("cc") {
        eprintln!("SKIPPED {name}: needs valgrind and cc (apt-get install valgrind gcc)");
        return None;
    }
    if backend == Backend::Tool && !tool_available() {
        eprintln!("SKIPPED {name}: splab's Valgrind tool was not built (Valgrind's headers were missing at build time)");
        return None;
    }
    Some(tmpdir(name))
}

fn compile(dir: &Path, name: &str, src: &str) -> String {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let exe = dir.join(name);
    let st = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&exe)
        .arg(&c)
        .status()
        .unwrap();
    assert!(st.success(), "cc failed on {name}.c");
    exe.display().to_string()
}

/// Records `cmd` and returns its events and the summary.
fn check(dir: &Path, cmd: Vec<String>, backend: Backend) -> (Vec<TraceEvent>, RecordSummary) {
    let out = dir.join("t.spt");
    let opts = RecordOptions {
        backend,
        ..Default::default()
    };
    let mut calls = 0;
    let s = record(&opts, &cmd, &out, |_| calls += 1).expect("record");
    assert!(calls >= 1, "progress is reported at least once");
    let mut r = TraceReader::open(&out).unwrap();
    let mut ev = Vec::new();
    while r.read_batch(&mut ev, 1 << 16).unwrap() > 0 {}
    assert_eq!(r.trailer().unwrap().accesses, s.accesses);
    // info and cat work on it.
    let mut text = Vec::new();
    info(&out, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.contains("processes") && text.contains("regions"),
        "{text}"
    );
    let mut lines = Vec::new();
    cat(&out, &mut lines, Some(50)).unwrap();
    assert_eq!(
        String::from_utf8(lines).unwrap().lines().count(),
        50.min(ev.len())
    );
    (ev, s)
}

const MALLOC64: &str = r#"
#include <stdlib.h>
#include <stdio.h>
int main(void) {
    size_t n = 64ul << 20;
    char *p = malloc(n);
    for (size_t i = 0; i < n; i += 4096) p[i] = 1;
    printf("%d\n", p[12345]);
    return 0;
}
"#;

#[test]
fn malloc_64mb_writes_16384_pages_of_one_mapping() {
    let Some(dir) = setup("malloc64", Backend::Tool) else {
        return;
    };
    let exe = compile(&dir, "malloc64", MALLOC64);
    let (ev, s) = check(&dir, vec![exe], Backend::Tool);
    assert_eq!(s.exit_code, Some(0));
    let big: Vec<(u64, u64)> = ev
        .iter()
        .filter_map(|e| match e {
            TraceEvent::Mmap {
                addr, len, flags, ..
            } if *len >= 64 << 20 && flags.contains(MmapFlags::ANON) => {
                Some((addr.0, addr.0 + len))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        big.len(),
        1,
        "one anonymous mapping of >= 64MB (malloc's mmap): {big:?}"
    );
    let (lo, hi) = big[0];
    let pages: HashSet<u64> = ev
        .iter()
        .filter_map(|e| match e {
            TraceEvent::Access {
                va,
                kind: AccessKind::Write,
                ..
            } if va.0 >= lo && va.0 < hi => Some(va.0 >> 12),
            _ => None,
        })
        .collect();
    assert!(
        pages.len() >= 16384,
        "{} distinct pages written",
        pages.len()
    );
    // The initial address space is there: the executable, a stack, a heap start.
    assert!(ev
        .iter()
        .any(|e| matches!(e, TraceEvent::Mmap { flags, .. } if flags.contains(MmapFlags::STACK))));
    assert!(ev.iter().any(|e| matches!(e, TraceEvent::Brk { .. })));
    assert!(ev.iter().any(
        |e| matches!(e, TraceEvent::FileOpen { name: Some(n), .. } if n.ends_with("/malloc64"))
    ));
    let _ = std::fs::remove_dir_all(dir);
}

const MAPLOOP: &str = r#"
#include <sys/mman.h>
#include <stdio.h>
int main(void) {
    for (int i = 0; i < 200; i++) {
        char *p = mmap(0, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return 1;
        for (int j = 0; j < (1 << 20); j += 4096) p[j] = (char)j;
        munmap(p, 1 << 20);
    }
    puts("ok");
    return 0;
}
"#;

#[test]
fn map_unmap_loop_has_matching_pairs() {
    let Some(dir) = setup("maploop", Backend::Tool) else {
        return;
    };
    let exe = compile(&dir, "maploop", MAPLOOP);
    let (ev, _) = check(&dir, vec![exe], Backend::Tool);
    let mut live: HashMap<u64, u64> = HashMap::new();
    let (mut maps, mut unmaps) = (0, 0);
    for e in &ev {
        match e {
            TraceEvent::Mmap { addr, len, .. } if *len == 1 << 20 => {
                maps += 1;
                live.insert(addr.0, *len);
            }
            TraceEvent::Munmap { addr, len, .. } if *len == 1 << 20 => {
                unmaps += 1;
                assert_eq!(
                    live.remove(&addr.0),
                    Some(1 << 20),
                    "munmap of {addr} matches an mmap"
                );
            }
            _ => {}
        }
    }
    assert_eq!((maps, unmaps), (200, 200));
    assert!(
        live.is_empty(),
        "no 1MB mapping is left: no footprint growth"
    );
    let _ = std::fs::remove_dir_all(dir);
}

const FORK: &str = r#"
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
    char *p = malloc(1 << 16);
    p[0] = 1;
    pid_t c = fork();
    if (c == 0) { for (int i = 0; i < (1 << 16); i += 64) p[i] = 2; _exit(0); }
    waitpid(c, 0, 0);
    return p[0] - 1;
}
"#;

fn check_fork(backend: Backend) {
    let name = format!("fork-{backend:?}");
    let Some(dir) = setup(&name, backend) else {
        return;
    };
    let exe = compile(&dir, "fork", FORK);
    let (ev, s) = check(&dir, vec![exe], backend);
    assert_eq!(s.exit_code, Some(0));
    assert_eq!(s.processes, 2, "two processes");
    let pids: HashSet<Pid> = ev.iter().filter_map(|e| e.pid()).collect();
    assert_eq!(pids.len(), 2, "{pids:?}");
    let forks: Vec<(Pid, Pid)> = ev
        .iter()
        .filter_map(|e| match e {
            TraceEvent::Fork { parent, child } => Some((*parent, *child)),
            _ => None,
        })
        .collect();
    assert_eq!(forks.len(), 1);
    let (parent, child) = forks[0];
    assert!(pids.contains(&parent) && pids.contains(&child) && parent != child);
    // The child's events come after the fork, and both processes exit.
    let fork_at = ev
        .iter()
        .position(|e| matches!(e, TraceEvent::Fork { .. }))
        .unwrap();
    assert!(ev[..fork_at].iter().all(|e| e.pid() != Some(child)));
    for p in [parent, child] {
        assert!(ev.contains(&TraceEvent::Exit { pid: p }), "exit of {p}");
    }
    let child_writes = ev.iter().filter(|e| matches!(e, TraceEvent::Access { pid, kind: AccessKind::Write, .. } if *pid == child)).count();
    assert!(
        child_writes >= 1024,
        "the child's 1024 stores: {child_writes}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn fork_shows_two_processes() {
    check_fork(Backend::Tool);
}

#[test]
fn lackey_fallback_records_a_fork() {
    check_fork(Backend::Lackey);
}

#[test]
fn exec_replaces_the_address_space() {
    let Some(dir) = setup("exec", Backend::Tool) else {
        return;
    };
    let src = r#"
#include <unistd.h>
int main(void) { execl("/bin/true", "true", (char *)0); return 1; }
"#;
    let exe = compile(&dir, "execer", src);
    let (ev, s) = check(&dir, vec![exe], Backend::Tool);
    assert_eq!(s.processes, 1);
    let at = ev
        .iter()
        .position(|e| matches!(e, TraceEvent::Exec { .. }))
        .expect("an Exec event");
    // After the exec: the new image's mappings, starting with /bin/true's file.
    assert!(ev[at..]
        .iter()
        .any(|e| matches!(e, TraceEvent::FileOpen { name: Some(n), .. } if n.ends_with("/true"))));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_missing_valgrind_says_how_to_install_it() {
    let dir = tmpdir("novg");
    let opts = RecordOptions {
        valgrind: "/nonexistent/valgrind".into(),
        ..Default::default()
    };
    let err = record(&opts, &["true".to_string()], &dir.join("x.spt"), |_| {}).unwrap_err();
    assert!(
        err.to_string().contains("apt-get install valgrind"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(dir);
}
