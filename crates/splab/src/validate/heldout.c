/* heldout.c: the held-out programs of `splab validate` (docs/validation.md). Calibration never
 * ran them. One program, three kernels:
 *
 *   heldout tree SIZE 4k|2m   a balanced binary search tree of SIZE/64 64-byte nodes, placed at
 *                             scattered slots, then random lookups (a pointer structure)
 *   heldout seq  SIZE 4k|2m   a sequential scan (sum) of SIZE bytes, repeated
 *   heldout gups SIZE 4k|2m   random read-modify-write updates of a SIZE-byte table
 *
 * The data lives in one anonymous mapping, 2MB-aligned, given MADV_NOHUGEPAGE (4k) or
 * MADV_HUGEPAGE (2m) before it is touched; every page is first touched by a write (so that no
 * read maps the shared zero page). WORK scales the kernel (1 = the default amount).
 *
 * Output (one line, stdout), after the timed part:
 *   heldout ns=N setup_ns=N kernel_ns=N switches=N region_kb=N anon_huge_kb=N check=N
 * ns is from main's entry to the kernel's end (what `splab validate` compares with the replay
 * of the whole recorded program); switches counts the context switches (voluntary and
 * involuntary) in that time: a run that was preempted is not a measurement of the machine;
 * anon_huge_kb is what /proc/self/smaps says the region's
 * mapping holds in transparent huge pages after the kernel: what the kernel granted. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#define HUGE (2UL << 20)

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static inline uint64_t next(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1DULL;
}

/* AnonHugePages (kB) of the mapping of /proc/self/smaps that holds addr. */
static long anon_huge_kb(void *addr)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    int inside = 0;
    long kb = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            inside = a <= (unsigned long)addr && (unsigned long)addr < b;
            continue;
        }
        if (inside && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
            break;
    }
    fclose(f);
    return kb;
}

struct node {
    uint64_t key;
    struct node *left, *right;
    uint64_t pad[5]; /* 64 bytes: one line per node */
};

static struct node *nodes;
static uint64_t slots_mask;

/* Node i's slot: an odd multiplier modulo a power of two is a permutation; it scatters
 * neighbouring keys over the region (no two tree neighbours share a page beyond the top). */
static inline struct node *slot(uint64_t i)
{
    return &nodes[(i * 0x9E3779B97F4A7C15ULL + 0x5851F42D4C957F2DULL) & slots_mask];
}

static struct node *build(uint64_t lo, uint64_t hi) /* keys [lo, hi) */
{
    if (lo >= hi)
        return NULL;
    uint64_t mid = lo + (hi - lo) / 2;
    struct node *n = slot(mid);
    n->key = mid;
    n->left = build(lo, mid);
    n->right = build(mid + 1, hi);
    return n;
}

static long switches(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_nvcsw + u.ru_nivcsw;
}

int main(int argc, char **argv)
{
    long s0 = switches();
    uint64_t t0 = now_ns();
    if (argc < 4) {
        fprintf(stderr, "usage: heldout tree|seq|gups SIZE 4k|2m [WORK]\n");
        return 2;
    }
    const char *kind = argv[1];
    uint64_t size = strtoull(argv[2], NULL, 0);
    int huge = strcmp(argv[3], "2m") == 0;
    double work = argc > 4 ? atof(argv[4]) : 1.0;
    if (size < 4096 || (size & (size - 1)) || work <= 0) {
        fprintf(stderr, "heldout: SIZE must be a power of two >= 4096, WORK > 0\n");
        return 2;
    }
    size_t len = (size < HUGE ? HUGE : size) + HUGE; /* a whole 2MB extent even when SIZE is smaller */
    char *raw = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        perror("heldout: mmap");
        return 1;
    }
    if (madvise(raw, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) != 0) {
        perror("heldout: madvise");
        return 1;
    }
    char *base = (char *)(((uintptr_t)raw + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
    uint64_t check = 0;
    uint64_t t1, t2;

    if (strcmp(kind, "tree") == 0) {
        uint64_t n = size / sizeof(struct node);
        nodes = (struct node *)base;
        slots_mask = n - 1;
        struct node *root = build(0, n);
        uint64_t lookups = (uint64_t)(262144 * work);
        t1 = now_ns();
        for (uint64_t i = 0; i < lookups; i++) {
            uint64_t k = next() & slots_mask;
            struct node *p = root;
            while (p && p->key != k)
                p = k < p->key ? p->left : p->right;
            check += p ? p->pad[0] + 1 : 0;
        }
    } else if (strcmp(kind, "seq") == 0) {
        uint64_t *a = (uint64_t *)base;
        uint64_t words = size / 8;
        for (uint64_t i = 0; i < words; i += 8) /* one write per line */
            a[i] = i;
        uint64_t passes = (uint64_t)((128ULL << 20) / size * work);
        if (passes < 1)
            passes = 1;
        t1 = now_ns();
        for (uint64_t p = 0; p < passes; p++) {
            uint64_t s = 0;
            for (uint64_t i = 0; i < words; i++)
                s += a[i];
            check += s;
        }
    } else if (strcmp(kind, "gups") == 0) {
        uint64_t *t = (uint64_t *)base;
        uint64_t words = size / 8;
        for (uint64_t i = 0; i < words; i += 8) /* one write per line */
            t[i] = i;
        uint64_t updates = (uint64_t)(4194304 * work);
        t1 = now_ns();
        for (uint64_t i = 0; i < updates; i++) {
            uint64_t r = next();
            t[r & (words - 1)] ^= r;
        }
        check = t[0];
    } else {
        fprintf(stderr, "heldout: unknown kind '%s' (tree, seq, gups)\n", kind);
        return 2;
    }
    t2 = now_ns();
    long s1 = switches();
    printf("heldout ns=%llu setup_ns=%llu kernel_ns=%llu switches=%ld region_kb=%llu anon_huge_kb=%ld "
           "check=%llu\n",
           (unsigned long long)(t2 - t0), (unsigned long long)(t1 - t0),
           (unsigned long long)(t2 - t1), s1 - s0, (unsigned long long)(size >> 10), anon_huge_kb(base),
           (unsigned long long)check);
    return 0;
}
