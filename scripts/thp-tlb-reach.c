// Build: cc -O2 -o /tmp/thp-tlb-reach scripts/thp-tlb-reach.c; run on an idle machine (docs/validation.md, "Runs of 2026-11-27 08:00").
// Is this guest's THP memory backed by 2MB host pages? 4096 lines (256 KiB: L2-resident) in a
// dependent pointer chase, random order, placed: packed (128 B apart inside one 2MB guest page),
// dense THP (one per 4KB over 8 guest 2MB pages), sparse THP (one per 16KB over 32 guest 2MB
// pages). Host 2MB pages: at most 32 TLB entries, all three cost an L2 hit. Host 4KB pages: the
// TLB entries are 4KB (min of guest and host), 4096 of them: beyond the 2048-entry STLB, walks.
#include "chase-common.h"
static char *map(size_t len, int adv){
  char *raw = mmap(0, len+HUGE, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE, -1, 0);
  madvise(raw, len+HUGE, adv);
  char *b = (char*)(((uintptr_t)raw + HUGE-1) & ~(HUGE-1)); memset(b, 0, len); return b;
}
static double t_chase(char *base, size_t *off, size_t n){
  size_t *o = malloc(n*sizeof *o); memcpy(o, off, n*sizeof *o);
  shuffle(o, n); double c = chase_p10_cycles(base, o, n, 4*n, 1<<18); free(o); return c;
}
int main(int argc,char**argv){
  size_t n = 4096; size_t *off = malloc(n*8);
  char *pk = map(HUGE, MADV_HUGEPAGE);
  for (size_t i=0;i<n;i++) off[i] = (i*128) + 64*(rnd()&1) ; // 4096*128 = 512 KiB span
  printf("packed (512 KiB span, 1 guest 2MB page)      %6.1f cycles/hop\n", t_chase(pk, off, n));
  char *d = map(n*PAGE, MADV_HUGEPAGE);
  for (size_t i=0;i<n;i++) off[i] = i*PAGE + (rnd()%64)*64;
  printf("dense THP (1 per 4KB, %zu guest 2MB pages)    %6.1f cycles/hop\n", n*PAGE/HUGE, t_chase(d, off, n));
  char *s = map(4*n*PAGE, MADV_HUGEPAGE);
  for (size_t i=0;i<n;i++) off[i] = 4*i*PAGE + (rnd()%64)*64;
  printf("sparse THP (1 per 16KB, %zu guest 2MB pages)  %6.1f cycles/hop\n", 4*n*PAGE/HUGE, t_chase(s, off, n));
  char *q = map(n*PAGE, MADV_NOHUGEPAGE);
  for (size_t i=0;i<n;i++) off[i] = i*PAGE + (rnd()%64)*64;
  printf("4KB guest pages (1 per 4KB, 4096 pages)      %6.1f cycles/hop\n", t_chase(q, off, n));
  for (size_t i=0;i<1024;i++) off[i] = i*PAGE + (rnd()%64)*64;
  printf("4KB guest pages, 1024 (STLB hits)            %6.1f cycles/hop\n", t_chase(q, off, 1024));
  printf("dense THP, 1024 lines                        %6.1f cycles/hop\n", t_chase(d, off, 1024));
  FILE *f=fopen("/proc/self/smaps_rollup","r"); char l[256]; while(fgets(l,256,f)) if(!strncmp(l,"AnonHugePages",13)) printf("%s", l);
  return 0;
}
