/* llc-monitor.c: the LLC's state over time, beside L2 and DRAM. One line a call: an add chain's
 * clock and the p10 (and median) ns a hop of dependent random chases over 64 KiB (L2), 3 MiB
 * (calibrate's LLC latency point), 6 MiB and 128 MiB (DRAM) of lines, one line of each 128-byte
 * pair, THP memory, 15 interleaved rounds. Run it every few minutes to see whether the LLC moves
 * while L2 and DRAM stay:
 *
 *   cc -O2 -o /tmp/llc-monitor scripts/llc-monitor.c
 *   while true; do flock -x /tmp/splab-quiet.lock /tmp/llc-monitor >> mon.log; sleep 240; done
 */
#include "chase-common.h"
static void** mk(size_t foot){ size_t span=2*foot,n=foot/64; char*m=mmap(0,span+(2<<20),PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  char*b=(char*)(((uintptr_t)m+(2<<20)-1)&~((uintptr_t)(2<<20)-1)); madvise(b,span,MADV_HUGEPAGE); memset(b,0,span);
  size_t*idx=malloc(n*sizeof*idx); for(size_t i=0;i<n;i++) idx[i]=i*128+(rnd()&1)*64;
  shuffle(idx,n);
  for(size_t i=0;i<n;i++) *(void**)(b+idx[i])=b+idx[(i+1)%n]; void**p=(void**)(b+idx[0]); free(idx); return p;}
int main(){ size_t f[4]={64<<10,3<<20,6<<20,128<<20}; void**p[4]; for(int i=0;i<4;i++)p[i]=mk(f[i]);
  double s[5][15];
  for(int rd=0;rd<15;rd++){ for(int i=0;i<4;i++){ size_t n=f[i]/64; size_t w=n<200000?2*n:100000; p[i]=chase(p[i],w); size_t h=i==3?20000:(n<60000?60000:n); double t=now(); p[i]=chase(p[i],h); s[i][rd]=(now()-t)/h; } s[4][rd]=add_ns(200000); }
  for(int i=0;i<5;i++) qsort(s[i],15,sizeof(double),cmpd);
  time_t tt=time(0); struct tm*g=gmtime(&tt); printf("%02d:%02d  add %.4f ns (%.2f GHz)  64K %.2f  3M %.2f  6M %.2f  128M %.1f ns (p10; medians %.2f %.2f %.2f %.1f)\n",g->tm_hour,g->tm_min,s[4][7],1/s[4][7],s[0][1],s[1][1],s[2][1],s[3][1],s[0][7],s[1][7],s[2][7],s[3][7]);
}
