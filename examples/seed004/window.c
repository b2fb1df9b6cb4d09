/* window: a gzip-like compressor's match finder, for seed 004 section 5.2's 164.gzip:
 * "characterized by linear data access patterns, using a floating window as it passes over
 * the data" - the benchmark that gained nothing from superpages, and for which the heuristic
 * correctly did not recommend them.
 *
 *   cc -O2 -DINPUT_MB=16 -DWSIZE=32768 -DMAXCHAIN=16 window.c -o window
 *
 * An INPUT_MB input buffer of pseudo-random, repetitive text; a WSIZE (32KB, gzip's) window
 * slides over it; 3-byte hashes index a head table and a prev chain over the window (as in
 * deflate); at each position at most MAXCHAIN candidates inside the window are compared and
 * the longest match (up to 258 bytes) is taken. All three arrays come from malloc. The number
 * of literals and matches and a checksum are printed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef INPUT_MB
#define INPUT_MB 16
#endif
#ifndef WSIZE
#define WSIZE 32768
#endif
#ifndef MAXCHAIN
#define MAXCHAIN 16
#endif
#define HBITS 15
#define HSIZE (1 << HBITS)
#define MAXMATCH 258
#define NIL (-1)

#define LEN ((long)INPUT_MB * 1024 * 1024)

int main(void)
{
    unsigned char *in = malloc(LEN + MAXMATCH);
    int *head = malloc(sizeof(int) * HSIZE);
    int *prev = malloc(sizeof(int) * WSIZE);
    if (!in || !head || !prev) {
        fprintf(stderr, "window: cannot allocate %d MB of input and the hash tables\n",
                INPUT_MB);
        return 1;
    }
    /* text: words from a small vocabulary, random letter words, and now and then a copy of
     * recent text */
    static const char *words[] = {"the ", "superpage ", "page ", "table ", "walk ", "miss ",
                                  "tlb ", "heap ", "of ", "and ", "compiler ", "loop "};
    uint32_t x = 2463534242u;
    long n = 0;
    while (n < LEN) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        if ((x & 7) == 0 && n > 4096) {
            long from = n - 1 - (long)(x >> 8) % 4000, len = 20 + (long)(x >> 20) % 100;
            for (long k = 0; k < len && n < LEN; k++)
                in[n++] = in[from + k];
        } else if ((x & 1) == 0) {
            for (const char *w = words[(x >> 4) % 12]; *w && n < LEN; w++)
                in[n++] = (unsigned char)*w;
        } else { /* a random "word" of 2 to 7 letters */
            for (uint32_t k = 0, len = 2 + (x >> 9) % 6; k < len && n < LEN; k++)
                in[n++] = (unsigned char)('a' + (x >> (k * 4 + 1)) % 26);
            if (n < LEN)
                in[n++] = ' ';
        }
    }
    for (long k = 0; k < MAXMATCH; k++)
        in[LEN + k] = 0;
    for (int h = 0; h < HSIZE; h++)
        head[h] = NIL;

    long literals = 0, matches = 0;
    uint64_t sum = 0;
    long i = 0;
    while (i < LEN - 2) {
        unsigned h = ((unsigned)in[i] << 10 ^ (unsigned)in[i + 1] << 5 ^ in[i + 2]) & (HSIZE - 1);
        int cand = head[h];
        long best = 0, bestpos = 0;
        for (int chain = 0; chain < MAXCHAIN && cand != NIL && cand > i - WSIZE; chain++) {
            long m = 0;
            while (m < MAXMATCH && i + m < LEN && in[cand + m] == in[i + m])
                m++;
            if (m > best) {
                best = m;
                bestpos = cand;
            }
            cand = prev[cand & (WSIZE - 1)];
        }
        prev[i & (WSIZE - 1)] = head[h];
        head[h] = (int)i;
        if (best >= 3) {
            matches++;
            sum = sum * 31 + (uint64_t)(i - bestpos) * 259 + (uint64_t)best;
            /* insert the hashes of the matched positions, as deflate does */
            for (long k = 1; k < best && i + k < LEN - 2; k++) {
                long p = i + k;
                unsigned hk = ((unsigned)in[p] << 10 ^ (unsigned)in[p + 1] << 5 ^ in[p + 2]) &
                              (HSIZE - 1);
                prev[p & (WSIZE - 1)] = head[hk];
                head[hk] = (int)p;
            }
            i += best;
        } else {
            literals++;
            sum = sum * 31 + in[i];
            i++;
        }
    }
    printf("window INPUT_MB=%d WSIZE=%d MAXCHAIN=%d literals %ld matches %ld checksum %016llx\n",
           INPUT_MB, WSIZE, MAXCHAIN, literals, matches, (unsigned long long)sum);
    free(in);
    free(head);
    free(prev);
    return 0;
}
