/* mlp-step.c: calibrate's benchmark 7 (memory-level parallelism) reproduced natively, to find
 * why its K=1 time a miss sits ~13 ns below its K=2 one when mlp-load.c shows no such step.
 * F MiB of nodes (one line each) on MADV_HUGEPAGE memory, linked as calibrate links them
 * (bench::link_word): the arrangement for the i-th K of 1,2,4,8,12,16,24,32 lives in word i of
 * every node's line, its K chains consecutive slices of a node order; timed as calibrate times
 * them (bench::time_chase_many inside bench::Interleaved): P passes of 15 rounds, each round
 * every K once in order, a run = 3 probes of 2048 rounds then one run of about 3 ms, each chain
 * going on from where it stopped; prints each pass's p10 of the 15 runs as ns a miss (K x hop).
 *   layout  pair: one line of each 128-byte pair over 2F, which of the two at random
 *                 (bench::random_lines, calibrate's); all: every line of F (mlp-load.c's)
 *   order   shared: one order for every arrangement (calibrate's: chain 0 of every K starts at
 *                 the same node and walks the same lines); own: each arrangement its own order
 *   cc -O2 -o /tmp/mlp-step scripts/mlp-step.c
 *   seq     up: each round runs K = 1, 2, ..., 32 (calibrate's); down: 32, ..., 1
 *   gap     microseconds slept before each run (default 0)
 *   R       rounds a pass (default 15, calibrate's); the p10 is the (R/10)-th fastest
 *   flock -x /tmp/splab-quiet.lock /tmp/mlp-step 1024 pair shared 3 up 0 15  # F MiB, layout, order, P, seq, gap, R
 * ~40 s to link at 1024, ~10 s a pass. 2026-11-29 05:20-05:23, 1024 MiB, ns a miss at K = 1, 2,
 * 4, 8, 12 (three passes): pair shared 183-184, 191-197, 199-201, 200-202, 209-212; pair own
 * 181-183, 194-195, 196-197, 200-202, 211-212; all shared 177-178, 188-191, 191-192, 194-195,
 * 198-202; pair shared down 185, 196-197, 197-198, 199-201, 209-210 (its first pass, right
 * after linking, left out): the step from K=1 to K=2 with every arrangement and order.
 * 05:40-05:41, pair shared, the slope over K = 2..12 (calibrate's rule) pass by pass: six passes
 * of 15 rounds 1.29, 1.57, 1.48, 1.56, 1.64, 1.99 ns (K=1 9.2-15.4 below the line); four of 45
 * rounds 1.11, 1.65, 1.67, 1.81 (8.4-10.3): three times the rounds do not narrow it, the K=12
 * point itself moves (209-218 ns) with the host's state within a minute.
 * Not part of the build. */
#include "chase-common.h"
#include <unistd.h>
#define NK 8
static const int KS[NK] = {1, 2, 4, 8, 12, 16, 24, 32};
static inline __attribute__((always_inline)) void go(void **s, int k, size_t rounds)
{
    void *p[32];
    for (int i = 0; i < k; i++)
        p[i] = s[i];
    for (size_t h = 0; h < rounds; h++)
        for (int i = 0; i < k; i++) {
            p[i] = *(void **)p[i];
            __asm__ volatile("" : "+r"(p[i]));
        }
    for (int i = 0; i < k; i++)
        s[i] = p[i];
}
/* One specialised loop per K (the compiler unrolls the inner loop and keeps p in registers). */
#define GO(K)                                                                                  \
    static __attribute__((noinline)) void go##K(void **s, size_t r) { go(s, K, r); }
GO(1) GO(2) GO(4) GO(8) GO(12) GO(16) GO(24) GO(32)
static void chase_many(void **s, int k, size_t r)
{
    switch (k) {
    case 1: go1(s, r); break;
    case 2: go2(s, r); break;
    case 4: go4(s, r); break;
    case 8: go8(s, r); break;
    case 12: go12(s, r); break;
    case 16: go16(s, r); break;
    case 24: go24(s, r); break;
    default: go32(s, r); break;
    }
}
/* bench::time_chase_many with reps 1: ns a hop (all chains together). */
static double time_many(void **s, int k, double ms)
{
    double per = 1e18;
    for (int i = 0; i < 3; i++) {
        double t = now();
        chase_many(s, k, 2048);
        double d = (now() - t) / 2048;
        if (d < per)
            per = d;
    }
    size_t rounds = (size_t)(ms * 1e6 / per);
    if (rounds < 1024)
        rounds = 1024;
    for (;;) {
        long a = sw();
        double t = now();
        chase_many(s, k, rounds);
        double d = now() - t;
        if (sw() == a)
            return d / (rounds * k);
    }
}
int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: mlp-step F_MiB pair|all shared|own passes [up|down [gap_us [rounds]]]\n");
        return 2;
    }
    size_t F = strtoul(argv[1], 0, 0) << 20;
    int pair = !strcmp(argv[2], "pair");
    int own = !strcmp(argv[3], "own");
    int passes = atoi(argv[4]);
    int down = argc > 5 && !strcmp(argv[5], "down");
    int gap = argc > 6 ? atoi(argv[6]) : 0;
    int R = argc > 7 ? atoi(argv[7]) : 15;
    size_t span = pair ? 2 * F : F, n = F / 64;
    char *b = thp_region(span);
    size_t *v = malloc(n * 8);
    for (size_t i = 0; i < n; i++)
        v[i] = pair ? i * 128 + 64 * (rnd() & 1) : i * 64;
    shuffle(v, n);
    void *s[NK][32];
    for (int w = 0; w < NK; w++) {
        if (own && w > 0)
            shuffle(v, n);
        int k = KS[w];
        for (int c = 0; c < k; c++) {
            size_t lo = c * n / k, hi = (c + 1) * n / k;
            for (size_t i = lo; i < hi; i++) {
                size_t nx = i + 1 < hi ? i + 1 : lo;
                *(void **)(b + v[i] + 8 * w) = b + v[nx] + 8 * w;
            }
            s[w][c] = b + v[lo] + 8 * w;
        }
    }
    printf("F=%zu MiB %s %s %s gap %d us: ns a miss (K x hop), p10 of %d interleaved rounds\n",
           F >> 20, argv[2], argv[3], down ? "down" : "up", gap, R);
    for (int p = 0; p < passes; p++) {
        double x[NK][R];
        for (int r = 0; r < R; r++)
            for (int j = 0; j < NK; j++) {
                int w = down ? NK - 1 - j : j;
                if (gap)
                    usleep(gap);
                x[w][r] = time_many(s[w], KS[w], 3.0);
            }
        printf("pass %d:", p);
        for (int w = 0; w < NK; w++) {
            qsort(x[w], R, 8, cmpd);
            printf(" K=%d %.1f", KS[w], x[w][R / 10] * KS[w]);
        }
        /* calibrate's rule (loaded_latency_fit): the slope over K = 2, 4, 8, 12. */
        double mx = 6.5, my = 0, sxx = 0, sxy = 0;
        for (int w = 1; w <= 4; w++)
            my += x[w][R / 10] * KS[w] / 4;
        for (int w = 1; w <= 4; w++) {
            sxx += (KS[w] - mx) * KS[w];
            sxy += (KS[w] - mx) * x[w][R / 10] * KS[w];
        }
        printf("  slope K=2..12 %.2f, K=1 %.1f below the line\n", sxy / sxx,
               my + sxy / sxx * (1 - mx) - x[0][R / 10]);
        fflush(stdout);
    }
    return 0;
}
