/* onemib-alternate.c: are the held-out 1 MiB kernels slower on a THP than on 4KB pages, on the
 * same machine at the same moment? (docs/validation.md, "The 1 MiB rows".) Not part of the build.
 *
 *   cc -O2 -fno-tree-vectorize -o /tmp/onemib-alternate scripts/onemib-alternate.c
 *   flock -x /tmp/splab-quiet.lock /tmp/onemib-alternate seq|gups [ROUNDS]
 *
 * One process maps two 1 MiB buffers the way heldout.c does (a 2MB-aligned region, first touched
 * by one write a line): A with MADV_HUGEPAGE (one THP), B with MADV_NOHUGEPAGE (256 4KB pages).
 * Then ROUNDS (default 2000) rounds each time one block of heldout.c's kernel on A and one on B,
 * in alternating order: `seq` 8 passes summing the buffer (heldout seq's inner loop), `gups`
 * 65536 xorshift updates (heldout gups's loop). A block is 0.3-1 ms, so A's and B's blocks of a
 * round see the same state of the machine (the other tenants, the other vCPU).
 *
 * Prints: AnonHugePages of A and B; the guest-physical frames of A and B (root: pagemap) as the
 * number of distinct 4KB page colours of the L2 (512 KiB, 8 ways: 16 colours) and the most pages
 * on one colour; each buffer's block times (p10, p50, p90, ns, rounds with a context switch left
 * out); the per-round ratio B/A (4KB time over THP time) p10/p50/p90; and the blocks' time series
 * as runs of "fast" and "slow" (a block slower than 1.5 x the p10 of its buffer), with the number
 * and median length of the slow runs in ms, which is the time scale of the machine's phases. */
/* The held-out program itself, for its clock, its generator (`next`, the one heldout gups
 * draws with), `switches` and `anon_huge_kb`: this script runs heldout.c's own code. */
#define main heldout_main
#include "../crates/splab/src/validate/heldout.c"
#undef main
#include <fcntl.h>
#include <unistd.h>

#define SIZE (1UL << 20)

static uint64_t *region(int huge)
{
    size_t len = HUGE + HUGE;
    char *raw = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED || madvise(raw, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE)) {
        perror("mmap/madvise");
        exit(1);
    }
    uint64_t *a = (uint64_t *)(((uintptr_t)raw + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
    for (uint64_t i = 0; i < SIZE / 8; i += 8)
        a[i] = i;
    return a;
}

/* Distinct L2 colours (guest-physical page number mod 16) of the buffer's 256 pages, and the
 * most pages on one colour; -1 without pagemap's frame numbers (not root). */
static void colours(const char *name, uint64_t *a)
{
    int fd = open("/proc/self/pagemap", O_RDONLY);
    int count[16] = {0}, distinct = 0, most = 0;
    uint64_t first = 0;
    for (uint64_t p = 0; p < SIZE / 4096; p++) {
        uint64_t e = 0;
        if (fd < 0 || pread(fd, &e, 8, ((uintptr_t)a / 4096 + p) * 8) != 8 || !(e & (1ULL << 63)) ||
            !(e & ((1ULL << 55) - 1))) {
            printf("%s: no frame numbers (pagemap needs root)\n", name);
            if (fd >= 0)
                close(fd);
            return;
        }
        uint64_t pfn = e & ((1ULL << 55) - 1);
        if (p == 0)
            first = pfn;
        count[pfn % 16]++;
    }
    close(fd);
    for (int c = 0; c < 16; c++) {
        distinct += count[c] > 0;
        most = count[c] > most ? count[c] : most;
    }
    printf("%s: first frame 0x%llx, %d of 16 L2 colours, at most %d pages on one (8 ways: %d fit)\n",
           name, (unsigned long long)first, distinct, most, 8);
}

static uint64_t sink;

__attribute__((noinline)) static void seq_block(uint64_t *a)
{
    uint64_t check = 0;
    for (int p = 0; p < 8; p++) {
        uint64_t s = 0;
        for (uint64_t i = 0; i < SIZE / 8; i++)
            s += a[i];
        check += s;
    }
    sink += check;
}

__attribute__((noinline)) static void gups_block(uint64_t *t)
{
    for (int i = 0; i < 65536; i++) {
        uint64_t r = next();
        t[r & (SIZE / 8 - 1)] ^= r;
    }
}

static int cmpu(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}
static int cmpd(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static uint64_t pctu(uint64_t *v, int n, double p)
{
    return v[(int)(p * (n - 1) + 0.5)];
}

int main(int argc, char **argv)
{
    int gups = argc > 1 && !strcmp(argv[1], "gups");
    int rounds = argc > 2 ? atoi(argv[2]) : 2000;
    void (*block)(uint64_t *) = gups ? gups_block : seq_block;
    uint64_t *a = region(1), *b = region(0);
    printf("%s, %d rounds; AnonHugePages A (MADV_HUGEPAGE) %ld kB, B (MADV_NOHUGEPAGE) %ld kB\n",
           gups ? "gups" : "seq", rounds, anon_huge_kb(a), anon_huge_kb(b));
    colours("A (THP)", a);
    colours("B (4KB)", b);
    uint64_t *ta = calloc(rounds, 8), *tb = calloc(rounds, 8), *start = calloc(rounds, 8);
    char *dirty = calloc(rounds, 1);
    block(a);
    block(b);
    uint64_t t0 = now_ns();
    for (int r = 0; r < rounds; r++) {
        long s = switches();
        uint64_t *first = r & 1 ? b : a, *second = r & 1 ? a : b;
        uint64_t x0 = now_ns();
        block(first);
        uint64_t x1 = now_ns();
        block(second);
        uint64_t x2 = now_ns();
        start[r] = x0 - t0;
        ta[r] = r & 1 ? x2 - x1 : x1 - x0;
        tb[r] = r & 1 ? x1 - x0 : x2 - x1;
        dirty[r] = switches() != s;
    }
    int n = 0, nd = 0;
    uint64_t *ca = calloc(rounds, 8), *cb = calloc(rounds, 8);
    double *ratio = calloc(rounds, sizeof(double));
    for (int r = 0; r < rounds; r++) {
        if (dirty[r]) {
            nd++;
            continue;
        }
        ca[n] = ta[r];
        cb[n] = tb[r];
        ratio[n] = (double)tb[r] / ta[r];
        n++;
    }
    qsort(ca, n, 8, cmpu);
    qsort(cb, n, 8, cmpu);
    qsort(ratio, n, sizeof(double), cmpd);
    printf("rounds kept %d (%d with a context switch left out), %.1f ms in all\n", n, nd,
           (now_ns() - t0) / 1e6);
    printf("A (THP) block ns: p10 %llu p50 %llu p90 %llu\n", (unsigned long long)pctu(ca, n, .1),
           (unsigned long long)pctu(ca, n, .5), (unsigned long long)pctu(ca, n, .9));
    printf("B (4KB) block ns: p10 %llu p50 %llu p90 %llu\n", (unsigned long long)pctu(cb, n, .1),
           (unsigned long long)pctu(cb, n, .5), (unsigned long long)pctu(cb, n, .9));
    printf("B/A per round: p10 %.3f p25 %.3f p50 %.3f p75 %.3f p90 %.3f\n", ratio[(int)(.1 * (n - 1) + .5)],
           ratio[(int)(.25 * (n - 1) + .5)], ratio[(int)(.5 * (n - 1) + .5)],
           ratio[(int)(.75 * (n - 1) + .5)], ratio[(int)(.9 * (n - 1) + .5)]);
    /* Phases: a round is slow when both of its blocks exceed 1.5 x their buffer's p10. */
    uint64_t la = pctu(ca, n, .1) * 3 / 2, lb = pctu(cb, n, .1) * 3 / 2;
    int slow_rounds = 0, runs = 0, only_a = 0, only_b = 0;
    double *len = calloc(rounds, sizeof(double));
    int in = 0;
    uint64_t since = 0;
    for (int r = 0; r < rounds; r++) {
        int sa = ta[r] > la, sb = tb[r] > lb, slow = sa && sb;
        only_a += sa && !sb;
        only_b += sb && !sa;
        slow_rounds += slow;
        if (slow && !in) {
            in = 1;
            since = start[r];
        } else if (!slow && in) {
            in = 0;
            len[runs++] = (start[r] - since) / 1e6;
        }
    }
    if (in)
        len[runs++] = (now_ns() - t0 - since) / 1e6;
    qsort(len, runs, sizeof(double), cmpd);
    printf("slow rounds (both blocks > 1.5 x p10) %d of %d; only A slow %d, only B slow %d; "
           "%d slow spells, length ms p50 %.2f max %.2f\n",
           slow_rounds, rounds, only_a, only_b, runs, runs ? len[runs / 2] : 0.0,
           runs ? len[runs - 1] : 0.0);
    return 0;
}
