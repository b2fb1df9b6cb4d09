/* smalloc linked directly (libsmalloc.a), as a program whose malloc calls a compiler pass has
 * rewritten into smalloc calls (seed 004 section 3). Usage: t_direct super|base, the heap
 * SMALLOC_MODE should have sent the allocations to. Prints "t_direct: ok" or fails naming the
 * check, with exit status 1. */
#include "check.h"
#include "smalloc.h"

#include <pthread.h>

static void *churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    void *slots[64] = {0};
    for (unsigned i = 0; i < 200000; i++) {
        unsigned k = (i * 2654435761u + seed) % 64;
        if (slots[k]) {
            CHECK(filled(slots[k], 24, k));
            sfree(slots[k]);
        }
        size_t n = 24 + (i % 17) * 40;
        slots[k] = smalloc(n);
        CHECK(slots[k] != NULL);
        fill(slots[k], 24, k);
    }
    for (int k = 0; k < 64; k++)
        sfree(slots[k]);
    return NULL;
}

int main(int argc, char **argv)
{
    CHECK(argc == 2 && (strcmp(argv[1], "super") == 0 || strcmp(argv[1], "base") == 0));
    int super = strcmp(argv[1], "super") == 0;
    int want = super ? 0 : 1;

    /* alignment, and the whole payload writable, over small and large sizes */
    static const size_t sizes[] = {0, 1, 15, 16, 17, 100, 511, 512, 513, 4095, 4096, 70000,
                                   300000, 1048560, 1048576, 3 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        unsigned char *p = smalloc(sizes[i]);
        CHECK(p != NULL);
        CHECK((uintptr_t)p % 16 == 0);
        memset(p, 0x5a, sizes[i]);
        CHECK(smalloc_heap_of(p) == want);
        CHECK(super ? in_superpage_vma(p) : in_base_vma(p));
        if (sizes[i] >= (1u << 20) && super)
            CHECK((uintptr_t)p % SP == 0); /* a large block starts its own 2MB region */
        sfree(p);
    }

    /* reuse after free, and scalloc zeroing reused memory (small and large) */
    unsigned char *a = smalloc(1000);
    memset(a, 0xab, 1000);
    sfree(a);
    unsigned char *b = scalloc(10, 100);
    CHECK(b == a);
    CHECK(all_zero(b, 1000));
    sfree(b);
    unsigned char *big = smalloc(3 << 20);
    memset(big, 0xab, 3 << 20);
    sfree(big);
    unsigned char *big2 = scalloc(3, 1 << 20);
    CHECK(big2 == big); /* the freed region is reused */
    CHECK(all_zero(big2, 3 << 20));
    sfree(big2);
    volatile size_t huge = (size_t)1 << 62;
    CHECK(scalloc(huge, 8) == NULL); /* overflow */

    /* srealloc keeps contents as a block grows from small to large and shrinks back */
    unsigned char *r = smalloc(100);
    fill(r, 100, 7);
    r = srealloc(r, 5000);
    CHECK(r && filled(r, 100, 7));
    fill(r, 5000, 8);
    r = srealloc(r, 2 << 20);
    CHECK(r && filled(r, 5000, 8));
    CHECK(smalloc_heap_of(r) == want);
    r = srealloc(r, 10);
    CHECK(r && filled(r, 10, 8));
    CHECK(smalloc_heap_of(r) == want);
    sfree(r);

    /* pointers from the C library's malloc go back to it */
    unsigned char *l = malloc(100);
    CHECK(l != NULL && smalloc_heap_of(l) == -1);
    fill(l, 100, 3);
    l = srealloc(l, 100000);
    CHECK(l != NULL && smalloc_heap_of(l) == -1);
    CHECK(filled(l, 100, 3));
    sfree(l);
    sfree(NULL);
    CHECK(srealloc(NULL, 10) != NULL && smalloc_heap_of(srealloc(NULL, 10)) == want);

    /* two threads at once under the one lock */
    pthread_t t1, t2;
    CHECK(pthread_create(&t1, NULL, churn, (void *)1) == 0);
    CHECK(pthread_create(&t2, NULL, churn, (void *)2) == 0);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);

    printf("t_direct: ok\n");
    return 0;
}
