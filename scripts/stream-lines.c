/* stream-lines.c: what a sequential pass costs per 64-byte line on this machine, by what the
 * loop does per line: every 8-byte word summed (scalar, as splab validate's held-out `seq` is
 * compiled; and with four accumulators), one load per line, one store per line, every word
 * stored. Each pass covers 128 MiB of MADV_HUGEPAGE memory that is cold in the caches (six
 * 128 MiB pieces in rotation); the best of seven passes is printed. Not part of the build.
 *
 *   cc -O2 -fno-tree-vectorize -o /tmp/stream-lines scripts/stream-lines.c && /tmp/stream-lines
 *   cc -O3 -o /tmp/stream-lines3 scripts/stream-lines.c && /tmp/stream-lines3
 *
 * docs/validation.md ("Streams: what one bandwidth leaves out") uses it. */
#include "chase-common.h"

__attribute__((noinline)) static uint64_t sum1(const uint64_t *p, size_t n)
{
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++)
        s += p[i];
    return s;
}

__attribute__((noinline)) static uint64_t sum4(const uint64_t *p, size_t n)
{
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i < n; i += 4) {
        a += p[i];
        b += p[i + 1];
        c += p[i + 2];
        d += p[i + 3];
    }
    return a ^ b ^ c ^ d;
}

__attribute__((noinline)) static uint64_t load_per_line(const uint64_t *p, size_t n)
{
    uint64_t s = 0;
    for (size_t i = 0; i < n; i += 8)
        s += *(const volatile uint64_t *)(p + i);
    return s;
}

__attribute__((noinline)) static void store_per_line(uint64_t *p, size_t n)
{
    for (size_t i = 0; i < n; i += 8)
        *(volatile uint64_t *)(p + i) = i;
}

__attribute__((noinline)) static void store_all(uint64_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        *(volatile uint64_t *)(p + i) = i;
}

int main(void)
{
    const size_t piece = 128UL << 20, pieces = 6;
    char *raw = mmap(NULL, piece * pieces + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        perror("stream-lines: mmap");
        return 1;
    }
    char *a = (char *)(((uintptr_t)raw + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
    madvise(a, piece * pieces, MADV_HUGEPAGE);
    memset(a, 1, piece * pieces);
    const char *names[] = {"sum, every word (1 accumulator)", "sum, every word (4 accumulators)",
                           "one load per line", "one store per line", "a store to every word"};
    double best[5] = {1e30, 1e30, 1e30, 1e30, 1e30};
    volatile uint64_t sink = 0;
    size_t z = 0, words = piece / 8;
    for (int rep = 0; rep < 7; rep++)
        for (int k = 0; k < 5; k++) {
            uint64_t *p = (uint64_t *)(a + (z++ % pieces) * piece);
            double t = now();
            switch (k) {
            case 0: sink += sum1(p, words); break;
            case 1: sink += sum4(p, words); break;
            case 2: sink += load_per_line(p, words); break;
            case 3: store_per_line(p, words); break;
            default: store_all(p, words); break;
            }
            double e = (now() - t) / (piece / 64);
            if (e < best[k])
                best[k] = e;
        }
    for (int k = 0; k < 5; k++)
        printf("%-34s %.2f ns per line (best of 7 passes of 128 MiB)\n", names[k], best[k]);
    return (int)(sink & 0);
}
