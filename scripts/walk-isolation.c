// Build: cc -O2 -o /tmp/walk-isolation scripts/walk-isolation.c; run on an idle machine (docs/validation.md, "Runs of 2026-11-27 08:00").
// Walk isolation on this guest: a dependent chain of loads, one per 4KB page, whose data all
// lie in ONE physical page (the shared zero page: read faults on an untouched MADV_NOHUGEPAGE
// region map it), so the data always hit L1 while every hop's translation misses the STLB and
// walks. Cases (ns per hop, p10 of clean runs):
//   ctl   : the same loop, all offsets in one touched 4KB page (L1 DTLB hit, L1 data hit)
//   stlb  : zero page, 1024 pages random order (STLB hits; SN=PAGES in the environment: PAGES)
//   walkL2: zero page, N pages random order (PTE lines: N*8 bytes, beyond L1)
//   walkL1: zero page, N pages, groups of 8 pages sharing one PTE line, visited together in
//           random order inside the group, groups in random order: 7 of 8 walks find their PTE
//           line in L1 (the previous walk loaded it)
//   real4k: touched MADV_NOHUGEPAGE region (frames as the allocator scatters them), same loop
//   contig: touched MADV_HUGEPAGE region split into 4KB PTEs (contiguous frames), same loop
// Offsets are uint32 in an array read in order (not on the dependent chain).
#include "chase-common.h"
#include <fcntl.h>
#include <unistd.h>


static char *map(size_t len, int adv){
  char *raw = mmap(0, len+HUGE, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE, -1, 0);
  if (raw==MAP_FAILED){perror("mmap");exit(1);}
  madvise(raw, len+HUGE, adv);
  return (char*)(((uintptr_t)raw + HUGE-1) & ~(HUGE-1));
}
static size_t ranges(char *base, size_t len){
  int fd = open("/proc/self/pagemap", O_RDONLY); if (fd<0) return 0;
  size_t n = len/PAGE; uint64_t *e = malloc(n*8);
  pread(fd, e, n*8, (uintptr_t)base/PAGE*8); close(fd);
  uint64_t *r = malloc(n*8); size_t m=0;
  for (size_t i=0;i<n;i++) if (e[i]>>63) r[m++] = (e[i] & ((1ULL<<55)-1))>>9;
  // count distinct
  int cmp(const void*a,const void*b){uint64_t x=*(uint64_t*)a,y=*(uint64_t*)b;return x<y?-1:x>y;}
  qsort(r,m,8,cmp); size_t d=0; for(size_t i=0;i<m;i++) if(!i||r[i]!=r[i-1]) d++;
  free(e); free(r); return d;
}

__attribute__((noinline)) static uint64_t run(const char *base, const uint32_t *off, size_t n, size_t hops){
  uint64_t v = 0; size_t mask = n-1;
  for (size_t i=0;i<hops;i+=4){
    v = *(volatile const uint64_t*)(base + off[(i)&mask] + v);
    v = *(volatile const uint64_t*)(base + off[(i+1)&mask] + v);
    v = *(volatile const uint64_t*)(base + off[(i+2)&mask] + v);
    v = *(volatile const uint64_t*)(base + off[(i+3)&mask] + v);
  }
  return v;
}
static double timeit(const char *base, const uint32_t *off, size_t n){
  size_t hops = 1<<18; double s[41]; int k=0, tries=0;
  run(base,off,n,n*4);
  while (k<31 && tries<200){ tries++; long a=sw(); double t=now(); run(base,off,n,hops); double d=now()-t; if (sw()==a) s[k++]=d/hops; }
  qsort(s,k,sizeof(double),cmpd); return s[k/10];
}
static void shuffle32(uint32_t *v, size_t n){ for(size_t i=n-1;i>0;i--){ size_t j=rnd()%(i+1); uint32_t t=v[i]; v[i]=v[j]; v[j]=t; } }

int main(int argc, char **argv){
  size_t N = argc>1 ? strtoul(argv[1],0,0) : 16384;
  double ghz = argc>2 ? atof(argv[2]) : 2.994;
  size_t len = N*PAGE;
  uint32_t *off = aligned_alloc(64, (N < 1024 ? 1024 : N)*4);
  // ctl: one touched page
  char *one = map(HUGE, MADV_NOHUGEPAGE); memset(one, 0, PAGE);
  for (size_t i=0;i<N;i++) off[i] = (rnd()%64)*64;
  double ctl = timeit(one, off, N);
  // zero-page region
  char *z = map(len, MADV_NOHUGEPAGE);
  volatile uint64_t sink=0; for (size_t p=0;p<N;p++) sink += *(volatile uint64_t*)(z+p*PAGE);
  size_t zr = ranges(z, len);
  // stlb: 1024 pages
  { size_t n = getenv("SN") ? strtoul(getenv("SN"),0,0) : 1024; for(size_t i=0;i<n;i++) off[i]=i; shuffle32(off,n); for(size_t i=0;i<n;i++) off[i]=off[i]*PAGE+(rnd()%64)*64;
    double t = timeit(z, off, n); printf("stlb   (zero page, %zu pages)        %6.2f ns  %6.1f cyc  (+%.1f over ctl)\n", n, t, t*ghz, (t-ctl)*ghz); }
  // walkL2
  for(size_t i=0;i<N;i++) off[i]=i; shuffle32(off,N); for(size_t i=0;i<N;i++) off[i]=off[i]*PAGE+(rnd()%64)*64;
  double wl2 = timeit(z, off, N);
  // walkL1: groups of 8
  { size_t g=N/8; uint32_t *go = malloc(g*4); for(size_t i=0;i<g;i++) go[i]=i; shuffle32(go,g);
    for(size_t i=0;i<g;i++){ uint32_t in[8]; for(int j=0;j<8;j++) in[j]=j; shuffle32(in,8);
      for(int j=0;j<8;j++) off[i*8+j] = (go[i]*8+in[j])*PAGE + (rnd()%64)*64; } }
  double wl1 = timeit(z, off, N);
  printf("ctl    (one page)                     %6.2f ns  %6.1f cyc\n", ctl, ctl*ghz);
  printf("walkL2 (zero page, %zu pages, ranges %zu) %6.2f ns  %6.1f cyc  (+%.1f over ctl)\n", N, zr, wl2, wl2*ghz, (wl2-ctl)*ghz);
  printf("walkL1 (zero page, groups of 8)       %6.2f ns  %6.1f cyc  (+%.1f over ctl)\n", wl1, wl1*ghz, (wl1-ctl)*ghz);
  // real 4k scattered
  for(size_t i=0;i<N;i++) off[i]=i; shuffle32(off,N); for(size_t i=0;i<N;i++) off[i]=off[i]*PAGE+(rnd()%64)*64;
  char *r4 = map(len, MADV_NOHUGEPAGE); memset(r4, 0, len);
  double t4 = timeit(r4, off, N);
  printf("real4k (touched 4KB, ranges %zu)       %6.2f ns  %6.1f cyc  (+%.1f over ctl)\n", ranges(r4,len), t4, t4*ghz, (t4-ctl)*ghz);
  char *rc = map(len, MADV_HUGEPAGE); memset(rc, 0, len);
  for (size_t o=0;o<len;o+=HUGE){ mprotect(rc+o, PAGE, PROT_READ); mprotect(rc+o, PAGE, PROT_READ|PROT_WRITE); }
  madvise(rc, len, MADV_NOHUGEPAGE);
  double tc = timeit(rc, off, N);
  printf("contig (THP split, ranges %zu)          %6.2f ns  %6.1f cyc  (+%.1f over ctl)\n", ranges(rc,len), tc, tc*ghz, (tc-ctl)*ghz);
  // contig with TLB hits (THP not split): data part alone
  char *rh = map(len, MADV_HUGEPAGE); memset(rh, 0, len);
  { FILE *f=fopen("/proc/self/smaps_rollup","r"); char l[256]; while(fgets(l,256,f)) if(!strncmp(l,"AnonHugePages",13)) printf("rollup %s", l); fclose(f); }
  double th = timeit(rh, off, N);
  printf("thp    (2MB pages, same offsets)       %6.2f ns  %6.1f cyc  (+%.1f over ctl)\n", th, th*ghz, (th-ctl)*ghz);
  return (int)(sink&0);
}
