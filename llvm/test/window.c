/* gzip-like (seed 004 5.2: 164-gzip is "characterized by linear data access
 * patterns, using a floating window as it passes over the data"). The input
 * (up to 64MB, from stdin) is read into a big buffer with fread; like gzip's
 * fill_window, which read()s the next block of input into its window, each
 * step slides the upper half of a 2*WSIZE window down and copies the next
 * WSIZE bytes of input into it (memcpy, as read() would); then linear passes
 * over the 32KB window: an Adler-32 style checksum, a count of bytes equal to
 * their predecessor, and an output block. The library calls (fread, memcpy)
 * are not loads and stores of a loop nest, so Figure 1 counts only the window
 * loops. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WSIZE 32768
#define CAP ((size_t)64 << 20)

int main(void) {
  unsigned char *in = malloc(CAP);
  unsigned char *window = malloc(2 * WSIZE);
  unsigned char *out = malloc(WSIZE);
  if (!in || !window || !out)
    return 1;
  size_t len = fread(in, 1, CAP, stdin);
  memset(window, 0, 2 * WSIZE);
  unsigned a = 1, b = 0;
  long runs = 0;
  for (size_t pos = 0; pos + WSIZE <= len; pos += WSIZE) {
    memcpy(window, window + WSIZE, WSIZE);
    memcpy(window + WSIZE, in + pos, WSIZE);
    for (int i = 0; i < WSIZE; i++) {
      unsigned char c = window[WSIZE + i];
      a = (a + c) % 65521u;
      b = (b + a) % 65521u;
      runs += c == window[WSIZE + i - 1];
      out[i] = c ^ (unsigned char)a;
    }
    fwrite(out, 1, 16, stdout);
  }
  printf("\n%u %u %ld\n", a, b, runs);
  free(in);
  free(window);
  free(out);
  return 0;
}
