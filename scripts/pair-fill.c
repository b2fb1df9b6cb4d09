// Build: cc -O2 -o /tmp/pair-fill scripts/pair-fill.c; run under flock -x /tmp/splab-quiet.lock (docs/validation.md, "Does L2 fill each missed line's 128-byte pair?").
// Does this host's L2 complete each line it fetches with the other line of its 128-byte aligned pair
// (Intel 64 and IA-32 Architectures Optimization Reference Manual, data prefetching: the L2 "spatial
// prefetcher")? Two tests, THP memory, dependent random chases:
//  1. Knees: at data footprints F, (a) one line of each 128 B pair of 2F bytes, (b) every line of F bytes.
//     If the pair is filled, (a) occupies 2F of L2 and its knee comes at about half of (b)'s.
//  2. Buddies: N lines, one of each pair; their buddies (line ^ 1) are linked into a second cycle, then
//     L2 is flushed (a chase over 16 MiB elsewhere); then either the first cycle is chased 4 times
//     ("warm") or not ("cold"), and one timed pass over the buddy cycle follows. Buddy lines were not
//     touched since the flush, so they hit L2 only if something filled them; cold is DRAM (the 16 MiB
//     flush exceeds this guest's LLC share too). Controls: the buddy cycle timed from the LLC (chased
//     once, then a 3 MiB chase evicts it from L2) and from L2 (chased twice just before).
// Times in ns/hop and in cycles of an add chain measured in the same round; p10 and median of R rounds.
#include "chase-common.h"
static double addns(long it){ double t=now(); long x=1,n=it,one=1; __asm__ volatile("1:\n" ".rept 32\n add %2,%0\n .endr\n dec %1\n jnz 1b":"+r"(x),"+r"(n):"r"(one)); return (now()-t)/(it*32.0); }
static void link_(char *b, size_t *o, size_t n){ for(size_t i=0;i<n;i++) *(void**)(b+o[i]) = b+o[(i+1)%n]; }
static double chase_ns(char *b, size_t *o, size_t n){ link_(b,o,n); void *p = chase(b+o[0], 4*n); double t=now(); p=chase(p, 1<<20); sinkp=p; return (now()-t)/(1<<20); }
#define R 11
static int cmpd2(const void *a, const void *b){ return cmpd(a,b); }
int main(int argc, char **argv){
  size_t region = 64UL<<20;
  char *raw = mmap(0, region + HUGE, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
  char *b = (char*)(((uintptr_t)raw + HUGE-1) & ~(HUGE-1)); madvise(b, region, MADV_HUGEPAGE); memset(b,1,region);
  int test = argc > 1 ? atoi(argv[1]) : 0;
  if (test == 0 || test == 1) {
    double fs[] = {0.5, 0.75, 1, 1.25, 1.5, 2, 3};
    size_t *o = malloc((8UL<<20)/64*sizeof(size_t));
    for (int k=0;k<7;k++){
      size_t F = (size_t)(fs[k]*(1<<20)), n = F/64;
      double sa[R], sb[R], sg[R];
      for (int r=0;r<R;r++){
        sg[r] = 1/addns(20000);
        for(size_t i=0;i<n;i++){ o[i] = i*128 + 64*(rnd()&1); } shuffle(o,n); sa[r] = chase_ns(b,o,n)*sg[r];
        for(size_t i=0;i<n;i++){ o[i] = (16UL<<20) + i*64; } shuffle(o,n); sb[r] = chase_ns(b,o,n)*sg[r];
      }
      qsort(sa,R,8,cmpd2); qsort(sb,R,8,cmpd2); qsort(sg,R,8,cmpd2);
      printf("F %.2f MiB: (a) one-of-pair p10 %.1f med %.1f cyc  (b) every-line p10 %.1f med %.1f cyc  (GHz med %.2f)\n", fs[k], sa[1], sa[R/2], sb[1], sb[R/2], sg[R/2]);
      fflush(stdout);
    }
  }
  if (test == 0 || test == 2) {
    size_t Ns[] = {2048, 4096, 8192};   // 128, 256, 512 KiB of one-of-pair lines
    for (int k=0;k<3;k++){
      size_t n = Ns[k];
      size_t *a = malloc(n*8), *bd = malloc(n*8), *fl = malloc((16UL<<20)/64*8), nf = (16UL<<20)/64;
      for(size_t i=0;i<nf;i++){ fl[i] = (32UL<<20) + i*64; } shuffle(fl,nf); link_(b,fl,nf);
      size_t nl = (3UL<<20)/64, *l2f = malloc(nl*8); for(size_t i=0;i<nl;i++){ l2f[i] = (52UL<<20) + i*64; } shuffle(l2f,nl); link_(b,l2f,nl);
      double sw_[R], sc[R], sgz[R], sl[R], sh[R];
      for (int r=0;r<R;r++){
        sgz[r] = 1/addns(20000);
        for (int warm=0; warm<2; warm++){
          for(size_t i=0;i<n;i++){ size_t l = i*128 + 64*(rnd()&1); a[i]=l; bd[i]=l^64; }
          shuffle(a,n); shuffle(bd,n); link_(b,a,n); link_(b,bd,n);
          sinkp = chase(b+fl[0], nf);            // flush L2 (and most of L1/L2 state)
          if (warm) sinkp = chase(b+a[0], 4*n);
          double t=now(); void *p = chase(b+bd[0], n); double d=(now()-t)/n; sinkp=p;
          (warm ? sw_ : sc)[r] = d*sgz[r];
        }
        // controls: buddies chased once, then L2 flushed by a 3 MiB chase (more than L2, less than the
        // LLC share): the LLC's latency for these lines; and buddies chased twice then timed: L2 hits.
        sinkp = chase(b+fl[0], nf); sinkp = chase(b+bd[0], n); sinkp = chase(b+l2f[0], nl);
        { double t=now(); void *p = chase(b+bd[0], n); sl[r]=(now()-t)/n*sgz[r]; sinkp=p; }
        sinkp = chase(b+bd[0], 2*n);
        { double t=now(); void *p = chase(b+bd[0], n); sh[r]=(now()-t)/n*sgz[r]; sinkp=p; }
      }
      qsort(sw_,R,8,cmpd2); qsort(sc,R,8,cmpd2); qsort(sl,R,8,cmpd2); qsort(sh,R,8,cmpd2);
      printf("buddies N %zu (%zu KiB): after warm one-of-pair chase p10 %.1f med %.1f cyc; cold (DRAM) p10 %.1f med %.1f; LLC control p10 %.1f med %.1f; L2 control p10 %.1f med %.1f\n", n, n*64>>10, sw_[1], sw_[R/2], sc[1], sc[R/2], sl[1], sl[R/2], sh[1], sh[R/2]);
      fflush(stdout);
    }
  }
  return 0;
}
