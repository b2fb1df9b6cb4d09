/* llc-once.c: the share of an LLC's lines touched once that are gone, by their age, free of L2:
 * the method of the benchmark tried on branch `once-curve` (its crates/splab/src/calibrate/
 * once.rs; not merged), which follows scripts/llc-reuse.c (docs/validation.md, "gups 128 MiB:
 * the LLC keeps lines that are reused, not lines touched once"; the results: "Lines touched
 * once: an age curve is not the mechanism").
 *
 *   cc -O2 -o /tmp/llc-once scripts/llc-once.c
 *   flock -x /tmp/splab-quiet.lock /tmp/llc-once [REPS [SIZE_MIB [T_MS,T_MS,...]]]     (~20 s)
 *
 * A region of SIZE MiB (8 by default; THP memory) and a 1 GiB eviction buffer. Each round:
 * read the eviction buffer (nothing of the region cached), touch one line of each 4KB page of
 * the region (the page's last line, never sampled: the probe's translations are then warm in
 * every mode), then either nothing ("dram") or one pass of stores over every line of the region
 * in address order ("once"), spin T, and chase K = 16384 lines sampled at random from the
 * region's FIRST half, one random cycle through them. The pass's second half (4 MiB at 8 MiB)
 * has pushed the first half out of L2 (2 MiB), so a sampled line is an LLC hit or a DRAM miss:
 * hop = h * LLC + (1 - h) * DRAM, and the share gone is 1 - h, with DRAM the "dram" round's hop
 * and LLC the latency given as LLC_NS (env; calibrate's LLC plateau). The sampled lines' age
 * at the probe is T plus the time from their store to the probe's start (3/4 of the pass on
 * average: the first half's lines are stored in its first half) plus half the probe.
 * Prints: T_ms mean_age_ms hop_ns (median of REPS) and 1 - h. */
#include "chase-common.h"

#define K 16384
#define EVICT (1UL << 30)

static volatile uint64_t sink;

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    size_t len = (size_t)(argc > 2 ? atoi(argv[2]) : 8) << 20, lines = len / 64;
    const char *e = getenv("LLC_NS");
    double llc = e ? atof(e) : 36.0;
    static double waits[16] = {0, 1, 2, 4, 8, 16, 32};
    int nwaits = 7;
    if (argc > 3) {
        nwaits = 0;
        for (char *t = strtok(argv[3], ","); t && nwaits < 16; t = strtok(NULL, ","))
            waits[nwaits++] = atof(t);
    }
    char *evict = thp_region(EVICT);
    char *r = thp_region(len);
    uint64_t *pick = malloc(K * sizeof *pick);
    char *used = calloc(lines, 1);
    for (int i = 0; i < K; i++) {
        uint64_t l;
        do
            l = rnd() % (lines / 2);
        while (used[l] || l % 64 == 63);
        used[l] = 1;
        pick[i] = l;
    }
    for (int i = 0; i < K; i++)
        *(void **)(r + pick[i] * 64) = r + pick[(i + 1) % K] * 64;
    void *start = r + pick[0] * 64;
    double *v = malloc(reps * sizeof *v), *pass_ns = malloc(reps * sizeof *pass_ns);
    double dram = 0;
    for (int m = -1; m < nwaits; m++) {
        for (int k = 0; k < reps; k++) {
            uint64_t s = 0;
            for (size_t i = 0; i < EVICT; i += 64)
                s += evict[i];
            for (size_t i = 63 * 64; i < len; i += 4096)
                s += r[i];
            sink += s;
            double t0 = now();
            if (m >= 0) {
                for (size_t i = 0; i < lines; i++)
                    r[i * 64 + 8]++;
                double end = now() + waits[m] * 1e6;
                while (now() < end)
                    ;
            }
            double t1 = now();
            void **p = start;
            for (int i = 0; i < K; i++)
                p = *p;
            double t2 = now();
            sink += (uintptr_t)p;
            v[k] = (t2 - t1) / K;
            pass_ns[k] = 0.75 * ((t1 - t0) - (m >= 0 ? waits[m] * 1e6 : 0)) + (t2 - t1) / 2.0;
        }
        qsort(v, reps, sizeof *v, cmpd);
        qsort(pass_ns, reps, sizeof *pass_ns, cmpd);
        double hop = v[reps / 2];
        if (m < 0) {
            dram = hop;
            printf("dram %.1f ns a hop; LLC %.1f\n", dram, llc);
            continue;
        }
        /* the pass's part of the age: its first half's lines were stored 3/4 of it before its end */
        double age = waits[m] * 1e6 + pass_ns[reps / 2];
        double h = (dram - hop) / (dram - llc);
        printf("%5.1f %6.2f %7.1f %6.3f  kept %.2f MiB of the first half\n", waits[m], age / 1e6, hop, 1 - h, h * len / 2 / 1048576.0);
        fflush(stdout);
    }
    return 0;
}
