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
    compile_with(dir, name, src, "-O1")
}

fn compile_with(dir: &Path, name: &str, src: &str, opt: &str) -> String {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let exe = dir.join(name);
    let st = Command::new("cc")
        .args(opt.split_whitespace())
        .arg("-o")
        .arg(&exe)
        .arg(&c)
        .status()
        .unwrap();
    assert!(st.success(), "cc failed on {name}.c");
    exe.display().to_string()
}

/// Records `cmd` and returns its events and the summary.
fn check(dir: &Path, cmd: Vec<String>, backend: Backend) -> (Vec<TraceEvent>, RecordSummary) {
    let opts = RecordOptions {
        backend,
        ..Default::default()
    };
    check_with(dir, cmd, &opts)
}

/// `check` with these options.
fn check_with(
    dir: &Path,
    cmd: Vec<String>,
    opts: &RecordOptions,
) -> (Vec<TraceEvent>, RecordSummary) {
    let out = dir.join("t.spt");
    let opts = opts.clone();
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

// ---------------------------------------------------------------------------------------------
// dep, ipa and read-modify-writes

/// The accesses of `kind` in the largest anonymous mapping of at least `min_len` bytes but the
/// stack (the test program's malloc'ed array, after the 16 bytes of malloc's chunk header), as
/// (dep, ipa).
fn in_big_mapping(ev: &[TraceEvent], min_len: u64, want: AccessKind) -> Vec<(u16, u16)> {
    let (lo, hi) = ev
        .iter()
        .filter_map(|e| match e {
            TraceEvent::Mmap {
                addr, len, flags, ..
            } if *len >= min_len
                && flags.contains(MmapFlags::ANON)
                && !flags.contains(MmapFlags::STACK) =>
            {
                Some((addr.0, addr.0 + len))
            }
            _ => None,
        })
        .max_by_key(|&(lo, hi)| hi - lo)
        .expect("the program's array is an anonymous mapping");
    ev.iter()
        .filter_map(|e| match e {
            TraceEvent::Access {
                va, kind, dep, ipa, ..
            } if *kind == want && va.0 >= lo + 16 && va.0 < hi => Some((*dep, *ipa)),
            _ => None,
        })
        .collect()
}

/// The most frequent value and the fraction of `v` it covers.
fn mode(v: impl Iterator<Item = u16>) -> (u16, f64) {
    let mut n: HashMap<u16, usize> = HashMap::new();
    let mut total = 0;
    for x in v {
        *n.entry(x).or_default() += 1;
        total += 1;
    }
    let (&m, &c) = n
        .iter()
        .max_by_key(|&(k, c)| (*c, std::cmp::Reverse(*k)))
        .unwrap();
    (m, c as f64 / total.max(1) as f64)
}

/// The instruction counts of the innermost loops of `main` in `exe` (a backward jump and the
/// instructions from its target to it), with the text of their instructions; None without
/// objdump.
fn loops_of_main(exe: &str) -> Option<Vec<Vec<String>>> {
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn", exe])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut insns: Vec<(u64, String)> = Vec::new();
    let mut in_main = false;
    for line in text.lines() {
        if line.ends_with("<main>:") {
            in_main = true;
            continue;
        }
        if in_main && line.trim().is_empty() {
            break;
        }
        if !in_main {
            continue;
        }
        let Some((a, rest)) = line.trim().split_once(':') else {
            continue;
        };
        let Ok(a) = u64::from_str_radix(a.trim(), 16) else {
            continue;
        };
        insns.push((a, rest.trim().to_string()));
    }
    let mut loops: Vec<(u64, u64)> = Vec::new();
    for (a, t) in &insns {
        if !t.starts_with('j') {
            continue;
        }
        let target = t
            .split_whitespace()
            .nth(1)
            .and_then(|x| u64::from_str_radix(x, 16).ok());
        if let Some(target) = target.filter(|&x| x <= *a) {
            loops.push((target, *a));
        }
    }
    let inner: Vec<(u64, u64)> = loops
        .iter()
        .filter(|&&(s, e)| {
            !loops
                .iter()
                .any(|&(s2, e2)| (s2, e2) != (s, e) && s <= s2 && e2 <= e)
        })
        .copied()
        .collect();
    Some(
        inner
            .iter()
            .map(|&(s, e)| {
                insns
                    .iter()
                    .filter(|(a, _)| *a >= s && *a <= e)
                    .map(|(_, t)| t.clone())
                    .collect()
            })
            .collect(),
    )
}

const CHASE: &str = r#"
#include <stdio.h>
#include <stdlib.h>
struct node { struct node *next; long pad; };
int main(void) {
    long n = (4l << 20) / sizeof(struct node);
    struct node *a = malloc(n * sizeof *a);
    long *perm = malloc(n * sizeof *perm);
    for (long i = 0; i < n; i++) perm[i] = i;
    unsigned long x = 88172645463325252ul;
    for (long i = n - 1; i > 0; i--) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        long j = (long)(x % (unsigned long)(i + 1)), t = perm[i];
        perm[i] = perm[j]; perm[j] = t;
    }
    for (long i = 0; i < n; i++) a[perm[i]].next = &a[perm[(i + 1) % n]];
    struct node *p = &a[perm[0]];
    for (long s = 0; s < 300000; s++) p = p->next;
    printf("%ld\n", (long)(p - a));
    return 0;
}
"#;

#[test]
fn a_pointer_chase_depends_on_the_previous_load() {
    let Some(dir) = setup("chase", Backend::Tool) else {
        return;
    };
    let exe = compile_with(&dir, "chase", CHASE, "-O2");
    let (ev, s) = check(&dir, vec![exe.clone()], Backend::Tool);
    assert_eq!(s.exit_code, Some(0));
    // The reads of the list's nodes are the loop's `p = p->next` loads (the list is built with
    // stores only).
    let chase = in_big_mapping(&ev, 4 << 20, AccessKind::Read);
    assert!(chase.len() >= 300_000, "{} chase loads", chase.len());
    let dependent = chase.iter().filter(|&&(d, _)| d >= 1).count();
    assert!(
        dependent as f64 >= 0.9 * chase.len() as f64,
        "{dependent} of {} chase loads depend on a load",
        chase.len()
    );
    let (dep, share) = mode(chase.iter().map(|&(d, _)| d));
    assert!(dep == 1 && share >= 0.9, "typical dep {dep} ({share:.3})");
    // ipa: the loop's instructions, one load per iteration.
    let (ipa, share) = mode(chase.iter().map(|&(_, i)| i));
    assert!(ipa > 1 && share >= 0.9, "typical ipa {ipa} ({share:.3})");
    match loops_of_main(&exe) {
        Some(loops) => {
            // The loop that loads a register through itself (`mov (%rsi),%rsi`).
            let chase_loop = loops.iter().find(|body| {
                body.iter().any(|t| {
                    let t = t.replace("0x0", "");
                    t.starts_with("mov")
                        && t.split_whitespace().nth(1).is_some_and(|ops| {
                            ops.split_once("),").is_some_and(|(m, r)| {
                                m.rsplit('(').next().is_some_and(|base| base == r)
                            })
                        })
                })
            });
            let body = chase_loop.expect("objdump shows the chase loop of main");
            assert_eq!(
                ipa as usize,
                body.len(),
                "ipa of the chase loads = the instructions of its loop: {body:?}"
            );
        }
        None => eprintln!("objdump missing: the chase loop's ipa checked only for stability"),
    }
    let _ = std::fs::remove_dir_all(dir);
}

const STREAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
int main(void) {
    long n = (4l << 20) / sizeof(long);
    long *a = malloc(n * sizeof *a);
    for (long i = 0; i < n; i++) a[i] = i;
    long s = 0;
    for (long i = 0; i < n; i++) s += a[i];
    printf("%ld\n", s);
    return 0;
}
"#;

#[test]
fn a_streaming_sum_depends_on_no_load() {
    let Some(dir) = setup("stream", Backend::Tool) else {
        return;
    };
    let exe = compile_with(&dir, "stream", STREAM, "-O2");
    let (ev, s) = check(&dir, vec![exe.clone()], Backend::Tool);
    assert_eq!(s.exit_code, Some(0));
    let loads = in_big_mapping(&ev, 4 << 20, AccessKind::Read);
    assert!(!loads.is_empty());
    let bytes: usize = 4 << 20;
    assert!(loads.len() * 64 >= bytes / 8, "{} array loads", loads.len());
    assert!(
        loads.iter().all(|&(d, _)| d == 0),
        "array loads with a dep: {}",
        loads.iter().filter(|&&(d, _)| d != 0).count()
    );
    let (ipa, share) = mode(loads.iter().map(|&(_, i)| i));
    assert!(ipa > 1 && share >= 0.9, "typical ipa {ipa} ({share:.3})");
    if let Some(loops) = loops_of_main(&exe) {
        // The loop that reads memory without writing it (the sum; the fill only stores).
        let sum = loops
            .iter()
            .find(|b| {
                b.iter().any(|t| t.contains("(%"))
                    && !b.iter().any(|t| t.starts_with("mov") && t.ends_with(')'))
            })
            .expect("objdump shows the sum loop");
        assert_eq!(ipa as usize, sum.len(), "{sum:?}");
    }
    // The trailer's totals agree with the events.
    let mut t = Vec::new();
    info(&dir.join("t.spt"), &mut t).unwrap();
    assert!(String::from_utf8(t).unwrap().contains("instructions"));
    let _ = std::fs::remove_dir_all(dir);
}

const RMW: &str = r#"
#include <stdio.h>
#include <stdlib.h>
int main(void) {
    long n = (1l << 20) / sizeof(long);
    long *a = calloc(n, sizeof *a);
    for (long i = 0; i < n; i++)
        __asm__ volatile("addq $3, %0" : "+m"(a[i]));       /* add [mem], imm */
    for (long i = 0; i < n; i++)
        __atomic_fetch_add(&a[i], 1, __ATOMIC_SEQ_CST);    /* lock add / lock xadd */
    long s = 0;
    for (long i = 0; i < n; i++) s += a[i];
    printf("%ld\n", s);
    return s == 4 * n ? 0 : 1;
}
"#;

#[test]
fn read_modify_writes_are_one_rmw_access() {
    let Some(dir) = setup("rmw", Backend::Tool) else {
        return;
    };
    let exe = compile_with(&dir, "rmw", RMW, "-O2");
    let (ev, s) = check(&dir, vec![exe], Backend::Tool);
    assert_eq!(
        s.exit_code,
        Some(0),
        "the program computed its sum under the tool"
    );
    let n = (1 << 20) / 8;
    let rmw = in_big_mapping(&ev, 1 << 20, AccessKind::Rmw);
    assert_eq!(rmw.len(), 2 * n, "one Rmw per add [mem] and per atomic add");
    let writes = in_big_mapping(&ev, 1 << 20, AccessKind::Write);
    assert!(
        writes.len() < n / 100,
        "no separate writes: {}",
        writes.len()
    );
    let reads = in_big_mapping(&ev, 1 << 20, AccessKind::Read);
    assert_eq!(reads.len(), n, "only the sum reads");
    let _ = std::fs::remove_dir_all(dir);
}

/// Eight functions, each on a page of its own, each called 1000 times.
const CODE_PAGES: &str = r#"
#include <stdio.h>
#define F(n) __attribute__((noinline, aligned(4096))) long f##n(long x) { return x * 3 + n; }
F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7)
long (*volatile fs[8])(long) = { f0, f1, f2, f3, f4, f5, f6, f7 };
int main(void) {
    long s = 0;
    for (int i = 0; i < 1000; i++)
        for (int k = 0; k < 8; k++) s = fs[k](s);
    printf("%ld\n", s);
    return 0;
}
"#;

/// The addresses of f0..f7 (`nm` of a non-PIE executable), None without `nm`.
fn code_page_functions(exe: &str) -> Option<Vec<u64>> {
    let out = Command::new("nm").arg(exe).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut f: Vec<(String, u64)> = text
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (a, _, n) = (w.next()?, w.next()?, w.next()?);
            let ok = n.len() == 2 && n.starts_with('f') && n.as_bytes()[1].is_ascii_digit();
            ok.then(|| (n.to_string(), u64::from_str_radix(a, 16).ok()))
                .and_then(|(n, a)| Some((n, a?)))
        })
        .collect();
    f.sort();
    (f.len() == 8).then(|| f.into_iter().map(|(_, a)| a).collect())
}

/// Issue 9, silent error 3: without `--ifetch` code was invisible (no text page was ever
/// touched in a replay). Now each code page a process runs gets exactly one `Ifetch`, in a
/// file mapping of the executable; `--ifetch` still records every instruction, and
/// `code_pages: false` records no code at all, as before.
#[test]
fn issue9_code_pages_are_recorded_once_per_page_without_ifetch() {
    let Some(dir) = setup("codepages", Backend::Tool) else {
        return;
    };
    let exe = compile_with(&dir, "codepages", CODE_PAGES, "-O1 -no-pie");
    let Some(fns) = code_page_functions(&exe) else {
        eprintln!("SKIPPED issue9_code_pages...: needs nm (binutils)");
        return;
    };
    let ifetches = |ev: &[TraceEvent]| -> Vec<(Pid, u64)> {
        ev.iter()
            .filter_map(|e| match e {
                TraceEvent::Access {
                    pid,
                    va,
                    kind: AccessKind::Ifetch,
                    ..
                } => Some((*pid, va.0)),
                _ => None,
            })
            .collect()
    };
    // Default options: one Ifetch per (process, code page).
    let (ev, s) = check(&dir, vec![exe.clone()], Backend::Tool);
    assert_eq!(s.exit_code, Some(0));
    let fetched = ifetches(&ev);
    let pages: HashSet<(Pid, u64)> = fetched.iter().map(|&(p, a)| (p, a >> 12)).collect();
    assert_eq!(pages.len(), fetched.len(), "one Ifetch per code page");
    for f in &fns {
        let on = fetched.iter().filter(|&&(_, a)| a >> 12 == f >> 12).count();
        assert_eq!(on, 1, "f at {f:#x}: its page is fetched once");
    }
    // Each lies in an executable file mapping (the program's or a library's text).
    let text: Vec<(u64, u64)> = ev
        .iter()
        .filter_map(|e| match e {
            TraceEvent::Mmap {
                addr,
                len,
                prot,
                file: Some(_),
                ..
            } if prot.0 & 4 != 0 => Some((addr.0, addr.0 + len)),
            _ => None,
        })
        .collect();
    for &(_, a) in &fetched {
        assert!(
            text.iter().any(|&(lo, hi)| a >= lo && a < hi),
            "ifetch at {a:#x} in an executable file mapping: {text:x?}"
        );
    }
    // The count is the trailer's.
    let (_, t) = read_header_and_trailer(&dir.join("t.spt")).unwrap();
    assert_eq!(t.ifetches, fetched.len() as u64);

    // --ifetch keeps its meaning: every instruction, so f0's page is fetched at each call.
    let opts = RecordOptions {
        ifetch: true,
        ..Default::default()
    };
    let (ev, _) = check_with(&dir, vec![exe.clone()], &opts);
    let on_f0 = ifetches(&ev)
        .iter()
        .filter(|&&(_, a)| a >> 12 == fns[0] >> 12)
        .count();
    assert!(on_f0 >= 1000, "{on_f0} ifetches of f0 with --ifetch");

    // code_pages off: no code at all (the recorder's behaviour before issue 9).
    let opts = RecordOptions {
        code_pages: false,
        ..Default::default()
    };
    let (ev, _) = check_with(&dir, vec![exe], &opts);
    assert_eq!(ifetches(&ev).len(), 0);
    let _ = std::fs::remove_dir_all(dir);
}

/// 1000 loads of a volatile array between SPLAB_START() and SPLAB_STOP(); stores to it before
/// and after.
const ROI: &str = r#"
#include <stdio.h>
#include "splab.h"
static volatile long a[4096];
int main(void) {
    long s = 0;
    for (int i = 0; i < 4096; i++) a[i] = i;
    SPLAB_START();
    for (int i = 0; i < 1000; i++) s += a[i];
    SPLAB_STOP();
    for (int i = 0; i < 4096; i++) a[i] = 0;
    printf("%ld\n", s);
    return s == 999 * 1000 / 2 ? 0 : 1;
}
"#;

/// The data accesses (not Ifetch) of a trace, with the range [lo, hi) of the array `a`.
fn data_accesses(ev: &[TraceEvent]) -> Vec<(u64, AccessKind, u16)> {
    ev.iter()
        .filter_map(|e| match e {
            TraceEvent::Access { va, kind, dep, .. } if *kind != AccessKind::Ifetch => {
                Some((va.0, *kind, *dep))
            }
            _ => None,
        })
        .collect()
}

fn compile_roi(dir: &Path) -> String {
    let inc = Path::new(env!("CARGO_MANIFEST_DIR")).join("valgrind");
    compile_with(dir, "roi", ROI, &format!("-O1 -no-pie -I{}", inc.display()))
}

/// Issue 9, regions of interest: with `roi`, only the region's accesses are recorded: the loop's
/// 1000 loads and 7 stores of the macros themselves (valgrind.h's amd64
/// VALGRIND_DO_CLIENT_REQUEST_EXPR stores its `_zzq_result` after SPLAB_START()'s request,
/// and SPLAB_STOP()'s 6-word `_zzq_args` block before its request); the address space before
/// the region is all there (the executable, the stack, the heap start).
#[test]
fn issue9_roi_records_exactly_the_region() {
    let Some(dir) = setup("roi", Backend::Tool) else {
        return;
    };
    let exe = compile_roi(&dir);
    let opts = RecordOptions {
        roi: true,
        ..Default::default()
    };
    let (ev, s) = check_with(&dir, vec![exe.clone()], &opts);
    assert_eq!(
        s.exit_code,
        Some(0),
        "the program ran correctly under the tool"
    );
    let data = data_accesses(&ev);
    let reads = data.iter().filter(|d| d.1 == AccessKind::Read).count();
    let writes = data.iter().filter(|d| d.1 == AccessKind::Write).count();
    let stores: Vec<_> = data.iter().filter(|d| d.1 != AccessKind::Read).collect();
    assert_eq!((reads, writes), (1000, 7), "stores {stores:x?}");
    assert!(ev
        .iter()
        .any(|e| matches!(e, TraceEvent::Mmap { flags, .. } if flags.contains(MmapFlags::STACK))));
    assert!(ev.iter().any(|e| matches!(e, TraceEvent::Brk { .. })));
    // No dep reaches before the region: the first recorded access depends on nothing.
    assert_eq!(data[0].2, 0);
    // Without `roi` the markers turn recording off and on: everything but the region's gap.
    let (ev, _) = check(&dir, vec![exe], Backend::Tool);
    let all = data_accesses(&ev);
    assert!(
        all.len() > 8192,
        "the stores before and after: {}",
        all.len()
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Issue 9: `start_after` / `max_accesses` keep exactly the accesses S..S+M of the full
/// recording (code-page fetches aside: they are kept wherever they fall and count toward
/// neither), deps never reach before the window, and 0 is refused.
#[test]
fn issue9_start_after_and_max_accesses_are_exact() {
    let Some(dir) = setup("window", Backend::Tool) else {
        return;
    };
    let exe = compile_roi(&dir);
    let (ev, _) = check(&dir, vec![exe.clone()], Backend::Tool);
    let full = data_accesses(&ev);
    let (skip, max) = (3000usize, 5000usize);
    assert!(full.len() > skip + max);
    let opts = RecordOptions {
        start_after: skip as u64,
        max_accesses: Some(max as u64),
        ..Default::default()
    };
    let (ev, s) = check_with(&dir, vec![exe.clone()], &opts);
    let win = data_accesses(&ev);
    let ifetches = ev
        .iter()
        .filter(|e| {
            matches!(
                e,
                TraceEvent::Access {
                    kind: AccessKind::Ifetch,
                    ..
                }
            )
        })
        .count() as u64;
    assert_eq!(win.len(), max);
    assert_eq!(s.accesses, max as u64 + ifetches);
    let addr_kind = |v: &[(u64, AccessKind, u16)]| -> Vec<(u64, AccessKind)> {
        v.iter().map(|d| (d.0, d.1)).collect()
    };
    assert_eq!(addr_kind(&win), addr_kind(&full[skip..skip + max]));
    for (i, d) in win.iter().enumerate() {
        assert!(
            d.2 as usize <= i + ifetches as usize,
            "access {i}: dep {}",
            d.2
        );
    }
    // Without code pages, the trailer's count is exactly the window.
    let opts = RecordOptions {
        code_pages: false,
        max_accesses: Some(1234),
        ..Default::default()
    };
    let (_, s) = check_with(&dir, vec![exe.clone()], &opts);
    assert_eq!(s.accesses, 1234);
    let opts = RecordOptions {
        max_accesses: Some(0),
        ..Default::default()
    };
    let err = record(&opts, &[exe], &dir.join("z.spt"), |_| {}).unwrap_err();
    assert!(err.to_string().contains("--max-accesses 0"), "{err}");
    assert!(!dir.join("z.spt").exists());
    let _ = std::fs::remove_dir_all(dir);
}
