//! Nested (two-dimensional) paging as a machine option (issue 8 item 2): `skylake:nested=4K`
//! makes GUPS walks cost more references than native, and 2MB guest pages save walk references
//! but not TLB misses on 4KB host pages (splintering); on 2MB host pages they save TLB misses
//! too. Counts only, never times; exact where the mechanism makes them exact.

mod common;

use common::{assert_error_line, assert_success, splab};
use splab_sim::report::Report;
use splab_sim::RunSpec;

const GUPS: &str = "gups:size=256M,updates=200K";

fn run_checked(machine: &str, policy: &str, workload: &str, check: bool) -> Report {
    splab_sim::run(&RunSpec {
        machine: machine.into(),
        policy: policy.into(),
        workload: workload.into(),
        seed: 1,
        check: check.into(),
        free_bytes: None,
        page_cache: Default::default(),
        dump_reservations: false,
    })
    .unwrap_or_else(|e| panic!("{workload} on {machine} with {policy}: {e}"))
}

fn run(machine: &str, policy: &str, workload: &str) -> Report {
    run_checked(machine, policy, workload, false)
}

fn refs_per_walk(r: &Report) -> f64 {
    r.tlb.walk_refs as f64 / r.tlb.walks as f64
}

/// Base pages on 4KB host pages: the TLB sees the same translations as natively (the same
/// walks, exactly), and the guest dimension of the walks is exactly the native walk (the guest
/// page-walk caches see the same walks); the host dimension comes on top.
#[test]
fn gups_walks_cost_more_references_nested() {
    let native = run("skylake", "base", GUPS);
    let nested = run("skylake:nested=4K", "base", GUPS);
    assert!(
        native.tlb.nested.is_none(),
        "a native report has no tlb.nested"
    );
    let n = nested.tlb.nested.as_ref().expect("tlb.nested");
    assert_eq!(n.host_page_size, 4096);
    assert_eq!(nested.tlb.walks, native.tlb.walks);
    assert_eq!(n.walk_refs_guest, native.tlb.walk_refs);
    assert_eq!(n.walk_refs_guest + n.walk_refs_host, nested.tlb.walk_refs);
    assert!(n.walk_refs_host > 0);
    // The host's references by place add up to them, and each place's share is at most the
    // whole walk's count there (the walker's by-place counts hold both dimensions).
    let sum: u64 = n
        .walk_refs_host_by_level
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(sum, n.walk_refs_host);
    for (k, v) in &n.walk_refs_host_by_level {
        assert!(
            v.as_u64() <= nested.tlb.walk_refs_by_level[k].as_u64(),
            "{k}"
        );
    }
    assert!(
        refs_per_walk(&nested) > refs_per_walk(&native),
        "{} vs {}",
        refs_per_walk(&nested),
        refs_per_walk(&native)
    );
    // Native 4-level walks never exceed 4 references; a 2D walk's most is above that, at
    // most 24 (4 x (4 + 1) + 4).
    assert!(
        n.walk_refs_max > 4 && n.walk_refs_max <= 24,
        "{}",
        n.walk_refs_max
    );
    // The host dimension's walks go through the data caches: more walk references served.
    let served = |r: &Report| -> u64 {
        r.tlb
            .walk_refs_by_level
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum()
    };
    assert_eq!(served(&nested), nested.tlb.walk_refs);
}

/// A skylake machine file whose walk caches are all off (guest PWCs, host PWCs, nested TLB), so
/// that every walk of a mapped page is a full two-dimensional miss.
fn uncached_guest_file(dir: &std::path::Path, host: &str) -> String {
    let text = splab_sim::hw::machine_file::built_in("skylake")
        .unwrap()
        .replace("pwc_entries = [2, 4, 32]", "pwc_entries = [0, 0, 0]");
    let text = format!(
        "{text}\n[nested]\nsource = \"test: no walk caching in either dimension\"\n\
         page_size = \"{host}\"\nlevel_sizes = [\"512G\", \"1G\", \"2M\", \"4K\"]\n\
         pwc_entries = [0, 0, 0]\nntlb_entries = 0\n"
    );
    let path = dir.join(format!("uncached-{host}.toml"));
    std::fs::write(&path, text).unwrap();
    format!("file:{}", path.display())
}

/// Bhargava et al. ASPLOS'08: with nothing cached, a walk is 4 x (4 + 1) + 4 = 24 references on
/// 4 + 4 levels; a 2MB host page takes one level off each host walk (4 x 4 + 3 = 19), a 2MB
/// guest page one guest level and its host walk (3 x 5 + 4 = 19), both 3 x 4 + 3 = 15. The most
/// one walk of GUPS made is exactly that (every update walks a mapped page).
#[test]
fn uncached_two_dimensional_walks_are_exact() {
    let dir = std::env::temp_dir().join(format!("splab-nested-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let w = "gups:size=64M,updates=20K";
    for (host, policy, max) in [
        ("4K", "base", 24),
        ("2M", "base", 19),
        ("4K", "linux", 19),
        ("2M", "linux", 15),
    ] {
        let m = uncached_guest_file(&dir, host);
        let r = run(&m, policy, w);
        let n = r.tlb.nested.as_ref().unwrap();
        assert_eq!(n.walk_refs_max, max, "host {host}, {policy}");
        assert_eq!((n.ntlb_hits, n.host_pwc_hits, r.tlb.pwc_hits), (0, 0, 0));
    }
    // The option on a file with a [nested] table changes its page size only.
    let m = format!("{}:nested=2M", uncached_guest_file(&dir, "4K"));
    let r = run(&m, "base", w);
    let n = r.tlb.nested.as_ref().unwrap();
    assert_eq!((n.host_page_size, n.walk_refs_max), (2 << 20, 19));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// 2MB guest pages (`linux`: THP at fault time, so all of GUPS's table) on 4KB host pages are
/// splintered: the TLB holds 4KB entries, so they miss exactly as base pages do (the same
/// walks), but each walk is one guest level (and its host walk) shorter. On 2MB host pages they
/// get 2MB entries, and the walks all but go.
#[test]
fn guest_superpages_splinter_on_small_host_pages() {
    let base4 = run("skylake:nested=4K", "base", GUPS);
    let thp4 = run("skylake:nested=4K", "linux", GUPS);
    assert_eq!(
        thp4.tlb.walks, base4.tlb.walks,
        "splintered: no TLB reach gained"
    );
    assert!(thp4.tlb.walk_refs < base4.tlb.walk_refs);
    assert!(refs_per_walk(&thp4) < refs_per_walk(&base4));
    let (g4, gb) = (
        thp4.tlb.nested.as_ref().unwrap().walk_refs_guest,
        base4.tlb.nested.as_ref().unwrap().walk_refs_guest,
    );
    assert!(g4 < gb, "{g4} vs {gb}");

    let base2 = run("skylake:nested=2M", "base", GUPS);
    let thp2 = run("skylake:nested=2M", "linux", GUPS);
    // Base pages on 2MB host pages: the TLB is as with 4KB host pages.
    assert_eq!(base2.tlb.walks, base4.tlb.walks);
    assert!(
        thp2.tlb.walks * 100 < base2.tlb.walks,
        "{} vs {}",
        thp2.tlb.walks,
        base2.tlb.walks
    );
    // Natively, the same: 2MB pages get 2MB entries.
    let thp = run("skylake", "linux", GUPS);
    assert_eq!(thp2.tlb.walks, thp.tlb.walks);

    // FreeBSD's reservations promote once a 2MB region is full (all 32 of a 64MB table's, with
    // a million updates): on 4KB host pages its TLB misses stay about base pages' (promotion's
    // invalidations make them differ a little: 905,929 against 905,909), its walks get shorter.
    let w = "gups:size=64M,updates=1M";
    let (b, fb) = (
        run("skylake:nested=4K", "base", w),
        run("skylake:nested=4K", "freebsd", w),
    );
    assert_eq!(fb.pages.promotions_by_size["2M"], 32);
    let ratio = fb.tlb.walks as f64 / b.tlb.walks as f64;
    assert!((0.999..=1.001).contains(&ratio), "{ratio}");
    assert!(refs_per_walk(&fb) < refs_per_walk(&b));
}

/// Splintered TLB entries pass the invariant checks (`--check`: an entry holds the host page of
/// a larger guest page, with that piece's frame), through THP faults, promotion and demotion.
#[test]
fn splintered_entries_pass_the_invariant_checks() {
    for policy in ["linux", "freebsd", "navarro"] {
        run_checked(
            "skylake:nested=4K,mem=1G",
            policy,
            "gups:size=64M,updates=50K",
            true,
        );
    }
    // 1GB guest pages splintered into 2MB host pages.
    run_checked("skylake:nested=2M,mem=2G", "navarro", "seq:size=1G", true);
}

/// Bad input: a size that is no page size of the machine, or a machine whose TLB is refilled by
/// software (no hardware walk to nest), exits 2 with one line naming the option.
#[test]
fn bad_nested_options_exit_2() {
    for (m, needles) in [
        ("skylake:nested=3K", &["nested", "'3K'", "4K, 2M, 1G"][..]),
        ("alpha21264:nested=8K", &["nested=8K", "software"][..]),
        ("pa8000:nested=4K", &["nested=4K", "software"][..]),
        ("core2:nested=2M", &["nested", "'2M'"][..]),
    ] {
        let args = ["run", "-m", m, "-w", "seq:size=1M"];
        let out = splab().args(args).output().unwrap();
        assert_error_line(&out, 2, args, needles);
    }
}

/// `machine show` writes the option into the file as a `[nested]` table, and the file runs as
/// the option does (the same counts; only the machine's name in the report differs).
#[test]
fn show_writes_the_nested_table() {
    let out = splab()
        .args(["machine", "show", "skylake:nested=2M"])
        .output()
        .unwrap();
    assert_success(&out, "machine show skylake:nested=2M");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("[nested] # from the option nested=2M"),
        "{text}"
    );
    let path = std::env::temp_dir().join(format!("splab-nested-show-{}.toml", std::process::id()));
    std::fs::write(&path, &text).unwrap();
    let w = "gups:size=64M,updates=20K";
    let a = run("skylake:nested=2M", "base", w);
    let b = run(&format!("file:{}", path.display()), "base", w);
    std::fs::remove_file(&path).unwrap();
    let tlb = |r: &Report| serde_json::to_string(&r.tlb).unwrap();
    assert_eq!(tlb(&a), tlb(&b));
    assert_eq!(a.time.cycles_total, b.time.cycles_total);
}

/// The host's frame placement is data in the machine (`nested.host_placement`, hw/host_frames.rs):
/// `machine show` prints it for the option's table and adds the default to a file's table that
/// leaves it out, the shown text runs as the file does, an explicit "identity" is another
/// machine, and a bad value exits 2 naming the key.
#[test]
fn show_prints_the_host_placement() {
    let show = |m: &str| {
        let out = splab().args(["machine", "show", m]).output().unwrap();
        assert_success(&out, m);
        String::from_utf8(out.stdout).unwrap()
    };
    assert!(
        show("skylake:nested=4K").contains("\nhost_placement = \"scattered\"\n"),
        "the option's table"
    );
    let dir = std::env::temp_dir().join(format!("splab-nested-place-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = uncached_guest_file(&dir, "4K");
    let text = show(&file);
    assert!(
        text.contains("\nhost_placement = \"scattered\" # the default"),
        "{text}"
    );
    let shown = dir.join("shown.toml");
    std::fs::write(&shown, &text).unwrap();
    let w = "gups:size=64M,updates=20K";
    let a = run(&file, "base", w);
    let b = run(&format!("file:{}", shown.display()), "base", w);
    assert_eq!(a.time.cycles_total, b.time.cycles_total);
    let caches = |r: &Report| serde_json::to_string(&r.caches).unwrap();
    assert_eq!(caches(&a), caches(&b));
    let path = file.trim_start_matches("file:");
    let base = std::fs::read_to_string(path).unwrap();
    // The base file with a placement written after its nested TLB's size.
    let with_placement = |name: &str, value: &str| {
        let f = dir.join(name);
        let key = format!("ntlb_entries = 0\nhost_placement = \"{value}\"\n");
        std::fs::write(&f, base.replace("ntlb_entries = 0\n", &key)).unwrap();
        f
    };
    let identity = with_placement("identity.toml", "identity");
    let i = run(&format!("file:{}", identity.display()), "base", w);
    assert!(
        show(&format!("file:{}", identity.display())).contains("host_placement = \"identity\"\n")
    );
    assert_eq!(i.tlb.walks, a.tlb.walks, "placement moves no translation");
    assert_ne!(caches(&i), caches(&a), "but the lines' sets");
    let bad = with_placement("bad.toml", "random");
    let m = format!("file:{}", bad.display());
    let args = ["run", "-m", m.as_str(), "-w", "seq:size=1M"];
    let out = splab().args(args).output().unwrap();
    assert_error_line(&out, 2, args, &["host_placement", "scattered", "identity"]);
    std::fs::remove_dir_all(&dir).unwrap();
}
