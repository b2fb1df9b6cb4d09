/* llc-reuse.c: how much of a region the LLC still holds after one pass over it, by the
 * region's size, the time since the pass, and whether the pass read or wrote the lines.
 *
 *   llc-reuse [REPS [random]]        (run under flock -x /tmp/splab-quiet.lock)
 *
 * For each size S, mode (r: one load per line, w: one store per line) and wait T: read a
 * 1 GiB eviction buffer (nothing of the region cached), pass once over the region in address
 * order (every 64-byte line; r2, w2: two passes back to back, so that a line's second touch
 * comes after S bytes of others: an LLC hit if the first pass's fill was kept), spin T (no memory), then chase K = 16384 lines sampled at random
 * from the whole region (a random cycle whose pointers sit in those lines, written once at
 * setup) and time the hop. A hop costs h * LLC + (1 - h) * DRAM: h is the share of the region's
 * lines still in the LLC. Endpoints: "dram" chases the sample right after the eviction (no
 * pass); "llc" chases it twice and times the second (the sample alone, 1 MiB, beyond L2's
 * share of it only at small S). THP memory (MADV_HUGEPAGE), so the hops' translations hit.
 * Prints: S_MiB mode T_ms ns_per_hop (median of REPS). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define HUGE (2UL << 20)
#define K 16384

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static char *huge_alloc(size_t len)
{
    char *p = mmap(NULL, len + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    p = (char *)(((uintptr_t)p + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
    madvise(p, len, MADV_HUGEPAGE);
    memset(p, 1, len);
    return p;
}

static uint64_t rng = 88172645463325252ULL;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static volatile uint64_t sink;
static char *evict;
#define EVICT (1UL << 30)

static void do_evict(void)
{
    uint64_t s = 0;
    for (size_t i = 0; i < EVICT; i += 64)
        s += evict[i];
    sink += s;
}

static void spin_ns(uint64_t ns)
{
    uint64_t end = now_ns() + ns;
    while (now_ns() < end)
        ;
}

static double chase(void *start)
{
    void **p = start;
    uint64_t t0 = now_ns();
    for (int i = 0; i < K; i++)
        p = *p;
    uint64_t t1 = now_ns();
    sink += (uintptr_t)p;
    return (double)(t1 - t0) / K;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 3;
    int random_order = argc > 2 && strcmp(argv[2], "random") == 0;
    static const int sizes[] = {4, 8, 16, 32, 64, 128};
    static const double waits[] = {0, 8};
    evict = huge_alloc(EVICT);
    for (unsigned si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        size_t len = (size_t)sizes[si] << 20, lines = len / 64;
        char *r = huge_alloc(len);
        /* K distinct random lines, one random cycle through them */
        uint64_t *pick = malloc(K * sizeof *pick);
        char *used = calloc(lines, 1);
        for (int i = 0; i < K; i++) {
            uint64_t l;
            do
                l = next() % lines;
            while (used[l]);
            used[l] = 1;
            pick[i] = l;
        }
        for (int i = 0; i < K; i++)
            *(void **)(r + pick[i] * 64) = r + pick[(i + 1) % K] * 64;
        void *start = r + pick[0] * 64;
        /* the pass's order: address order, or (argument "random") one random permutation of
         * the lines, so that every fill is a demand miss (no stream for a prefetcher) */
        uint32_t *ord = malloc(lines * sizeof *ord);
        for (size_t i = 0; i < lines; i++)
            ord[i] = i;
        if (random_order)
            for (size_t i = lines - 1; i > 0; i--) {
                size_t j = next() % (i + 1);
                uint32_t t = ord[i];
                ord[i] = ord[j];
                ord[j] = t;
            }
        double *v = malloc(reps * sizeof *v);
        for (int m = 0; m < 6; m++) { /* 0 dram, 1 llc, 2 r, 3 w, 4 r2, 5 w2 */
            int nw = m < 2 ? 1 : sizeof waits / sizeof *waits;
            for (int wi = 0; wi < nw; wi++) {
                for (int k = 0; k < reps; k++) {
                    do_evict();
                    if (m == 1)
                        chase(start);
                    for (int pass = 0; pass < (m >= 4 ? 2 : 1); pass++) {
                        if (m == 2 || m == 4) {
                            uint64_t s = 0;
                            for (size_t i = 0; i < lines; i++)
                                s += r[(size_t)ord[i] * 64 + 8];
                            sink += s;
                        }
                        if (m == 3 || m == 5)
                            for (size_t i = 0; i < lines; i++)
                                r[(size_t)ord[i] * 64 + 8]++;
                    }
                    if (m >= 2)
                        spin_ns((uint64_t)(waits[wi] * 1e6));
                    v[k] = chase(start);
                }
                qsort(v, reps, sizeof *v, cmpd);
                static const char *names[] = {"dram", "llc", "r", "w", "r2", "w2"};
                printf("%4d %-4s %5.1f %7.1f\n", sizes[si], names[m], m >= 2 ? waits[wi] : 0.0,
                       v[reps / 2]);
                fflush(stdout);
            }
        }
        munmap(r - 0, len); /* the aligned start; the unaligned head leaks, fine for a script */
        free(pick);
        free(used);
        free(ord);
        free(v);
    }
    return 0;
}
