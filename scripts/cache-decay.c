/* cache-decay.c: does a cached line stay cached while the program is busy elsewhere?
 * One dependent chase over FOOT bytes of packed lines (every line of FOOT/4096 pages, THP
 * memory, a random cyclic order), with a dependent spin of SPIN iterations after every hop: the
 * same lines in the same order, only the time between two visits of a line grows. On a machine
 * of one's own a line's level depends on how many other lines were touched since, not on how
 * long ago; on a shared host, the other tenants (other VMs' vCPUs time-sliced on this core, and
 * on this CCX's L3) evict lines at a rate, so a slower round finds fewer of its lines.
 * Prints, per spin, the round time and the hop latency (p10 of 15 rounds, ns) with the spin's
 * own cost (the same spin over a one-line chase) taken off.
 *   cc -O2 -o /tmp/cache-decay scripts/cache-decay.c && /tmp/cache-decay 1048576
 * Not part of the build. */
#include "chase-common.h"

static double round_ns(void **start, size_t hops, long spin, double *per_hop)
{
    double t[15];
    for (int r = 0; r < 16; r++) {
        void *p = start;
        double t0 = now();
        for (size_t h = 0; h < hops; h++) {
            p = *(void **)p;
            uintptr_t x = (uintptr_t)p;
            for (long s = spin; s > 0; s--) {
                x = x * 3 + 1;
                __asm__ volatile("" : "+r"(x));
            }
            __asm__ volatile("" : "+r"(p) : "r"(x)); /* the next hop waits for the spin */
        }
        sinkp = p;
        if (r > 0)
            t[r - 1] = now() - t0;
    }
    qsort(t, 15, sizeof t[0], cmpd);
    *per_hop = t[1] / (double)hops;
    return t[1];
}

int main(int argc, char **argv)
{
    size_t foot = argc > 1 ? strtoul(argv[1], 0, 10) : 1 << 20;
    if (foot < 4096 || foot % 64) {
        fprintf(stderr, "usage: cache-decay FOOTPRINT_BYTES (a multiple of 64, >= 4096)\n");
        return 2;
    }
    size_t n = foot / 64, len = (foot + HUGE - 1) / HUGE * HUGE + HUGE;
    char *raw = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    madvise(raw, len, MADV_HUGEPAGE);
    char *b = (char *)(((uintptr_t)raw + HUGE - 1) / HUGE * HUGE);
    size_t *perm = malloc(n * sizeof *perm);
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    shuffle(perm, n);
    for (size_t i = 0; i < n; i++)
        *(void **)(b + perm[i] * 64) = b + perm[(i + 1) % n] * 64;
    void **one = (void **)(b + len - HUGE - 64);
    *one = one;
    static const long spins[] = {0, 25, 50, 100, 200, 400, 800};
    printf("footprint %zu KiB, %zu lines\n", foot >> 10, n);
    printf("%8s %12s %14s %14s\n", "spin", "round ms", "spin ns/hop", "memory ns/hop");
    for (size_t i = 0; i < sizeof spins / sizeof spins[0]; i++) {
        double alone, hop;
        round_ns(one, n, spins[i], &alone);
        double rt = round_ns((void **)(b + perm[0] * 64), n, spins[i], &hop);
        printf("%8ld %12.3f %14.2f %14.2f\n", spins[i], rt / 1e6, alone, hop - alone);
    }
    return 0;
}
