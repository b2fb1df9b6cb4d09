// Build: cc -O2 -o /tmp/l2-latency-pages scripts/l2-latency-pages.c; run on an idle machine (docs/validation.md, "Runs of 2026-11-27 08:00").
// calibrate's L2 latency chase (1 MiB footprint of THP memory, one line of each 128 B pair,
// all in one random order) against the same lines visited page by page (the 32 lines of a 4KB
// page in random order, pages in random order): the second needs one TLB entry per 32 hops.
#include "chase-common.h"
static double t_chase(char *base, size_t *o, size_t n){ return chase_p10_cycles(base, o, n, 2*n, 1<<18); }
int main(int argc,char**argv){
  size_t foot = strtoul(argv[1],0,0)<<10; int adv = argc>2 && argv[2][0]=='n' ? MADV_NOHUGEPAGE : MADV_HUGEPAGE;
  char *raw = mmap(0, 64UL<<20, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
  madvise(raw, 64UL<<20, adv); char *b = (char*)(((uintptr_t)raw + HUGE-1) & ~(HUGE-1)); memset(b, 0, 32UL<<20);
  size_t n = foot/128; size_t *o = malloc(n*8);
  for (size_t i=0;i<n;i++) o[i] = i*128 + 64*(rnd()&1);
  shuffle(o, n); double a = t_chase(b, o, n);
  size_t per = PAGE/128, pages = n/per; size_t *pg = malloc(pages*8); for (size_t i=0;i<pages;i++) pg[i]=i; shuffle(pg,pages);
  for (size_t i=0;i<pages;i++){ size_t *q = o + i*per; for (size_t j=0;j<per;j++) q[j] = pg[i]*PAGE + j*128 + 64*(rnd()&1); shuffle(q, per); }
  double g = t_chase(b, o, n);
  printf("%5zu KiB %s: random order %5.1f cycles/hop, page by page %5.1f (%zu pages)\n", foot>>10, adv==MADV_HUGEPAGE?"THP":"4KB", a, g, pages);
  return 0;
}
