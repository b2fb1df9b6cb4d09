/* pair-knee.c: does this machine's L2 hold the other line of each 128-byte pair it misses on
 * (Intel's L2 "spatial" / adjacent-line prefetcher, Intel 64 and IA-32 Architectures
 * Optimization Reference Manual, data prefetching: it completes a line fetched to L2 with the
 * line that pairs it to a 128-byte aligned chunk)? If it always did, a chase over one line of
 * each pair (what calibrate's latency curve and validate's rows use) would fill L2 with twice
 * its bytes and overflow at half the footprint of a chase over every line.
 *
 *   cc -O2 -o /tmp/pair-knee scripts/pair-knee.c
 *   flock -x /tmp/splab-quiet.lock /tmp/pair-knee
 *
 * For each data footprint F (bytes of lines the chase touches): a dependent random chase over
 * one line of each 128-byte pair of a 2F region (which line at random), and one over every
 * line of an F region; THP memory, each chase in its own 8 MiB slot; 15 interleaved rounds of
 * 3 laps of warm-up and 400,000 timed hops. Prints the 2nd fastest (p10) and median ns a hop. */
#include "chase-common.h"
int main(){
  size_t kib[]={16,512,768,1024,1280,1536,2048,3072}; int nk=8;
  size_t len=(128<<20); char*r=mmap(0,len+(2<<20),PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  char*a=(char*)(((uintptr_t)r+(2<<20)-1)&~((uintptr_t)(2<<20)-1)); madvise(a,len,MADV_HUGEPAGE); memset(a,0,len);
  /* m = 0: one line of each 128-byte pair over 2F; m = 1: every line over F; each in its own 8 MiB slot */
  void**st[8][2]; size_t nn[8][2];
  for(int k=0;k<nk;k++) for(int m=0;m<2;m++){ char*b=a+((size_t)(k*2+m)<<23); size_t n=kib[k]*1024/64; nn[k][m]=n; size_t*idx=malloc(n*sizeof*idx);
    for(size_t i=0;i<n;i++) idx[i]= m? i*64 : i*128+(rnd()&1)*64;
    shuffle(idx,n);
    for(size_t i=0;i<n;i++) *(void**)(b+idx[i])=b+idx[(i+1)%n];
    st[k][m]=(void**)(b+idx[0]); free(idx);}
  double s[8][2][15];
  for(int rd=0;rd<15;rd++) for(int k=0;k<nk;k++) for(int m=0;m<2;m++){ void**p=chase(st[k][m],3*nn[k][m]); size_t h=400000; double t=now(); p=chase(p,h); s[k][m][rd]=(now()-t)/h; st[k][m]=p; }
  for(int k=0;k<nk;k++){ for(int m=0;m<2;m++) qsort(s[k][m],15,sizeof(double),cmpd);
    printf("%5zu KiB of lines: one-of-pair %6.2f ns (med %6.2f)   every-line %6.2f ns (med %6.2f)\n",kib[k],s[k][0][1],s[k][0][7],s[k][1][1],s[k][1][7]); }
}
