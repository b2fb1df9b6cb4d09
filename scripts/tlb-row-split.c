// Build: cc -O2 -o /tmp/tlb-row-split scripts/tlb-row-split.c; /tmp/tlb-row-split N, under flock -x /tmp/splab-quiet.lock (docs/validation.md, "Runs of 2026-11-28 13:40").
// validate's "1 line per 4KB page" chase over N pages (MADV_NOHUGEPAGE) against controls whose
// translations hit the L1 DTLB: the same in-page line offsets (the same L1D sets) packed into as
// few 4KB pages as they need, and spread over 90 pages (few lines per page: no spatial
// prefetch), and N lines 128 B apart (all in 32 L1D sets: every hop misses L1D). Cycles per
// hop (p10 of 31) over one add chain's clock (1 cycle per add) timed just before.
#include "chase-common.h"
static double addns(long it){ double t=now(); long x=1,n=it,one=1; __asm__ volatile("1:\n" ".rept 32\n add %2,%0\n .endr\n dec %1\n jnz 1b":"+r"(x),"+r"(n):"r"(one)); return (now()-t)/(it*32.0); }
static double t(char *b, size_t *o, size_t n){ size_t h = n*64 < (1<<20) ? (1<<20) : n*64; return chase_p10_cycles(b,o,n,4*n,h)/2.994; }
int main(int argc, char **argv){
  size_t n = strtoul(argv[1],0,0);
  size_t len = n*PAGE + HUGE;
  char *a = mmap(0, len+HUGE, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
  char *ab = (char*)(((uintptr_t)a + HUGE-1) & ~(HUGE-1));
  madvise(ab, len, MADV_NOHUGEPAGE); memset(ab, 1, len);
  char *c = mmap(0, 64UL<<20, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
  char *cb = (char*)(((uintptr_t)c + HUGE-1) & ~(HUGE-1));
  madvise(cb, 32UL<<20, MADV_HUGEPAGE); memset(cb, 1, 32UL<<20);
  size_t *o = malloc(n*8), *oc = malloc(n*8), *op = malloc(n*8), *pg = malloc(n*8), *os = malloc(n*8);
  size_t cnt[64] = {0};
  for (size_t i=0;i<n;i++) pg[i]=i; shuffle(pg,n);
  size_t maxc = 0;
  for (size_t i=0;i<n;i++){ size_t l = rnd()%64; o[i] = pg[i]*PAGE + l*64; oc[i] = cnt[l]*PAGE + l*64; os[i] = ((cnt[l] + l*37) % 90)*PAGE + l*64; cnt[l]++; if (cnt[l]>maxc) maxc=cnt[l]; op[i] = i*128; }
  shuffle(op, n);
  for (int r=0;r<2;r++){
    double a0 = addns(20000), x = t(ab,o,n), y = t(cb,oc,n), w = t(cb,os,n), z = t(cb,op,n);
    printf("N=%zu clock %.3f GHz; cycles: per-page %.2f  same-sets-in-%zu-pages %.2f  same-sets-in-90-pages %.2f packed %.2f  (per-page - same-sets %.2f / %.2f)\n", n, 1/a0, x/a0, maxc, y/a0, w/a0, z/a0, (x-y)/a0, (x-w)/a0);
  }
  return 0;
}
