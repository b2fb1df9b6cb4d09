/* Shared helpers of smalloc's C tests: what /proc/self/smaps says about the VMA holding a
 * pointer, and a CHECK that names the failed condition and line and exits 1. */
#ifndef SMALLOC_TEST_CHECK_H
#define SMALLOC_TEST_CHECK_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                           \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);        \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

struct vma {
    uintptr_t start, end;
    int hg, nh, ht;     /* VmFlags: MADV_HUGEPAGE, MADV_NOHUGEPAGE, hugetlb */
    int thp_eligible;   /* THPeligible: 1 */
    int found;
};

/* The VMA of /proc/self/smaps that contains p. */
static inline struct vma vma_of(const void *p)
{
    struct vma v = {0};
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    int in = 0;
    if (!f) {
        perror("/proc/self/smaps");
        exit(1);
    }
    while (fgets(line, sizeof line, f)) {
        uintptr_t s, e;
        char c;
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR "%c", &s, &e, &c) == 3 && c == ' ') {
            if (in)
                break;
            in = (uintptr_t)p >= s && (uintptr_t)p < e;
            if (in) {
                v.start = s;
                v.end = e;
                v.found = 1;
            }
            continue;
        }
        if (!in)
            continue;
        if (strncmp(line, "THPeligible:", 12) == 0)
            v.thp_eligible = atoi(line + 12) == 1;
        if (strncmp(line, "VmFlags:", 8) == 0) {
            v.hg = strstr(line, " hg") != NULL;
            v.nh = strstr(line, " nh") != NULL;
            v.ht = strstr(line, " ht") != NULL;
        }
    }
    fclose(f);
    return v;
}

#define SP ((uintptr_t)2 << 20)

/* p lies in a superpage-heap region: a 2MB-aligned VMA madvised MADV_HUGEPAGE and eligible for
 * THP, or a MAP_HUGETLB one (SMALLOC_HUGETLB=1 where the kernel has a pool). */
static inline int in_superpage_vma(const void *p)
{
    struct vma v = vma_of(p);
    return v.found && v.start % SP == 0 && ((v.hg && v.thp_eligible && !v.nh) || v.ht);
}

/* p lies in a base-heap region: madvised MADV_NOHUGEPAGE. */
static inline int in_base_vma(const void *p)
{
    struct vma v = vma_of(p);
    return v.found && v.nh && !v.hg && !v.ht;
}

static inline void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 31 + seed);
}

static inline int filled(const unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(i * 31 + seed))
            return 0;
    return 1;
}

static inline int all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

#endif
