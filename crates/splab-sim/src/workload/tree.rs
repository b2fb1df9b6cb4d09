//! Tree (seed 000 6.2): "four operations performed randomly on a 50000-node red-black tree:
//! 50% lookups, 24% insertions, 24% deletions, and 2% traversals. Nodes on the tree contain a
//! pointer to a 128-byte record. On insertions a new record is allocated and initialized; on
//! lookups and traversals, half of the record is read."
//!
//! The tree is a real left-leaning red-black tree (Sedgewick 2008) whose nodes and records live
//! at simulated addresses handed out by a small malloc over brk; every field read or write of a
//! node, and every word of a record touched, is one 8-byte access. Node layout (48 bytes):
//! key @0, left @8, right @16, color @24, record @32.

use rustc_hash::FxHashMap;

use super::Batch;
use crate::engine::Engine;
use crate::error::{Result, SimError};
use crate::rng::Rng;
use crate::spec::Spec;
use crate::units::{Access, MemOp, Pid};

const NIL: u32 = u32::MAX;
/// Instructions per access: a red-black tree step is ~6 instructions for its two accesses (key,
/// child pointer; gcc -O2, docs/constants.md 6).
const TREE_IPA: u16 = 3;
const NODE_BYTES: u64 = 48;
const RECORD_BYTES: u64 = 128;
const KEY: u64 = 0;
const LEFT: u64 = 8;
const RIGHT: u64 = 16;
const COLOR: u64 = 24;
const REC: u64 = 32;

pub struct Tree {
    nodes: u64,
    ops: u64,
}

impl Tree {
    pub fn parse(spec: &mut Spec) -> Result<Tree> {
        let nodes = spec.take_count("nodes", 50_000, 1, 100_000_000)?;
        let ops = spec.take_count("ops", 20_000, 0, 1 << 40)?;
        Ok(Tree { nodes, ops })
    }
}

/// A malloc over brk: 16-byte headers, chunk sizes rounded to 16, LIFO free lists per size (like
/// glibc's tcache), the heap grown by brk in 128KB steps (glibc M_TOP_PAD default).
struct Heap {
    top: u64,
    end: u64,
    free: FxHashMap<u64, Vec<u64>>,
}

impl Heap {
    fn new(e: &Engine, pid: Pid) -> Result<Heap> {
        let b = e.current_brk(pid)?;
        Ok(Heap {
            top: b,
            end: b,
            free: FxHashMap::default(),
        })
    }

    fn malloc(&mut self, e: &mut Engine, pid: Pid, batch: &mut Batch, size: u64) -> Result<u64> {
        let chunk = (size + 16).div_ceil(16) * 16;
        if let Some(p) = self.free.get_mut(&chunk).and_then(|l| l.pop()) {
            batch.push(e, Access::new(p, MemOp::Load, 0, TREE_IPA))?; // the free-list link
            return Ok(p);
        }
        if self.top + chunk > self.end {
            let want = self.end + (128 << 10).max(chunk);
            batch.flush(e)?;
            let got = e.brk(pid, want)?;
            if got < want {
                return Err(SimError::OutOfMemory(format!(
                    "tree: brk to {want:#x} refused"
                )));
            }
            self.end = got;
        }
        let p = self.top + 16;
        batch.push(e, Access::new(self.top + 8, MemOp::Store, 0, TREE_IPA))?; // chunk header
        self.top += chunk;
        Ok(p)
    }

    fn free(&mut self, e: &mut Engine, batch: &mut Batch, p: u64, size: u64) -> Result<()> {
        let chunk = (size + 16).div_ceil(16) * 16;
        batch.push(e, Access::new(p, MemOp::Store, 0, TREE_IPA))?; // the free-list link
        self.free.entry(chunk).or_default().push(p);
        Ok(())
    }
}

#[derive(Clone, Copy)]
struct Node {
    key: u64,
    left: u32,
    right: u32,
    red: bool,
    record: u64,
    addr: u64,
}

/// The tree, with the simulated memory it lives in.
struct Rb<'a> {
    e: &'a mut Engine,
    pid: Pid,
    batch: Batch,
    heap: Heap,
    nodes: Vec<Node>,
    /// Per node: the access (`Batch::pushed` before it) that loaded the pointer to it last,
    /// so accesses to the node depend on that load (a pointer chase).
    loaded: Vec<Option<u64>>,
    free_nodes: Vec<u32>,
    root: u32,
}

impl Rb<'_> {
    fn touch(&mut self, n: u32, field: u64, op: MemOp) -> Result<()> {
        let a = self.nodes[n as usize].addr + field;
        let dep = self
            .batch
            .dep_on(self.loaded.get(n as usize).copied().flatten());
        self.batch.push(self.e, Access::new(a, op, dep, TREE_IPA))
    }
    fn rd(&mut self, n: u32, field: u64) -> Result<()> {
        self.touch(n, field, MemOp::Load)
    }
    fn wr(&mut self, n: u32, field: u64) -> Result<()> {
        self.touch(n, field, MemOp::Store)
    }
    /// Node `child`'s address was just loaded (by the last access pushed).
    fn pointer_loaded(&mut self, child: u32) {
        if child != NIL {
            let i = child as usize;
            if self.loaded.len() <= i {
                self.loaded.resize(i + 1, None);
            }
            self.loaded[i] = Some(self.batch.pushed - 1);
        }
    }

    fn is_red(&mut self, n: u32) -> Result<bool> {
        if n == NIL {
            return Ok(false);
        }
        self.rd(n, COLOR)?;
        Ok(self.nodes[n as usize].red)
    }

    fn left(&mut self, n: u32) -> Result<u32> {
        self.rd(n, LEFT)?;
        let c = self.nodes[n as usize].left;
        self.pointer_loaded(c);
        Ok(c)
    }
    fn right(&mut self, n: u32) -> Result<u32> {
        self.rd(n, RIGHT)?;
        let c = self.nodes[n as usize].right;
        self.pointer_loaded(c);
        Ok(c)
    }
    fn set_left(&mut self, n: u32, c: u32) -> Result<()> {
        self.nodes[n as usize].left = c;
        self.wr(n, LEFT)
    }
    fn set_right(&mut self, n: u32, c: u32) -> Result<()> {
        self.nodes[n as usize].right = c;
        self.wr(n, RIGHT)
    }
    fn set_red(&mut self, n: u32, red: bool) -> Result<()> {
        self.nodes[n as usize].red = red;
        self.wr(n, COLOR)
    }
    fn key(&mut self, n: u32) -> Result<u64> {
        self.rd(n, KEY)?;
        Ok(self.nodes[n as usize].key)
    }

    fn new_node(&mut self, key: u64) -> Result<u32> {
        let addr = self
            .heap
            .malloc(self.e, self.pid, &mut self.batch, NODE_BYTES)?;
        let record = self
            .heap
            .malloc(self.e, self.pid, &mut self.batch, RECORD_BYTES)?;
        // "On insertions a new record is allocated and initialized."
        self.batch.words(
            self.e,
            record,
            RECORD_BYTES / 8,
            MemOp::Store,
            TREE_IPA,
            None,
        )?;
        let node = Node {
            key,
            left: NIL,
            right: NIL,
            red: true,
            record,
            addr,
        };
        let id = match self.free_nodes.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() as u32 - 1
            }
        };
        self.batch
            .words(self.e, addr, NODE_BYTES / 8, MemOp::Store, TREE_IPA, None)?;
        if let Some(l) = self.loaded.get_mut(id as usize) {
            *l = None;
        }
        Ok(id)
    }

    fn free_node(&mut self, n: u32, with_record: bool) -> Result<()> {
        let Node { addr, record, .. } = self.nodes[n as usize];
        if with_record {
            self.heap
                .free(self.e, &mut self.batch, record, RECORD_BYTES)?;
        }
        self.heap.free(self.e, &mut self.batch, addr, NODE_BYTES)?;
        self.free_nodes.push(n);
        Ok(())
    }

    fn read_half_record(&mut self, n: u32) -> Result<()> {
        self.rd(n, REC)?;
        let r = self.nodes[n as usize].record;
        let producer = Some(self.batch.pushed - 1);
        self.batch.words(
            self.e,
            r,
            RECORD_BYTES / 16,
            MemOp::Load,
            TREE_IPA,
            producer,
        )
    }

    fn rotate_left(&mut self, h: u32) -> Result<u32> {
        let x = self.right(h)?;
        let xl = self.left(x)?;
        self.set_right(h, xl)?;
        self.set_left(x, h)?;
        let hr = self.is_red(h)?;
        self.set_red(x, hr)?;
        self.set_red(h, true)?;
        Ok(x)
    }

    fn rotate_right(&mut self, h: u32) -> Result<u32> {
        let x = self.left(h)?;
        let xr = self.right(x)?;
        self.set_left(h, xr)?;
        self.set_right(x, h)?;
        let hr = self.is_red(h)?;
        self.set_red(x, hr)?;
        self.set_red(h, true)?;
        Ok(x)
    }

    fn flip_colors(&mut self, h: u32) -> Result<()> {
        for n in [h, self.nodes[h as usize].left, self.nodes[h as usize].right] {
            if n != NIL {
                let r = self.is_red(n)?;
                self.set_red(n, !r)?;
            }
        }
        Ok(())
    }

    fn fix_up(&mut self, mut h: u32) -> Result<u32> {
        let r = self.right(h)?;
        if self.is_red(r)? {
            h = self.rotate_left(h)?;
        }
        let l = self.left(h)?;
        if self.is_red(l)? {
            let ll = self.left(l)?;
            if self.is_red(ll)? {
                h = self.rotate_right(h)?;
            }
        }
        let (l, r) = (self.left(h)?, self.right(h)?);
        if self.is_red(l)? && self.is_red(r)? {
            self.flip_colors(h)?;
        }
        Ok(h)
    }

    fn insert_at(&mut self, h: u32, key: u64) -> Result<u32> {
        if h == NIL {
            return self.new_node(key);
        }
        let k = self.key(h)?;
        if key < k {
            let l = self.left(h)?;
            let nl = self.insert_at(l, key)?;
            self.set_left(h, nl)?;
        } else {
            let r = self.right(h)?;
            let nr = self.insert_at(r, key)?;
            self.set_right(h, nr)?;
        }
        self.fix_up(h)
    }

    fn insert(&mut self, key: u64) -> Result<()> {
        let r = self.root;
        let root = self.insert_at(r, key)?;
        self.root = root;
        self.set_red(root, false)
    }

    fn lookup(&mut self, key: u64) -> Result<()> {
        let mut h = self.root;
        while h != NIL {
            let k = self.key(h)?;
            if key == k {
                return self.read_half_record(h);
            }
            h = if key < k {
                self.left(h)?
            } else {
                self.right(h)?
            };
        }
        Ok(())
    }

    fn move_red_left(&mut self, mut h: u32) -> Result<u32> {
        self.flip_colors(h)?;
        let r = self.right(h)?;
        let rl = self.left(r)?;
        if self.is_red(rl)? {
            let nr = self.rotate_right(r)?;
            self.set_right(h, nr)?;
            h = self.rotate_left(h)?;
            self.flip_colors(h)?;
        }
        Ok(h)
    }

    fn move_red_right(&mut self, mut h: u32) -> Result<u32> {
        self.flip_colors(h)?;
        let l = self.left(h)?;
        let ll = if l == NIL { NIL } else { self.left(l)? };
        if self.is_red(ll)? {
            h = self.rotate_right(h)?;
            self.flip_colors(h)?;
        }
        Ok(h)
    }

    /// Removes the minimum of the subtree at `h`; returns (new subtree, the removed node).
    fn delete_min(&mut self, mut h: u32) -> Result<(u32, u32)> {
        let l = self.left(h)?;
        if l == NIL {
            return Ok((NIL, h));
        }
        let ll = self.left(l)?;
        if !self.is_red(l)? && !self.is_red(ll)? {
            h = self.move_red_left(h)?;
        }
        let l = self.left(h)?;
        let (nl, min) = self.delete_min(l)?;
        self.set_left(h, nl)?;
        Ok((self.fix_up(h)?, min))
    }

    fn delete_at(&mut self, mut h: u32, key: u64) -> Result<u32> {
        let k = self.key(h)?;
        if key < k {
            let l = self.left(h)?;
            let ll = if l == NIL { NIL } else { self.left(l)? };
            if !self.is_red(l)? && !self.is_red(ll)? {
                h = self.move_red_left(h)?;
            }
            let l = self.left(h)?;
            let nl = self.delete_at(l, key)?;
            self.set_left(h, nl)?;
        } else {
            let l = self.left(h)?;
            if self.is_red(l)? {
                h = self.rotate_right(h)?;
            }
            let r = self.right(h)?;
            if key == self.key(h)? && r == NIL {
                self.free_node(h, true)?;
                return Ok(NIL);
            }
            let rl = if r == NIL { NIL } else { self.left(r)? };
            if !self.is_red(r)? && !self.is_red(rl)? {
                h = self.move_red_right(h)?;
            }
            if key == self.key(h)? {
                // Replace h's key and record by its successor's, then unlink the successor.
                let r = self.right(h)?;
                let (nr, min) = self.delete_min(r)?;
                let old_record = self.nodes[h as usize].record;
                self.heap
                    .free(self.e, &mut self.batch, old_record, RECORD_BYTES)?;
                let (mk, mrec) = (self.key(min)?, {
                    self.rd(min, REC)?;
                    self.nodes[min as usize].record
                });
                self.nodes[h as usize].key = mk;
                self.nodes[h as usize].record = mrec;
                self.wr(h, KEY)?;
                self.wr(h, REC)?;
                self.free_node(min, false)?;
                self.set_right(h, nr)?;
            } else {
                let r = self.right(h)?;
                let nr = self.delete_at(r, key)?;
                self.set_right(h, nr)?;
            }
        }
        self.fix_up(h)
    }

    fn delete(&mut self, key: u64) -> Result<()> {
        let root = self.root;
        let (l, r) = (self.left(root)?, self.right(root)?);
        if !self.is_red(l)? && !self.is_red(r)? {
            self.set_red(root, true)?;
        }
        self.root = self.delete_at(root, key)?;
        if self.root != NIL {
            let root = self.root;
            self.set_red(root, false)?;
        }
        Ok(())
    }

    /// In-order traversal reading half of every record.
    fn traverse(&mut self) -> Result<()> {
        let mut stack = Vec::new();
        let mut h = self.root;
        while h != NIL || !stack.is_empty() {
            while h != NIL {
                stack.push(h);
                h = self.left(h)?;
            }
            let n = stack.pop().expect("traverse: stack");
            self.key(n)?;
            self.read_half_record(n)?;
            h = self.right(n)?;
        }
        Ok(())
    }
}

impl super::Workload for Tree {
    fn describe(&self) -> String {
        format!("tree:nodes={},ops={}", self.nodes, self.ops)
    }

    fn expected_accesses(&self) -> Option<u64> {
        None
    }

    fn run(&mut self, e: &mut Engine, rng: &mut Rng) -> Result<()> {
        let pid = e.spawn()?;
        let heap = Heap::new(e, pid)?;
        let mut t = Rb {
            e,
            pid,
            batch: Batch::new(pid),
            heap,
            nodes: Vec::new(),
            loaded: Vec::new(),
            free_nodes: Vec::new(),
            root: NIL,
        };
        // Live keys, for picking a random existing key in O(1).
        let mut keys: Vec<u64> = Vec::new();
        let mut pos: FxHashMap<u64, usize> = FxHashMap::default();
        let new_key = |rng: &mut Rng, pos: &FxHashMap<u64, usize>| loop {
            let k = rng.below(1 << 40);
            if !pos.contains_key(&k) {
                return k;
            }
        };
        for _ in 0..self.nodes {
            let k = new_key(rng, &pos);
            t.insert(k)?;
            pos.insert(k, keys.len());
            keys.push(k);
        }
        for _ in 0..self.ops {
            let r = rng.below(100);
            if r < 50 {
                let k = keys[rng.below(keys.len() as u64) as usize];
                t.lookup(k)?;
            } else if r < 74 || keys.len() <= 1 {
                let k = new_key(rng, &pos);
                t.insert(k)?;
                pos.insert(k, keys.len());
                keys.push(k);
            } else if r < 98 {
                let i = rng.below(keys.len() as u64) as usize;
                let k = keys.swap_remove(i);
                pos.remove(&k);
                if i < keys.len() {
                    pos.insert(keys[i], i);
                }
                t.delete(k)?;
            } else {
                t.traverse()?;
            }
        }
        t.batch.flush(t.e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::Machine;
    use crate::policy::Policy;
    use crate::workload::Workload;

    /// Walks the model tree and checks the red-black properties and key order.
    fn check(rb: &Rb, h: u32, lo: u64, hi: u64) -> usize {
        if h == NIL {
            return 1;
        }
        let n = rb.nodes[h as usize];
        assert!(n.key >= lo && n.key <= hi, "key order");
        if n.red {
            assert!(
                n.left == NIL || !rb.nodes[n.left as usize].red,
                "red node with red child"
            );
        }
        assert!(
            n.right == NIL || !rb.nodes[n.right as usize].red,
            "right-leaning red link"
        );
        let bl = check(rb, n.left, lo, n.key);
        let br = check(rb, n.right, n.key, hi);
        assert_eq!(bl, br, "black height");
        bl + usize::from(!n.red)
    }

    #[test]
    fn llrb_stays_balanced_under_inserts_and_deletes() {
        let mut e = Engine::new(
            Machine::from_spec("skylake").unwrap(),
            Policy::base(),
            false,
            None,
        );
        let pid = e.spawn().unwrap();
        let heap = Heap::new(&e, pid).unwrap();
        let mut rb = Rb {
            e: &mut e,
            pid,
            batch: Batch::new(pid),
            heap,
            nodes: Vec::new(),
            loaded: Vec::new(),
            free_nodes: Vec::new(),
            root: NIL,
        };
        let mut rng = Rng::new(3);
        let mut live = std::collections::BTreeSet::new();
        for i in 0..3000 {
            if i % 3 == 2 && !live.is_empty() {
                let k = *live
                    .iter()
                    .nth(rng.below(live.len() as u64) as usize)
                    .unwrap();
                live.remove(&k);
                rb.delete(k).unwrap();
            } else {
                let k = rng.below(1 << 20);
                if live.insert(k) {
                    rb.insert(k).unwrap();
                }
            }
        }
        check(&rb, rb.root, 0, u64::MAX);
        let mut inorder = Vec::new();
        let mut stack = Vec::new();
        let mut h = rb.root;
        while h != NIL || !stack.is_empty() {
            while h != NIL {
                stack.push(h);
                h = rb.nodes[h as usize].left;
            }
            let n = stack.pop().unwrap();
            inorder.push(rb.nodes[n as usize].key);
            h = rb.nodes[n as usize].right;
        }
        assert_eq!(inorder, live.iter().copied().collect::<Vec<_>>());
    }

    #[test]
    fn tree_workload_runs_and_keeps_heap_in_brk() {
        let mut e = Engine::new(
            Machine::from_spec("skylake").unwrap(),
            Policy::base(),
            true,
            None,
        );
        let mut w = Tree {
            nodes: 500,
            ops: 300,
        };
        w.run(&mut e, &mut Rng::new(1)).unwrap();
        assert!(e.os.acc.total > 10_000);
        assert!(e.os.stats.faults.zero_fill > 10);
    }
}
