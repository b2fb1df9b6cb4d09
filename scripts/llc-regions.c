/* llc-regions.c: does the LLC's latency depend on where a chase's memory lies? calibrate's LLC
 * latency point (a dependent random chase over 3 MiB of lines, one line of each 128-byte pair,
 * THP memory, its own region) timed over R separate regions in the same rounds: each round
 * times every region once (one lap of warm-up, then one timed lap) in a rotating order, and an
 * add chain (the clock in that round). If the regions' medians differ by more than each
 * region's spread over the rounds, the latency is the region's (its frames' place), not only
 * the moment's; if they move together, it is the moment's.
 *
 *   cc -O2 -o /tmp/llc-regions scripts/llc-regions.c
 *   flock -x /tmp/splab-quiet.lock /tmp/llc-regions 12 31     # 12 regions, 31 rounds, ~3 s
 *   flock -x /tmp/splab-quiet.lock /tmp/llc-regions 1 31 256  # 1 region, a 256 MiB read before
 *                                                             # each region's warm-up lap
 *
 * Prints, per region, its first 2MB page's guest-physical address (/proc/self/pagemap, root),
 * the p10 / median / p90 ns a hop over the rounds and the median in add-chain cycles; then per
 * round the median over regions (the moment's drift). */
#include "chase-common.h"
#include <fcntl.h>
#include <unistd.h>
static double pct(double*v,int n,double q){double*c=malloc(n*sizeof*c);memcpy(c,v,n*sizeof*c);qsort(c,n,sizeof*c,cmpd);double r=c[(int)(q*(n-1)+0.5)];free(c);return r;}
static uint64_t gpa(void*va){int fd=open("/proc/self/pagemap",O_RDONLY);if(fd<0)return 0;uint64_t e=0;pread(fd,&e,8,((uintptr_t)va/4096)*8);close(fd);return (e&(1ull<<63))?(e&((1ull<<55)-1))*4096:0;}
int main(int argc,char**argv){
  int R=argc>1?atoi(argv[1]):12, NR=argc>2?atoi(argv[2]):31; size_t foot=3<<20, span=2*foot, n=foot/64;
  size_t T=(argc>3?(size_t)atoi(argv[3]):0)<<20; volatile uint64_t sink=0; uint64_t*th=0;
  if(T){ th=mmap(0,T,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0); madvise(th,T,MADV_HUGEPAGE); memset(th,1,T); }
  void***st=malloc(R*sizeof*st); uint64_t*pa=malloc(R*8);
  for(int r=0;r<R;r++){ char*m=mmap(0,span+(2<<20),PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
    char*b=(char*)(((uintptr_t)m+(2<<20)-1)&~((uintptr_t)(2<<20)-1)); madvise(b,span,MADV_HUGEPAGE); memset(b,0,span); pa[r]=gpa(b);
    size_t*idx=malloc(n*sizeof*idx); for(size_t i=0;i<n;i++) idx[i]=i*128+(rnd()&1)*64;
    shuffle(idx,n);
    for(size_t i=0;i<n;i++) *(void**)(b+idx[i])=b+idx[(i+1)%n]; st[r]=(void**)(b+idx[0]); free(idx); }
  double*s=malloc(sizeof(double)*R*NR), *ad=malloc(sizeof(double)*NR);
  for(int rd=0;rd<NR;rd++){ for(int k=0;k<R;k++){ int r=(k+rd)%R; if(T){uint64_t a=0;for(size_t i=0;i<T/8;i+=8)a+=th[i];sink+=a;} void**p=chase(st[r],n); double t=now(); p=chase(p,n); s[r*NR+rd]=(now()-t)/n; st[r]=p; }
    ad[rd]=add_ns(200000); }
  double addm=pct(ad,NR,0.5); printf("add chain median %.4f ns (%.3f GHz)\n",addm,1/addm);
  for(int r=0;r<R;r++) printf("region %2d gpa %#12llx  p10 %.2f  med %.2f  p90 %.2f ns  med %.1f cyc\n",r,(unsigned long long)pa[r],pct(s+r*NR,NR,0.1),pct(s+r*NR,NR,0.5),pct(s+r*NR,NR,0.9),pct(s+r*NR,NR,0.5)/addm);
  printf("per round, median over regions (ns):"); for(int rd=0;rd<NR;rd++){double*c=malloc(R*8);for(int r=0;r<R;r++)c[r]=s[r*NR+rd];printf(" %.1f",pct(c,R,0.5));free(c);} printf("\n");
  return 0;
}
