//! Newtypes for the units that cross module boundaries: frames, buddy orders, pids, size
//! classes, protections, access kinds. All are `#[repr(transparent)]` and free at run time.
//!
//! Not (yet) newtypes: virtual byte addresses and virtual page numbers, which the VM converts
//! between by the base-page shift at every turn, and cycle counts; they are `u64` named `va`,
//! `vpn` and `cycles`.

use serde::Serialize;

/// A physical frame number, in base pages of the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(transparent)]
pub struct Pfn(pub u64);

/// A buddy-allocator order: a block of `2^order` base pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(transparent)]
pub struct Order(pub u8);

/// A process id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
#[repr(transparent)]
pub struct Pid(pub u32);

/// Index of a page size in the machine's list: 0 is the base page, 1.. the superpage sizes in
/// increasing order. Small, so it fits in TLB tags and page-table entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(transparent)]
pub struct SizeClass(pub u8);

impl SizeClass {
    pub const BASE: SizeClass = SizeClass(0);
    #[inline]
    pub const fn is_base(self) -> bool {
        self.0 == 0
    }
}

impl Order {
    #[inline]
    pub const fn pages(self) -> u64 {
        1u64 << self.0
    }
}

impl Pfn {
    #[inline]
    pub const fn is_aligned(self, order: Order) -> bool {
        self.0 & ((1u64 << order.0) - 1) == 0
    }
}

/// What an access does, as the core times it. A read-modify-write instruction (x86 `add [m], r`,
/// an atomic) loads and stores one address: it waits for its data like a load and dirties the
/// line like a store; the VM sees it as one `Write`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MemOp {
    Load,
    Store,
    Rmw,
    Ifetch,
}

impl MemOp {
    /// The access kind the VM sees.
    #[inline]
    pub const fn kind(self) -> AccessKind {
        match self {
            MemOp::Load => AccessKind::Read,
            MemOp::Store | MemOp::Rmw => AccessKind::Write,
            MemOp::Ifetch => AccessKind::Ifetch,
        }
    }
    /// The plain operation of an access kind (a write is a store).
    #[inline]
    pub const fn of_kind(k: AccessKind) -> MemOp {
        match k {
            AccessKind::Read => MemOp::Load,
            AccessKind::Write => MemOp::Store,
            AccessKind::Ifetch => MemOp::Ifetch,
        }
    }
}

/// One memory access as a workload issues it: the address, what it does, `dep` (how many
/// accesses back is the load whose value formed this address; 0 = independent) and `ipa` (the
/// instructions since the previous access, this one included; 0 for a second access of the
/// same instruction).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    pub va: u64,
    pub op: MemOp,
    pub dep: u16,
    pub ipa: u16,
}

impl Access {
    #[inline]
    pub const fn new(va: u64, op: MemOp, dep: u16, ipa: u16) -> Access {
        Access { va, op, dep, ipa }
    }
    /// An independent access of kind `k` with one instruction.
    #[inline]
    pub const fn plain(va: u64, k: AccessKind) -> Access {
        Access::new(va, MemOp::of_kind(k), 0, 1)
    }
}

/// Memory access kinds. A read-modify-write instruction is one `Write`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessKind {
    Read,
    Write,
    Ifetch,
}

/// Protection bits of a mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(transparent)]
pub struct Prot(pub u8);

impl Prot {
    pub const NONE: Prot = Prot(0);
    pub const READ: Prot = Prot(1);
    pub const WRITE: Prot = Prot(2);
    pub const EXEC: Prot = Prot(4);
    pub const RW: Prot = Prot(3);
    pub const RX: Prot = Prot(5);
    pub const RWX: Prot = Prot(7);
    #[inline]
    pub const fn allows(self, kind: AccessKind) -> bool {
        match kind {
            AccessKind::Read => self.0 & 1 != 0,
            AccessKind::Write => self.0 & 2 != 0,
            AccessKind::Ifetch => self.0 & 4 != 0,
        }
    }
    #[inline]
    pub const fn writable(self) -> bool {
        self.0 & 2 != 0
    }
}

impl std::fmt::Display for Prot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = if self.0 & 1 != 0 { 'r' } else { '-' };
        let w = if self.0 & 2 != 0 { 'w' } else { '-' };
        let x = if self.0 & 4 != 0 { 'x' } else { '-' };
        write!(f, "{r}{w}{x}")
    }
}

/// Formats a byte count with a binary suffix: 4096 -> "4K", 2097152 -> "2M".
pub fn fmt_size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "T"),
        (1 << 30, "G"),
        (1 << 20, "M"),
        (1 << 10, "K"),
    ];
    for (unit, suffix) in UNITS {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{}{}", bytes / unit, suffix);
        }
    }
    format!("{bytes}")
}

/// Index of a memory object in the OS's object table (a unit, so that the reservation layer can
/// name objects without depending on the VM).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct ObjId(pub u32);
