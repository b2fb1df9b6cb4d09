/* l2-interleaved.c: calibrate's L2 latency point outside calibrate. A dependent random chase over
 * one line of each 128-byte pair (which line at random), THP memory, at the footprints
 * calibrate's latency curve interleaves (16 KiB to 4 MiB of lines, each in its own 2MB-aligned
 * part of one region), every round timing each footprint once (2 laps of warm-up, the fastest of
 * three 4096-hop probes sizes a run of about 3 ms) and an add chain, 21 rounds, the p10 of each.
 *
 *   cc -O2 -o /tmp/l2-interleaved scripts/l2-interleaved.c
 *   flock -x /tmp/splab-quiet.lock /tmp/l2-interleaved 1 11    # all 11 footprints interleaved
 *   flock -x /tmp/splab-quiet.lock /tmp/l2-interleaved 1 4     # 16 KiB to 128 KiB only
 *   flock -x /tmp/splab-quiet.lock /tmp/l2-interleaved 0 4     # 128 KiB alone, round after round
 *
 * Prints each footprint's p10 ns a hop and that over the add chain's p10 ("cyc"; this probe's
 * 8-add loop reads the L1 hop as 4.6-5.0 of them: compare footprints by their ratio to the
 * 16 KiB hop, an L1 hit of 5 cycles on Golden Cove). */
#include "chase-common.h"
int main(int argc,char**argv){
  int inter=atoi(argv[1]); size_t foots[11]={16,32,64,128,256,512,1024,1536,2048,3072,4096}; int nf=argc>2?atoi(argv[2]):4; size_t offs[12]; offs[0]=0; for(int f=0;f<11;f++){size_t b=2*foots[f]*1024; offs[f+1]=offs[f]+((b+(2<<20)-1)&~((size_t)(2<<20)-1));}
  size_t tot=offs[nf]; size_t len=tot+(2<<20); char*r=mmap(0,len,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  char*a=(char*)(((uintptr_t)r+(2<<20)-1)&~((uintptr_t)(2<<20)-1)); madvise(a,tot,MADV_HUGEPAGE); memset(a,0,tot);
  void**st[11]; size_t nn[11];
  for(int f=0;f<nf;f++){ char*b=a+offs[f]; size_t n=foots[f]*1024/64; nn[f]=n; size_t*idx=malloc(n*sizeof*idx);
    for(size_t i=0;i<n;i++) idx[i]=i*128+(rnd()&1)*64;
    shuffle(idx,n);
    for(size_t i=0;i<n;i++) *(void**)(b+idx[i])=b+idx[(i+1)%n]; st[f]=(void**)(b+idx[0]); }
  double s[12][21];
  for(int rd=0;rd<21;rd++){ for(int f=0;f<nf;f++){ if(!inter && f!=3) {s[f][rd]=0;continue;}
      void**p=chase(st[f],2*nn[f]); double per=1e9; for(int k=0;k<3;k++){double t=now();p=chase(p,4096);double x=(now()-t)/4096;if(x<per)per=x;}
      size_t h=((size_t)(3e6/per))&~7ul; double t=now(); p=chase(p,h); s[f][rd]=(now()-t)/h; st[f]=p; }
    s[11][rd]=add_ns(2000000); }
  for(int f=0;f<12;f++) qsort(s[f],21,sizeof(double),cmpd);
  printf("inter %d: ",inter); for(int f=0;f<nf;f++) printf("%zuK %.3f ns (%.1f cyc)  ",foots[f],s[f][2],s[f][2]/s[11][2]); printf("add %.4f\n",s[11][2]);
}
