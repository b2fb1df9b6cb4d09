//! Composition of workloads on one machine (seed 000 6.5's experiments):
//! - `seq(A,B,...)`: one after another ("we run the FFTW benchmark four times in sequence"
//!   after the web server). Each is a fresh process; when it is done its processes exit, and
//!   what it left in the machine (page cache, fragmentation) stays for the next.
//! - `par(A,B,...)`: concurrently ("runs the web server concurrently with a contiguity-seeking
//!   application"), interleaved on the one simulated CPU at event granularity.
//!
//! Components keep their own syntax: `seq(web:requests=1000,fftw:n=100)`. A comma followed by
//! `key=value` (no `:` and no `(`) continues the previous component's parameters, so
//! `seq(gups:size=1M,updates=10,tree)` has two components.
//!
//! How `par` suspends a workload. Workloads are straight-line programs that call the engine's
//! event methods (`Workload::run(&mut Engine)`); rewriting each as a resumable state machine
//! would change every workload and every one to come. Instead each component runs on its own
//! thread and the engine is handed from thread to thread as a baton (a Mutex and a Condvar):
//! exactly one thread owns the engine at a time, the others wait in `Sched::after_event` holding
//! a placeholder engine (`Engine::placeholder`) in its place. The engine itself moves (safe
//! Rust, no aliasing of a `&mut`); the decision of who runs next depends only on simulated
//! clocks, so runs are deterministic whatever the host's thread timing.
//!
//! Scheduling: after each event, the runnable component that has had the least CPU time runs
//! next (ties: the one running stays, then the lowest index): a fair share at event
//! granularity, as 4BSD's scheduler approximates with its decaying estimated CPU use. A
//! component sleeping (`Engine::idle_until`, e.g. `seeker`) is not runnable until the clock
//! reaches its wake time; when it wakes it starts from the least CPU time among the runnable
//! ones, so sleep earns no credit (4BSD's `updatepri` decays a sleeper's estcpu, not below
//! zero). With every component asleep the machine is idle until the first wakes.

use std::collections::BTreeSet;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::Workload;
use crate::engine::{Engine, Sched};
use crate::error::{Result, SimError};
use crate::rng::Rng;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Seq,
    Par,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Seq => "seq",
            Mode::Par => "par",
        }
    }
}

/// One component: its text as given (a `par` thread parses its own copy from it), and the
/// parsed workload.
struct Child {
    text: String,
    w: Box<dyn Workload>,
}

/// What one component did, for `stats`.
#[derive(Clone, Debug, Default)]
struct Done {
    describe: String,
    start: u64,
    end: u64,
    cpu: u64,
    /// Promotions to each superpage size while it ran (seq only: in par they interleave).
    promotions: Option<Vec<u64>>,
    stats: Option<serde_json::Value>,
}

pub struct Compose {
    mode: Mode,
    children: Vec<Child>,
    done: Vec<Done>,
    freq_hz: u64,
    /// The clock when the workload started (`Engine::origin`: after `--frag`'s set-up); the
    /// components' times are reported from it.
    origin: u64,
}

/// Whether `text` is a composition (`seq(` or `par(` or any other `NAME(`).
pub fn is_composition(text: &str) -> bool {
    text.contains('(') || text.contains(')')
}

/// Parses a composition.
pub fn parse(text: &str) -> Result<Compose> {
    let chars: Vec<char> = text.chars().collect();
    let mut p = Parser {
        s: &chars,
        i: 0,
        depth: 0,
    };
    p.skip_ws();
    let Some(c) = p.node()? else {
        p.i = chars.iter().position(|&c| c == ')').unwrap_or(0);
        return Err(p.err("unbalanced parentheses: ')' without '('"));
    };
    p.skip_ws();
    if p.i < chars.len() {
        return Err(p.err(&format!(
            "unexpected '{}' after the end of the composition",
            chars[p.i]
        )));
    }
    Ok(c)
}

/// How deep compositions may nest: far beyond any experiment (seed 000 6.5 nests two), and
/// shallow enough for the recursion of parsing, describing and running them. Unbounded,
/// `seq(` 5000 times overflowed the stack (an abort, not an error).
pub const MAX_DEPTH: usize = 32;

struct Parser<'a> {
    s: &'a [char],
    i: usize,
    /// Compositions open around `i`.
    depth: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_whitespace() {
            self.i += 1;
        }
    }

    fn err(&self, what: &str) -> SimError {
        let text: String = self.s.iter().collect();
        SimError::BadInput(format!(
            "workload '{text}': {what} at position {} (compositions: seq(A,B,...), par(A,B,...))",
            self.i + 1
        ))
    }

    /// A composition at `i` (`NAME(` ... `)`), or None if there is no `(` before the next
    /// top-level `,` or `)`.
    fn node(&mut self) -> Result<Option<Compose>> {
        let start = self.i;
        while self.i < self.s.len() && !"(),".contains(self.s[self.i]) {
            self.i += 1;
        }
        if self.i >= self.s.len() || self.s[self.i] != '(' {
            self.i = start;
            return Ok(None);
        }
        let name: String = self.s[start..self.i].iter().collect::<String>();
        let mode = match name.trim() {
            "seq" => Mode::Seq,
            "par" => Mode::Par,
            other => {
                self.i = start;
                return Err(self.err(&format!("unknown composition '{other}' (valid: seq, par)")));
            }
        };
        if self.depth == MAX_DEPTH {
            self.i = start;
            return Err(self.err(&format!("compositions nested more than {MAX_DEPTH} deep")));
        }
        self.depth += 1;
        self.i += 1; // '('
        let mut children: Vec<Child> = Vec::new();
        loop {
            self.skip_ws();
            let item_at = self.i;
            if self.i >= self.s.len() {
                return Err(self.err("unbalanced parentheses: missing ')'"));
            }
            if self.s[self.i] == ')' {
                if children.is_empty() {
                    return Err(self.err(&format!("empty list in {}()", mode.name())));
                }
                return Err(self.err("empty component before ')'"));
            }
            if self.s[self.i] == ',' {
                return Err(self.err("empty component"));
            }
            if let Some(c) = self.node()? {
                let text: String = self.s[item_at..self.i].iter().collect();
                children.push(Child {
                    text: text.trim().to_string(),
                    w: Box::new(c),
                });
            } else {
                // A leaf: up to the next ',' or ')' at this depth.
                while self.i < self.s.len() && !"(),".contains(self.s[self.i]) {
                    self.i += 1;
                }
                let leaf: String = self.s[item_at..self.i].iter().collect();
                let leaf = leaf.trim().to_string();
                let continues = !leaf.contains(':') && leaf.contains('=');
                match children.last_mut() {
                    Some(prev) if continues && !prev.text.ends_with(')') => {
                        prev.text = format!("{},{leaf}", prev.text);
                    }
                    _ if continues => {
                        self.i = item_at;
                        return Err(
                            self.err(&format!("parameter '{leaf}' with no workload before it"))
                        );
                    }
                    _ => children.push(Child {
                        text: leaf,
                        w: Box::new(Placeholder),
                    }),
                }
                // Parse the (possibly extended) leaf now, so errors name its position.
                let last = children.last_mut().expect("just pushed");
                last.w = super::parse(&last.text).map_err(|e| {
                    SimError::BadInput(format!("{e} (component at position {})", item_at + 1))
                })?;
            }
            self.skip_ws();
            if self.i >= self.s.len() {
                return Err(self.err("unbalanced parentheses: missing ')'"));
            }
            match self.s[self.i] {
                ',' => self.i += 1,
                ')' => {
                    self.i += 1;
                    break;
                }
                c => return Err(self.err(&format!("unexpected '{c}'"))),
            }
        }
        self.depth -= 1;
        Ok(Some(Compose {
            mode,
            children,
            done: Vec::new(),
            freq_hz: 0,
            origin: 0,
        }))
    }
}

/// Stands in for a leaf between reading and parsing it.
struct Placeholder;

impl Workload for Placeholder {
    fn describe(&self) -> String {
        String::new()
    }
    fn expected_accesses(&self) -> Option<u64> {
        None
    }
    fn run(&mut self, _e: &mut Engine, _rng: &mut Rng) -> Result<()> {
        Ok(())
    }
}

/// Live pids of the engine.
fn live_pids(e: &Engine) -> BTreeSet<u32> {
    e.os.procs.iter().map(|(&p, _)| p).collect()
}

/// Exits the processes in `pids` that are still alive (a component is done).
fn exit_all(e: &mut Engine, pids: &BTreeSet<u32>) -> Result<()> {
    for &p in pids {
        if e.os.procs.contains_key(&p) {
            e.exit(crate::units::Pid(p))?;
        }
    }
    Ok(())
}

impl Compose {
    fn run_seq(&mut self, e: &mut Engine, rng: &mut Rng) -> Result<()> {
        for c in &mut self.children {
            let before = live_pids(e);
            let start = e.clock();
            let idle = e.idle_cycles;
            let promoted = e.os.stats.promotions.clone();
            // Each component draws from the run's seed as it would run alone.
            c.w.run(e, &mut rng.clone())?;
            let promotions =
                e.os.stats
                    .promotions
                    .iter()
                    .zip(&promoted)
                    .skip(1)
                    .map(|(a, b)| a - b)
                    .collect();
            let mine: BTreeSet<u32> = live_pids(e).difference(&before).copied().collect();
            exit_all(e, &mine)?;
            let end = e.clock();
            self.done.push(Done {
                describe: c.w.describe(),
                start,
                end,
                cpu: end - start - (e.idle_cycles - idle),
                promotions: Some(promotions),
                stats: c.w.stats(),
            });
        }
        Ok(())
    }

    fn run_par(&mut self, e: &mut Engine, rng: &mut Rng) -> Result<()> {
        let n = self.children.len();
        let now = e.clock();
        let shared = Arc::new(Shared {
            st: Mutex::new(State {
                turn: 0,
                slot: None,
                spares: Vec::new(),
                cpu: vec![0; n],
                vtime: vec![0; n],
                asleep: vec![None; n],
                finished: vec![false; n],
                start: vec![None; n],
                end: vec![0; n],
                owned: vec![BTreeSet::new(); n],
                known: live_pids(e),
                turn_start: now,
                failed: None,
            }),
            cv: Condvar::new(),
        });
        let shell = e.placeholder();
        shared.lock().slot = Some(std::mem::replace(e, shell));
        // Each component draws from the run's seed as it would run alone.
        let rngs: Vec<Rng> = (0..n).map(|_| rng.clone()).collect();
        let results: Vec<(Result<()>, String, Option<serde_json::Value>)> =
            std::thread::scope(|s| {
                let handles: Vec<_> = self
                    .children
                    .iter()
                    .zip(rngs)
                    .enumerate()
                    .map(|(i, (c, mut rng))| {
                        let shared = shared.clone();
                        let text = c.text.clone();
                        s.spawn(move || component(i, &text, shared, &mut rng))
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                    .collect()
            });
        let mut st = shared.lock();
        let real = st
            .slot
            .take()
            .ok_or_else(|| SimError::Invariant("par: the engine was not handed back".into()))?;
        *e = real;
        if let Some(i) = st.failed {
            let (r, _, _) = results.into_iter().nth(i).expect("component index");
            return r;
        }
        for (i, (_, describe, stats)) in results.into_iter().enumerate() {
            self.done.push(Done {
                describe,
                start: st.start[i].unwrap_or(now),
                end: st.end[i],
                cpu: st.cpu[i],
                promotions: None,
                stats,
            });
        }
        Ok(())
    }
}

/// The scheduler's state, shared by the components' threads.
struct State {
    /// The component that owns the engine (or will take it from `slot`).
    turn: usize,
    /// The engine while it passes from one thread to another.
    slot: Option<Engine>,
    /// Placeholder engines not in use.
    spares: Vec<Engine>,
    /// CPU time each component has had, cycles.
    cpu: Vec<u64>,
    /// The scheduler's key: CPU time, raised on waking to the least runnable one's.
    vtime: Vec<u64>,
    /// Wake time of a sleeping component.
    asleep: Vec<Option<u64>>,
    finished: Vec<bool>,
    start: Vec<Option<u64>>,
    end: Vec<u64>,
    /// Processes each component created (exited when it is done).
    owned: Vec<BTreeSet<u32>>,
    known: BTreeSet<u32>,
    /// Clock when the running component got the engine.
    turn_start: u64,
    /// The component whose error stopped the run.
    failed: Option<usize>,
}

struct Shared {
    st: Mutex<State>,
    cv: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl State {
    /// Charges the running component `i` for the time since its turn began and records the
    /// processes it created.
    fn charge(&mut self, i: usize, e: &Engine) {
        let now = e.clock();
        self.cpu[i] += now - self.turn_start;
        self.vtime[i] += now - self.turn_start;
        self.turn_start = now;
        for p in live_pids(e) {
            if self.known.insert(p) {
                self.owned[i].insert(p);
            }
        }
    }

    /// Wakes sleepers due at `now` and picks who runs next: the least CPU time, `cur` on a
    /// tie, then the lowest index. None if nothing is runnable.
    fn pick(&mut self, now: u64, cur: Option<usize>) -> Option<usize> {
        let runnable = |s: &State, j: usize| !s.finished[j] && s.asleep[j].is_none();
        let floor = (0..self.cpu.len())
            .filter(|&j| runnable(self, j))
            .map(|j| self.vtime[j])
            .min();
        for j in 0..self.cpu.len() {
            if self.asleep[j].is_some_and(|t| t <= now) {
                self.asleep[j] = None;
                if let Some(f) = floor {
                    self.vtime[j] = self.vtime[j].max(f);
                }
            }
        }
        let best = (0..self.cpu.len())
            .filter(|&j| runnable(self, j))
            .min_by_key(|&j| (self.vtime[j], j))?;
        match cur {
            Some(c) if runnable(self, c) && self.vtime[c] <= self.vtime[best] => Some(c),
            _ => Some(best),
        }
    }
}

/// The scheduler as one component's thread sees it.
struct ParSched {
    i: usize,
    shared: Arc<Shared>,
}

fn aborted() -> SimError {
    SimError::BadInput("par: stopped because another component failed".into())
}

impl ParSched {
    /// Hands the engine to `next` and waits until it is this component's turn again.
    fn handoff<'a>(
        &'a self,
        e: &mut Engine,
        mut g: MutexGuard<'a, State>,
        next: usize,
    ) -> Result<()> {
        let shell = match g.spares.pop() {
            Some(s) => s,
            None => e.placeholder(),
        };
        g.slot = Some(std::mem::replace(e, shell));
        g.turn = next;
        self.shared.cv.notify_all();
        while g.turn != self.i && g.failed.is_none() {
            g = self.shared.cv.wait(g).unwrap_or_else(|p| p.into_inner());
        }
        if g.turn != self.i {
            return Err(aborted());
        }
        let real = g.slot.take().expect("the engine comes with the turn");
        let shell = std::mem::replace(e, real);
        g.spares.push(shell);
        g.turn_start = e.clock();
        if g.start[self.i].is_none() {
            g.start[self.i] = Some(g.turn_start);
        }
        Ok(())
    }

    /// Runs sleepers' wake-ups and the next component; idles the machine while all sleep.
    /// Returns with the engine (to run on) or after handing it over.
    fn reschedule<'a>(&'a self, e: &mut Engine, mut g: MutexGuard<'a, State>) -> Result<()> {
        loop {
            let now = e.clock();
            match g.pick(now, Some(self.i)) {
                Some(j) if j == self.i => return Ok(()),
                Some(j) => return self.handoff(e, g, j),
                None => {
                    let Some(w) = g.asleep.iter().flatten().min().copied() else {
                        return Ok(());
                    };
                    drop(g);
                    e.idle_to(w)?;
                    g = self.shared.lock();
                    g.turn_start = e.clock();
                }
            }
        }
    }
}

impl Sched for ParSched {
    fn after_event(&mut self, e: &mut Engine) -> Result<()> {
        let mut g = self.shared.lock();
        g.charge(self.i, e);
        self.reschedule(e, g)
    }

    fn sleep_until(&mut self, e: &mut Engine, until: u64) -> Result<()> {
        let mut g = self.shared.lock();
        g.charge(self.i, e);
        if until <= e.clock() {
            return Ok(());
        }
        g.asleep[self.i] = Some(until);
        self.reschedule(e, g)
    }

    fn others_active(&self) -> bool {
        let g = self.shared.lock();
        (0..g.finished.len()).any(|j| j != self.i && !g.finished[j])
    }
}

/// One component's thread: waits for its first turn, runs, exits its processes and hands the
/// engine on. Returns the run's result, the component's canonical spec and its stats.
fn component(
    i: usize,
    text: &str,
    shared: Arc<Shared>,
    rng: &mut Rng,
) -> (Result<()>, String, Option<serde_json::Value>) {
    // Parsed again on this thread: workloads need not be Send. The main thread has parsed the
    // same text already, so this cannot fail differently.
    let mut w = match super::parse(text) {
        Ok(w) => w,
        Err(err) => return (Err(err), String::new(), None),
    };
    let mut g = shared.lock();
    while g.turn != i && g.failed.is_none() {
        g = shared.cv.wait(g).unwrap_or_else(|p| p.into_inner());
    }
    if g.turn != i {
        return (Err(aborted()), w.describe(), None);
    }
    let mut e = g.slot.take().expect("the engine comes with the turn");
    g.turn_start = e.clock();
    g.start[i] = Some(g.turn_start);
    drop(g);
    e.sched = Some(Box::new(ParSched {
        i,
        shared: shared.clone(),
    }));
    let mut r = w.run(&mut e, rng);
    let mut g = shared.lock();
    if g.turn != i {
        // Stopped while another component held the engine: `e` is a placeholder.
        return (r, w.describe(), w.stats());
    }
    e.sched = None;
    g.charge(i, &e);
    if r.is_ok() {
        let mine = std::mem::take(&mut g.owned[i]);
        drop(g);
        r = exit_all(&mut e, &mine);
        g = shared.lock();
        g.charge(i, &e);
    }
    g.finished[i] = true;
    g.end[i] = e.clock();
    if r.is_err() && g.failed.is_none() {
        g.failed = Some(i);
    }
    if g.failed.is_none() {
        // Hand the engine to the next component, idling while all sleep.
        loop {
            let now = e.clock();
            if let Some(j) = g.pick(now, None) {
                g.turn = j;
                break;
            }
            let Some(wake) = g.asleep.iter().flatten().min().copied() else {
                g.turn = usize::MAX; // everyone is done: back to the main thread
                break;
            };
            drop(g);
            if let Err(err) = e.idle_to(wake) {
                r = Err(err);
                g = shared.lock();
                g.failed = Some(i);
                break;
            }
            g = shared.lock();
            g.turn_start = e.clock();
        }
    }
    g.turn_start = e.clock();
    g.slot = Some(e);
    shared.cv.notify_all();
    drop(g);
    (r, w.describe(), w.stats())
}

impl Workload for Compose {
    fn describe(&self) -> String {
        let parts: Vec<String> = self.children.iter().map(|c| c.w.describe()).collect();
        format!("{}({})", self.mode.name(), parts.join(","))
    }

    fn expected_accesses(&self) -> Option<u64> {
        self.children
            .iter()
            .map(|c| c.w.expected_accesses())
            .sum::<Option<u64>>()
    }

    fn run(&mut self, e: &mut Engine, rng: &mut Rng) -> Result<()> {
        self.freq_hz = e.os.machine.freq_hz;
        self.origin = e.origin;
        self.done.clear();
        match self.mode {
            Mode::Seq => self.run_seq(e, rng),
            Mode::Par => self.run_par(e, rng),
        }
    }

    fn stats(&self) -> Option<serde_json::Value> {
        let at = |c: u64| c.saturating_sub(self.origin);
        let secs = |c: u64| at(c) as f64 / self.freq_hz.max(1) as f64;
        let components: Vec<serde_json::Value> = self
            .done
            .iter()
            .map(|d| {
                let mut v = serde_json::json!({
                    "workload": d.describe,
                    "start_cycles": at(d.start),
                    "end_cycles": at(d.end),
                    "start_seconds": secs(d.start),
                    "end_seconds": secs(d.end),
                    "cpu_cycles": d.cpu,
                });
                if let Some(p) = &d.promotions {
                    v["promotions"] = serde_json::json!(p);
                }
                if let Some(s) = &d.stats {
                    v["stats"] = s.clone();
                }
                v
            })
            .collect();
        let mut v = serde_json::json!({
            "compose": self.mode.name(),
            "components": components,
        });
        if self.mode == Mode::Seq {
            // Phase boundaries: where each component after the first began (for `splab plot`).
            v["phases"] = self.done.iter().skip(1).map(|d| secs(d.start)).collect();
        }
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_moves_between_threads() {
        fn send<T: Send>() {}
        send::<Engine>();
    }

    #[test]
    fn parses_nesting_and_continued_parameters() {
        let c = parse("seq(gups:size=1M,updates=10,par(seeker:count=2,tree:nodes=100,ops=10))")
            .unwrap();
        assert_eq!(
            c.describe(),
            "seq(gups:size=1M,updates=10,ipa=12,par(seeker:size=1M,rate=5,count=2,tree:nodes=100,ops=10))"
        );
    }

    #[test]
    fn parse_errors_name_the_position() {
        let e = |t: &str| super::super::parse(t).err().unwrap().to_string();
        let m = e("seq(gups:size=1M");
        assert!(m.contains("missing ')'"), "{m}");
        let m = e("seq()");
        assert!(m.contains("empty list") && m.contains("position 5"), "{m}");
        let m = e("seq(gups,,tree)");
        assert!(
            m.contains("empty component") && m.contains("position 10"),
            "{m}"
        );
        let m = e("seq(gups,bogus)");
        assert!(m.contains("'bogus'") && m.contains("position 10"), "{m}");
        let m = e("pair(gups)");
        assert!(m.contains("unknown composition 'pair'"), "{m}");
        let m = e("seq(gups))");
        assert!(
            m.contains("unexpected ')'") && m.contains("position 10"),
            "{m}"
        );
        let m = e("seq(n=3,gups)");
        assert!(m.contains("'n=3' with no workload"), "{m}");
        let m = e("gups)");
        assert!(m.contains("position"), "{m}");
        // Nesting is bounded: 5000 levels overflowed the stack (an abort) before.
        let nest = |n: usize| {
            format!(
                "{}gups:size=1M,updates=10{}",
                "seq(".repeat(n),
                ")".repeat(n)
            )
        };
        super::super::parse(&nest(MAX_DEPTH)).unwrap();
        let m = e(&nest(MAX_DEPTH + 1));
        assert!(
            m.contains("nested more than 32 deep")
                && m.contains(&format!("position {}", 4 * MAX_DEPTH + 1)),
            "{m}"
        );
        let m = e(&nest(5000));
        assert!(m.contains("nested more than 32 deep"), "{m}");
    }
}
