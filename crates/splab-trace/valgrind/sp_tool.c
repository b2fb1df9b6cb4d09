/* sp_tool.c: splab's own Valgrind tool ("--tool=splab"), the capture half of `splab record`.
 *
 * Who calls it: only splab-trace's `record` (src/record.rs), which starts
 *   VALGRIND_LIB=<dir> valgrind --tool=splab --trace-children=yes --sp-fd=N CMD...
 * with the write end of a pipe at fd N, and converts what arrives into the .spt format on the fly.
 *
 * What it records, per process (the pid is the client's getpid()):
 *   - every load, store and read-modify-write of the client, from the VEX IR (Load, Store,
 *     LoadG, StoreG, CAS, LLSC and dirty helpers' memory effects), optionally every instruction
 *     fetch (--sp-ifetch=yes); with each access its dep (the distance, in access events of the
 *     process, back to the load its address derives from) and its ipa (guest instructions since
 *     the previous access); see "instrumentation" below;
 *   - the address space at start (after exec too): every client segment of Valgrind's address
 *     space manager, with the file it maps, and the heap (brk) start;
 *   - the code pages each process runs: one ifetch access per page, the first time (see "code
     pages"; --sp-code-pages=no turns it off, --sp-ifetch=yes replaces it);
   - regions of interest: SPLAB_START() / SPLAB_STOP() (valgrind/splab.h) turn the recording
     of accesses on and off; --sp-roi=yes starts with it off;
   - the memory syscalls with their real results: mmap, munmap, mremap, mprotect, madvise, brk;
 *   - fork (from the child: its first record names its parent and the clone flags the client
 *     asked for, so that a vfork / posix_spawn is told from a fork), exec (a new tool instance
 *     starts in the same pid and says HELLO), exit.
 *
 * Wire format (tool -> splab, little endian, documented in docs/trace-format.md "Capture wire"):
 *   chunk  = u32 magic "SPC2" | u32 pid | u32 payload_bytes | u32 reserved | payload
 *   payload = records of 64-bit words:
 *     bit 63 set: an access, 1:1 | run:1 | kind:2 | size code:3 | ipa:5 | dep:5 | addr:47
 *       (kind 0 read, 1 write, 2 ifetch, 3 read-modify-write; size = 1 << code, code <= 6;
 *       ipa or dep 31: the value of the last DI word). A run has one more word,
 *       stride:16 (signed) | count:48, standing for `count` accesses at addr, addr+stride, ...;
 *     else the top byte is a tag:
 *       0x0f (DI): word = tag:8 | dep:16 << 16 | ipa:16, before an access with a 31;
 *       >= 0x10: word = tag:8 | n:32, then n words (see the TAG_ list below).
 *   A chunk is at most PIPE_BUF (4096) bytes, so that chunks written by several processes on the
 *   same pipe never interleave (POSIX: writes of at most PIPE_BUF bytes to a pipe are atomic).
 *
 * Why runs: consecutive accesses of the same kind, size, dep and ipa at a constant stride (array
 * scans, memset/memcpy loops, stack pushes) collapse into one record here, at the cost of one
 * compare per access, which keeps the pipe and the converter far from being the bottleneck.
 */

#include "pub_tool_basics.h"
#include "pub_tool_tooliface.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_libcprint.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_libcproc.h"
#include "pub_tool_options.h"
#include "pub_tool_machine.h"
#include "pub_tool_threadstate.h"
#include "pub_tool_aspacemgr.h"
#include "pub_tool_vki.h"
#include "pub_tool_vkiscnums.h"
#include "pub_tool_mallocfree.h"
#include "pub_tool_clreq.h"
#include "libvex_guest_amd64.h"

/* ---- record tags (keep in sync with src/record.rs, module `wire`) ---- */
/* Access kinds (the wire's kind + 1). */
#define K_READ        1
#define K_WRITE       2
#define K_IFETCH      3
#define K_RMW         4    /* one instruction loads and stores the same address */
#define W_ACCESS      (1ULL << 63)
#define W_RUN         (1ULL << 62)
#define W_ESC         31   /* an ipa or dep field of 31: see the last DI word */
#define TAG_DI        0x0f /* dep:16 << 16 | ipa:16 */
#define TAG_ACCESS_LONG 0x1c /* addr, stride:16|count:48, kind<<8|size (after a DI word) */
#define TAG_MMAP      0x10 /* a=addr; len, prot|flags<<32, offset, dev, ino, file_size */
#define TAG_MUNMAP    0x11 /* a=addr; len */
#define TAG_MREMAP    0x12 /* a=old_addr; old_len, new_addr, new_len */
#define TAG_MPROTECT  0x13 /* a=addr; len, prot */
#define TAG_MADVISE   0x14 /* a=addr; len, advice */
#define TAG_BRK       0x15 /* a=new_end */
#define TAG_FORK      0x16 /* a=parent pid (the chunk's pid is the child); clone flags */
#define TAG_HELLO     0x17 /* a=0: a tool instance starts (first process, or after exec) */
#define TAG_EXIT      0x18 /* a=exit code */
#define TAG_FILENAME  0x19 /* a=dev; ino, file_size, name_len, name bytes (padded to 8) */
#define TAG_HEAPSTART 0x1a /* a=heap start (initial break) */
#define TAG_STACK     0x1b /* a=lowest address, extra: end (the initial stack segment) */
#define TAG_BRK_REFUSED 0x1d /* a=requested end; the end Valgrind left (see sp_post_syscall) */
#define TAG_MORECORE  0x30 /* a=addr: the next MMAP is glibc's fallback for a refused brk */

#define SPC_MAGIC 0x32435053u /* "SPC2" */

/* dep beyond DEP_CAP is 0 (no dependence); ipa saturates at IPA_CAP (docs/trace-format.md). */
#define DEP_CAP 1023
#define IPA_CAP 65535

/* Linux mmap flags, as the client passed them (amd64). */
#define L_MAP_SHARED    0x01
#define L_MAP_FIXED     0x10
#define L_MAP_ANONYMOUS 0x20

/* ---- options ---- */
static Long clo_fd = -1;
static Bool clo_ifetch = False;
static Bool clo_code_pages = True; /* --sp-code-pages: one ifetch per new code page (below) */
static Bool clo_roi = False;        /* --sp-roi: record no access before SPLAB_START() */

/* Regions of interest (valgrind/splab.h, whose codes these must equal): the client's
   SPLAB_START() / SPLAB_STOP() are tool client requests (valgrind.h, VG_USERREQ_TOOL_BASE and
   VG_IS_TOOL_USERREQ; handled by sp_client_request). While g_on is False no access is recorded;
   address-space records and code pages still are. */
#define SPLAB_USERREQ_START (VG_USERREQ_TOOL_BASE('S', 'P'))
#define SPLAB_USERREQ_STOP  (VG_USERREQ_TOOL_BASE('S', 'P') + 1)
static Bool g_on = True;

/* ---- the output chunk ---- */
#define CHUNK_WORDS (4096 / 8)
#define HDR_WORDS 2
static ULong chunk[CHUNK_WORDS];
static UInt nw = HDR_WORDS;
static Int my_pid;
static Bool out_broken = False;
static Int out_fd = -1;

static void flush_chunk(void)
{
   if (nw == HDR_WORDS)
      return;
   chunk[0] = (ULong)SPC_MAGIC | ((ULong)(UInt)my_pid << 32);
   chunk[1] = (ULong)((nw - HDR_WORDS) * 8);
   if (!out_broken) {
      const HChar* p = (const HChar*)chunk;
      Int left = (Int)(nw * 8);
      while (left > 0) {
         Int n = VG_(write)(out_fd, p, left);
         if (n <= 0) {
            out_broken = True;
            VG_(umsg)("splab: cannot write the trace to fd %d; recording stops here\n", out_fd);
            break;
         }
         p += n;
         left -= n;
      }
   }
   nw = HDR_WORDS;
}

/* ---- access events: sequence numbers, instruction counts, runs ----

   Every access event of the process gets the next sequence number (g_seq).  A shadow register
   (Valgrind's shadow guest state 1, one 64-bit slot per general-purpose register) holds the
   sequence number of the most recent load its value derives from, 0 for none; an access whose
   address derives from a register tag t has dep = seq - t (0 beyond DEP_CAP).  Inside a
   superblock, dependences on the block's own loads are resolved at instrumentation time
   (static distances), see "dependence tags" below.

   g_pending counts guest instructions run since the last access event: the instrumentation adds
   each superblock's instruction counts to it at the block's exits, and each access takes it
   (plus the instructions of its block since the block's previous access) as its ipa. */
static ULong g_seq = 1ULL << 32; /* far from tag 0 ("no load"), so 0 never looks recent */
static ULong g_pending = 0;

static Addr run_first;
static Addr run_last;
static ULong run_key;      /* kind:8 | size:8 | dep:16 | ipa:16; valid when run_count > 0 */
static Long run_stride;
static ULong run_count;

static void emit_run(void)
{
   if (run_count == 0)
      return;
   if (nw + 5 > CHUNK_WORDS)
      flush_chunk();
   ULong dep = (run_key >> 16) & 0xffff, ipa = run_key & 0xffff;
   ULong kind = run_key >> 40, size = (run_key >> 32) & 0xff;
   if (UNLIKELY((run_first >> 47) || (size & (size - 1)) || size == 0)) {
      /* Beyond 47 bits (not seen in amd64 Linux user space) or an odd size (x87's 10 bytes,
         the rest of a split XSAVE area): the long form. */
      chunk[nw++] = (ULong)TAG_DI << 56 | dep << 16 | ipa;
      chunk[nw++] = ((ULong)TAG_ACCESS_LONG << 56) | 3;
      chunk[nw++] = run_first;
      chunk[nw++] = (ULong)(UShort)(Short)run_stride | (run_count << 16);
      chunk[nw++] = kind << 8 | size;
   } else {
      ULong d5 = dep, i5 = ipa;
      if (UNLIKELY(dep >= W_ESC || ipa >= W_ESC)) {
         chunk[nw++] = (ULong)TAG_DI << 56 | dep << 16 | ipa;
         d5 = dep >= W_ESC ? W_ESC : dep;
         i5 = ipa >= W_ESC ? W_ESC : ipa;
      }
      ULong w = W_ACCESS | (kind - 1) << 60 | (ULong)__builtin_ctzll(size) << 57 | i5 << 52
                | d5 << 47 | run_first;
      if (run_count == 1) {
         chunk[nw++] = w;
      } else {
         chunk[nw++] = w | W_RUN;
         chunk[nw++] = (ULong)(UShort)(Short)run_stride | (run_count << 16);
      }
   }
   run_count = 0;
}

static inline void one_access(Addr a, ULong key)
{
   if (run_count != 0 && key == run_key) {
      Long d = (Long)(a - run_last);
      if (run_count == 1) {
         if (d >= -32768 && d <= 32767) {
            run_stride = d;
            run_count = 2;
            run_last = a;
            return;
         }
      } else if (d == run_stride && run_count < 0xffffffffffffULL) {
         run_count++;
         run_last = a;
         return;
      }
   }
   emit_run();
   run_first = run_last = a;
   run_key = key;
   run_stride = 0;
   run_count = 1;
}

/* meta (built by the instrumentation, add_ev) is the run key of the access but its ipa, with
   the extras the helper needs:
     k:16 | sdep:16 << 16 | size:8 << 32 | kind:8 << 40 | big:16 << 48
   k: instructions of this superblock since its previous access (this one's included), to which
   g_pending is added: the ipa; sdep: the static dep (a load of the same superblock), 0 when
   none; rtag: the register tag of the address (0 = none; the instrumentation passes one only
   when sdep is 0). big: the size when above 64 (size is then 0): XSAVE, FXSAVE areas are split
   into 64-byte pieces so that every byte is covered and the size fits the wire's 8 bits; each
   piece is one access event. */
static __attribute__((noinline)) void big_access(Addr a, ULong key, UWord size)
{
   ULong dep = (key >> 16) & 0xffff;
   key &= ~0xffffffffULL;
   ULong ipa0 = key & 0xffff;
   for (;;) {
      UWord n = size > 64 ? 64 : size;
      g_seq++;
      one_access(a, key | (ULong)n << 32 | dep << 16 | ipa0);
      if (size <= 64)
         break;
      a += 64;
      size -= 64;
      ipa0 = 0;
      if (dep != 0)
         dep = dep < DEP_CAP ? dep + 1 : 0;
   }
}

static VG_REGPARM(3) void h_acc(Addr a, UWord meta, UWord rtag)
{
   if (UNLIKELY(!g_on)) {
      g_pending = 0; /* the region's first access counts its own instructions only */
      return;
   }
   ULong ipa = g_pending + (meta & 0xffff);
   g_pending = 0;
   if (UNLIKELY(ipa > IPA_CAP))
      ipa = IPA_CAP;
   ULong key = (meta & 0xffffffffffff0000ULL) | ipa;
   if (rtag != 0) {
      ULong dep = g_seq + 1 - (ULong)rtag;
      if (dep <= DEP_CAP)
         key |= dep << 16;
   }
   if (UNLIKELY(meta >> 48)) {
      big_access(a, key & 0xffffffffffffULL, meta >> 48);
      return;
   }
   g_seq++;
   one_access(a, key);
}

static void h_acc2(Addr a1, UWord m1, UWord r1, Addr a2, UWord m2, UWord r2)
{
   h_acc(a1, m1, r1);
   h_acc(a2, m2, r2);
}

/* One ifetch of the code page at `a` (see "code pages"): an access event like any other (it takes
   a sequence number, so the register tags' distances count it), with ipa 0 (the instructions
   before it stay pending for the next data access) and dep 0. */
static void emit_code_touch(Addr a)
{
   g_seq++;
   one_access(a, (ULong)K_IFETCH << 40 | 1ULL << 32);
}

/* ---- code pages ----

   Without --sp-ifetch the program's code would be invisible: its text pages (file-backed, of
   the executable and the libraries) would never be touched in a replay, and footprints would
   count data only. Instead, the first time a translation of a code page is made in a process,
   one ifetch access (1 byte, at the first byte of the page the block uses; dep 0, ipa 0) is
   emitted, before the block runs. Valgrind translates a superblock (SB) once, on its first
   execution, and caches it (coregrind/m_translate.c, VG_(translate); m_transtab.c), so this costs
   nothing per executed block: one lookup per translation, one event per page. The pages an SB
   spans are its guest extents (VexGuestExtents: up to 3 ranges when the front end chases
   branches), as Cachegrind's and Callgrind's instrumenters see them.

   `cp` is the set of code pages noted in this process: 2 MiB regions with a 512-bit map of
   their 4 KiB pages. A fork's child inherits it, as it inherits the parent's translations; an
   exec starts a new tool instance, hence an empty set. munmap, mremap and mmap clear their range
   (Valgrind discards the translations of unmapped code, VG_(discard_translations), so new code
   mapped there is translated, and noted, again). Pages outside the client's segments (the
   tool's own trampoline page) are noted but not emitted. */
#define CP_REGION_SHIFT 21
typedef struct {
   Addr region;   /* address >> CP_REGION_SHIFT */
   ULong bits[8]; /* one bit per 4 KiB page of the region */
} CodeRegion;
static CodeRegion* cp = NULL;
static Int cp_n = 0, cp_cap = 0, cp_last = 0;

static CodeRegion* cp_region(Addr a)
{
   Addr r = a >> CP_REGION_SHIFT;
   if (cp_last < cp_n && cp[cp_last].region == r)
      return &cp[cp_last];
   for (Int i = 0; i < cp_n; i++)
      if (cp[i].region == r) {
         cp_last = i;
         return &cp[i];
      }
   if (cp_n == cp_cap) {
      cp_cap = cp_cap ? cp_cap * 2 : 64;
      cp = VG_(realloc)("splab.codepages", cp, cp_cap * sizeof(CodeRegion));
   }
   VG_(memset)(&cp[cp_n], 0, sizeof(CodeRegion));
   cp[cp_n].region = r;
   cp_last = cp_n;
   return &cp[cp_n++];
}

/* Forgets the code pages of [a, a + len): code mapped there later is new code. */
static void cp_forget(Addr a, SizeT len)
{
   if (len == 0 || cp_n == 0)
      return;
   Addr lo = a >> 12, hi = (a + len - 1) >> 12; /* pages, inclusive */
   for (Int i = 0; i < cp_n; i++) {
      Addr first = cp[i].region << (CP_REGION_SHIFT - 12), last = first + 511;
      if (last < lo || first > hi)
         continue;
      for (Addr p = lo > first ? lo : first; p <= hi && p <= last; p++)
         cp[i].bits[(p - first) >> 6] &= ~(1ULL << ((p - first) & 63));
   }
}

static Bool is_client_code(Addr a)
{
   NSegment const* seg = VG_(am_find_nsegment)(a);
   if (!seg || (seg->kind != SkFileC && seg->kind != SkAnonC && seg->kind != SkShmC))
      return False;
   if (seg->kind == SkFileC) {
      const HChar* name = VG_(am_get_filename)(seg);
      if (name && VG_(strstr)(name, "/splab-amd64-linux"))
         return False;
   }
   return True;
}

/* An SB with these guest extents is about to run for the first time: note its code pages. */
static void note_code(const VexGuestExtents* vge)
{
   for (UInt i = 0; i < vge->n_used; i++) {
      Addr a = (Addr)vge->base[i], end = a + vge->len[i];
      while (a < end) {
         CodeRegion* r = cp_region(a);
         UInt pg = (UInt)((a >> 12) & 511);
         ULong bit = 1ULL << (pg & 63);
         if (!(r->bits[pg >> 6] & bit)) {
            r->bits[pg >> 6] |= bit;
            if (is_client_code(a))
               emit_code_touch(a);
         }
         a = (a | 0xfff) + 1;
      }
   }
}

/* ---- other records ---- */
static void emit_rec(UInt tag, ULong a, const ULong* extra, UInt n)
{
   emit_run();
   if (nw + 2 + n > CHUNK_WORDS)
      flush_chunk();
   chunk[nw++] = ((ULong)tag << 56) | (n + 1);
   chunk[nw++] = a;
   for (UInt i = 0; i < n; i++)
      chunk[nw++] = extra[i];
}

#define MAX_NAME 1024
static void emit_filename(ULong dev, ULong ino, ULong size, const HChar* name)
{
   ULong extra[3 + MAX_NAME / 8];
   UInt len = name ? (UInt)VG_(strlen)(name) : 0;
   if (len > MAX_NAME)
      len = MAX_NAME;
   VG_(memset)(extra, 0, sizeof(extra));
   extra[0] = ino;
   extra[1] = size;
   extra[2] = len;
   if (len)
      VG_(memcpy)(&extra[3], name, len);
   emit_rec(TAG_FILENAME, dev, extra, 3 + (len + 7) / 8);
}

static ULong file_size_of(ULong dev, ULong ino, const HChar* name, Int fd)
{
   struct vg_stat st;
   if (fd >= 0 && VG_(fstat)(fd, &st) == 0)
      return (ULong)st.size;
   if (name) {
      SysRes r = VG_(stat)(name, &st);
      if (!sr_isError(r) && st.dev == dev && st.ino == ino)
         return (ULong)st.size;
   }
   return 0;
}

/* Emits an MMAP record for [a, a+len) as the client now has it; fd < 0 when unknown. */
static void emit_mmap(Addr a, SizeT len, UWord prot, UWord flags, ULong offset, Int fd)
{
   ULong extra[6] = { len, (ULong)prot | ((ULong)flags << 32), offset, 0, 0, 0 };
   if (!(flags & L_MAP_ANONYMOUS)) {
      NSegment const* seg = VG_(am_find_nsegment)(a);
      if (seg && seg->kind == SkFileC) {
         const HChar* name = VG_(am_get_filename)(seg);
         ULong size = file_size_of(seg->dev, seg->ino, name, fd);
         extra[3] = seg->dev;
         extra[4] = seg->ino;
         extra[5] = size;
         emit_filename(seg->dev, seg->ino, size, name);
      }
   }
   emit_rec(TAG_MMAP, a, extra, 6);
}

/* The client's address space at start: every client segment, the stack marked as such. */
static Bool started = False;

static void emit_startup(ThreadId tid)
{
   static Addr starts[1024];
   Int n = VG_(am_get_segment_starts)(SkFileC | SkAnonC | SkShmC, starts, 1024);
   Addr sp = VG_(get_SP)(tid);
   started = True;
   emit_rec(TAG_HELLO, 0, NULL, 0);
   if (n < 0)
      n = 0;
   for (Int i = 0; i < n; i++) {
      NSegment const* seg = VG_(am_find_nsegment)(starts[i]);
      if (!seg)
         continue;
      SizeT len = seg->end - seg->start + 1;
      UWord prot = (seg->hasR ? 1 : 0) | (seg->hasW ? 2 : 0) | (seg->hasX ? 4 : 0);
      NSegment const* next = VG_(am_find_nsegment)(seg->end + 1);
      NSegment const* prev = seg->start > 0 ? VG_(am_find_nsegment)(seg->start - 1) : NULL;
      /* Valgrind's brk segment: anonymous, followed by the reservation it grows into. */
      if (seg->kind == SkAnonC && (seg->isCH || (next && next->kind == SkResvn
                                                 && next->smode == SmLower))) {
         emit_rec(TAG_HEAPSTART, seg->start, NULL, 0);
         continue;
      }
      /* The main stack: the segment holding SP, with the reservation below it that it may
         grow into (the rlimit's worth), reported as one growable stack mapping. */
      if (sp >= seg->start && sp <= seg->end) {
         ULong end = seg->end + 1;
         Addr lo = seg->start;
         if (prev && prev->kind == SkResvn && prev->smode == SmUpper)
            lo = prev->start;
         emit_rec(TAG_STACK, lo, &end, 1);
         continue;
      }
      if (seg->kind == SkFileC) {
         /* The one client-visible page of the tool itself (Valgrind's trampoline) is not
            part of the program. */
         const HChar* name = VG_(am_get_filename)(seg);
         if (name && VG_(strstr)(name, "/splab-amd64-linux"))
            continue;
      }
      UWord flags = 0x02 /* MAP_PRIVATE */;
      if (seg->kind == SkAnonC)
         flags |= L_MAP_ANONYMOUS;
      if (seg->kind == SkShmC)
         flags = L_MAP_SHARED | L_MAP_ANONYMOUS;
      if (seg->kind == SkFileC) {
         const HChar* name = VG_(am_get_filename)(seg);
         ULong size = file_size_of(seg->dev, seg->ino, name, -1);
         ULong extra[6] = { len, (ULong)prot | ((ULong)flags << 32), (ULong)seg->offset,
                            seg->dev, seg->ino, size };
         emit_filename(seg->dev, seg->ino, size, name);
         emit_rec(TAG_MMAP, seg->start, extra, 6);
      } else {
         ULong extra[6] = { len, (ULong)prot | ((ULong)flags << 32), 0, 0, 0, 0 };
         emit_rec(TAG_MMAP, seg->start, extra, 6);
      }
   }
}

/* ---- syscalls ---- */

/* The clone flags of the fork the client is making. Valgrind runs every vfork as a fork:
   __NR_vfork is wrapped by sys_fork, and PRE(sys_clone) clears CLONE_VM from
   CLONE_VFORK | CLONE_VM before ML_(do_fork_clone), since the child's Valgrind must not share
   the parent's host memory (coregrind/m_syswrap/syswrap-amd64-linux.c, syscall table entry
   for __NR_vfork; syswrap-linux.c, PRE(sys_clone) and ML_(do_fork_clone)). glibc's
   posix_spawn calls clone3 first, which Valgrind 3.19 answers ENOSYS (sys_ni_syscall), then
   clone(CLONE_VM | CLONE_VFORK | SIGCHLD). The tool's pre-syscall hook runs before the
   wrapper (syswrap-main.c, VG_(client_syscall)), so the flags are known by the time the
   child's atfork hook runs, and the child reports what the program asked for. */
#define L_CLONE_VM    0x00000100
#define L_CLONE_VFORK 0x00004000
static ULong fork_flags = 0;

static void sp_pre_syscall(ThreadId tid, UInt sysno, UWord* args, UInt nArgs)
{
   switch (sysno) {
   case __NR_clone:
      fork_flags = args[0];
      break;
   case __NR_vfork:
      fork_flags = L_CLONE_VM | L_CLONE_VFORK;
      break;
   case __NR_fork:
      fork_flags = 0;
      break;
   case __NR_execve:
   case __NR_execveat:
   case __NR_exit_group:
      /* The image is about to go: everything recorded so far must reach the pipe. */
      emit_run();
      flush_chunk();
      break;
   default:
      break;
   }
}

/* The thread whose last syscall was a refused brk (VG_INVALID_THREADID: none). When MORECORE
   (sbrk) fails for the main arena, glibc's sysmalloc (malloc/malloc.c, sysmalloc_mmap_fallback)
   maps the growth with mmap(0, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS) as
   that thread's very next syscall. Only the tool sees both the break asked for (the trace's
   Brk holds the result) and the thread, so it marks that mmap (TAG_MORECORE) and the replay
   can put it back on the heap (docs/replay.md, "Valgrind's heap cap"). */
static ThreadId brk_refused_tid = VG_INVALID_THREADID;

static void sp_post_syscall(ThreadId tid, UInt sysno, UWord* args, UInt nArgs, SysRes res)
{
   Bool after_refused_brk = tid == brk_refused_tid;
   if (after_refused_brk)
      brk_refused_tid = VG_INVALID_THREADID;
   if (sr_isError(res))
      return;
   switch (sysno) {
   case __NR_mmap:
      cp_forget((Addr)sr_Res(res), args[1]);
      if (after_refused_brk && args[0] == 0 && (args[3] & L_MAP_ANONYMOUS)
          && !(args[3] & L_MAP_SHARED))
         emit_rec(TAG_MORECORE, (Addr)sr_Res(res), NULL, 0);
      emit_mmap((Addr)sr_Res(res), args[1], args[2], args[3], args[5], (Int)args[4]);
      break;
   case __NR_munmap: {
      cp_forget(args[0], args[1]);
      ULong e[1] = { args[1] };
      emit_rec(TAG_MUNMAP, args[0], e, 1);
      break;
   }
   case __NR_mremap: {
      cp_forget(args[0], args[1]);
      cp_forget((Addr)sr_Res(res), args[2]);
      ULong e[3] = { args[1], (ULong)sr_Res(res), args[2] };
      emit_rec(TAG_MREMAP, args[0], e, 3);
      break;
   }
   case __NR_mprotect: {
      ULong e[2] = { args[1], args[2] };
      emit_rec(TAG_MPROTECT, args[0], e, 2);
      break;
   }
   case __NR_madvise: {
      ULong e[2] = { args[1], args[2] };
      emit_rec(TAG_MADVISE, args[0], e, 2);
      break;
   }
   case __NR_brk: {
      /* Valgrind emulates brk inside a data segment it sizes at start-up: RLIMIT_DATA clamped
         to [1 MiB, 8 MiB] (coregrind/m_initimg/initimg-linux.c, VG_(ii_create_image), "Setup
         client data (brk) segment"; no command-line option changes it, the manual's
         "Limitations" says to recompile Valgrind). Growth beyond it fails in do_brk
         (coregrind/m_syswrap/syswrap-generic.c), which returns the old end as a success, so
         glibc's malloc falls back to mmap and the recorded program is not the native one.
         Say so: the converter warns, and the trace's trailer counts it. */
      ULong got = (ULong)sr_Res(res);
      if (args[0] > got) {
         ULong e[1] = { got };
         emit_rec(TAG_BRK_REFUSED, args[0], e, 1);
         brk_refused_tid = tid;
      }
      emit_rec(TAG_BRK, got, NULL, 0);
      break;
   }
   default:
      break;
   }
}

/* fork: the parent flushes before, so the child inherits an empty buffer; the child's first
   record names its parent, which orders it after everything the parent wrote before forking. */
static void sp_atfork_pre(ThreadId tid)
{
   emit_run();
   flush_chunk();
}

static void sp_atfork_child(ThreadId tid)
{
   Int parent = my_pid;
   nw = HDR_WORDS;
   run_count = 0;
   my_pid = VG_(getpid)();
   emit_rec(TAG_FORK, (ULong)(UInt)parent, &fork_flags, 1);
}

/* ---- instrumentation ----

   Per superblock (SB), one pass over the statements:
   - access events are queued per guest instruction and flushed as calls to h_acc / h_acc2 at
     the next IMark, before a side exit and at the end, in program order;
   - instruction counts (ipa): c_ins counts the IMarks since the SB's previous access; each new
     access event takes it (k in its meta) and resets it. At every exit the count left over is
     added to g_pending: at a side exit with a StoreG guarded by the exit's own guard, at the end
     unconditionally. So g_pending, at an SB's first access, holds exactly the instructions run
     since the previous access in earlier SBs;
   - dependence tags (dep): each IR temp gets a static tag: `ld`, the static index (in the SB's
     access event order) of the most recent load its value derives from, or -1; else `rm`, the
     set of general-purpose registers whose values at SB entry it derives from. A temp's tag is
     the max (ld) / union (rm) over its operands; a load's result gets its own index; GET of a
     register the SB has not written yet gives {that register}, GET of one it wrote gives the tag
     written. An access whose address has ld >= 0 has the static dep (its index - ld); one with
     a register set gets the max of those registers' shadow tags at SB entry (read once, at the
     register's first GET) and h_acc computes the distance at run time. At every exit the
     shadow tags of the registers the SB wrote are stored: a load's sequence number is g_seq
     (read there) - (events so far) + its index + 1, since every event before the exit has
     been counted by then.
   Not followed: values through memory (a spilled register reloaded is a new load: its
   dependents get that load's dep), through vector, x87 or flags registers, through helpers
   (dirty calls' results get no tag, or their own load's). A guarded access whose guard is false
   emits no event, which shifts the static distances across it by one (rare on amd64: VEX uses
   guarded loads/stores for a few AVX masked moves only). */

typedef struct {
   Int ld;    /* static index of the most recent load, or -1 */
   UShort rm; /* registers whose SB-entry tags it derives from (when ld < 0) */
} Tag;

static const Tag NO_TAG = { -1, 0 };

static inline Tag tag_max(Tag a, Tag b)
{
   Tag t;
   t.ld = a.ld > b.ld ? a.ld : b.ld;
   t.rm = t.ld >= 0 ? 0 : (UShort)(a.rm | b.rm);
   return t;
}

static inline Tag load_tag(Int idx)
{
   Tag t = { idx, 0 };
   return idx >= 0 ? t : NO_TAG;
}

#define N_GPR 16
#define GPR_LO ((Int)offsetof(VexGuestAMD64State, guest_RAX))

static IRSB* sb;            /* the SB being built */
static Int shadow_base;     /* offset of shadow area 1 from the guest state */
static Tag* ttag;           /* per temp of the input SB */
static Int ttag_cap = 0;
static Int ttag_n = 0;
static Bool r_mod[N_GPR];   /* written in this SB so far */
static Tag r_tag[N_GPR];    /* its tag when r_mod */
static IRTemp r_entry[N_GPR]; /* its shadow tag at SB entry (a temp), once read */
static Bool r_shw[N_GPR];   /* its shadow written at an exit of this SB */
static Tag r_wtag[N_GPR];   /* ... with this tag */
static Int n_ev;            /* static index of the next access event */
static UInt c_ins;          /* instructions since the SB's previous (unguarded) access */

#define MASK_CACHE 8
static UShort mc_mask[MASK_CACHE];
static IRTemp mc_tmp[MASK_CACHE];
static Int mc_n;

static Int gpr_of(Int off, Int size)
{
   if (off < GPR_LO || size <= 0 || off + size > GPR_LO + 8 * N_GPR)
      return -1;
   Int r = (off - GPR_LO) / 8;
   if ((off + size - 1 - GPR_LO) / 8 != r)
      return -1;
   return r;
}

static IRTemp entry_of(Int r)
{
   if (r_entry[r] == IRTemp_INVALID) {
      r_entry[r] = newIRTemp(sb->tyenv, Ity_I64);
      addStmtToIRSB(sb, IRStmt_WrTmp(r_entry[r],
                                     IRExpr_Get(shadow_base + GPR_LO + 8 * r, Ity_I64)));
   }
   return r_entry[r];
}

/* The tag of register r as the SB sees it now. */
static Tag reg_read(Int r)
{
   if (r < 0)
      return NO_TAG;
   if (r_mod[r])
      return r_tag[r];
   entry_of(r);
   Tag t = { -1, (UShort)(1u << r) };
   return t;
}

static Tag atom_tag(const IRExpr* e)
{
   if (e && e->tag == Iex_RdTmp && e->Iex.RdTmp.tmp < ttag_n)
      return ttag[e->Iex.RdTmp.tmp];
   return NO_TAG;
}

/* The max of the SB-entry shadow tags of the registers in `rm`, as an atom. */
static IRExpr* mask_value(UShort rm)
{
   for (Int i = 0; i < mc_n; i++)
      if (mc_mask[i] == rm)
         return IRExpr_RdTmp(mc_tmp[i]);
   IRTemp cur = IRTemp_INVALID;
   for (Int r = 0; r < N_GPR; r++) {
      if (!(rm & (1u << r)))
         continue;
      IRTemp e = entry_of(r);
      if (cur == IRTemp_INVALID) {
         cur = e;
         continue;
      }
      IRTemp lt = newIRTemp(sb->tyenv, Ity_I1);
      IRTemp mx = newIRTemp(sb->tyenv, Ity_I64);
      addStmtToIRSB(sb, IRStmt_WrTmp(lt, IRExpr_Binop(Iop_CmpLT64U, IRExpr_RdTmp(cur),
                                                         IRExpr_RdTmp(e))));
      addStmtToIRSB(sb, IRStmt_WrTmp(mx, IRExpr_ITE(IRExpr_RdTmp(lt), IRExpr_RdTmp(e),
                                                      IRExpr_RdTmp(cur))));
      cur = mx;
   }
   if (mc_n < MASK_CACHE) {
      mc_mask[mc_n] = rm;
      mc_tmp[mc_n] = cur;
      mc_n++;
   }
   return IRExpr_RdTmp(cur);
}

typedef struct {
   IRExpr* addr;
   IRExpr* guard; /* NULL when unconditional */
   UWord meta;    /* h_acc's encoding */
   IRExpr* rtag;  /* atom: the address's register tag, or NULL */
   Int index;     /* static index of its (first) event */
   Int size;
} Ev;

#define MAX_EV 16
static Ev evs[MAX_EV];
static Int n_evs = 0;

#define META_KIND(m) (((m) >> 40) & 0xff)
#define META_KIND_MASK (0xffUL << 40)

static IRExpr* rtag_arg(const Ev* e)
{
   return e->rtag ? e->rtag : mkIRExpr_HWord(0);
}

static void flush_evs(void)
{
   Int i = 0;
   while (i < n_evs) {
      Ev* e = &evs[i];
      IRDirty* di;
      if (e->guard == NULL && i + 1 < n_evs && evs[i + 1].guard == NULL) {
         Ev* f = &evs[i + 1];
         di = unsafeIRDirty_0_N(0, "sp_acc2", VG_(fnptr_to_fnentry)(h_acc2),
                                mkIRExprVec_6(e->addr, mkIRExpr_HWord(e->meta), rtag_arg(e),
                                              f->addr, mkIRExpr_HWord(f->meta), rtag_arg(f)));
         i += 2;
      } else {
         di = unsafeIRDirty_0_N(3, "sp_acc", VG_(fnptr_to_fnentry)(h_acc),
                                mkIRExprVec_3(e->addr, mkIRExpr_HWord(e->meta), rtag_arg(e)));
         if (e->guard)
            di->guard = e->guard;
         i += 1;
      }
      addStmtToIRSB(sb, IRStmt_Dirty(di));
   }
   n_evs = 0;
}

/* Queues an access of the current instruction; returns the static index of its (first) event,
   -1 for none. A write (or CAS) of the address and size an unguarded read of the same
   instruction loaded turns that read into one read-modify-write. */
static Int add_ev(UInt kind, IRExpr* addr, Int size, IRExpr* guard)
{
   if (size <= 0)
      return -1;
   if ((kind == K_WRITE || kind == K_RMW) && guard == NULL) {
      for (Int i = n_evs - 1; i >= 0; i--) {
         Ev* e = &evs[i];
         if (META_KIND(e->meta) == K_READ && e->guard == NULL && e->size == size
             && eqIRAtom(e->addr, addr)) {
            e->meta = (e->meta & ~META_KIND_MASK) | ((UWord)K_RMW << 40);
            return e->index;
         }
      }
   }
   Int idx = n_ev;
   n_ev += size > 64 ? (size + 63) / 64 : 1;
   /* A guarded access takes no instruction count: if it does not happen, the next one still
      counts them. */
   UWord k = 0;
   if (guard == NULL) {
      k = c_ins > IPA_CAP ? IPA_CAP : c_ins;
      c_ins = 0;
   }
   Tag t = atom_tag(addr);
   UWord sdep = 0;
   IRExpr* rt = NULL;
   if (t.ld >= 0) {
      sdep = (UWord)(idx - t.ld);
      if (sdep > DEP_CAP)
         sdep = 0;
   } else if (t.rm) {
      rt = mask_value(t.rm);
   }
   if (n_evs == MAX_EV)
      flush_evs();
   Ev* e = &evs[n_evs++];
   e->addr = addr;
   e->guard = guard;
   e->meta = k | sdep << 16 | (UWord)kind << 40;
   if (size <= 64)
      e->meta |= (UWord)size << 32;
   else
      e->meta |= (UWord)(size > 0xffff ? 0xffff : size) << 48;
   e->size = size;
   e->rtag = rt;
   e->index = idx;
   return idx;
}

/* At an exit (guard = the exit's guard, NULL for the end of the SB): the instructions not yet
   counted go to g_pending, and the shadow tags of the registers the SB wrote are stored.
   `last`: nothing after this side exit changes the count or the tags (the usual conditional
   branch that ends a block), so the end would do the same: count unconditionally here, once. */
static void at_exit(IRExpr* guard, Bool last)
{
   flush_evs();
   if (last)
      guard = NULL;
   if (c_ins > 0) {
      IRTemp old = newIRTemp(sb->tyenv, Ity_I64);
      IRTemp sum = newIRTemp(sb->tyenv, Ity_I64);
      IRExpr* where = mkIRExpr_HWord((HWord)&g_pending);
      addStmtToIRSB(sb, IRStmt_WrTmp(old, IRExpr_Load(Iend_LE, Ity_I64, where)));
      addStmtToIRSB(sb, IRStmt_WrTmp(sum, IRExpr_Binop(Iop_Add64, IRExpr_RdTmp(old),
                                                         IRExpr_Const(IRConst_U64(c_ins)))));
      if (guard)
         addStmtToIRSB(sb, IRStmt_StoreG(Iend_LE, mkIRExpr_HWord((HWord)&g_pending),
                                         IRExpr_RdTmp(sum), guard));
      else
         addStmtToIRSB(sb, IRStmt_Store(Iend_LE, mkIRExpr_HWord((HWord)&g_pending),
                                        IRExpr_RdTmp(sum)));
      if (last)
         c_ins = 0;
   }
   IRTemp seq = IRTemp_INVALID;
   for (Int r = 0; r < N_GPR; r++) {
      if (!r_mod[r])
         continue;
      Tag t = r_tag[r];
      if (r_shw[r]) {
         if (t.ld == r_wtag[r].ld && t.rm == r_wtag[r].rm)
            continue;
      } else if (t.ld < 0 && t.rm == (1u << r)) {
         continue; /* the shadow still holds the entry tag, which is the one wanted */
      }
      IRExpr* v;
      if (t.ld >= 0) {
         if (seq == IRTemp_INVALID) {
            seq = newIRTemp(sb->tyenv, Ity_I64);
            addStmtToIRSB(sb, IRStmt_WrTmp(seq, IRExpr_Load(Iend_LE, Ity_I64,
                                                            mkIRExpr_HWord((HWord)&g_seq))));
         }
         IRTemp s = newIRTemp(sb->tyenv, Ity_I64);
         addStmtToIRSB(sb, IRStmt_WrTmp(s, IRExpr_Binop(Iop_Add64, IRExpr_RdTmp(seq),
                                                          IRExpr_Const(IRConst_U64(
                                                             (ULong)(Long)(t.ld + 1 - n_ev))))));
         v = IRExpr_RdTmp(s);
      } else if (t.rm) {
         v = mask_value(t.rm);
      } else {
         v = IRExpr_Const(IRConst_U64(0));
      }
      addStmtToIRSB(sb, IRStmt_Put(shadow_base + GPR_LO + 8 * r, v));
      r_shw[r] = True;
      r_wtag[r] = t;
   }
}

static void set_tag(IRTemp t, Tag g)
{
   if (t != IRTemp_INVALID && t < ttag_n)
      ttag[t] = g;
}

/* A write of [off, off + size) of the guest state with a value of tag g (whole: it replaces
   the register's value; else it merges into it). */
static void reg_write(Int off, Int size, Tag g, Bool whole)
{
   for (Int r = 0; r < N_GPR; r++) {
      Int lo = GPR_LO + 8 * r;
      if (off >= lo + 8 || off + size <= lo)
         continue;
      Tag t = (whole && off == lo && size == 8) ? g : tag_max(reg_read(r), g);
      r_mod[r] = True;
      r_tag[r] = t;
   }
}

static Tag expr_tag(const IRExpr* e)
{
   switch (e->tag) {
   case Iex_Get:
      return reg_read(gpr_of(e->Iex.Get.offset, sizeofIRType(e->Iex.Get.ty)));
   case Iex_RdTmp:
      return atom_tag(e);
   case Iex_Unop:
      return atom_tag(e->Iex.Unop.arg);
   case Iex_Binop:
      return tag_max(atom_tag(e->Iex.Binop.arg1), atom_tag(e->Iex.Binop.arg2));
   case Iex_Triop: {
      const IRTriop* t = e->Iex.Triop.details;
      return tag_max(tag_max(atom_tag(t->arg1), atom_tag(t->arg2)), atom_tag(t->arg3));
   }
   case Iex_Qop: {
      const IRQop* q = e->Iex.Qop.details;
      return tag_max(tag_max(atom_tag(q->arg1), atom_tag(q->arg2)),
                     tag_max(atom_tag(q->arg3), atom_tag(q->arg4)));
   }
   case Iex_ITE:
      return tag_max(atom_tag(e->Iex.ITE.cond),
                     tag_max(atom_tag(e->Iex.ITE.iftrue), atom_tag(e->Iex.ITE.iffalse)));
   case Iex_CCall: {
      Tag t = NO_TAG;
      for (Int i = 0; e->Iex.CCall.args[i]; i++)
         t = tag_max(t, atom_tag(e->Iex.CCall.args[i]));
      return t;
   }
   default:
      return NO_TAG;
   }
}

static void sb_start(IRSB* out, const IRSB* in, const VexGuestLayout* layout)
{
   sb = out;
   shadow_base = layout->total_sizeB;
   ttag_n = in->tyenv->types_used;
   if (ttag_n > ttag_cap) {
      ttag_cap = ttag_n * 2 + 64;
      ttag = VG_(realloc)("splab.ttag", ttag, ttag_cap * sizeof(Tag));
   }
   for (Int i = 0; i < ttag_n; i++)
      ttag[i] = NO_TAG;
   for (Int r = 0; r < N_GPR; r++) {
      r_mod[r] = False;
      r_shw[r] = False;
      r_entry[r] = IRTemp_INVALID;
   }
   n_ev = 0;
   c_ins = 0;
   n_evs = 0;
   mc_n = 0;
}

/* True when the statements from `i` on run no instruction, access nothing and write no
   general-purpose register. */
static Bool nothing_after(const IRSB* in, Int i)
{
   for (; i < in->stmts_used; i++) {
      const IRStmt* st = in->stmts[i];
      if (!st)
         continue;
      switch (st->tag) {
      case Ist_NoOp:
      case Ist_AbiHint:
         break;
      case Ist_Put:
         if (gpr_of(st->Ist.Put.offset,
                    sizeofIRType(typeOfIRExpr(in->tyenv, st->Ist.Put.data))) >= 0)
            return False;
         break;
      case Ist_WrTmp:
         if (st->Ist.WrTmp.data->tag == Iex_Load)
            return False;
         break;
      default:
         return False;
      }
   }
   return True;
}

static IRSB* sp_instrument(VgCallbackClosure* closure, IRSB* sbIn, const VexGuestLayout* layout,
                           const VexGuestExtents* vge, const VexArchInfo* archinfo_host,
                           IRType gWordTy, IRType hWordTy)
{
   if (!started)
      emit_startup(closure->tid);
   /* With --sp-ifetch every instruction is an access already. */
   if (clo_code_pages && !clo_ifetch)
      note_code(vge);

   IRSB* sbOut = deepCopyIRSBExceptStmts(sbIn);
   IRTypeEnv* tyenv = sbIn->tyenv;
   sb_start(sbOut, sbIn, layout);
   for (Int i = 0; i < sbIn->stmts_used; i++) {
      IRStmt* st = sbIn->stmts[i];
      if (!st || st->tag == Ist_NoOp)
         continue;
      switch (st->tag) {
      case Ist_IMark:
         flush_evs();
         c_ins++;
         if (clo_ifetch)
            add_ev(K_IFETCH, mkIRExpr_HWord((HWord)st->Ist.IMark.addr),
                   (Int)st->Ist.IMark.len, NULL);
         break;
      case Ist_WrTmp: {
         IRExpr* data = st->Ist.WrTmp.data;
         Tag t;
         if (data->tag == Iex_Load)
            t = load_tag(add_ev(K_READ, data->Iex.Load.addr, sizeofIRType(data->Iex.Load.ty),
                                NULL));
         else
            t = expr_tag(data);
         set_tag(st->Ist.WrTmp.tmp, t);
         break;
      }
      case Ist_Put: {
         IRExpr* d = st->Ist.Put.data;
         Int off = st->Ist.Put.offset, size = sizeofIRType(typeOfIRExpr(tyenv, d));
         if (gpr_of(off, size) >= 0)
            reg_write(off, size, atom_tag(d), True);
         break;
      }
      case Ist_Store:
         add_ev(K_WRITE, st->Ist.Store.addr,
                sizeofIRType(typeOfIRExpr(tyenv, st->Ist.Store.data)), NULL);
         break;
      case Ist_StoreG: {
         IRStoreG* sg = st->Ist.StoreG.details;
         add_ev(K_WRITE, sg->addr, sizeofIRType(typeOfIRExpr(tyenv, sg->data)), sg->guard);
         break;
      }
      case Ist_LoadG: {
         IRLoadG* lg = st->Ist.LoadG.details;
         IRType ty = Ity_INVALID, ty_wide = Ity_INVALID;
         typeOfIRLoadGOp(lg->cvt, &ty_wide, &ty);
         Int idx = add_ev(K_READ, lg->addr, sizeofIRType(ty), lg->guard);
         set_tag(lg->dst, tag_max(load_tag(idx), atom_tag(lg->alt)));
         break;
      }
      case Ist_Dirty: {
         IRDirty* d = st->Ist.Dirty.details;
         Int idx = -1;
         if (d->mFx != Ifx_None && d->mAddr != NULL)
            idx = add_ev(d->mFx == Ifx_Read ? K_READ : d->mFx == Ifx_Write ? K_WRITE : K_RMW,
                         d->mAddr, d->mSize, NULL);
         Tag t = d->mFx == Ifx_Write ? NO_TAG : load_tag(idx);
         set_tag(d->tmp, t);
         for (Int k = 0; k < d->nFxState; k++) {
            if (d->fxState[k].fx == Ifx_Read || d->fxState[k].fx == Ifx_None)
               continue;
            for (Int j = 0; j <= d->fxState[k].nRepeats; j++)
               reg_write(d->fxState[k].offset + j * d->fxState[k].repeatLen,
                         d->fxState[k].size, t, d->fxState[k].fx == Ifx_Write);
         }
         break;
      }
      case Ist_CAS: {
         IRCAS* cas = st->Ist.CAS.details;
         Int sz = sizeofIRType(typeOfIRExpr(tyenv, cas->dataLo));
         if (cas->dataHi != NULL)
            sz *= 2;
         Int idx = add_ev(K_RMW, cas->addr, sz, NULL);
         set_tag(cas->oldLo, load_tag(idx));
         set_tag(cas->oldHi, load_tag(idx));
         break;
      }
      case Ist_LLSC: {
         if (st->Ist.LLSC.storedata == NULL) {
            Int idx = add_ev(K_READ, st->Ist.LLSC.addr,
                             sizeofIRType(typeOfIRTemp(tyenv, st->Ist.LLSC.result)), NULL);
            set_tag(st->Ist.LLSC.result, load_tag(idx));
         } else {
            add_ev(K_WRITE, st->Ist.LLSC.addr,
                   sizeofIRType(typeOfIRExpr(tyenv, st->Ist.LLSC.storedata)), NULL);
         }
         break;
      }
      case Ist_Exit:
         /* A side exit may leave the block: account for everything before it first. */
         at_exit(st->Ist.Exit.guard, nothing_after(sbIn, i + 1));
         break;
      default:
         break;
      }
      addStmtToIRSB(sbOut, st);
   }
   at_exit(NULL, False);
   return sbOut;
}

/* The core wrote guest registers (a syscall's result, a signal frame, ...): not a load. */
static void sp_post_reg_write(CorePart part, ThreadId tid, PtrdiffT off, SizeT size)
{
   static const UChar zeros[8 * N_GPR];
   PtrdiffT lo = off > GPR_LO ? off : GPR_LO;
   PtrdiffT hi = off + (PtrdiffT)size < GPR_LO + 8 * N_GPR ? off + (PtrdiffT)size
                                                          : GPR_LO + 8 * N_GPR;
   if (lo < hi)
      VG_(set_shadow_regs_area)(tid, 1, lo, (SizeT)(hi - lo), zeros);
}

static void sp_post_reg_write_ccr(ThreadId tid, PtrdiffT off, SizeT size, Addr f)
{
   sp_post_reg_write(Vg_CoreClientReq, tid, off, size);
}

/* g_pending is per thread: threads switch rarely (Valgrind runs one at a time, for long
   timeslices), so it is swapped here rather than indexed on every access. */
#define MAX_TIDS 1024
static ULong pending_of[MAX_TIDS];
static ThreadId cur_tid = 0;

static void sp_start_client_code(ThreadId tid, ULong blocks)
{
   if (tid == cur_tid || tid >= MAX_TIDS)
      return;
   if (cur_tid < MAX_TIDS)
      pending_of[cur_tid] = g_pending;
   g_pending = pending_of[tid];
   cur_tid = tid;
}

/* SPLAB_START() / SPLAB_STOP() (valgrind/splab.h). Toggles happen between superblocks (a client
   request ends its block), so every access of a block run is in or out. At a start, the sequence
   numbers jump past DEP_CAP: register tags of loads before the region are too old to give a dep
   (those loads are not in the trace). */
static Bool sp_client_request(ThreadId tid, UWord* arg, UWord* ret)
{
   if (!VG_IS_TOOL_USERREQ('S', 'P', arg[0]))
      return False;
   switch (arg[0]) {
   case SPLAB_USERREQ_START:
      if (!g_on)
         g_seq += DEP_CAP + 1;
      g_on = True;
      break;
   case SPLAB_USERREQ_STOP:
      emit_run();
      g_on = False;
      break;
   default:
      return False;
   }
   *ret = 0;
   return True;
}

/* ---- life cycle ---- */
static Bool sp_process_cmd_line_option(const HChar* arg)
{
   if VG_INT_CLO(arg, "--sp-fd", clo_fd) {}
   else if VG_BOOL_CLO(arg, "--sp-ifetch", clo_ifetch) {}
   else if VG_BOOL_CLO(arg, "--sp-code-pages", clo_code_pages) {}
   else if VG_BOOL_CLO(arg, "--sp-roi", clo_roi) {}
   else
      return False;
   return True;
}

static void sp_print_usage(void)
{
   VG_(printf)("    --sp-fd=N                 write the splab capture stream to fd N\n"
               "    --sp-ifetch=no|yes        also record instruction fetches [no]\n"
               "    --sp-code-pages=no|yes    one ifetch per code page first run [yes]\n"
               "    --sp-roi=no|yes           record no access before SPLAB_START() [no]\n");
}

static void sp_print_debug_usage(void)
{
   VG_(printf)("    (none)\n");
}

static void sp_post_clo_init(void)
{
   if (clo_fd < 0)
      VG_(fmsg_bad_option)("--sp-fd", "splab's tool needs --sp-fd=N (it is started by `splab record`)\n");
   out_fd = (Int)clo_fd;
   g_on = !clo_roi;
   my_pid = VG_(getpid)();
}

static void sp_fini(Int exitcode)
{
   emit_rec(TAG_EXIT, (ULong)(Long)exitcode, NULL, 0);
   flush_chunk();
}

static void sp_pre_clo_init(void)
{
   VG_(details_name)("splab");
   VG_(details_version)(NULL);
   VG_(details_description)("splab's memory-trace recorder");
   VG_(details_copyright_author)("splab authors");
   VG_(details_bug_reports_to)("the splab repository");
   VG_(details_avg_translation_sizeB)(300);

   VG_(basic_tool_funcs)(sp_post_clo_init, sp_instrument, sp_fini);
   VG_(needs_command_line_options)(sp_process_cmd_line_option, sp_print_usage,
                                   sp_print_debug_usage);
   VG_(needs_syscall_wrapper)(sp_pre_syscall, sp_post_syscall);
   VG_(atfork)(sp_atfork_pre, NULL, sp_atfork_child);
   VG_(track_post_reg_write)(sp_post_reg_write);
   VG_(track_post_reg_write_clientcall_return)(sp_post_reg_write_ccr);
   VG_(track_start_client_code)(sp_start_client_code);
   VG_(needs_client_requests)(sp_client_request);
}

VG_DETERMINE_INTERFACE_VERSION(sp_pre_clo_init)
