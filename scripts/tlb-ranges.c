/* tlb-ranges.c: validate's scattered TLB row ("TLB: 1 line per 4KB page, 16384 pages": one
 * chain, pages in random order, a random line of each, MADV_NOHUGEPAGE, every hop an STLB miss)
 * natively on chosen guest-physical frames, several frame sets in one process with their rounds
 * interleaved (the host's minute-to-minute changes fall on all of them alike).
 * A frame set "R:S" takes R THP pages (split into 4KB entries, as `Region::split_to_ptes`) and
 * from each N/R frames S apart (S = 1: a contiguous run; S = 8: one page per line of the host's
 * leaf entries, EPT PTEs, 8 to a 64-byte line) at a random offset, moved by mremap in order into
 * one window (window page i on range i / (N/R)); so the 2MB ranges (host PDEs) and the host leaf
 * lines (frames / 8 distinct) are chosen independently; S = 0: N/R distinct frames of each
 * range at random (as a fresh region's few pages in each of its ranges). "0": a fresh MADV_NOHUGEPAGE window
 * faulted in (validate's row as it is). "R:S:P": the R ranges are every P-th page of a pool of
 * R x P THP pages (P = 8: each range's host PDE on its own 64-byte line when the pool is
 * physically contiguous). Reported: the distinct 1GB ranges (host PDPTEs), lines of host PDEs
 * (pfn >> 12), 2MB ranges (host PDEs) and lines of host leaf entries (pfn >> 3). -w W: W untimed
 * passes before each timed one (default 1).
 * Every set's window is chased with the same page order and line offsets. A round of a set: one
 * untimed pass over its cycle (N hops, the warm-up, as validate's consecutive repetitions leave
 * it), then one timed pass; rounds go round-robin over the sets; a round whose thread was
 * context-switched is redone. Prints, per set, its 2MB ranges and host leaf lines (from
 * /proc/self/pagemap, root only), and the p10 / median ns per hop and cycles at the clock of an
 * add chain timed before each round; with a prefix, writes each set's frames (one pfn a line,
 * window order) to PREFIX-<set>.txt for the model:
 *   cargo run --release -p splab-sim --example walk_chase -- file:H.toml 16384 frames=PREFIX-R:S.txt 1
 * Each page moved alone is a mapping of its own: several stride sets in one run need more than
 * the default vm.max_map_count (65530); raise it for the run (sysctl -w vm.max_map_count=262144)
 * and restore it after.
 * Build and run (under the lock, as every native timing here):
 *   cc -O2 -o /tmp/tlb-ranges scripts/tlb-ranges.c
 *   flock -x /tmp/splab-quiet.lock /tmp/tlb-ranges -p /tmp/tlbrow/f -n 16384 -r 21 0 32:1 256:1 256:8 2048:1 2048:64
 *   flock -x /tmp/splab-quiet.lock /tmp/tlb-ranges -p /tmp/tlbrow/f9 -w 2 -h 75000 -r 15 0 32:1 512:8 512:16 2048:8 2048:64
 * (the second: validate's timing, the one to compare with the model; interleaved rounds after a
 * few warm passes read 20-30% faster at 16k leaf lines than the steady state, which takes more
 * than 8 passes to reach, and their p10 picks those). The model on the same frames, with L2's
 * pair fill off / as next victim / 30% as most recent:
 *   walk_chase file:H.toml 16384 frames=/tmp/tlbrow/f9-512:16.txt 1 [nopair | pair | pair recent=0.3]
 * Not part of the build. */
#include "chase-common.h"
#include <fcntl.h>
#include <unistd.h>

static uint64_t pfn_of(int fd, void *va)
{
    uint64_t e = 0;
    if (pread(fd, &e, 8, ((uintptr_t)va / PAGE) * 8) != 8)
        return 0;
    return (e >> 63) ? (e & ((1ULL << 55) - 1)) : 0;
}

static int cmpu(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static size_t distinct(uint64_t *v, size_t n, int shift)
{
    uint64_t *g = malloc(n * 8);
    for (size_t i = 0; i < n; i++)
        g[i] = v[i] >> shift;
    qsort(g, n, 8, cmpu);
    size_t d = 0;
    for (size_t i = 0; i < n; i++)
        d += i == 0 || g[i] != g[i - 1];
    free(g);
    return d;
}

struct set {
    const char *spec;
    char *w;
    size_t ranges, leaf_lines, pde_lines, gb;
    double *ns, *cyc;
};

/* A window of n pages on the frames the spec names; returns its base. */
static char *build(const char *spec, size_t n)
{
    long r = 0, s = 1, sp = 1;
    sscanf(spec, "%ld:%ld:%ld", &r, &s, &sp);
    size_t len = n * PAGE;
    char *raw = mmap(0, len + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return 0;
    char *w = (char *)(((uintptr_t)raw + HUGE - 1) / HUGE * HUGE);
    if (r == 0) {
        madvise(w, len, MADV_NOHUGEPAGE);
        for (size_t o = 0; o < len; o += PAGE)
            w[o] = 1;
        return w;
    }
    size_t per = n / r;
    if (n % r || s < 0 || per > HUGE / PAGE || (per - 1) * s >= HUGE / PAGE) {
        fprintf(stderr, "set %s: %zu pages on %ld ranges at stride %ld do not fit\n", spec, n, r, s);
        return 0;
    }
    if (sp < 1)
        sp = 1;
    size_t plen = (size_t)r * sp * HUGE;
    char *praw = mmap(0, plen + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *pool = (char *)(((uintptr_t)praw + HUGE - 1) / HUGE * HUGE);
    madvise(pool, plen, MADV_HUGEPAGE);
    for (size_t o = 0; o < plen; o += PAGE)
        pool[o] = 1;
    for (size_t o = 0; o < plen; o += HUGE) { /* split each PMD into 4KB entries */
        mprotect(pool + o, PAGE, PROT_READ);
        mprotect(pool + o, PAGE, PROT_READ | PROT_WRITE);
    }
    size_t span = (per - 1) * (s ? s : 1) + 1, i = 0, slots = HUGE / PAGE;
    for (long j = 0; j < r; j++) {
        size_t off = rnd() % (slots - span + 1);
        if (s == 1 && per % 8 == 0)
            off &= ~(size_t)7; /* runs of whole host leaf lines */
        char *src = pool + j * sp * HUGE;
        if (s == 0) { /* per distinct random frames of the range, in frame order */
            char used[512] = {0};
            for (size_t q = 0; q < per;) {
                size_t x = rnd() % slots;
                q += !used[x];
                used[x] = 1;
            }
            for (size_t x = 0; x < slots; x++)
                if (used[x] && mremap(src + x * PAGE, PAGE, PAGE, MREMAP_MAYMOVE | MREMAP_FIXED,
                                      w + i++ * PAGE) == MAP_FAILED)
                    return 0;
        } else if (s == 1) {
            if (mremap(src + off * PAGE, per * PAGE, per * PAGE,
                       MREMAP_MAYMOVE | MREMAP_FIXED, w + i * PAGE) == MAP_FAILED)
                return 0;
            i += per;
        } else
            for (size_t q = 0; q < per; q++, i++)
                if (mremap(src + (off + q * s) * PAGE, PAGE, PAGE,
                           MREMAP_MAYMOVE | MREMAP_FIXED, w + i * PAGE) == MAP_FAILED)
                    return 0;
    }
    munmap(pool, plen); /* the frames not moved go back (each moved page is its own mapping:
                           the pool's holes would count against vm.max_map_count too) */
    madvise(w, len, MADV_NOHUGEPAGE); /* no collapse back into 2MB pages */
    return w;
}

int main(int argc, char **argv)
{
    size_t n = 16384;
    int rounds = 21, warm = 1, a = 1;
    size_t hops = 0;
    const char *prefix = 0;
    for (; a < argc && argv[a][0] == '-'; a += 2) {
        if (a + 1 >= argc)
            break;
        if (argv[a][1] == 'n')
            n = strtoul(argv[a + 1], 0, 0);
        else if (argv[a][1] == 'r')
            rounds = atoi(argv[a + 1]);
        else if (argv[a][1] == 'h')
            hops = strtoul(argv[a + 1], 0, 0);
        else if (argv[a][1] == 'w')
            warm = atoi(argv[a + 1]);
        else if (argv[a][1] == 'p')
            prefix = argv[a + 1];
    }
    int ns_ = argc - a;
    if (ns_ < 1) {
        fprintf(stderr, "usage: tlb-ranges [-p PREFIX] [-n PAGES] [-r ROUNDS] SET... (SET: 0 or R:S)\n");
        return 2;
    }
    struct set *st = calloc(ns_, sizeof *st);
    int fd = open("/proc/self/pagemap", O_RDONLY);
    uint64_t *f = malloc(n * 8);
    /* One page order and one line offset per page for every set. */
    size_t *perm = malloc(n * sizeof *perm), *line = malloc(n * sizeof *line);
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    shuffle(perm, n);
    for (size_t i = 0; i < n; i++)
        line[i] = rnd() % 64;
    for (int k = 0; k < ns_; k++) {
        st[k].spec = argv[a + k];
        if (!(st[k].w = build(st[k].spec, n))) {
            perror(st[k].spec);
            return 1;
        }
        for (size_t i = 0; i < n; i++)
            f[i] = fd >= 0 ? pfn_of(fd, st[k].w + i * PAGE) : 0;
        st[k].ranges = distinct(f, n, 9);
        st[k].leaf_lines = distinct(f, n, 3);
        st[k].pde_lines = distinct(f, n, 12);
        st[k].gb = distinct(f, n, 18);
        if (prefix) {
            char name[512];
            snprintf(name, sizeof name, "%s-%s.txt", prefix, st[k].spec);
            FILE *o = fopen(name, "w");
            for (size_t i = 0; o && i < n; i++)
                fprintf(o, "%llu\n", (unsigned long long)f[i]);
            if (o)
                fclose(o);
        }
        char *w = st[k].w;
        for (size_t i = 0; i < n; i++)
            *(void **)(w + perm[i] * PAGE + line[i] * 64) =
                w + perm[(i + 1) % n] * PAGE + line[(i + 1) % n] * 64;
        st[k].ns = malloc(rounds * sizeof(double));
        st[k].cyc = malloc(rounds * sizeof(double));
    }
    /* -h H: validate's timing instead (bench::time_chase): each set in turn, W passes of
     * warm-up, then ROUNDS consecutive runs of H hops (H = 75,000 is validate's 3 ms at 40 ns). */
    for (int k = 0; hops && k < ns_; k++) {
        char *w = st[k].w;
        void *p = chase(w + perm[0] * PAGE + line[0] * 64, n * warm);
        for (int q = 0; q < rounds;) {
            double add = add_ns(20000);
            long c = sw();
            double t = now();
            p = chase(p, hops);
            double d = (now() - t) / hops;
            if (sw() == c) {
                st[k].ns[q] = d;
                st[k].cyc[q++] = d / add;
            }
        }
        sinkp = p;
    }
    for (int q = 0; !hops && q < rounds; q++)
        for (int k = 0; k < ns_; k++) {
            char *w = st[k].w;
            void *p = w + perm[0] * PAGE + line[0] * 64;
            for (;;) {
                double add = add_ns(20000);
                p = chase(p, n * warm);
                long c = sw();
                double t = now();
                p = chase(p, n);
                double d = (now() - t) / n;
                if (sw() == c) {
                    st[k].ns[q] = d;
                    st[k].cyc[q] = d / add;
                    break;
                }
            }
            sinkp = p;
        }
    for (int k = 0; k < ns_; k++) {
        qsort(st[k].ns, rounds, sizeof(double), cmpd);
        qsort(st[k].cyc, rounds, sizeof(double), cmpd);
        printf("set %-9s GB %2zu PDE lines %4zu ranges %5zu leaf lines %5zu: ns/hop p10 %6.2f median %6.2f; cycles p10 %6.1f median %6.1f\n",
               st[k].spec, st[k].gb, st[k].pde_lines, st[k].ranges, st[k].leaf_lines, st[k].ns[rounds / 10], st[k].ns[rounds / 2],
               st[k].cyc[rounds / 10], st[k].cyc[rounds / 2]);
    }
    return 0;
}
