/* window: a gzip-like linear floating window, for seed 004 section 5.2's 164.gzip: "characterized
 * by linear data access patterns, using a floating window as it passes over the data" - the
 * benchmark that gained nothing from superpages, and for which the heuristic correctly did not
 * recommend them.
 *
 *   cc -O2 window.c -o window && ./window [MB]      (MB of input, default 64)
 *
 * As gzip's deflate (fill_window), the input passes through a window of 2 x WSIZE bytes (32KB
 * halves): each step slides the upper half down and brings the next WSIZE bytes of input into it
 * (memcpy, as gzip's read() would; the input is generated block by block into a WSIZE staging
 * buffer, as a file's next block arrives, so no loop walks more than the window); then linear
 * passes over the new half: an Adler-32 checksum (gzip's own is CRC-32), a count of bytes equal
 * to their predecessor (a run finder's first test) and an output block. All three buffers come
 * from malloc. The number of input blocks is a run-time argument, as an input file's length is,
 * so a compiler does not know the outer loop's trip count. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WSIZE 32768

int main(int argc, char **argv)
{
    long mb = argc > 1 ? atol(argv[1]) : 64;
    if (mb <= 0) {
        fprintf(stderr, "window: the input size '%s' is not a positive number of MB\n", argv[1]);
        return 2;
    }
    long blocks = mb * (1024 * 1024 / WSIZE);
    unsigned char *next = malloc(WSIZE);
    unsigned char *window = malloc(2 * WSIZE);
    unsigned char *out = malloc(WSIZE);
    if (!next || !window || !out) {
        fprintf(stderr, "window: cannot allocate the window\n");
        return 1;
    }
    memset(window, 0, 2 * WSIZE);
    uint32_t x = 2463534242u, a = 1, b = 0;
    uint64_t sum = 0;
    long runs = 0;
    for (long blk = 0; blk < blocks; blk++) {
        /* the next block of input: letters with repeats, as text has */
        for (int k = 0; k < WSIZE; k++) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            next[k] = (unsigned char)('a' + (x >> 28));
        }
        memcpy(window, window + WSIZE, WSIZE);
        memcpy(window + WSIZE, next, WSIZE);
        for (int i = 0; i < WSIZE; i++) {
            unsigned char c = window[WSIZE + i];
            a = (a + c) % 65521u;
            b = (b + a) % 65521u;
            runs += c == window[WSIZE + i - 1];
            out[i] = c ^ (unsigned char)a;
        }
        for (int i = 0; i < WSIZE; i += 64)
            sum = sum * 31 + out[i];
    }
    printf("window MB=%ld adler %08x runs %ld checksum %016llx\n", mb, (b << 16) | a, runs,
           (unsigned long long)sum);
    free(next);
    free(window);
    free(out);
    return 0;
}
