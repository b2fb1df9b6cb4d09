/* lifetime-warmup.c: what does the line-lifetime benchmark's round read, and after how many
 * rounds? (docs/calibrate.md, "The spin-free round"). The chase of llc_lifetime
 * (crates/splab/src/calibrate/measure.rs): FOOT bytes of lines, one of each 128 B pair over
 * 2*FOOT bytes of THP memory, one random cycle, a spin of SPIN dependent steps after every hop
 * whose result is and-ed with 0 into the next address. Per repeat: optionally PRE_US of a spin
 * on one line (the chase's lines grow old, as after calibrate's 24 ms rounds), WARM0 spin-free
 * rounds (a warm start), then ROUNDS rounds at SPIN, each printed as its ns a hop less the
 * one-line chase's with the same spin (plus the spin-free one's), and its wall time.
 *   cc -O2 -o /tmp/lifetime-warmup scripts/lifetime-warmup.c
 *   /tmp/lifetime-warmup FOOT SPIN ROUNDS PRE_US REPEATS WARM0
 *   /tmp/lifetime-warmup 524288 0 8 30000 5 0     # spin-free rounds after a 30 ms idle
 *   /tmp/lifetime-warmup 524288 300 12 0 2 10     # ~2.5 ms rounds after a warm start
 * Not part of the build. */
#include "chase-common.h"
#include <unistd.h>
static inline void *chase_spin(void *p, size_t hops, long spin)
{
    for (size_t h = 0; h < hops; h++) {
        p = *(void **)p;
        uintptr_t x = (uintptr_t)p;
        for (long s = spin; s > 0; s--) {
            x = x * 3 + 1;
            __asm__ volatile("" : "+r"(x));
        }
        uintptr_t a = (uintptr_t)p;
        __asm__ volatile("and $0, %1\n\tadd %1, %0" : "+r"(a), "+r"(x));
        p = (void *)a;
    }
    return p;
}
static void *P;
static double round1(size_t hops, long spin, double *wall)
{
    struct timespec c0, c1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    double t = now();
    P = chase_spin(P, hops, spin);
    *wall = now() - t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    return ((c1.tv_sec - c0.tv_sec) * 1e9 + (c1.tv_nsec - c0.tv_nsec)) / hops;
}
int main(int argc, char **argv)
{
    size_t foot = argc > 1 ? strtoul(argv[1], 0, 10) : 512 << 10; /* bytes of lines */
    long spin = argc > 2 ? atol(argv[2]) : 0;
    int nr = argc > 3 ? atoi(argv[3]) : 8;
    long pre = argc > 4 ? atol(argv[4]) : 0; /* us of idle spin on one line before (cold) */
    int reps = argc > 5 ? atoi(argv[5]) : 5;
    int warm0 = argc > 6 ? atoi(argv[6]) : 0; /* spin-free rounds before each rep */
    size_t span = 2 * foot, n = span / 128, len = span + 2 * HUGE;
    char *raw = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    madvise(raw, len, MADV_HUGEPAGE);
    char *b = (char *)(((uintptr_t)raw + HUGE - 1) / HUGE * HUGE);
    memset(b, 1, span + 4096);
    size_t *o = malloc(n * sizeof *o);
    for (size_t i = 0; i < n; i++)
        o[i] = i * 128 + 64 * (rnd() & 1);
    shuffle(o, n);
    for (size_t i = 0; i < n; i++)
        *(void **)(b + o[i]) = b + o[(i + 1) % n];
    void **one = (void **)(b + span);
    *one = one;
    P = b + o[0];
    printf("foot %zu KiB lines %zu spin %ld pre %ld us\n", foot >> 10, n, spin, pre);
    for (int r = 0; r < reps; r++) {
        if (pre) {
            double t = now();
            void *q = one;
            while (now() - t < pre * 1e3)
                q = chase_spin(q, 1000, 0);
            sinkp = q;
        }
        for (int w = 0; w < warm0; w++) {
            double x;
            round1(n, 0, &x);
        }
        printf("rep %d:", r);
        for (int i = 0; i < nr; i++) {
            void *keep = P;
            P = one;
            /* About 0.2 ms of one-line chase, as llc_lifetime's: a spin step took ~0.65 ns
             * here (spin 300: ~200 ns a hop on the AMD guest, 2026-11-28 00:48). */
            size_t ah = (size_t)(2e5 / (2.0 + spin * 0.65));
            if (ah < 64) ah = 64;
            if (ah > n) ah = n;
            double x, a = round1(ah, spin, &x), a0 = round1(ah, 0, &x);
            P = keep;
            double w, h = round1(n, spin, &w);
            printf(" %.1f(%.2fms)", h - a + a0, w / 1e6);
        }
        printf("\n");
    }
    return 0;
}
