/* A plain malloc program run with LD_PRELOAD=libsmalloc.so. Usage: t_preload hints|all|base.
 *   hints: SMALLOC_HINTS holds exactly
 *            superpages size=300000..300000
 *            superpages size=5000..5000 nth=2
 *   all:   no hints, everything in the superpage heap
 *   base:  SMALLOC_MODE=base, everything in the base heap
 * Prints "t_preload: ok" or fails naming the check, with exit status 1. */
#define _GNU_SOURCE
#include "check.h"

#include <errno.h>
#include <malloc.h>
#include <unistd.h>

static int mode;  /* 0 hints, 1 all, 2 base */

/* where p must be if its request matched a hint (or would have) */
static int where(const void *p, int matched)
{
    int super = mode == 1 || (mode == 0 && matched);
    return super ? in_superpage_vma(p) : in_base_vma(p);
}

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    mode = strcmp(argv[1], "hints") == 0 ? 0 : strcmp(argv[1], "all") == 0 ? 1
           : strcmp(argv[1], "base") == 0 ? 2 : -1;
    CHECK(mode >= 0);

    unsigned char *a = malloc(300000);
    CHECK(a && where(a, 1));
    unsigned char *b = malloc(1000);
    CHECK(b && where(b, 0));
    void *c1 = malloc(5000), *c2 = malloc(5000), *c3 = malloc(5000);
    CHECK(where(c1, 0) && where(c2, 1) && where(c3, 0)); /* nth=2: only the second */

    /* realloc moves a block between heaps (heap migration) and keeps its contents */
    fill(b, 1000, 1);
    b = realloc(b, 300000);
    CHECK(b && where(b, 1) && filled(b, 1000, 1));
    fill(b, 300000, 2);
    b = realloc(b, 1000);
    CHECK(b && where(b, 0) && filled(b, 1000, 2));

    /* calloc zeroes reused memory */
    memset(a, 0xff, 300000);
    free(a);
    unsigned char *z = calloc(100, 3000);
    CHECK(z == a && where(z, 1) && all_zero(z, 300000));
    volatile size_t huge = (size_t)1 << 62; /* volatile: no compile-time overflow warning */
    CHECK(calloc(huge, 16) == NULL);

    /* the aligned allocators and malloc_usable_size */
    void *m = NULL;
    CHECK(posix_memalign(&m, 4096, 300000) == 0 && (uintptr_t)m % 4096 == 0 && where(m, 1));
    CHECK(malloc_usable_size(m) >= 300000);
    memset(m, 1, 300000);
    CHECK(posix_memalign(&m, 3, 10) == EINVAL);
    void *al = aligned_alloc(64, 640);
    CHECK(al && (uintptr_t)al % 64 == 0 && malloc_usable_size(al) >= 640);
    void *me = memalign(1 << 16, 5);
    CHECK(me && (uintptr_t)me % (1 << 16) == 0 && malloc_usable_size(me) >= 5);
    void *va = valloc(100);
    CHECK(va && (uintptr_t)va % 4096 == 0);
    void *pv = pvalloc(100);
    CHECK(pv && (uintptr_t)pv % 4096 == 0 && malloc_usable_size(pv) >= 4096);
    unsigned char *g = realloc(me, 100000); /* an aligned block reallocated */
    CHECK(g && malloc_usable_size(g) >= 100000);
    free(g);
    free(al);
    free(va);
    free(pv);
    free(m);
    free(b);
    free(z);
    free(c1);
    free(c2);
    free(c3);
    free(NULL);

    /* the C library's own users of malloc */
    char *s = strdup("superpages");
    CHECK(s && strcmp(s, "superpages") == 0);
    free(s);
    for (int i = 0; i < 1000; i++) {
        void *p = malloc((size_t)i * 37);
        CHECK(p && (uintptr_t)p % 16 == 0);
        free(p);
    }
    printf("t_preload: ok\n");
    return 0;
}
