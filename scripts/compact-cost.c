/* compact-cost.c: what the host kernel's memory compaction costs per page migrated and per pfn
 * scanned, to charge page migration in vm/compact.rs (docs/constants.md section 7). Not part
 * of the build. Needs root, THP enabled (always or madvise), and a mostly idle machine.
 *
 *   cc -O2 -o /tmp/compact-cost scripts/compact-cost.c
 *   echo 0 > /proc/sys/vm/compaction_proactiveness   # no kcompactd while it holds (restore after)
 *   /tmp/compact-cost 4096 16     # MB fragmented, 4KB pages kept in each 2MB block
 *   /tmp/compact-cost 4096 128
 *   /tmp/compact-cost copy         # ns per 4KB page memcpy'd, cold (the copy inside a migration)
 *
 * It fragments memory as seed 003's tool does (Quicksilver Frag/frag/fragment_level.c): maps
 * SIZE MB of 2MB-aligned anonymous memory with MADV_HUGEPAGE, writes it (a THP a block), and
 * munmaps all but the last KEEP 4KB pages of each block. The partly unmapped THPs are split by
 * the deferred-split shrinker, which `echo 2 > /proc/sys/vm/drop_caches` runs (drop_slab), so
 * each block becomes KEEP resident pages and 512 - KEEP free ones. Then it writes 1 to
 * /proc/sys/vm/compact_memory (compact_nodes: synchronous compaction of every zone, run in the
 * writer's context) twice, and prints for each run the wall time, the process's system time
 * and the /proc/vmstat deltas (pgmigrate_success, compact_migrate_scanned,
 * compact_free_scanned, compact_isolated). The second run finds memory already compacted: its
 * scanning with little migration is the second point of the fit
 *   time = a * migrated + b * migrate_scanned + c * free_scanned.
 * The holder exits at the end (its memory freed).
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "procfs.h"

#define PAGE 4096UL

static const char *names[] = {"pgmigrate_success", "compact_migrate_scanned",
			      "compact_free_scanned", "compact_isolated"};
#define NV 4
static void vmstat(uint64_t v[NV]) { vmstat_read(names, NV, v); }

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static double stime(void) {
	struct rusage r;
	getrusage(RUSAGE_SELF, &r);
	return r.ru_stime.tv_sec + r.ru_stime.tv_usec * 1e-6;
}

static void compact_once(const char *label) {
	uint64_t a[NV], b[NV];
	vmstat(a);
	double s0 = stime(), t0 = now();
	write_file("/proc/sys/vm/compact_memory", "1");
	double t1 = now(), s1 = stime();
	vmstat(b);
	printf("%s wall_ms %.2f sys_ms %.2f", label, (t1 - t0) * 1e3, (s1 - s0) * 1e3);
	for (int i = 0; i < NV; i++)
		printf(" %s %llu", names[i], (unsigned long long)(b[i] - a[i]));
	printf("\n");
	fflush(stdout);
}

/* `compact-cost copy`: ns per 4KB page copied (memcpy) from one 256MB buffer to another, both
 * written first (so no faults), each page once: as cold as a migration's copy. */
static int copy_cost(void) {
	size_t n = 256UL << 20;
	char *a = malloc(n), *b = malloc(n);
	memset(a, 1, n);
	memset(b, 2, n);
	for (int r = 0; r < 5; r++) {
		double t0 = now();
		for (size_t off = 0; off < n; off += PAGE)
			memcpy(b + off, a + off, PAGE);
		double t1 = now();
		printf("copy ns_per_page %.1f\n", (t1 - t0) * 1e9 / (n / PAGE));
	}
	return b[12345] - 1;
}

int main(int argc, char **argv) {
	if (argc == 2 && !strcmp(argv[1], "copy"))
		return copy_cost();
	if (argc < 3) { fprintf(stderr, "usage: %s SIZE_MB KEEP_PAGES\n", argv[0]); return 2; }
	size_t size = strtoul(argv[1], NULL, 10) << 20;
	size_t keep = strtoul(argv[2], NULL, 10);
	size_t blocks = size / HPAGE;
	char *raw = mmap(NULL, size + HPAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);
	if (raw == MAP_FAILED) { perror("mmap"); return 1; }
	char *p = (char *)(((uintptr_t)raw + HPAGE - 1) & ~(HPAGE - 1));
	madvise(p, size, MADV_HUGEPAGE);
	for (size_t i = 0; i < blocks; i++)
		memset(p + i * HPAGE, 1, HPAGE);
	long thp = meminfo("AnonHugePages:");
	for (size_t i = 0; i < blocks; i++)
		munmap(p + i * HPAGE, HPAGE - keep * PAGE);
	long free0 = meminfo("MemFree:");
	write_file("/proc/sys/vm/drop_caches", "2");
	sleep(1);
	long free1 = meminfo("MemFree:");
	printf("blocks %zu keep %zu AnonHugePages_kB %ld MemFree_kB %ld -> %ld after split\n", blocks,
	       keep, thp, free0, free1);
	/* Where the kept pages are: pfns in 1GB (262144-pfn) buckets, from /proc/self/pagemap. */
	int pm = open("/proc/self/pagemap", O_RDONLY);
	long hist[64] = {0};
	for (size_t i = 0; pm >= 0 && i < blocks; i++) {
		uint64_t e;
		uintptr_t va = (uintptr_t)(p + (i + 1) * HPAGE - PAGE);
		if (pread(pm, &e, 8, (va / PAGE) * 8) == 8 && (e >> 63)) {
			uint64_t pfn = e & ((1ULL << 55) - 1);
			hist[(pfn >> 18) < 63 ? (pfn >> 18) : 63]++;
		}
	}
	printf("kept pages' pfns by GB:");
	for (int i = 0; i < 64; i++)
		if (hist[i])
			printf(" %d:%ld", i, hist[i]);
	printf("\n");
	int runs = argc > 3 ? atoi(argv[3]) : 2;
	for (int r = 0; r < runs; r++) {
		char label[16];
		snprintf(label, sizeof label, "run%d", r + 1);
		compact_once(label);
	}
	return 0;
}
