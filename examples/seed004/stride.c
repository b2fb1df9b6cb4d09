/* stride: seed 004 section 5.1's "synthetic kernel that strides through a large array with
 * increasing step sizes" (5.2: superpages were recommended for it by the heuristic but gave
 * no significant benefit; the authors suspect hardware prefetching).
 *
 *   cc -O2 -DSIZE_MB=64 -DMAXSTEP=1048576 -DREPS=4 stride.c -o stride
 *
 * An int array of SIZE_MB megabytes from malloc; for each step size from 1 element doubling up
 * to MAXSTEP elements (4 bytes each), every step-th element is read and updated; REPS times.
 * Small steps walk memory sequentially; from 1024 elements (4KB) on, every access lands on a
 * new base page. A checksum is printed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef SIZE_MB
#define SIZE_MB 64
#endif
#ifndef MAXSTEP
#define MAXSTEP (1L << 20)
#endif
#ifndef REPS
#define REPS 4
#endif

#define NELEM ((long)SIZE_MB * 1024 * 1024 / (long)sizeof(int))

int main(void)
{
    int *a = malloc(sizeof(int) * NELEM);
    if (!a) {
        fprintf(stderr, "stride: cannot allocate %d MB\n", SIZE_MB);
        return 1;
    }
    for (long i = 0; i < NELEM; i++)
        a[i] = (int)(i & 0xff);
    for (int r = 0; r < REPS; r++)
        for (long step = 1; step <= MAXSTEP; step *= 2)
            for (long i = 0; i < NELEM; i += step)
                a[i] = a[i] * 3 + (int)step;
    uint64_t sum = 0;
    for (long i = 0; i < NELEM; i += 7)
        sum += (uint32_t)a[i];
    printf("stride SIZE_MB=%d MAXSTEP=%ld REPS=%d checksum %016llx\n", SIZE_MB, (long)MAXSTEP,
           REPS, (unsigned long long)sum);
    free(a);
    return 0;
}
