/* llc-burst.c: does calibrate's LLC burst recover from the benchmark before it? The LLC latency
 * point's chase (3 MiB of lines, one of each 128-byte pair, THP memory) run as calibrate's burst
 * runs it (two laps of warm-up, then timed runs of 80,000 hops, about 3 ms each) after a
 * sequential read of T MiB (the zeroing/copying burst that precedes it in calibrate reads 512
 * MiB); eight such rounds, every run printed in ns a hop.
 *
 *   cc -O2 -o /tmp/llc-burst scripts/llc-burst.c
 *   flock -x /tmp/splab-quiet.lock /tmp/llc-burst 512 12     # T = 512 MiB, 12 runs a round
 */
#include "chase-common.h"
int main(int argc,char**argv){
  size_t T=(size_t)atoi(argv[1])<<20; int runs=atoi(argv[2]); size_t foot=3<<20, span=2*foot, n=foot/64;
  char*m=mmap(0,span+(2<<20),PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  char*b=(char*)(((uintptr_t)m+(2<<20)-1)&~((uintptr_t)(2<<20)-1)); madvise(b,span,MADV_HUGEPAGE); memset(b,0,span);
  size_t*idx=malloc(n*sizeof*idx); for(size_t i=0;i<n;i++) idx[i]=i*128+(rnd()&1)*64;
  shuffle(idx,n);
  for(size_t i=0;i<n;i++) *(void**)(b+idx[i])=b+idx[(i+1)%n]; void**p=(void**)(b+idx[0]);
  uint64_t*th=mmap(0,T,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0); madvise(th,T,MADV_HUGEPAGE); memset(th,1,T); volatile uint64_t sink=0;
  for(int rd=0;rd<8;rd++){ uint64_t a=0; for(size_t i=0;i<T/8;i+=8)a+=th[i]; sink+=a;
    p=chase(p,2*n); printf("round %d:",rd); for(int r=0;r<runs;r++){ size_t h=80000; double t=now(); p=chase(p,h); printf(" %.1f",(now()-t)/h);} printf("\n"); }
}
