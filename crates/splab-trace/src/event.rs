//! The event stream as recorded: [`TraceEvent`] and the small newtypes it carries.
//!
//! Who uses it: everything in this crate, and the simulator's trace workload, which maps each
//! variant onto the design's event stream one to one (docs/trace-format.md "Event semantics").

use std::fmt;

/// A process id as the traced program saw it (`getpid()`), or as an importer assigned it.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pid(pub u32);

/// A virtual address of the traced program.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Vaddr(pub u64);

/// A file known to the trace; 0 is never used (anonymous memory has `file: None`).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FileId(pub u32);

impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for Vaddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

impl fmt::Display for FileId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "f{}", self.0)
    }
}

/// What an access does. The code (`as u8`) is the format's 2-bit kind field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AccessKind {
    /// A load.
    Read = 0,
    /// A store.
    Write = 1,
    /// An instruction fetch.
    Ifetch = 2,
    /// A read-modify-write: one instruction that loads and stores the same address (x86
    /// `add [mem], r`, `inc [mem]`, `xchg`, lock-prefixed operations). One access, which is a
    /// load as far as `dep` is concerned. Version-1 traces have none (they recorded a `Write`).
    Rmw = 3,
}

impl AccessKind {
    #[inline]
    pub const fn from_code(c: u8) -> Option<AccessKind> {
        match c {
            0 => Some(AccessKind::Read),
            1 => Some(AccessKind::Write),
            2 => Some(AccessKind::Ifetch),
            3 => Some(AccessKind::Rmw),
            _ => None,
        }
    }
    pub const fn letter(self) -> char {
        match self {
            AccessKind::Read => 'R',
            AccessKind::Write => 'W',
            AccessKind::Ifetch => 'I',
            AccessKind::Rmw => 'M',
        }
    }
    /// True for the kinds that load a value (`Read`, `Rmw`): the ones a `dep` can point at.
    #[inline]
    pub const fn loads(self) -> bool {
        matches!(self, AccessKind::Read | AccessKind::Rmw)
    }
    /// True for the kinds that store (`Write`, `Rmw`).
    #[inline]
    pub const fn stores(self) -> bool {
        matches!(self, AccessKind::Write | AccessKind::Rmw)
    }
}

/// `dep` is at most this: a load further back is "no dependence" (0). An out-of-order core
/// has retired such a load long ago (reorder buffers hold at most ~1024 instructions, hence at
/// most that many accesses), and larger distances, which mostly come from base pointers loaded
/// once and used for a long time, would cost bytes and defeat the format's prediction.
pub const DEP_CAP: u16 = 1023;
/// `ipa` saturates at this value.
pub const IPA_CAP: u16 = u16::MAX;

/// Protection bits, Linux's values: read 1, write 2, exec 4.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Prot(pub u8);

impl Prot {
    pub const NONE: Prot = Prot(0);
    pub const READ: Prot = Prot(1);
    pub const WRITE: Prot = Prot(2);
    pub const EXEC: Prot = Prot(4);
    pub const RW: Prot = Prot(3);
    #[inline]
    pub const fn readable(self) -> bool {
        self.0 & 1 != 0
    }
    #[inline]
    pub const fn writable(self) -> bool {
        self.0 & 2 != 0
    }
    #[inline]
    pub const fn executable(self) -> bool {
        self.0 & 4 != 0
    }
}

impl fmt::Display for Prot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = |b: bool, ch: char| if b { ch } else { '-' };
        write!(
            f,
            "{}{}{}",
            c(self.readable(), 'r'),
            c(self.writable(), 'w'),
            c(self.executable(), 'x')
        )
    }
}

/// Mapping flags of the design's `mmap` (not Linux's bit values: see the constants).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MmapFlags(pub u16);

impl MmapFlags {
    /// Anonymous memory (zero-filled on first touch).
    pub const ANON: MmapFlags = MmapFlags(1);
    /// Backed by a file (`file` is set).
    pub const FILE: MmapFlags = MmapFlags(2);
    /// Shared (writes visible to other mappers; no copy-on-write at fork).
    pub const SHARED: MmapFlags = MmapFlags(4);
    /// The address was imposed (`MAP_FIXED`).
    pub const FIXED: MmapFlags = MmapFlags(8);
    /// A thread's or the process's stack.
    pub const STACK: MmapFlags = MmapFlags(16);
    /// Grows down on faults just below it (`MAP_GROWSDOWN`, the main stack).
    pub const GROWABLE: MmapFlags = MmapFlags(32);
    /// The mapping was reconstructed from addresses (importers), not seen as a syscall.
    pub const INFERRED: MmapFlags = MmapFlags(64);
    /// (Version 4.) glibc's malloc made this anonymous mapping to grow its main heap because
    /// the recorder's Valgrind refused the `brk` before it (its 8 MiB data-segment cap; glibc
    /// `sysmalloc`'s mmap fallback for a failed MORECORE). A native run would have grown the
    /// program break by this much instead; a replayer may put the mapping back on the heap
    /// (docs/replay.md, "Valgrind's heap cap").
    pub const MORECORE: MmapFlags = MmapFlags(128);
    /// All bits this version defines.
    pub const ALL: u16 = 255;

    #[inline]
    pub const fn contains(self, other: MmapFlags) -> bool {
        self.0 & other.0 == other.0
    }
    #[inline]
    pub const fn union(self, other: MmapFlags) -> MmapFlags {
        MmapFlags(self.0 | other.0)
    }

    /// Converts Linux's `mmap` flags (amd64 values).
    pub fn from_linux(flags: u64, has_file: bool) -> MmapFlags {
        let mut f = MmapFlags(0);
        if flags & 0x20 != 0 || !has_file {
            f = f.union(MmapFlags::ANON);
        } else {
            f = f.union(MmapFlags::FILE);
        }
        if flags & 0x01 != 0 {
            f = f.union(MmapFlags::SHARED);
        }
        if flags & 0x10 != 0 || flags & 0x100000 != 0 {
            f = f.union(MmapFlags::FIXED); // MAP_FIXED, MAP_FIXED_NOREPLACE
        }
        if flags & 0x20000 != 0 {
            f = f.union(MmapFlags::STACK);
        }
        if flags & 0x100 != 0 {
            f = f.union(MmapFlags::GROWABLE);
        }
        f
    }
}

impl fmt::Display for MmapFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (MmapFlags::ANON, "anon"),
            (MmapFlags::FILE, "file"),
            (MmapFlags::SHARED, "shared"),
            (MmapFlags::FIXED, "fixed"),
            (MmapFlags::STACK, "stack"),
            (MmapFlags::GROWABLE, "growable"),
            (MmapFlags::INFERRED, "inferred"),
            (MmapFlags::MORECORE, "morecore"),
        ];
        let mut first = true;
        for (bit, name) in names {
            if self.contains(bit) {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        if first {
            f.write_str("none")?;
        }
        Ok(())
    }
}

/// `madvise` advice the simulator models; anything else is kept as Linux's number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Advice {
    DontNeed,
    Free,
    HugePage,
    NoHugePage,
    Collapse,
    Other(u32),
}

impl Advice {
    /// From Linux's `MADV_*` number.
    pub fn from_linux(a: u64) -> Advice {
        match a {
            4 => Advice::DontNeed,
            8 => Advice::Free,
            14 => Advice::HugePage,
            15 => Advice::NoHugePage,
            25 => Advice::Collapse,
            other => Advice::Other(other.min(u32::MAX as u64) as u32),
        }
    }
}

/// What a `Compute` event counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ComputeUnit {
    Cycles,
    Instructions,
}

/// One event of the recorded stream. Semantics (exactly what a replayer must do) are in
/// docs/trace-format.md, "Event semantics". Every address is the one the program really used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    /// A memory access of `size` bytes at `va` (may cross a page boundary), with what an
    /// out-of-order core model needs (docs/trace-format.md, "Event semantics"):
    /// - `dep`: the distance, in access events of the same pid, back to the most recent load
    ///   (`Read` or `Rmw`) whose value formed this access's address; 0 when the address depends
    ///   on no load (or on one more than [`DEP_CAP`] = 1023 accesses back);
    /// - `ipa`: the instructions executed since the pid's previous access, this access's own
    ///   included (0 for the second access of one instruction), at most [`IPA_CAP`].
    Access {
        pid: Pid,
        va: Vaddr,
        kind: AccessKind,
        size: u32,
        dep: u16,
        ipa: u16,
    },
    /// A new mapping at `addr` (the address the program got), `len` bytes (page multiple not
    /// guaranteed: round up). Replaces whatever was mapped there (as `MAP_FIXED` does).
    Mmap {
        pid: Pid,
        addr: Vaddr,
        len: u64,
        prot: Prot,
        flags: MmapFlags,
        file: Option<FileId>,
        offset: u64,
    },
    Munmap {
        pid: Pid,
        addr: Vaddr,
        len: u64,
    },
    /// `[old_addr, +old_len)` moves to `[new_addr, +new_len)`, contents kept.
    Mremap {
        pid: Pid,
        old_addr: Vaddr,
        old_len: u64,
        new_addr: Vaddr,
        new_len: u64,
    },
    Mprotect {
        pid: Pid,
        addr: Vaddr,
        len: u64,
        prot: Prot,
    },
    Madvise {
        pid: Pid,
        addr: Vaddr,
        len: u64,
        advice: Advice,
    },
    /// The program break is now `new_end`. A process's first `Brk` sets the heap start
    /// (an empty heap at `new_end`).
    Brk {
        pid: Pid,
        new_end: Vaddr,
    },
    /// `child` is a copy of `parent` (copy-on-write for private mappings).
    Fork {
        parent: Pid,
        child: Pid,
    },
    /// `child` was created by vfork (or `clone(CLONE_VM | CLONE_VFORK)`, as glibc's posix_spawn
    /// does): it runs in `parent`'s address space, the parent suspended, until the child's
    /// `Exec` (which gives it an address space of its own) or `Exit` (which leaves the
    /// parent's untouched). Version 3.
    Vfork {
        parent: Pid,
        child: Pid,
    },
    /// `pid` replaced its image: its address space is now empty; Mmap events follow.
    Exec {
        pid: Pid,
    },
    /// `pid` ended: its address space goes away.
    Exit {
        pid: Pid,
    },
    /// Introduces a file id, with the file's size in bytes and its name when known.
    FileOpen {
        file: FileId,
        size: u64,
        name: Option<Box<str>>,
    },
    /// Time spent not touching memory. (In version-2 traces the `ipa` of the pid's next access
    /// already counts `Instructions`: a model that uses `ipa` should not add them again.)
    Compute {
        pid: Pid,
        amount: u64,
        unit: ComputeUnit,
    },
}

impl TraceEvent {
    /// The process the event belongs to (`parent` for `Fork`, none for `FileOpen`).
    pub fn pid(&self) -> Option<Pid> {
        use TraceEvent::*;
        match self {
            Access { pid, .. }
            | Mmap { pid, .. }
            | Munmap { pid, .. }
            | Mremap { pid, .. }
            | Mprotect { pid, .. }
            | Madvise { pid, .. }
            | Brk { pid, .. }
            | Exec { pid }
            | Exit { pid }
            | Compute { pid, .. } => Some(*pid),
            Fork { parent, .. } | Vfork { parent, .. } => Some(*parent),
            FileOpen { .. } => None,
        }
    }
}

impl fmt::Display for TraceEvent {
    /// One line, the `splab trace cat` form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use TraceEvent::*;
        match self {
            Access {
                pid,
                va,
                kind,
                size,
                dep,
                ipa,
            } => write!(f, "{pid} {} {va} {size} dep={dep} ipa={ipa}", kind.letter()),
            Mmap {
                pid,
                addr,
                len,
                prot,
                flags,
                file,
                offset,
            } => {
                write!(
                    f,
                    "{pid} mmap {addr} len={len:#x} prot={prot} flags={flags}"
                )?;
                if let Some(file) = file {
                    write!(f, " file={file} off={offset:#x}")?;
                }
                Ok(())
            }
            Munmap { pid, addr, len } => write!(f, "{pid} munmap {addr} len={len:#x}"),
            Mremap {
                pid,
                old_addr,
                old_len,
                new_addr,
                new_len,
            } => write!(
                f,
                "{pid} mremap {old_addr} len={old_len:#x} -> {new_addr} len={new_len:#x}"
            ),
            Mprotect {
                pid,
                addr,
                len,
                prot,
            } => {
                write!(f, "{pid} mprotect {addr} len={len:#x} prot={prot}")
            }
            Madvise {
                pid,
                addr,
                len,
                advice,
            } => {
                write!(f, "{pid} madvise {addr} len={len:#x} {advice:?}")
            }
            Brk { pid, new_end } => write!(f, "{pid} brk {new_end}"),
            Fork { parent, child } => write!(f, "{parent} fork {child}"),
            Vfork { parent, child } => write!(f, "{parent} vfork {child}"),
            Exec { pid } => write!(f, "{pid} exec"),
            Exit { pid } => write!(f, "{pid} exit"),
            FileOpen { file, size, name } => {
                write!(f, "- file {file} size={size}")?;
                if let Some(n) = name {
                    write!(f, " {n}")?;
                }
                Ok(())
            }
            Compute { pid, amount, unit } => write!(f, "{pid} compute {amount} {unit:?}"),
        }
    }
}
