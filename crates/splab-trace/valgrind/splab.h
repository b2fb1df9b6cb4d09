/* splab.h: regions of interest for `splab record` (docs/replay.md, "Regions of interest").
 *
 *   #include "splab.h"      (needs Valgrind's <valgrind/valgrind.h>: apt-get install valgrind)
 *   ...set up...
 *   SPLAB_START();          (record accesses from here)
 *   ...the part to measure...
 *   SPLAB_STOP();           (and not from here)
 *
 * Record with `splab record --roi -o F.spt -- prog` to record no accesses before the first
 * SPLAB_START() (without --roi, recording starts on and SPLAB_STOP() / SPLAB_START() turn it off
 * and on). Outside the region, accesses are not recorded; the address space still is (mmap,
 * munmap, brk, ..., fork, exec, exit, and the code pages the program runs), so a replay of the
 * trace starts from the program's address space at SPLAB_START().
 *
 * The macros are Valgrind client requests, as Cachegrind's and Callgrind's instrumentation
 * macros are (valgrind.h, VALGRIND_DO_CLIENT_REQUEST_STMT, with a tool request code from
 * VG_USERREQ_TOOL_BASE): outside Valgrind they are a few no-op instructions, so a program built
 * with them runs natively at full speed. The codes must match valgrind/sp_tool.c. */
#ifndef SPLAB_H
#define SPLAB_H

#include <valgrind/valgrind.h>

typedef enum {
   SPLAB_USERREQ_START = VG_USERREQ_TOOL_BASE('S', 'P'),
   SPLAB_USERREQ_STOP
} Splab_ClientRequest;

/* Starts recording accesses (no effect when they are already recorded). */
#define SPLAB_START() \
   VALGRIND_DO_CLIENT_REQUEST_STMT(SPLAB_USERREQ_START, 0, 0, 0, 0, 0)

/* Stops recording accesses (address-space events are still recorded). */
#define SPLAB_STOP() \
   VALGRIND_DO_CLIENT_REQUEST_STMT(SPLAB_USERREQ_STOP, 0, 0, 0, 0, 0)

#endif
