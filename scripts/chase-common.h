/* chase-common.h: what the native chase experiments of scripts/ share (host-page-probe.c,
 * l2-latency-pages.c, thp-tlb-reach.c, walk-isolation.c, walk-chains.c): a xorshift generator,
 * a monotonic clock in ns, this thread's context switches (a run that was switched is not a
 * measurement of the machine), a dependent chase, a comparison for qsort, a shuffle and a timed
 * cycle (`chase_p10_cycles`), an add chain's ns per add (`add_ns`, the clock of a round), and a
 * touched, 2MB-aligned MADV_HUGEPAGE region (`thp_region`, the mlp-*.c probes'); stream-lines.c
 * uses its clock; l2-interleaved.c, pair-knee.c and the llc-*.c probes use the rest.
 * Not part of the build. */
#ifndef CHASE_COMMON_H
#define CHASE_COMMON_H
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#define PAGE 4096UL
#define HUGE (2UL << 20)

static uint64_t rng = 88172645463325252ULL;
__attribute__((unused)) static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
/* `len` bytes of anonymous memory, 2MB-aligned, advised MADV_HUGEPAGE and touched (so THP
 * faults happen here, not in the timed loops). */
__attribute__((unused)) static char *thp_region(size_t len)
{
    char *a = mmap(0, len + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *b = (char *)(((uintptr_t)a + HUGE - 1) & ~(HUGE - 1));
    madvise(b, len, MADV_HUGEPAGE);
    memset(b, 1, len);
    return b;
}
__attribute__((unused)) static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}
__attribute__((unused)) static long sw(void)
{
    struct rusage r;
    getrusage(RUSAGE_THREAD, &r);
    return r.ru_nvcsw + r.ru_nivcsw;
}
/* The empty asm makes each hop opaque to the compiler, so a chase whose end is never read (a
 * warm-up, or a timed run whose result only feeds the next) is not dropped as a pure call. */
__attribute__((unused, noinline)) static void *chase(void *p, size_t hops)
{
    for (size_t i = 0; i < hops; i++) {
        p = *(void **)p;
        __asm__ volatile("" : "+r"(p));
    }
    return p;
}
__attribute__((unused)) static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
__attribute__((unused)) static void *volatile sinkp;
__attribute__((unused)) static void shuffle(size_t *v, size_t n)
{
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = rnd() % (i + 1), t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}
/* ns per add of a chain of `n` x 8 dependent register adds (one cycle each): the clock of the
 * moment it runs. */
__attribute__((unused)) static double add_ns(uint64_t n)
{
    uint64_t x = 1;
    double t = now();
    for (uint64_t i = 0; i < n; i++)
        __asm__ volatile("add %0,%0\n add %0,%0\n add %0,%0\n add %0,%0\n"
                         "add %0,%0\n add %0,%0\n add %0,%0\n add %0,%0"
                         : "+r"(x));
    return (now() - t) / (n * 8.0);
}
/* Links the nodes at base + o[0..n) into one cycle in that order, chases it `warm` hops, then
 * times 31 chases of `hops` hops that were not context-switched; returns the 4th fastest
 * (about the 10th percentile) in cycles per hop at 2.994 GHz, the clock of the Intel guest
 * these experiments were run on. */
__attribute__((unused)) static double chase_p10_cycles(char *base, const size_t *o, size_t n,
                                                       size_t warm, size_t hops)
{
    for (size_t i = 0; i < n; i++)
        *(void **)(base + o[i]) = base + o[(i + 1) % n];
    void *p = chase(base + o[0], warm);
    double s[31];
    int k = 0;
    while (k < 31) {
        long a = sw();
        double t = now();
        p = chase(p, hops);
        double d = now() - t;
        if (sw() == a)
            s[k++] = d / hops;
    }
    sinkp = p;
    qsort(s, k, sizeof s[0], cmpd);
    return s[3] * 2.994;
}
#endif
