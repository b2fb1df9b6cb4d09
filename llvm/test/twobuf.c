/* Two buffers for the per-site mode: `table` (64MB) is read at pseudo-random
 * indices inside a loop nest, so every iteration may land on a new page;
 * `log` (64KB, 16 pages) is written and then read sequentially, 32 pages of
 * spread in all, below core2's 65-page threshold. Only table's malloc should
 * go to superpages. */
#include <stdio.h>
#include <stdlib.h>

#define TABLE (16u << 20) /* ints: 64MB */
#define LOG (1u << 14)    /* ints: 64KB */

int main(void) {
  int *table = malloc((size_t)TABLE * sizeof(int));
  int *log = malloc((size_t)LOG * sizeof(int));
  if (!table || !log)
    return 1;
  for (unsigned k = 0; k < TABLE; k += 1024)
    table[k] = (int)k;
  for (unsigned k = 0; k < LOG; k++)
    log[k] = (int)(k * 2654435761u);
  long sum = 0;
  unsigned x = 1;
  for (int round = 0; round < 8; round++)
    for (unsigned k = 0; k < 4096; k++) {
      x = x * 1664525u + 1013904223u;
      sum += table[x & (TABLE - 1)];
    }
  for (unsigned k = 0; k < LOG; k++)
    sum ^= log[k];
  printf("%ld\n", sum);
  free(table);
  free(log);
  return 0;
}
