/* chase-common.h: what the native chase experiments of scripts/ share (host-page-probe.c,
 * l2-latency-pages.c, thp-tlb-reach.c, walk-isolation.c): a xorshift generator, a monotonic
 * clock in ns, this thread's context switches (a run that was switched is not a measurement of
 * the machine), a dependent chase and a comparison for qsort; stream-lines.c uses its clock.
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
__attribute__((unused, noinline)) static void *chase(void *p, size_t hops)
{
    for (size_t i = 0; i < hops; i++)
        p = *(void **)p;
    return p;
}
__attribute__((unused)) static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
__attribute__((unused)) static void *volatile sinkp;
#endif
