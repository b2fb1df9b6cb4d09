// Build: cc -O2 -o /tmp/l2-footprint-clock scripts/l2-footprint-clock.c; run under flock -x /tmp/splab-quiet.lock (docs/validation.md, "Runs of 2026-11-28 13:40").
// Interleaved rounds of an add chain (1 cycle/add), an L1 chase (16 KiB footprint) and
// calibrate's L2 chase (128 KiB footprint: one line of each 128 B pair of 256 KiB, random order,
// THP), and an all-miss L2 chase (2048 lines 128 B apart: 32 L1 sets), validate's L2 row before 2026-11-28 (192 KiB)
// and its L1D row (24 KiB); p10 of 21 each, in cycles of the add chain.
#include "chase-common.h"
static double addns(long it){ double t=now(); long x=1,n=it,one=1; __asm__ volatile("1:\n" ".rept 32\n add %2,%0\n .endr\n dec %1\n jnz 1b":"+r"(x),"+r"(n):"r"(one)); return (now()-t)/(it*32.0); }
static double chase_ns(char *b, size_t *o, size_t n){ for(size_t i=0;i<n;i++) *(void**)(b+o[i]) = b+o[(i+1)%n]; void *p = chase(b+o[0], 4*n); double t=now(); p=chase(p, 1<<20); sinkp=p; return (now()-t)/(1<<20); }
static void mk(size_t *o, size_t span){ size_t n=span/128; for(size_t i=0;i<n;i++) o[i]=i*128+64*(rnd()&1); shuffle(o,n); }
int main(){
  char *raw = mmap(0, 16UL<<20, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
  char *b = (char*)(((uintptr_t)raw + HUGE-1) & ~(HUGE-1)); madvise(b, 8UL<<20, MADV_HUGEPAGE); memset(b,0,8UL<<20);
  size_t o1[256], o2[2048], o3[2048], o4[3072], o5[384];
  mk(o1, 32<<10); mk(o2, 256<<10); mk(o4, 384<<10); mk(o5, 48<<10); for(int i=0;i<384;i++) o5[i]+= (6UL<<20); for(int i=0;i<2048;i++) o3[i]=(4UL<<20)+i*128; shuffle(o3,2048);
  double s[6][21];
  for (int r=0;r<21;r++){ s[0][r]=addns(20000); s[1][r]=chase_ns(b,o1,256); s[2][r]=chase_ns(b,o2,2048); s[3][r]=chase_ns(b,o3,2048); s[4][r]=chase_ns(b,o4,3072); s[5][r]=chase_ns(b,o5,384);}
  for(int k=0;k<6;k++) qsort(s[k],21,8,cmpd);
  double a=s[0][2];
  printf("add %.4f ns (%.3f GHz)  L1 %.3f ns = %.2f cyc  L2 128K %.3f = %.2f  L2 all-miss %.3f = %.2f  L2 192K %.3f = %.2f  L1 24K %.3f = %.2f\n", a, 1/a, s[1][2], s[1][2]/a, s[2][2], s[2][2]/a, s[3][2], s[3][2]/a, s[4][2], s[4][2]/a, s[5][2], s[5][2]/a);
  return 0;
}
