/* mlp-load.c: loaded latency natively. K interleaved dependent chases over F MiB of
 * MADV_HUGEPAGE memory, one random line per hop drawn from all of its lines (each chase its own
 * random cycle over 1/K of them, positions kept across timed runs so every run misses), for
 * K = 1, 2, 4, 8, 12, 14, 16, twice; prints the ns per hop (p10 of 9 runs) and the time a miss
 * takes, K x the hop (Little's law: below the fill buffers' limit each chase has one miss in
 * flight). docs/validation.md "Loaded latency: the MLP rows" has the runs; the model's side is
 * examples/mlp_chase.rs.
 *   cc -O2 -o /tmp/mlp-load scripts/mlp-load.c
 *   flock -x /tmp/splab-quiet.lock /tmp/mlp-load 256     # F in MiB; ~30 s at 256, ~2 min at 1024
 * Not part of the build. */
#include "chase-common.h"
#define KMAX 16
static double run(void **s, int k, size_t hops){
  void **p=s;
  double t=now();
  for(size_t h=0;h<hops;h++){ for(int i=0;i<k;i++){ p[i]=*(void**)p[i]; __asm__ volatile(""::"r"(p[i])); } }
  double d=now()-t; return d/(hops*k); }
int main(int argc,char**argv){
  size_t F=strtoul(argv[1],0,0)<<20; size_t nl=F/64;
  char *b=thp_region(F);
  size_t use = nl;   /* lines in the chase */
  size_t *l=malloc(nl*8); for(size_t i=0;i<nl;i++) l[i]=i; shuffle(l,nl);
  int ks[]={1,2,4,8,12,14,16};
  for(int r=0;r<2;r++) for(int ki=0;ki<7;ki++){ int k=ks[ki];
    size_t per=use/k; void *s[KMAX];
    for(int c=0;c<k;c++){ size_t *v=l+c*per; for(size_t i=0;i<per;i++) *(void**)(b+v[i]*64)=b+v[(i+1)%per]*64; s[c]=b+v[0]*64; }
    size_t hops=per<(1<<16)?per:(1<<16);
    run(s,k,hops/4); double x[9]; for(int j=0;j<9;j++) x[j]=run(s,k,hops/2); qsort(x,9,8,cmpd);
    printf("F=%zuMiB K=%2d hop %.2f ns  per-miss %.1f ns\n",F>>20,k,x[1],x[1]*k); fflush(stdout); }
  return 0; }
