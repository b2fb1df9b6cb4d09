/* smalloc: the runtime of seed 004 ("compiler-guided superpage allocation") section 3,
 * rebuilt for today's Linux.
 *
 * What seed 004 section 3 says, and what this file does instead:
 *
 *  - "memory can be backed by either base pages, superpages, or to a limited extent both.
 *    smalloc requests memory by calling one of two versions of the morecore function ...
 *    Base pages are obtained by mmapping /dev/zero and superpages are obtained by mmapping a
 *    file backed by the hugeTLBfs". Here there are two heaps. The superpage heap is made of
 *    2MB-aligned anonymous mmap regions marked madvise(MADV_HUGEPAGE), so transparent huge
 *    pages (THP, enabled=madvise or always) may back them; with SMALLOC_HUGETLB=1 its regions
 *    are mapped with MAP_HUGETLB (the hugetlbfs pool, as in the seed) and, if the kernel
 *    refuses, it says so once on stderr and falls back to THP. The base heap is made of
 *    anonymous mmap regions marked madvise(MADV_NOHUGEPAGE). Nothing here assumes a huge page
 *    was granted: the exit report reads /proc/self/smaps.
 *
 *  - "based on algorithms used in the malloc implementation in glibc": not copied. This is a
 *    deliberately simple allocator of its own: per heap, segregated free lists by size class
 *    (no splitting, no coalescing), refilled by bumping through arena regions; requests of
 *    about LARGE_MIN (1MB) or more get a region of their own (2MB-aligned and a multiple of 2MB
 *    in the superpage heap) with no header, so the block itself starts on a 2MB boundary and a
 *    64MB array takes exactly 32 superpages. Freed small chunks go back on their class's list;
 *    freed large regions are kept, up to CACHE_MAX bytes per heap, for later large requests
 *    that fit (this is also what lets the exit report still see them), and unmapped beyond
 *    that. Small chunks have a 16-byte header; payloads are 16-byte aligned. A sorted table of
 *    regions answers "is this pointer ours" (sfree of a libc pointer). One global mutex
 *    serialises everything (threads are safe, not scalable).
 *
 *  - "Each version aligns the base of the heap at the end of the data segment" and "the system
 *    also provides heap migration and base heap freezing to reduce fragmentation within the
 *    heap [6]". The tech report [6] is not available; what follows is inferred. The seed's two
 *    morecore versions grow one program heap from the end of the data segment, so switching
 *    from base pages to superpages must stop ("freeze") the base-page part where it is and
 *    continue ("migrate") the heap in superpage-aligned memory, and blocks may move between
 *    the two kinds. Built here, on two separate heaps:
 *      heap migration: srealloc (and realloc in preload mode) moves a block, copying it, to the
 *        heap the current request is routed to, so a block can change heaps over its life;
 *        and when the superpage heap cannot get memory (mmap or MAP_HUGETLB fails), requests
 *        migrate to the base heap (counted in the report).
 *      base heap freezing: with SMALLOC_FREEZE_BASE=1 (or smalloc_freeze_base(1)), from the
 *        first superpage-heap allocation on, the base heap maps no new region: base requests
 *        are served from its free lists and its current arena, else from the superpage heap.
 *    Not built: a single contiguous heap at the end of the data segment (sbrk), moving live
 *    blocks without a realloc call, and any policy of [6] we cannot see.
 *
 * Routing (which heap a request goes to):
 *  - smalloc/scalloc/srealloc: the superpage heap, or the base heap under SMALLOC_MODE=base.
 *  - preload build (SMALLOC_PRELOAD, libsmalloc.so; malloc & co. are this allocator): without
 *    SMALLOC_HINTS as above; with SMALLOC_HINTS=PATH a request goes to the superpage heap only
 *    if it matches a line of the hints file, else to the base heap. SMALLOC_MODE=base wins
 *    over hints (everything base), so one binary can be measured both ways.
 *
 * Hints file (written by `splab advise`):
 *   # comment lines start with '#'; blank lines ignored
 *   superpages size=MIN..MAX          requested size in bytes in [MIN, MAX], inclusive
 *   superpages size=MIN..MAX nth=K    only the K-th (1-based) request matching this line
 * Every malloc-family call counts as one request of its requested size: malloc(n) n,
 * calloc(m, n) m*n, realloc(p, n) n (also when it is satisfied in place), the aligned
 * allocators their size. Each line counts its own matches. A malformed line is reported as
 * "smalloc: PATH:LINE: what is wrong" and the process exits with status 2 at start-up.
 */
#define _GNU_SOURCE
#include "smalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << 26)
#endif

#define SP_SIZE ((size_t)2 << 20)      /* x86-64 superpage: 2MB */
#define PAGE ((size_t)4096)
#define ALIGNMENT ((size_t)16)
#define HDR ((size_t)16)
#define LARGE_MIN ((size_t)1 << 20)    /* chunks (header included) above this get a region */
#define SP_ARENA ((size_t)4 << 20)     /* superpage heap arena region: two superpages */
#define BASE_ARENA ((size_t)1 << 20)   /* base heap arena region */
#define CACHE_MAX ((size_t)256 << 20)  /* freed large regions kept per heap */
#define CACHE_SLOTS 64
#define NCLASS_MAX 96
#define MAGIC 0x5a110c5du

enum { HEAP_SUPER = 0, HEAP_BASE = 1, NHEAPS = 2 };
enum { K_SMALL = 1, K_ALIGNED = 3 };

/* The header in front of every small payload. A large block has none: it is its own region,
 * its payload starts the region (so a 2MB-aligned one, in the superpage heap), and the region
 * table knows its size. For K_ALIGNED (an aligned payload inside a bigger block, small or
 * large) `size` is the distance back to that block's payload. */
struct hdr {
    size_t size;    /* usable bytes after the header (K_SMALL) */
    uint32_t magic;
    uint16_t cls;   /* size class (K_SMALL) */
    uint8_t heap;
    uint8_t kind;
};
_Static_assert(sizeof(struct hdr) == 16, "header is 16 bytes");

struct region {
    uintptr_t base;
    size_t len;
    uint8_t heap;
    uint8_t hugetlb;
    uint8_t large;  /* one large block, starting at base */
};

struct cached {
    char *base;
    size_t len;
};

struct heap {
    const char *name;
    void *free[NCLASS_MAX];
    char *bump, *bump_end;
    struct cached cache[CACHE_SLOTS];
    int ncache;
    size_t cached_bytes;
    /* statistics for the report */
    size_t mapped, peak, nregions, nallocs, hugetlb_regions, migrated_in;
};

struct hint {
    uint64_t min, max, nth, seen;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int initialised;
static int mode_heap = HEAP_SUPER;
static int want_hugetlb;
static int freeze_on_super;   /* SMALLOC_FREEZE_BASE: freeze at first superpage-heap use */
static int base_frozen;
static int thp_madvise_failed;
static struct heap heaps[NHEAPS] = {{.name = "superpage"}, {.name = "base"}};
static size_t classes[NCLASS_MAX];
static int nclass;
static struct region *regions;
static size_t nreg, capreg;
#ifdef SMALLOC_PRELOAD
static struct hint *hints;
static size_t nhints;
static int have_hints;
#endif

/* ---- small output helpers that never allocate ---- */

struct buf {
    char b[512];
    size_t n;
};

static void put_s(struct buf *b, const char *s)
{
    while (*s && b->n < sizeof b->b - 1)
        b->b[b->n++] = *s++;
}

static void put_u(struct buf *b, uint64_t v)
{
    char t[24];
    int i = 0;
    do {
        t[i++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (i && b->n < sizeof b->b - 1)
        b->b[b->n++] = t[--i];
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

static void say(struct buf *b)
{
    put_s(b, "\n");
    write_all(2, b->b, b->n);
}

/* ---- size classes ---- */

static void init_classes(void)
{
    size_t c;
    nclass = 0;
    for (c = 32; c <= 512; c += 16)
        classes[nclass++] = c;
    for (size_t base = 512; base < LARGE_MIN; base *= 2)
        for (int q = 1; q <= 4; q++)
            classes[nclass++] = base + base / 4 * (size_t)q;
}

static int class_of(size_t chunk)
{
    int lo = 0, hi = nclass - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (classes[mid] >= chunk)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* ---- the region table: sorted by base, for "is this pointer ours, and where" ---- */

static long region_find(uintptr_t p)
{
    size_t lo = 0, hi = nreg;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (regions[mid].base <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    lo--;
    return p < regions[lo].base + regions[lo].len ? (long)lo : -1;
}

static int region_insert(uintptr_t base, size_t len, int heap, int hugetlb, int large)
{
    if (nreg == capreg) {
        size_t ncap = capreg ? capreg * 2 : 1024;
        void *n = mmap(NULL, ncap * sizeof *regions, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (n == MAP_FAILED)
            return -1;
        if (regions) {
            memcpy(n, regions, nreg * sizeof *regions);
            munmap(regions, capreg * sizeof *regions);
        }
        regions = n;
        capreg = ncap;
    }
    size_t i = nreg;
    while (i > 0 && regions[i - 1].base > base) {
        regions[i] = regions[i - 1];
        i--;
    }
    regions[i] = (struct region){base, len, (uint8_t)heap, (uint8_t)hugetlb, (uint8_t)large};
    nreg++;
    return 0;
}

static void region_remove(long i)
{
    memmove(&regions[i], &regions[i + 1], (nreg - (size_t)i - 1) * sizeof *regions);
    nreg--;
}

/* ---- morecore: one per heap, as in seed 004 section 3 ---- */

/* Map a region of at least len bytes for heap h; returns its base, sets *got to its length. */
static char *map_region(int h, size_t len, int large, size_t *got)
{
    struct heap *hp = &heaps[h];
    char *p = NULL;
    int huge = 0;
    if (h == HEAP_SUPER) {
        len = (len + SP_SIZE - 1) & ~(SP_SIZE - 1);
        if (want_hugetlb) {
            void *q = mmap(NULL, len, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_HUGE_2MB, -1, 0);
            if (q != MAP_FAILED) {
                p = q;
                huge = 1;
            } else {
                struct buf b = {.n = 0};
                put_s(&b, "smalloc: SMALLOC_HUGETLB=1: mmap(MAP_HUGETLB) of ");
                put_u(&b, len);
                put_s(&b, " bytes failed (");
                put_s(&b, strerrordesc_np(errno));
                put_s(&b, "); superpage heap falls back to THP via madvise(MADV_HUGEPAGE)");
                say(&b);
                want_hugetlb = 0;
            }
        }
        if (!p) {
            /* over-map by one superpage, then trim to a 2MB-aligned range */
            char *q = mmap(NULL, len + SP_SIZE, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (q == MAP_FAILED)
                return NULL;
            uintptr_t a = ((uintptr_t)q + SP_SIZE - 1) & ~(uintptr_t)(SP_SIZE - 1);
            size_t head = a - (uintptr_t)q, tail = SP_SIZE - head;
            if (head)
                munmap(q, head);
            if (tail)
                munmap((char *)a + len, tail);
            p = (char *)a;
            if (madvise(p, len, MADV_HUGEPAGE) != 0 && !thp_madvise_failed) {
                struct buf b = {.n = 0};
                thp_madvise_failed = 1;
                put_s(&b, "smalloc: madvise(MADV_HUGEPAGE) failed (");
                put_s(&b, strerrordesc_np(errno));
                put_s(&b, "); the superpage heap gets whatever the kernel's THP setting gives");
                say(&b);
            }
        }
    } else {
        len = (len + PAGE - 1) & ~(PAGE - 1);
        void *q = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (q == MAP_FAILED)
            return NULL;
        p = q;
        madvise(p, len, MADV_NOHUGEPAGE); /* fails only where THP is not built in: harmless */
    }
    if (region_insert((uintptr_t)p, len, h, huge, large) != 0) {
        munmap(p, len);
        return NULL;
    }
    hp->mapped += len;
    hp->nregions++;
    hp->hugetlb_regions += (size_t)huge;
    if (hp->mapped > hp->peak)
        hp->peak = hp->mapped;
    *got = len;
    return p;
}

static void unmap_region(long i)
{
    struct heap *hp = &heaps[regions[i].heap];
    hp->mapped -= regions[i].len;
    hp->nregions--;
    hp->hugetlb_regions -= regions[i].hugetlb;
    munmap((void *)regions[i].base, regions[i].len);
    region_remove(i);
}

/* ---- allocation within one heap (lock held) ---- */

static void put_free(struct heap *hp, char *chunk, int cls)
{
    struct hdr *h = (struct hdr *)chunk;
    *h = (struct hdr){classes[cls] - HDR, MAGIC, (uint16_t)cls, (uint8_t)(hp - heaps), K_SMALL};
    *(void **)(chunk + HDR) = hp->free[cls];
    hp->free[cls] = chunk + HDR;
}

/* Carve what is left of the current arena into free chunks, largest classes first. */
static void retire_arena(struct heap *hp)
{
    while (hp->bump && (size_t)(hp->bump_end - hp->bump) >= classes[0]) {
        int c = class_of((size_t)(hp->bump_end - hp->bump));
        if (classes[c] > (size_t)(hp->bump_end - hp->bump))
            c--;
        put_free(hp, hp->bump, c);
        hp->bump += classes[c];
    }
}

/* May heap h grow (map a new region)? Not the base heap once frozen. */
static int may_grow(int h)
{
    return !(h == HEAP_BASE && base_frozen);
}

static void *alloc_small(int h, size_t chunk, int *fresh)
{
    struct heap *hp = &heaps[h];
    int c = class_of(chunk);
    void *p = hp->free[c];
    if (p) {
        hp->free[c] = *(void **)p;
        *fresh = 0;
        return p;
    }
    if (!hp->bump || (size_t)(hp->bump_end - hp->bump) < classes[c]) {
        if (!may_grow(h))
            return NULL;
        size_t got;
        char *r = map_region(h, h == HEAP_SUPER ? SP_ARENA : BASE_ARENA, 0, &got);
        if (!r)
            return NULL;
        retire_arena(hp);
        hp->bump = r;
        hp->bump_end = r + got;
    }
    char *chunkp = hp->bump;
    hp->bump += classes[c];
    *(struct hdr *)chunkp = (struct hdr){classes[c] - HDR, MAGIC, (uint16_t)c, (uint8_t)h, K_SMALL};
    *fresh = 1;
    return chunkp + HDR;
}

static void *alloc_large(int h, size_t chunk, int *fresh)
{
    struct heap *hp = &heaps[h];
    int best = -1;
    for (int i = 0; i < hp->ncache; i++) {
        size_t l = hp->cache[i].len;
        if (l >= chunk && l - chunk <= l / 2 && (best < 0 || l < hp->cache[best].len))
            best = i;
    }
    char *r;
    size_t got;
    if (best >= 0) {
        r = hp->cache[best].base;
        got = hp->cache[best].len;
        hp->cached_bytes -= got;
        hp->cache[best] = hp->cache[--hp->ncache];
        *fresh = 0;
    } else {
        if (!may_grow(h))
            return NULL;
        r = map_region(h, chunk, 1, &got);
        if (!r)
            return NULL;
        *fresh = 1;
    }
    return r;
}

/* Allocate n bytes in heap h, migrating to the other heap when h cannot serve it (seed 004
 * section 3, "heap migration" and "base heap freezing", as inferred above). */
static void *alloc_in(int h, size_t n, int *fresh)
{
    int dummy;
    if (!fresh)
        fresh = &dummy;
    if (n > SIZE_MAX / 2) {
        errno = ENOMEM;
        return NULL;
    }
    size_t chunk = ((n + ALIGNMENT - 1) & ~(ALIGNMENT - 1)) + HDR;
    if (chunk < classes[0])
        chunk = classes[0];
    for (int attempt = 0; attempt < 2; attempt++) {
        void *p = chunk > LARGE_MIN ? alloc_large(h, chunk - HDR, fresh)
                                    : alloc_small(h, chunk, fresh);
        if (p) {
            heaps[h].nallocs++;
            heaps[h].migrated_in += (size_t)attempt;
            if (h == HEAP_SUPER && freeze_on_super)
                base_frozen = 1;
            return p;
        }
        h = 1 - h;
    }
    errno = ENOMEM;
    return NULL;
}

/* What the allocator knows of one of its payloads p (lock held, p owned). */
struct blk {
    long ri;        /* its region */
    char *payload;  /* the block's own payload: p, or the block p was aligned inside */
    size_t usable;  /* bytes usable from p on */
    int heap;
};

static void corrupted(void)
{
    struct buf b = {.n = 0};
    put_s(&b, "smalloc: free/realloc of a block whose header is corrupted");
    say(&b);
    abort();
}

static struct blk blk_of(void *p)
{
    struct blk k;
    k.ri = region_find((uintptr_t)p);
    struct region *r = &regions[k.ri];
    k.heap = r->heap;
    k.payload = p;
    if (!r->large || (uintptr_t)p != r->base) {
        struct hdr *h = (struct hdr *)((char *)p - HDR);
        if (h->magic != MAGIC || (h->kind != K_SMALL && h->kind != K_ALIGNED))
            corrupted();
        if (h->kind == K_ALIGNED)
            k.payload = (char *)p - h->size;
    }
    if (r->large) {
        if ((uintptr_t)k.payload != r->base)
            corrupted();
        k.usable = r->base + r->len - (uintptr_t)p;
    } else {
        struct hdr *c = (struct hdr *)(k.payload - HDR);
        if (c->magic != MAGIC || c->kind != K_SMALL)
            corrupted();
        k.usable = c->size - (size_t)((char *)p - k.payload);
    }
    return k;
}

static void free_ours(void *p)
{
    struct blk k = blk_of(p);
    struct heap *hp = &heaps[k.heap];
    if (!regions[k.ri].large) {
        struct hdr *c = (struct hdr *)(k.payload - HDR);
        *(void **)k.payload = hp->free[c->cls];
        hp->free[c->cls] = k.payload;
        return;
    }
    /* a large block: keep its region for reuse, up to CACHE_MAX bytes per heap */
    size_t len = regions[k.ri].len;
    if (hp->ncache < CACHE_SLOTS && hp->cached_bytes + len <= CACHE_MAX) {
        hp->cache[hp->ncache++] = (struct cached){k.payload, len};
        hp->cached_bytes += len;
    } else {
        unmap_region(k.ri);
    }
}

/* ---- hints (preload build) ---- */

#ifdef SMALLOC_PRELOAD
/* "smalloc: PATH:LINE: what 'tok' after", then exit status 2 (seed-independent: the hints
 * file is splab's; a malformed line is never skipped). */
static void hints_fail(const char *path, size_t line, const char *what, const char *tok,
                       size_t toklen, const char *after)
{
    struct buf b = {.n = 0};
    put_s(&b, "smalloc: ");
    put_s(&b, path);
    put_s(&b, ":");
    put_u(&b, line);
    put_s(&b, ": ");
    put_s(&b, what);
    if (tok) {
        put_s(&b, " '");
        for (size_t i = 0; i < toklen && b.n < sizeof b.b - 2; i++)
            b.b[b.n++] = tok[i];
        put_s(&b, "'");
    }
    if (after)
        put_s(&b, after);
    say(&b);
    _exit(2);
}

/* Parse a decimal number occupying exactly [s, e); -1 if it is not one. */
static int parse_u64(const char *s, const char *e, uint64_t *out)
{
    uint64_t v = 0;
    if (s == e)
        return -1;
    for (; s < e; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return 0;
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

static void parse_hint_line(const char *path, size_t lineno, const char *s, const char *e,
                            struct hint *out, int *is_hint)
{
    *is_hint = 0;
    while (s < e && is_space(*s))
        s++;
    if (s == e || *s == '#')
        return;
    /* a '#' after blank space starts a trailing comment */
    for (const char *q = s; q < e; q++)
        if (*q == '#' && is_space(q[-1])) {
            e = q;
            break;
        }
    while (e > s && is_space(e[-1]))
        e--;
    const char *t = s;
    while (t < e && !is_space(*t))
        t++;
    if ((size_t)(t - s) != 10 || memcmp(s, "superpages", 10) != 0)
        hints_fail(path, lineno, "unknown directive", s, (size_t)(t - s),
                   " (expected 'superpages')");
    int have_size = 0, have_nth = 0;
    *out = (struct hint){0, 0, 0, 0};
    s = t;
    for (;;) {
        while (s < e && is_space(*s))
            s++;
        if (s == e)
            break;
        t = s;
        while (t < e && !is_space(*t))
            t++;
        const char *eq = memchr(s, '=', (size_t)(t - s));
        if (!eq)
            hints_fail(path, lineno, "expected key=value, got", s, (size_t)(t - s), NULL);
        if (eq - s == 4 && memcmp(s, "size", 4) == 0) {
            if (have_size)
                hints_fail(path, lineno, "size= given twice:", s, (size_t)(t - s), NULL);
            const char *dots = NULL;
            for (const char *q = eq + 1; q + 1 < t; q++)
                if (q[0] == '.' && q[1] == '.') {
                    dots = q;
                    break;
                }
            if (!dots || parse_u64(eq + 1, dots, &out->min) != 0 ||
                parse_u64(dots + 2, t, &out->max) != 0)
                hints_fail(path, lineno, "bad size", s, (size_t)(t - s),
                           " (expected size=MIN..MAX, decimal byte counts)");
            if (out->min > out->max)
                hints_fail(path, lineno, "size range has MIN > MAX:", s, (size_t)(t - s), NULL);
            have_size = 1;
        } else if (eq - s == 3 && memcmp(s, "nth", 3) == 0) {
            if (have_nth)
                hints_fail(path, lineno, "nth= given twice:", s, (size_t)(t - s), NULL);
            if (parse_u64(eq + 1, t, &out->nth) != 0 || out->nth == 0)
                hints_fail(path, lineno, "bad nth", s, (size_t)(t - s),
                           " (expected nth=K, K >= 1: 1-based)");
            have_nth = 1;
        } else {
            hints_fail(path, lineno, "unknown key", s, (size_t)(eq - s),
                       " (expected size= or nth=)");
        }
        s = t;
    }
    if (!have_size)
        hints_fail(path, lineno, "missing size=MIN..MAX", NULL, 0, NULL);
    *is_hint = 1;
}

static void load_hints(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        struct buf b = {.n = 0};
        put_s(&b, "smalloc: SMALLOC_HINTS=");
        put_s(&b, path);
        put_s(&b, ": cannot read the hints file (");
        put_s(&b, strerrordesc_np(errno));
        put_s(&b, ")");
        say(&b);
        _exit(2);
    }
    size_t size = (size_t)st.st_size;
    char *text = NULL;
    if (size) {
        text = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (text == MAP_FAILED) {
            struct buf b = {.n = 0};
            put_s(&b, "smalloc: SMALLOC_HINTS=");
            put_s(&b, path);
            put_s(&b, ": cannot map the hints file");
            say(&b);
            _exit(2);
        }
    }
    close(fd);
    size_t lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += text[i] == '\n';
    hints = mmap(NULL, lines * sizeof *hints, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (hints == MAP_FAILED) {
        struct buf b = {.n = 0};
        put_s(&b, "smalloc: out of memory reading the hints file");
        say(&b);
        _exit(2);
    }
    size_t lineno = 0;
    for (size_t i = 0; i < size;) {
        size_t j = i;
        while (j < size && text[j] != '\n')
            j++;
        lineno++;
        int is_hint;
        parse_hint_line(path, lineno, text + i, text + j, &hints[nhints], &is_hint);
        nhints += (size_t)is_hint;
        i = j + 1;
    }
    if (text)
        munmap(text, size);
    have_hints = 1;
}

/* The heap of a malloc-family request of `size` bytes in the preload build. */
static int route_preload(size_t size)
{
    if (mode_heap == HEAP_BASE || !have_hints)
        return mode_heap;
    int match = 0;
    for (size_t i = 0; i < nhints; i++) {
        struct hint *h = &hints[i];
        if (size < h->min || size > h->max)
            continue;
        if (h->nth == 0)
            match = 1;
        else if (++h->seen == h->nth)
            match = 1;
    }
    return match ? HEAP_SUPER : HEAP_BASE;
}
#endif

/* ---- initialisation and fork ---- */

static void bad_env(const char *name, const char *val, const char *expected)
{
    struct buf b = {.n = 0};
    put_s(&b, "smalloc: ");
    put_s(&b, name);
    put_s(&b, "=");
    put_s(&b, val);
    put_s(&b, ": expected ");
    put_s(&b, expected);
    say(&b);
    _exit(2);
}

static int env_flag(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v || strcmp(v, "0") == 0)
        return 0;
    if (strcmp(v, "1") == 0)
        return 1;
    bad_env(name, v, "0 or 1");
    return 0;
}

static void init_locked(void)
{
    if (initialised)
        return;
    initialised = 1;
    init_classes();
    const char *m = getenv("SMALLOC_MODE");
    if (m && *m) {
        if (strcmp(m, "base") == 0)
            mode_heap = HEAP_BASE;
        else if (strcmp(m, "super") == 0)
            mode_heap = HEAP_SUPER;
        else
            bad_env("SMALLOC_MODE", m, "super or base");
    }
    want_hugetlb = env_flag("SMALLOC_HUGETLB");
    freeze_on_super = env_flag("SMALLOC_FREEZE_BASE");
#ifdef SMALLOC_PRELOAD
    const char *hp = getenv("SMALLOC_HINTS");
    if (hp && *hp)
        load_hints(hp);
#endif
}

static void atfork_prepare(void) { pthread_mutex_lock(&lock); }
static void atfork_parent(void) { pthread_mutex_unlock(&lock); }
static void atfork_child(void) { pthread_mutex_init(&lock, NULL); }

static void report(void);

__attribute__((constructor)) static void smalloc_load(void)
{
    pthread_mutex_lock(&lock);
    init_locked();
    pthread_mutex_unlock(&lock);
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

__attribute__((destructor)) static void smalloc_unload(void)
{
    report();
}

/* ---- the exit report: AnonHugePages of the VMAs overlapping each heap's regions ---- */

static int vma_heap_overlap(uintptr_t s, uintptr_t e, int h)
{
    /* regions are sorted: find the first region whose end is above s */
    size_t lo = 0, hi = nreg;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (regions[mid].base + regions[mid].len <= s)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < nreg && regions[i].base < e; i++)
        if (regions[i].heap == h)
            return 1;
    return 0;
}

static uint64_t field_kb(const char *line, size_t n, const char *key)
{
    size_t k = strlen(key);
    if (n <= k || memcmp(line, key, k) != 0)
        return UINT64_MAX;
    uint64_t v = 0;
    for (size_t i = k; i < n; i++)
        if (line[i] >= '0' && line[i] <= '9')
            v = v * 10 + (uint64_t)(line[i] - '0');
        else if (v || line[i] != ' ')
            break;
    return v;
}

static int parse_hex(const char **p, const char *e, uintptr_t *out)
{
    uintptr_t v = 0;
    const char *s = *p;
    int any = 0;
    for (; s < e; s++) {
        int d;
        if (*s >= '0' && *s <= '9')
            d = *s - '0';
        else if (*s >= 'a' && *s <= 'f')
            d = *s - 'a' + 10;
        else
            break;
        v = v * 16 + (uintptr_t)d;
        any = 1;
    }
    *p = s;
    *out = v;
    return any ? 0 : -1;
}

struct smaps_sum {
    uint64_t ahp_kb[NHEAPS], hugetlb_kb[NHEAPS];
    uintptr_t vs, ve;
    int in_vma;
};

static void smaps_line(struct smaps_sum *s, const char *l, size_t n)
{
    const char *p = l, *e = l + n;
    uintptr_t a, b;
    if (parse_hex(&p, e, &a) == 0 && p < e && *p == '-') {
        p++;
        if (parse_hex(&p, e, &b) == 0 && p < e && *p == ' ') {
            s->vs = a;
            s->ve = b;
            s->in_vma = 1;
            return;
        }
    }
    if (!s->in_vma)
        return;
    uint64_t v;
    for (int h = 0; h < NHEAPS; h++) {
        if ((v = field_kb(l, n, "AnonHugePages:")) != UINT64_MAX) {
            if (v && vma_heap_overlap(s->vs, s->ve, h))
                s->ahp_kb[h] += v;
        } else if ((v = field_kb(l, n, "Private_Hugetlb:")) != UINT64_MAX ||
                   (v = field_kb(l, n, "Shared_Hugetlb:")) != UINT64_MAX) {
            if (v && vma_heap_overlap(s->vs, s->ve, h))
                s->hugetlb_kb[h] += v;
        }
    }
}

static int read_smaps(struct smaps_sum *s)
{
    static char chunk[65536];
    int fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t have = 0;
    for (;;) {
        ssize_t r = read(fd, chunk + have, sizeof chunk - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        have += (size_t)r;
        size_t start = 0;
        for (size_t i = 0; i < have; i++)
            if (chunk[i] == '\n') {
                smaps_line(s, chunk + start, i - start);
                start = i + 1;
            }
        memmove(chunk, chunk + start, have - start);
        have -= start;
        if (have == sizeof chunk) /* an absurdly long line: drop it */
            have = 0;
    }
    if (have)
        smaps_line(s, chunk, have);
    close(fd);
    return 0;
}

static void report(void)
{
    const char *r = getenv("SMALLOC_REPORT");
    if (!r || !*r || strcmp(r, "0") == 0)
        return;
    int fd = 2, close_fd = 0;
    if (strcmp(r, "1") != 0) {
        /* "%p" in the path becomes the process id: under LD_PRELOAD, children (a compiler
         * driver's cc1, a shell's commands) would otherwise overwrite one file */
        struct buf path = {.n = 0};
        for (const char *c = r; *c; c++) {
            if (c[0] == '%' && c[1] == 'p') {
                put_u(&path, (uint64_t)getpid());
                c++;
            } else {
                char one[2] = {*c, 0};
                put_s(&path, one);
            }
        }
        path.b[path.n] = 0;
        fd = open(path.b, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
            struct buf b = {.n = 0};
            put_s(&b, "smalloc: SMALLOC_REPORT=");
            put_s(&b, r);
            put_s(&b, ": cannot write the report (");
            put_s(&b, strerrordesc_np(errno));
            put_s(&b, ")");
            say(&b);
            return;
        }
        close_fd = 1;
    }
    pthread_mutex_lock(&lock);
    struct smaps_sum s;
    memset(&s, 0, sizeof s);
    int ok = read_smaps(&s) == 0;
    for (int h = 0; h < NHEAPS; h++) {
        struct heap *hp = &heaps[h];
        struct buf b = {.n = 0};
        put_s(&b, "smalloc: ");
        put_s(&b, hp->name);
        put_s(&b, " heap: mapped ");
        put_u(&b, hp->mapped);
        put_s(&b, " bytes in ");
        put_u(&b, hp->nregions);
        put_s(&b, " regions, AnonHugePages ");
        if (ok)
            put_u(&b, s.ahp_kb[h]);
        else
            put_s(&b, "?");
        put_s(&b, " kB (from /proc/self/smaps); Hugetlb ");
        if (ok)
            put_u(&b, s.hugetlb_kb[h]);
        else
            put_s(&b, "?");
        put_s(&b, " kB in ");
        put_u(&b, hp->hugetlb_regions);
        put_s(&b, " MAP_HUGETLB regions, peak mapped ");
        put_u(&b, hp->peak);
        put_s(&b, " bytes, ");
        put_u(&b, hp->nallocs);
        put_s(&b, " allocations (");
        put_u(&b, hp->migrated_in);
        put_s(&b, " migrated in)");
        put_s(&b, "\n");
        write_all(fd, b.b, b.n);
    }
    pthread_mutex_unlock(&lock);
    if (close_fd)
        close(fd);
}

/* ---- the smalloc interface (seed 004 section 3) ---- */

#ifdef SMALLOC_PRELOAD
extern void __libc_free(void *);
extern void *__libc_realloc(void *, size_t);
#define FOREIGN_FREE __libc_free
#define FOREIGN_REALLOC __libc_realloc
#else
#define FOREIGN_FREE free
#define FOREIGN_REALLOC realloc
#endif

static int owned(const void *p)
{
    return p && region_find((uintptr_t)p) >= 0;
}

static void *do_malloc(size_t n, int zero)
{
    int fresh = 0;
    void *p = alloc_in(mode_heap, n, &fresh);
    if (p && zero && !fresh)
        memset(p, 0, n);
    return p;
}

void *smalloc(size_t size)
{
    pthread_mutex_lock(&lock);
    init_locked();
    void *p = do_malloc(size, 0);
    pthread_mutex_unlock(&lock);
    return p;
}

void *scalloc(size_t nmemb, size_t size)
{
    if (size && nmemb > SIZE_MAX / size) {
        errno = ENOMEM;
        return NULL;
    }
    pthread_mutex_lock(&lock);
    init_locked();
    void *p = do_malloc(nmemb * size, 1);
    pthread_mutex_unlock(&lock);
    return p;
}

void sfree(void *ptr)
{
    if (!ptr)
        return;
    pthread_mutex_lock(&lock);
    if (owned(ptr)) {
        free_ours(ptr);
        pthread_mutex_unlock(&lock);
        return;
    }
    pthread_mutex_unlock(&lock);
    FOREIGN_FREE(ptr);
}

/* realloc within smalloc: keep the block if it stays in heap h and fits, else move it (heap
 * migration when h differs from the block's heap). Lock held; ptr is ours. */
static void *realloc_ours(void *ptr, size_t size, int h)
{
    struct blk k = blk_of(ptr);
    size_t have = k.usable;
    if (k.heap == h && size <= have && (!regions[k.ri].large || size > have / 2))
        return ptr;
    void *n = alloc_in(h, size, NULL);
    if (!n)
        return NULL;
    memcpy(n, ptr, size < have ? size : have);
    free_ours(ptr);
    return n;
}

void *srealloc(void *ptr, size_t size)
{
    if (!ptr)
        return smalloc(size);
    pthread_mutex_lock(&lock);
    init_locked();
    if (!owned(ptr)) {
        pthread_mutex_unlock(&lock);
        return FOREIGN_REALLOC(ptr, size);
    }
    void *p = realloc_ours(ptr, size, mode_heap);
    pthread_mutex_unlock(&lock);
    return p;
}

int smalloc_heap_of(const void *ptr)
{
    pthread_mutex_lock(&lock);
    long i = ptr ? region_find((uintptr_t)ptr) : -1;
    int h = i >= 0 ? regions[i].heap : -1;
    pthread_mutex_unlock(&lock);
    return h;
}

void smalloc_freeze_base(int frozen)
{
    pthread_mutex_lock(&lock);
    init_locked();
    base_frozen = frozen != 0;
    if (!frozen)
        freeze_on_super = 0;
    pthread_mutex_unlock(&lock);
}

/* ---- preload build: the C library's names ---- */

#ifdef SMALLOC_PRELOAD
#define EXPORT __attribute__((visibility("default")))

/* An allocation of size bytes aligned to align (a power of two), in heap h. Lock held. */
static void *alloc_aligned(int h, size_t align, size_t size)
{
    if (align <= ALIGNMENT)
        return alloc_in(h, size, NULL);
    if (size > SIZE_MAX / 4 || align > SIZE_MAX / 4) {
        errno = ENOMEM;
        return NULL;
    }
    char *p = alloc_in(h, size + align + HDR, NULL);
    if (!p)
        return NULL;
    uintptr_t a = ((uintptr_t)p + HDR + align - 1) & ~(uintptr_t)(align - 1);
    struct hdr *ah = (struct hdr *)(a - HDR);
    *ah = (struct hdr){a - (uintptr_t)p, MAGIC, 0, (uint8_t)blk_of(p).heap, K_ALIGNED};
    return (void *)a;
}

EXPORT void *malloc(size_t size)
{
    pthread_mutex_lock(&lock);
    init_locked();
    void *p = alloc_in(route_preload(size), size, NULL);
    pthread_mutex_unlock(&lock);
    return p;
}

EXPORT void free(void *ptr)
{
    sfree(ptr);
}

EXPORT void *calloc(size_t nmemb, size_t size)
{
    if (size && nmemb > SIZE_MAX / size) {
        errno = ENOMEM;
        return NULL;
    }
    pthread_mutex_lock(&lock);
    init_locked();
    int fresh = 0;
    size_t n = nmemb * size;
    void *p = alloc_in(route_preload(n), n, &fresh);
    if (p && !fresh)
        memset(p, 0, n);
    pthread_mutex_unlock(&lock);
    return p;
}

EXPORT void *realloc(void *ptr, size_t size)
{
    if (!ptr)
        return malloc(size);
    pthread_mutex_lock(&lock);
    init_locked();
    if (!owned(ptr)) {
        pthread_mutex_unlock(&lock);
        return __libc_realloc(ptr, size);
    }
    void *p = realloc_ours(ptr, size, route_preload(size));
    pthread_mutex_unlock(&lock);
    return p;
}

EXPORT void *reallocarray(void *ptr, size_t nmemb, size_t size)
{
    if (size && nmemb > SIZE_MAX / size) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(ptr, nmemb * size);
}

EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
    if (align < sizeof(void *) || (align & (align - 1)))
        return EINVAL;
    pthread_mutex_lock(&lock);
    init_locked();
    void *p = alloc_aligned(route_preload(size), align, size);
    pthread_mutex_unlock(&lock);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

EXPORT void *memalign(size_t align, size_t size)
{
    if (align == 0 || (align & (align - 1))) {
        /* glibc rounds a non-power-of-two alignment up; do the same */
        size_t a = ALIGNMENT;
        while (a < align && a < SIZE_MAX / 2)
            a *= 2;
        align = a;
    }
    pthread_mutex_lock(&lock);
    init_locked();
    void *p = alloc_aligned(route_preload(size), align, size);
    pthread_mutex_unlock(&lock);
    return p;
}

EXPORT void *aligned_alloc(size_t align, size_t size)
{
    if (align == 0 || (align & (align - 1))) {
        errno = EINVAL;
        return NULL;
    }
    return memalign(align, size);
}

EXPORT void *valloc(size_t size)
{
    return memalign(PAGE, size);
}

EXPORT void *pvalloc(size_t size)
{
    if (size > SIZE_MAX - PAGE) {
        errno = ENOMEM;
        return NULL;
    }
    return memalign(PAGE, (size + PAGE - 1) & ~(PAGE - 1));
}

/* For a pointer that is not ours (none should reach here in preload mode) it returns 0: the C
 * library's own answer cannot be reached without dlsym. */
EXPORT size_t malloc_usable_size(void *ptr)
{
    pthread_mutex_lock(&lock);
    size_t n = owned(ptr) ? blk_of(ptr).usable : 0;
    pthread_mutex_unlock(&lock);
    return n;
}
#endif
