/* transpose: square matrix transposition, seed 004 section 5 ("transpose, a matrix
 * transposition code"; 5.2: TLB misses of the standard-page run part from the superpage run's
 * at 130x130, "an input size of approximately 66 KB"). N x N ints (4 bytes), N a compile-time
 * constant so the loop nest's trip counts are known to a compiler pass.
 *
 *   cc -O2 -DN=300 -DREPS=2000 transpose.c -o transpose
 *
 * Source and destination come from malloc and are filled with pseudo-random data; the nest is
 * run REPS times over the same two arrays, one element of the source changed in between (so no
 * repetition is dead), and a checksum of the result is printed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef N
#define N 200
#endif
#ifndef REPS
#define REPS 3000
#endif

int main(void)
{
    int *src = malloc(sizeof(int) * N * N);
    int *dst = malloc(sizeof(int) * N * N);
    if (!src || !dst) {
        fprintf(stderr, "transpose: cannot allocate two %dx%d int matrices\n", N, N);
        return 1;
    }
    uint32_t x = 12345;
    for (long k = 0; k < (long)N * N; k++) {
        x = x * 1103515245u + 12345u;
        src[k] = (int)(x >> 8);
    }
    for (int r = 0; r < REPS; r++) {
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++)
                dst[j * N + i] = src[i * N + j];
        /* The same two matrices every repetition (no swap), so the outer loop does not change
           the references' addresses: Figure 1 multiplies a spread only by loops its address
           varies with. */
        src[r % ((long)N * N)] ^= dst[r % ((long)N * N)];
    }
    uint64_t sum = 0;
    for (long k = 0; k < (long)N * N; k++)
        sum = sum * 31 + (uint32_t)dst[k];
    printf("transpose N=%d REPS=%d checksum %016llx\n", N, REPS, (unsigned long long)sum);
    free(src);
    free(dst);
    return 0;
}
