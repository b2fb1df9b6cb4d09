/* seed 004 5.1: "stride, a synthetic kernel that strides through a large array
 * with increasing step sizes". ROUNDS passes over a 64MB-class int array; pass
 * r reads TOUCHES elements STEP*(r+1) ints apart, so the step grows by
 * STEP*4 bytes (one 4KB page with the defaults) from one pass to the next. */
#include <stdio.h>
#include <stdlib.h>

#ifndef ROUNDS
#define ROUNDS 16
#endif
#ifndef TOUCHES
#define TOUCHES 1000
#endif
#ifndef STEP
#define STEP 1024
#endif

int main(void) {
  size_t n = (size_t)TOUCHES * STEP * ROUNDS + 1;
  int *a = malloc(n * sizeof(int));
  if (!a)
    return 1;
  for (size_t i = 0; i < n; i += STEP)
    a[i] = (int)i;
  long sum = 0;
  for (int r = 0; r < ROUNDS; r++) {
    long step = (long)STEP * (r + 1);
    for (long i = 0; i < TOUCHES; i++)
      sum += a[i * step];
  }
  printf("%ld\n", sum);
  free(a);
  return 0;
}
