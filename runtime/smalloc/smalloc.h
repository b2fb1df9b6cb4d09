/* smalloc: a superpage-aware memory allocator for Linux, after the runtime of seed 004
 * ("compiler-guided superpage allocation"), section 3: "Our API for superpage-aware memory
 * allocation is called smalloc ... smalloc supports the core interface of the C standard,
 * including scalloc, srealloc and sfree."
 *
 * A compiler pass rewrites malloc/calloc/realloc/free at the sites it chose into these calls.
 * sfree and srealloc also accept pointers that came from the C library's malloc (the pass may
 * rewrite only some sites) and hand them to the C library; sfree(NULL) does nothing.
 *
 * Environment (read once, at the first call or at load):
 *   SMALLOC_MODE=super|base   which heap smalloc/scalloc/srealloc use (default super)
 *   SMALLOC_HUGETLB=1         back the superpage heap with MAP_HUGETLB when the kernel grants it
 *   SMALLOC_FREEZE_BASE=1     freeze the base heap once the superpage heap is first used
 *   SMALLOC_REPORT=1|PATH     at exit, one line per heap on stderr (or into PATH; %p in
 *                             PATH becomes the process id)
 *   SMALLOC_HINTS=PATH        preload build only: which malloc calls go to the superpage heap
 * See runtime/smalloc/README.md. */
#ifndef SMALLOC_H
#define SMALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void *smalloc(size_t size);
void *scalloc(size_t nmemb, size_t size);
void *srealloc(void *ptr, size_t size);
void sfree(void *ptr);

/* Diagnostics: 0 if ptr lies in the superpage heap, 1 if in the base heap, -1 otherwise. */
int smalloc_heap_of(const void *ptr);
/* Freeze (1) or thaw (0) the base heap by hand: see "base heap freezing" in smalloc.c. */
void smalloc_freeze_base(int frozen);

#ifdef __cplusplus
}
#endif

#endif
