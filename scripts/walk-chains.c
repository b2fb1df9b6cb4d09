/* walk-chains.c: K interleaved dependent chases over N nodes, one line per 4KB page (a random
 * line of each page, MADV_NOHUGEPAGE), or with "packed" every line of N/64 pages side by side
 * (MADV_HUGEPAGE): validate's "walks: 8 chases" row and its single-chain and packed controls,
 * natively. Prints the p10 and median of 15 rounds, ns per hop (all chains together).
 *   cc -O2 -o /tmp/walk-chains scripts/walk-chains.c && /tmp/walk-chains 65536 8 [packed]
 * Not part of the build. */
#include "chase-common.h"

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], 0, 10) : 65536;
    int k = argc > 2 ? atoi(argv[2]) : 8;
    int packed = argc > 3 && strcmp(argv[3], "packed") == 0;
    if (n < 2 || k < 1 || k > 64 || (size_t)k > n) {
        fprintf(stderr, "usage: walk-chains NODES CHAINS [packed] (1 <= CHAINS <= 64, <= NODES)\n");
        return 2;
    }
    size_t stride = packed ? 64 : PAGE;
    size_t len = (n * stride + HUGE - 1) / HUGE * HUGE + HUGE;
    char *raw = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    madvise(raw, len, packed ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    char *b = (char *)(((uintptr_t)raw + HUGE - 1) / HUGE * HUGE);
    for (size_t o = 0; o < n * stride; o += PAGE)
        b[o] = 1;
    size_t *perm = malloc(n * sizeof *perm);
    char **addr = malloc(n * sizeof *addr);
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    shuffle(perm, n);
    for (size_t i = 0; i < n; i++)
        addr[i] = b + perm[i] * stride + (packed ? 0 : (rnd() % 64) * 64);
    /* Chain c: nodes [c * per, (c + 1) * per) in order, a cycle. */
    size_t per = n / k;
    void *p[64];
    for (int c = 0; c < k; c++) {
        for (size_t j = 0; j < per; j++)
            *(void **)addr[c * per + j] = addr[c * per + (j + 1) % per];
        p[c] = addr[c * per];
    }
    double t[15];
    for (int r = 0; r < 16; r++) {
        double t0 = now();
        for (size_t h = 0; h < per; h++)
            for (int c = 0; c < k; c++)
                p[c] = *(void **)p[c];
        if (r > 0) /* the first round warms up */
            t[r - 1] = (now() - t0) / (double)(per * k);
    }
    for (int c = 0; c < k; c++)
        sinkp = p[c];
    qsort(t, 15, sizeof t[0], cmpd);
    printf("%zu nodes, %d chains%s: p10 %.2f ns/hop, median %.2f\n", n, k,
           packed ? ", packed" : "", t[1], t[7]);
    return 0;
}
