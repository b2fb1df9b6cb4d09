// Build: cc -O2 -o /tmp/host-page-probe scripts/host-page-probe.c; run on an idle machine (docs/validation.md, "Runs of 2026-11-27 08:00").
// calibrate's host-page-size probe (measure.rs, benchmark 6) at N lines: one line per 4KB page
// over N pages of 4KB memory and of THP memory, against N lines packed 128 B apart in a THP
// region (the control). Cycles per hop at 2.994 GHz, p10 of 31 clean runs.
#include "chase-common.h"
static char *map(size_t len, int adv){
  char *raw = mmap(0, len+HUGE, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE, -1, 0);
  madvise(raw, len+HUGE, adv);
  char *b = (char*)(((uintptr_t)raw + HUGE-1) & ~(HUGE-1)); for (size_t o=0;o<len;o+=PAGE) b[o]=1; return b;
}
static double t_chase(char *base, size_t *o, size_t n){
  shuffle(o, n); return chase_p10_cycles(base, o, n, 2*n, 1<<17);
}
int main(int argc,char**argv){
  size_t n = strtoul(argv[1],0,0);
  char *r4 = map(64UL<<20, MADV_NOHUGEPAGE), *r2 = map(512UL<<20, MADV_HUGEPAGE), *c = map(16UL<<20, MADV_HUGEPAGE);
  size_t *o = malloc(n*8);
  for (size_t i=0;i<n;i++) o[i] = i*PAGE + (rnd()%64)*64; double a4 = t_chase(r4, o, n);
  for (size_t i=0;i<n;i++) o[i] = i*PAGE + (rnd()%64)*64; double a2 = t_chase(r2, o, n);
  for (size_t i=0;i<n;i++) o[i] = i*128; double ac = t_chase(c, o, n);
  printf("N=%5zu: 4KB %6.1f  THP %6.1f  packed %6.1f  => o4 %+6.1f  o2 %+6.1f\n", n, a4, a2, ac, a4-ac, a2-ac);
  return 0;
}
