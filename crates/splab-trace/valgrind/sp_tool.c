/* sp_tool.c: splab's own Valgrind tool ("--tool=splab"), the capture half of `splab record`.
 *
 * Who calls it: only splab-trace's `record` (src/record.rs), which starts
 *   VALGRIND_LIB=<dir> valgrind --tool=splab --trace-children=yes --sp-fd=N CMD...
 * with the write end of a pipe at fd N, and converts what arrives into the .spt format on the fly.
 *
 * What it records, per process (the pid is the client's getpid()):
 *   - every load, store and read-modify-write (one Write) of the client, from the VEX IR
 *     (Load, Store, LoadG, StoreG, CAS, LLSC and dirty helpers' memory effects), optionally
 *     every instruction fetch (--sp-ifetch=yes);
 *   - the address space at start (after exec too): every client segment of Valgrind's address
 *     space manager, with the file it maps, and the heap (brk) start;
 *   - the memory syscalls with their real results: mmap, munmap, mremap, mprotect, madvise, brk;
 *   - fork (from the child: its first record names its parent), exec (a new tool instance
 *     starts in the same pid and says HELLO), exit.
 *
 * Wire format (tool -> splab, little endian, documented in docs/trace-format.md "Capture wire"):
 *   chunk  = u32 magic "SPC1" | u32 pid | u32 payload_bytes | u32 reserved | payload
 *   payload = records of 64-bit words, each starting with a word whose top byte is a tag:
 *     tag 1 read, 2 write, 3 ifetch: one access, word = tag:8 | size:8 | addr:48;
 *     tag 5, 6, 7 (4 | kind): a run, the same word then stride:16 (signed) | count:48, standing
 *       for `count` accesses at addr, addr+stride, addr+2*stride ...;
 *     tag >= 0x10: word = tag:8 | n:32, then n words (see the TAG_ list below).
 *   A chunk is at most PIPE_BUF (4096) bytes, so that chunks written by several processes on the
 *   same pipe never interleave (POSIX: writes of at most PIPE_BUF bytes to a pipe are atomic).
 *
 * Why runs: consecutive accesses of the same kind and size at a constant stride (array scans,
 * memset/memcpy loops, stack pushes) collapse into one record here, at the cost of one compare
 * per access, which keeps the pipe and the converter far from being the bottleneck.
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
#include "pub_tool_aspacemgr.h"
#include "pub_tool_vki.h"
#include "pub_tool_vkiscnums.h"

/* ---- record tags (keep in sync with src/record.rs, module `wire`) ---- */
#define TAG_READ      1
#define TAG_WRITE     2
#define TAG_IFETCH    3
#define TAG_RUN       4    /* or-ed into 1..3: a run, one more word: stride:16 | count:48 */
#define TAG_ACCESS_LONG 0x1c /* addr, stride:16|count:48, tag<<8|size */
#define TAG_MMAP      0x10 /* a=addr; len, prot|flags<<32, offset, dev, ino, file_size */
#define TAG_MUNMAP    0x11 /* a=addr; len */
#define TAG_MREMAP    0x12 /* a=old_addr; old_len, new_addr, new_len */
#define TAG_MPROTECT  0x13 /* a=addr; len, prot */
#define TAG_MADVISE   0x14 /* a=addr; len, advice */
#define TAG_BRK       0x15 /* a=new_end */
#define TAG_FORK      0x16 /* a=parent pid (the chunk's pid is the child) */
#define TAG_HELLO     0x17 /* a=0: a tool instance starts (first process, or after exec) */
#define TAG_EXIT      0x18 /* a=exit code */
#define TAG_FILENAME  0x19 /* a=dev; ino, file_size, name_len, name bytes (padded to 8) */
#define TAG_HEAPSTART 0x1a /* a=heap start (initial break) */
#define TAG_STACK     0x1b /* a=lowest address, extra: end (the initial stack segment) */

#define SPC_MAGIC 0x31435053u /* "SPC1" */

/* Linux mmap flags, as the client passed them (amd64). */
#define L_MAP_SHARED    0x01
#define L_MAP_FIXED     0x10
#define L_MAP_ANONYMOUS 0x20

/* ---- options ---- */
static Long clo_fd = -1;
static Bool clo_ifetch = False;

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

/* A record of `n` words after its header word; the current run must already be out. */
static void emit_rec_raw(UInt tag, const ULong* extra, UInt n)
{
   if (nw + 1 + n > CHUNK_WORDS)
      flush_chunk();
   chunk[nw++] = ((ULong)tag << 56) | n;
   for (UInt i = 0; i < n; i++)
      chunk[nw++] = extra[i];
}

/* ---- the current access run ---- */
static Addr run_first;
static Addr run_last;
static UWord run_meta;     /* tag << 8 | size; valid when run_count > 0 */
static Long run_stride;
static ULong run_count;

static void emit_run(void)
{
   if (run_count == 0)
      return;
   if (nw + 3 > CHUNK_WORDS)
      flush_chunk();
   ULong tag = run_meta >> 8, size = run_meta & 0xff;
   if (UNLIKELY(run_first >> 48)) {
      /* Beyond 48 bits (not seen on amd64 Linux user space): the long form. */
      ULong extra[3] = { run_first, (ULong)(UShort)(Short)run_stride | (run_count << 16),
                         tag << 8 | size };
      emit_rec_raw(TAG_ACCESS_LONG, extra, 3);
   } else if (run_count == 1) {
      chunk[nw++] = tag << 56 | size << 48 | run_first;
   } else {
      chunk[nw++] = (tag | TAG_RUN) << 56 | size << 48 | run_first;
      chunk[nw++] = (ULong)(UShort)(Short)run_stride | (run_count << 16);
   }
   run_count = 0;
}

static inline void one_access(Addr a, UWord meta)
{
   if (run_count != 0 && meta == run_meta) {
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
   run_meta = meta;
   run_stride = 0;
   run_count = 1;
}

/* meta = tag << 8 | size in bytes.  Sizes above 64 (XSAVE, FXSAVE areas) are split into
   64-byte pieces so that every byte is covered and the size fits the wire's 8 bits. */
static VG_REGPARM(2) void h_acc(Addr a, UWord meta)
{
   UWord size = meta & 0xffff;
   UWord tag = meta >> 16;
   while (size > 64) {
      one_access(a, tag << 8 | 64);
      a += 64;
      size -= 64;
   }
   one_access(a, tag << 8 | size);
}

static void h_acc2(Addr a1, UWord m1, Addr a2, UWord m2)
{
   h_acc(a1, m1);
   h_acc(a2, m2);
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
static void sp_pre_syscall(ThreadId tid, UInt sysno, UWord* args, UInt nArgs)
{
   switch (sysno) {
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

static void sp_post_syscall(ThreadId tid, UInt sysno, UWord* args, UInt nArgs, SysRes res)
{
   if (sr_isError(res))
      return;
   switch (sysno) {
   case __NR_mmap:
      emit_mmap((Addr)sr_Res(res), args[1], args[2], args[3], args[5], (Int)args[4]);
      break;
   case __NR_munmap: {
      ULong e[1] = { args[1] };
      emit_rec(TAG_MUNMAP, args[0], e, 1);
      break;
   }
   case __NR_mremap: {
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
   case __NR_brk:
      emit_rec(TAG_BRK, (ULong)sr_Res(res), NULL, 0);
      break;
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
   emit_rec(TAG_FORK, (ULong)(UInt)parent, NULL, 0);
}

/* ---- instrumentation ---- */
typedef struct {
   IRExpr* addr;
   IRExpr* guard; /* NULL when unconditional */
   UWord meta;    /* tag << 16 | size (h_acc's encoding) */
} Ev;

#define MAX_EV 16
static Ev evs[MAX_EV];
static Int n_evs = 0;

static IRDirty* acc_call(Ev* e)
{
   return unsafeIRDirty_0_N(2, "sp_acc", VG_(fnptr_to_fnentry)(h_acc),
                            mkIRExprVec_2(e->addr, mkIRExpr_HWord(e->meta)));
}

static void flush_evs(IRSB* sb)
{
   Int i = 0;
   while (i < n_evs) {
      Ev* e = &evs[i];
      IRDirty* di;
      if (e->guard == NULL && i + 1 < n_evs && evs[i + 1].guard == NULL) {
         Ev* f = &evs[i + 1];
         di = unsafeIRDirty_0_N(0, "sp_acc2", VG_(fnptr_to_fnentry)(h_acc2),
                                mkIRExprVec_4(e->addr, mkIRExpr_HWord(e->meta),
                                              f->addr, mkIRExpr_HWord(f->meta)));
         i += 2;
      } else {
         di = acc_call(e);
         if (e->guard)
            di->guard = e->guard;
         i += 1;
      }
      addStmtToIRSB(sb, IRStmt_Dirty(di));
   }
   n_evs = 0;
}

static void add_ev(IRSB* sb, UInt tag, IRExpr* addr, Int size, IRExpr* guard)
{
   if (size <= 0)
      return;
   /* A store to the address just loaded by the same instruction, of the same size, is a
      read-modify-write: the design's event stream counts it as one write. */
   if (tag == TAG_WRITE && guard == NULL && n_evs > 0) {
      Ev* last = &evs[n_evs - 1];
      if ((last->meta >> 16) == TAG_READ && last->guard == NULL
          && (last->meta & 0xffff) == (UWord)size && eqIRAtom(last->addr, addr)) {
         last->meta = (UWord)TAG_WRITE << 16 | (UWord)size;
         return;
      }
   }
   if (n_evs == MAX_EV)
      flush_evs(sb);
   evs[n_evs].addr = addr;
   evs[n_evs].guard = guard;
   evs[n_evs].meta = (UWord)tag << 16 | (UWord)(size & 0xffff);
   n_evs++;
}

static IRSB* sp_instrument(VgCallbackClosure* closure, IRSB* sbIn, const VexGuestLayout* layout,
                           const VexGuestExtents* vge, const VexArchInfo* archinfo_host,
                           IRType gWordTy, IRType hWordTy)
{
   if (!started)
      emit_startup(closure->tid);

   IRSB* sbOut = deepCopyIRSBExceptStmts(sbIn);
   IRTypeEnv* tyenv = sbIn->tyenv;
   Int i = 0;
   n_evs = 0;
   /* Statements before the first IMark belong to no instruction: copy them as they are. */
   while (i < sbIn->stmts_used && sbIn->stmts[i]->tag != Ist_IMark) {
      addStmtToIRSB(sbOut, sbIn->stmts[i]);
      i++;
   }
   for (; i < sbIn->stmts_used; i++) {
      IRStmt* st = sbIn->stmts[i];
      if (!st || st->tag == Ist_NoOp)
         continue;
      switch (st->tag) {
      case Ist_IMark:
         flush_evs(sbOut);
         if (clo_ifetch)
            add_ev(sbOut, TAG_IFETCH, mkIRExpr_HWord((HWord)st->Ist.IMark.addr),
                   (Int)st->Ist.IMark.len, NULL);
         break;
      case Ist_WrTmp: {
         IRExpr* data = st->Ist.WrTmp.data;
         if (data->tag == Iex_Load)
            add_ev(sbOut, TAG_READ, data->Iex.Load.addr, sizeofIRType(data->Iex.Load.ty), NULL);
         break;
      }
      case Ist_Store:
         add_ev(sbOut, TAG_WRITE, st->Ist.Store.addr,
                sizeofIRType(typeOfIRExpr(tyenv, st->Ist.Store.data)), NULL);
         break;
      case Ist_StoreG: {
         IRStoreG* sg = st->Ist.StoreG.details;
         add_ev(sbOut, TAG_WRITE, sg->addr, sizeofIRType(typeOfIRExpr(tyenv, sg->data)),
                sg->guard);
         break;
      }
      case Ist_LoadG: {
         IRLoadG* lg = st->Ist.LoadG.details;
         IRType ty = Ity_INVALID, ty_wide = Ity_INVALID;
         typeOfIRLoadGOp(lg->cvt, &ty_wide, &ty);
         add_ev(sbOut, TAG_READ, lg->addr, sizeofIRType(ty), lg->guard);
         break;
      }
      case Ist_Dirty: {
         IRDirty* d = st->Ist.Dirty.details;
         if (d->mFx != Ifx_None && d->mAddr != NULL)
            add_ev(sbOut, d->mFx == Ifx_Read ? TAG_READ : TAG_WRITE, d->mAddr, d->mSize, NULL);
         break;
      }
      case Ist_CAS: {
         IRCAS* cas = st->Ist.CAS.details;
         Int sz = sizeofIRType(typeOfIRExpr(tyenv, cas->dataLo));
         if (cas->dataHi != NULL)
            sz *= 2;
         add_ev(sbOut, TAG_WRITE, cas->addr, sz, NULL);
         break;
      }
      case Ist_LLSC: {
         if (st->Ist.LLSC.storedata == NULL)
            add_ev(sbOut, TAG_READ, st->Ist.LLSC.addr,
                   sizeofIRType(typeOfIRTemp(tyenv, st->Ist.LLSC.result)), NULL);
         else
            add_ev(sbOut, TAG_WRITE, st->Ist.LLSC.addr,
                   sizeofIRType(typeOfIRExpr(tyenv, st->Ist.LLSC.storedata)), NULL);
         break;
      }
      case Ist_Exit:
         /* A side exit may leave the block: record this instruction's accesses first. */
         flush_evs(sbOut);
         break;
      default:
         break;
      }
      addStmtToIRSB(sbOut, st);
   }
   flush_evs(sbOut);
   return sbOut;
}

/* ---- life cycle ---- */
static Bool sp_process_cmd_line_option(const HChar* arg)
{
   if VG_INT_CLO(arg, "--sp-fd", clo_fd) {}
   else if VG_BOOL_CLO(arg, "--sp-ifetch", clo_ifetch) {}
   else
      return False;
   return True;
}

static void sp_print_usage(void)
{
   VG_(printf)("    --sp-fd=N                 write the splab capture stream to fd N\n"
               "    --sp-ifetch=no|yes        also record instruction fetches [no]\n");
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
}

VG_DETERMINE_INTERFACE_VERSION(sp_pre_clo_init)
