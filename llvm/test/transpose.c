/* seed 004 5.1/5.2: "transpose, a matrix transposition code". An N x N int
 * matrix (N by -DN, default 300) in malloc'd memory, transposed with
 * dst[j*N+i] = src[i*N+j]: the store walks a column of dst, a step of N*4
 * bytes per iteration of the inner loop. */
#include <stdio.h>
#include <stdlib.h>

#ifndef N
#define N 300
#endif

int main(void) {
  int *src = malloc((size_t)N * N * sizeof(int));
  int *dst = malloc((size_t)N * N * sizeof(int));
  if (!src || !dst)
    return 1;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      src[i * N + j] = i ^ (j * 7);
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      dst[j * N + i] = src[i * N + j];
  long sum = 0;
  for (int k = 0; k < N * N; k++)
    sum += (long)dst[k] * (k & 15);
  printf("%ld\n", sum);
  free(src);
  free(dst);
  return 0;
}
