/* mlp-partner.c: what slows a DRAM chase's hop when a second chain runs beside it. Chain A is
 * calibrate's K=1 chase of benchmark 7 (1 GiB of nodes, one line of each 128-byte pair over
 * 2 GiB of MADV_HUGEPAGE memory, random order: every hop a TLB miss, a nested walk under the
 * host's 4KB pages, and a DRAM miss). Each round of the timed loop is one hop of A and M
 * dependent hops of a partner chain P, independent of A (out of order, P's hops run during A's
 * miss), P one of
 *   none   no partner (A alone: calibrate's K=1)
 *   dram   a second chain like A over other lines (M=1: calibrate's K=2)
 *   walk   one random line of each 4KB page of 16,384 pages (64 MiB): every hop a walk (beyond
 *          the STLB's 2048 entries), its references and data in L1/L2; no miss beyond L2
 *   llc    every line of 4 MiB (1,024 4KB pages, within the STLB) in random order: beyond L2
 *          (2 MiB), served by the LLC, without walks
 *   l1     every line of 16 KiB in random order: L1 hits (the loop's own cost)
 * and each partner is also timed alone, M hops a round. Prints, per pass (partners interleaved,
 * 15 rounds of ~3 ms runs, p10), A's ns a hop with each partner and each partner's ns for M hops
 * alone. If A's hop rises by calibrate's K=1 -> K=2 step with `walk` and not with `llc`, the
 * step is the walks'; with `llc` and not `walk`, the misses' beyond L2.
 *   cc -O2 -o /tmp/mlp-partner scripts/mlp-partner.c
 *   flock -x /tmp/splab-quiet.lock /tmp/mlp-partner 4 3 1024   # M, passes, A's F MiB (1024:
 *                                                              calibrate's); ~40 s to link
 * 2026-11-29 05:24-05:26, three passes each, A's ns a hop: M=4: none 184-186, dram 198-200,
 * walk 206-209, llc 204-207, l1 189-191 (alone: walk 58-63, llc 134-137, l1 5 ns a round);
 * M=1: none 183-185, dram 197-198, walk 202-204, llc 201-202, l1 188-189 (alone: walk 18, llc
 * 30-31, l1 1.4): the lone chase is 13-22 ns faster than with any partner that misses L1, one
 * that takes no miss beyond L2 (walk) included, and the rise hardly depends on the partner's
 * rate. 05:58, F=256 (M=1): none 169-173, dram 173-181, walk 190-191, llc 183-193, l1 177-178:
 * the partners' rise as large, the second DRAM chase's smaller and noisier (mlp-load.c 256 at
 * 05:50-05:58: K=1 163.6-165.3, K=2 166.4-166.6 ns a miss). calibrate leaves K=1 out of the
 * loaded latency's slope (loaded_latency_fit).
 * Not part of the build. */
#include "chase-common.h"
enum { NONE, DRAM, WALK, LLC, L1, NP };
static const char *NAME[NP] = {"none", "dram", "walk", "llc", "l1"};
/* `rounds` rounds of one hop of *a (if a) and m hops of *p (if p). */
static __attribute__((noinline)) void run(void **a, void **p, int m, size_t rounds)
{
    void *x = a ? *a : 0, *y = p ? *p : 0;
    for (size_t r = 0; r < rounds; r++) {
        if (a) {
            x = *(void **)x;
            __asm__ volatile("" : "+r"(x));
        }
        if (p)
            for (int i = 0; i < m; i++) {
                y = *(void **)y;
                __asm__ volatile("" : "+r"(y));
            }
    }
    if (a)
        *a = x;
    if (p)
        *p = y;
}
/* ns a round: 3 probes of 2048 rounds size a run of about 3 ms, timed unswitched. */
static double timed(void **a, void **p, int m)
{
    double per = 1e18;
    for (int i = 0; i < 3; i++) {
        double t = now();
        run(a, p, m, 2048);
        double d = (now() - t) / 2048;
        per = d < per ? d : per;
    }
    size_t rounds = (size_t)(3e6 / per);
    rounds = rounds < 1024 ? 1024 : rounds;
    for (;;) {
        long s = sw();
        double t = now();
        run(a, p, m, rounds);
        double d = now() - t;
        if (sw() == s)
            return d / rounds;
    }
}
static void *cycle(char *b, size_t *o, size_t n)
{
    for (size_t i = 0; i < n; i++)
        *(void **)(b + o[i]) = b + o[(i + 1) % n];
    return b + o[0];
}
int main(int argc, char **argv)
{
    int m = argc > 1 ? atoi(argv[1]) : 4, passes = argc > 2 ? atoi(argv[2]) : 3;
    size_t F = (argc > 3 ? strtoul(argv[3], 0, 0) : 1024) << 20, n = F / 64;
    char *big = thp_region(2 * F);
    size_t *v = malloc(n * 8);
    for (size_t i = 0; i < n; i++)
        v[i] = i * 128 + 64 * (rnd() & 1);
    shuffle(v, n);
    /* A over the first half of the order, the DRAM partner over the second: calibrate's K=2. */
    void *s[NP];
    void *a = cycle(big, v, n / 2);
    s[DRAM] = cycle(big, v + n / 2, n - n / 2);
    size_t wp = 16384;
    char *wb = thp_region(wp * PAGE);
    for (size_t i = 0; i < wp; i++)
        v[i] = i * PAGE + (rnd() % 64) * 64;
    shuffle(v, wp);
    s[WALK] = cycle(wb, v, wp);
    size_t ln = (4UL << 20) / 64;
    char *lb = thp_region(4UL << 20);
    for (size_t i = 0; i < ln; i++)
        v[i] = i * 64;
    shuffle(v, ln);
    s[LLC] = cycle(lb, v, ln);
    size_t l1n = 256;
    char *l1b = thp_region(HUGE);
    for (size_t i = 0; i < l1n; i++)
        v[i] = i * 64;
    shuffle(v, l1n);
    s[L1] = cycle(l1b, v, l1n);
    printf("F=%zu MiB M=%d: A's ns a hop with each partner (p10 of 15 interleaved rounds); partner alone, "
           "ns a round of M hops\n", F >> 20, m);
    for (int pass = 0; pass < passes; pass++) {
        double with[NP][15], alone[NP][15];
        for (int r = 0; r < 15; r++)
            for (int q = 0; q < NP; q++) {
                int mm = q == DRAM ? 1 : m;
                with[q][r] = timed(&a, q == NONE ? 0 : &s[q], mm);
                alone[q][r] = q == NONE ? 0 : timed(0, &s[q], mm);
            }
        printf("pass %d: A with", pass);
        for (int q = 0; q < NP; q++) {
            qsort(with[q], 15, 8, cmpd);
            printf(" %s %.1f", NAME[q], with[q][1]);
        }
        printf(" | alone");
        for (int q = 1; q < NP; q++) {
            qsort(alone[q], 15, 8, cmpd);
            printf(" %s %.1f", NAME[q], alone[q][1]);
        }
        printf("\n");
        fflush(stdout);
    }
    sinkp = a;
    return 0;
}
