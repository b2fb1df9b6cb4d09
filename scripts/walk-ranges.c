/* walk-ranges.c: validate's "walks: 8 chases, 1 line per 4KB page, 65536 pages" row natively,
 * with the region's guest-physical frames on a chosen number R of 2MB ranges, the virtual layout
 * unchanged (one 256 MiB window, 4KB page-table entries). The frames come from a THP pool of R
 * 2MB pages split into 4KB entries (an mprotect of each 2MB page's first 4KB, as
 * `Region::split_to_ptes`); each pool page gives a run of 65536/R contiguous frames (at a random
 * offset in it) that mremap moves into the window in order, so window page i lies on range
 * i / (65536/R). R = 0: a fresh MADV_NOHUGEPAGE window faulted in (the validate row as it is).
 * Prints the window's 2MB ranges (from /proc/self/pagemap, root only) and the p10 and median of
 * 15 timed rounds, ns per hop (all chains together); with a file name, writes the window's
 * frames (one pfn a line, window order) there, for the model (examples/walk_chase.rs,
 * mode frames=FILE).
 *   cc -O2 -o /tmp/walk-ranges scripts/walk-ranges.c
 *   flock -x /tmp/splab-quiet.lock /tmp/walk-ranges 128 /tmp/walkrow/f128.txt   # R in 0, 128 .. 4096
 *   flock -x /tmp/splab-quiet.lock /tmp/walk-ranges 128 /tmp/walkrow/f128s8.txt 8   # groups of 8 shuffled
 * Not part of the build. */
#include "chase-common.h"
#include <fcntl.h>
#include <unistd.h>

#define N 65536UL

static uint64_t pfn_of(int fd, void *va)
{
    uint64_t e = 0;
    if (pread(fd, &e, 8, ((uintptr_t)va / PAGE) * 8) != 8)
        return 0;
    return (e >> 63) ? (e & ((1ULL << 55) - 1)) : 0;
}

/* p10 of 7 timed passes of a 512-hop cycle through the lines at b + o[0..512), cycles at the
 * clock `ghz`: one line of each 4KB page of a 2MB range, all in L1D (32 KiB), so a hop costs
 * L1's latency plus its translation's: an L1 DTLB hit if the 2MB range is one TLB entry, an
 * STLB lookup if it is 512 4KB entries (96 in the L1 DTLB). */
static double range_hop(char *b, const size_t *o)
{
    for (size_t i = 0; i < 512; i++)
        *(void **)(b + o[i]) = b + o[(i + 1) % 512];
    void *p = chase(b + o[0], 4096);
    double s[7];
    for (int k = 0; k < 7; k++) {
        double t = now();
        p = chase(p, 512 * 64);
        s[k] = (now() - t) / (512 * 64);
    }
    sinkp = p;
    qsort(s, 7, sizeof s[0], cmpd);
    return s[0];
}

static int cmpu(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    long r = argc > 1 ? atol(argv[1]) : 0;
    const char *out = argc > 2 ? argv[2] : 0;
    if (r < 0 || (r > 0 && (r < 128 || r > 8192 || N % r))) {
        fprintf(stderr, "usage: walk-ranges R [FRAMES_FILE [G]] (R = 0 or 128..8192 dividing 65536)\n");
        return 2;
    }
    size_t len = N * PAGE;
    char *raw = mmap(0, len + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    char *w = (char *)(((uintptr_t)raw + HUGE - 1) / HUGE * HUGE);
    if (r == 0) {
        madvise(w, len, MADV_NOHUGEPAGE);
        for (size_t o = 0; o < len; o += PAGE)
            w[o] = 1;
    } else {
        size_t plen = (size_t)r * HUGE;
        char *praw = mmap(0, plen + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (praw == MAP_FAILED) {
            perror("mmap pool");
            return 1;
        }
        char *pool = (char *)(((uintptr_t)praw + HUGE - 1) / HUGE * HUGE);
        madvise(pool, plen, MADV_HUGEPAGE);
        for (size_t o = 0; o < plen; o += PAGE)
            pool[o] = 1;
        /* Before the split: each pool page's translation, one 2MB TLB entry (the host backs the
         * range with a 2MB page too) or 512 4KB entries (the host's pages are 4KB: a TLB entry
         * maps the smaller of the guest's and the host's page, SDM vol. 3C 28.3.1, combined
         * translations). References: the same chase over 8 4KB pages (32 KiB of lines: L1 DTLB
         * hits) and over a NOHUGEPAGE 2MB range (512 4KB entries: L1 DTLB misses). */
        size_t o512[512];
        for (size_t i = 0; i < 512; i++)
            o512[i] = i * PAGE + ((i * 7) % 64) * 64;
        size_t oref[512];
        for (size_t i = 0; i < 512; i++)
            oref[i] = (i % 8) * PAGE + (i / 8) * 64;
        char *r4 = mmap(0, 2 * HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        char *b4 = (char *)(((uintptr_t)r4 + HUGE - 1) / HUGE * HUGE);
        madvise(b4, HUGE, MADV_NOHUGEPAGE);
        for (size_t o = 0; o < HUGE; o += PAGE)
            b4[o] = 1;
        double hit = range_hop(pool, oref), miss = range_hop(b4, o512);
        long big = 0;
        double lo = 1e9, hi = 0;
        for (long j = 0; j < r; j++) {
            double h = range_hop(pool + j * HUGE, o512);
            big += h < (hit + miss) / 2;
            lo = h < lo ? h : lo;
            hi = h > hi ? h : hi;
        }
        printf("R=%ld pool: %ld of %ld 2MB pages one TLB entry (hop %.2f-%.2f ns; L1 DTLB hit %.2f, "
               "4KB entries %.2f)\n", r, big, r, lo, hi, hit, miss);
        for (size_t o = 0; o < plen; o += HUGE) { /* split each PMD into 4KB entries */
            mprotect(pool + o, PAGE, PROT_READ);
            mprotect(pool + o, PAGE, PROT_READ | PROT_WRITE);
        }
        size_t per = N / r, slots = HUGE / PAGE;
        /* With G > 0 ("shuffle G"): the same frames, moved in groups of G pages (G a power of
         * two, at least 8: one host leaf line's worth) to shuffled places in the window, so a
         * group's neighbours in the window are not its neighbours in guest-physical memory. */
        size_t grp = per;
        if (argc > 3 && (grp = strtoul(argv[3], 0, 10)) < 8)
            grp = 8;
        if (grp > per)
            grp = per;
        size_t ng = N / grp, *gs = malloc(ng * sizeof *gs), *gd = malloc(ng * sizeof *gd);
        for (long j = 0, g = 0; j < r; j++) {
            size_t s = per < slots ? rnd() % (slots - per + 1) : 0;
            for (size_t q = 0; q < per; q += grp)
                gs[g++] = j * (HUGE / PAGE) + s + q;
        }
        for (size_t g = 0; g < ng; g++)
            gd[g] = g * grp;
        if (grp < per)
            shuffle(gd, ng);
        for (size_t g = 0; g < ng; g++) {
            void *d = mremap(pool + gs[g] * PAGE, grp * PAGE, grp * PAGE,
                             MREMAP_MAYMOVE | MREMAP_FIXED, w + gd[g] * PAGE);
            if (d == MAP_FAILED) {
                perror("mremap");
                return 1;
            }
        }
        madvise(w, len, MADV_NOHUGEPAGE); /* no collapse back into 2MB pages */
    }
    /* The window's frames and their 2MB ranges. */
    int fd = open("/proc/self/pagemap", O_RDONLY);
    uint64_t *f = malloc(N * 8), *g = malloc(N * 8);
    size_t ranges = 0, absent = 0;
    for (size_t i = 0; i < N; i++) {
        f[i] = fd >= 0 ? pfn_of(fd, w + i * PAGE) : 0;
        absent += f[i] == 0;
        g[i] = f[i] >> 9;
    }
    qsort(g, N, 8, cmpu);
    for (size_t i = 0; i < N; i++)
        ranges += i == 0 || g[i] != g[i - 1];
    if (out && absent == 0) {
        FILE *o = fopen(out, "w");
        for (size_t i = 0; o && i < N; i++)
            fprintf(o, "%llu\n", (unsigned long long)f[i]);
        if (o)
            fclose(o);
    }
    /* validate's chase: pages in random order, a random line of each, 8 chains. */
    int k = 8;
    size_t *perm = malloc(N * sizeof *perm);
    char **addr = malloc(N * sizeof *addr);
    for (size_t i = 0; i < N; i++)
        perm[i] = i;
    shuffle(perm, N);
    for (size_t i = 0; i < N; i++)
        addr[i] = w + perm[i] * PAGE + (rnd() % 64) * 64;
    size_t per = N / k;
    void *p[8];
    for (int c = 0; c < k; c++) {
        for (size_t j = 0; j < per; j++)
            *(void **)addr[c * per + j] = addr[c * per + (j + 1) % per];
        p[c] = addr[c * per];
    }
    double t[15];
    for (int q = 0; q < 16; q++) {
        double t0 = now();
        for (size_t h = 0; h < per; h++)
            for (int c = 0; c < k; c++)
                p[c] = *(void **)p[c];
        if (q > 0) /* the first round warms up */
            t[q - 1] = (now() - t0) / (double)(per * k);
    }
    for (int c = 0; c < k; c++)
        sinkp = p[c];
    qsort(t, 15, sizeof t[0], cmpd);
    printf("R=%ld: frames on %zu 2MB ranges (%zu absent); p10 %.2f ns/hop, median %.2f\n", r,
           ranges, absent, t[1], t[7]);
    return 0;
}
