/* frag-fault.c: THP fault latency on this machine's own kernel under seed 003's fragmentation
 * levels, the real-hardware check of issue 11's "kv cold at --frag 50: p95 fault latency at
 * least 2x --frag 0" (docs/linux-thp.md, docs/constants.md section 7). Not part of the build.
 * Needs root and no swap; it puts the THP knobs back as it found them.
 *
 *   cc -O2 -o /tmp/frag-fault scripts/frag-fault.c
 *   for f in 0 50 100 0 50 100; do /tmp/frag-fault $f 1024 always noreport; done
 *
 * Arguments: PCT (the level), WORK_MB (the workload's memory), DEFRAG (the value written to
 * /sys/kernel/mm/transparent_hugepage/defrag for the timed part: always, defer, madvise, ...),
 * then optionally `noreport` and `inproc`:
 *   noreport  turn the guest's free page reporting off for the run (page_reporting_order 11;
 *             put back after) and touch all free memory once first. This guest reports free
 *             2MB blocks to its host, which takes their memory back; a THP fault into such a
 *             block then also faults the host's pages in, milliseconds a fault (measured: p50
 *             6.8 ms at --frag 0 with reporting on), which is the host's doing, not the
 *             guest kernel's THP path.
 *   inproc    the fragmenting holder is this process itself (as scripts/compact-cost.c); by
 *             default it is a child that sleeps holding its memory, as seed 003's tool is a
 *             process of its own.
 * FRAG_FAULT_CSV=PATH writes each timed fault's latency and /proc/vmstat deltas;
 * FRAG_FAULT_PROACTIVE=20 FRAG_FAULT_IDLE=60 waits 60 s (seed 003's) with proactive compaction at
 * 20 between the fragmenting and the timed part (the timed part keeps it at 20);
 * FRAG_FAULT_SLACK_MB=1024 (default 3072) leaves less memory beside the workload's unfragmented,
 * so that the holder fragments ZONE_DMA32 too, as seed 003's tool does (it matters to
 * kcompactd, whose score weights each zone by its size). docs/linux-thp.md has the runs.
 *
 * 1. Fragments memory as seed 003's tool does (Quicksilver Frag/frag/fragment_level.c, as
 *    scripts/compact-cost.c): a holder maps all free memory but 3 GB (the slack) and WORK_MB,
 *    2MB-aligned, with MADV_HUGEPAGE, writes it, and munmaps all but the last 16 4KB pages of
 *    each 2MB block;
 *    `drop_caches` 2 runs the deferred-split shrinker, so each block becomes 16 resident pages
 *    and 496 free ones.
 * 2. Leaves (100 - PCT)% of WORK_MB as free 2MB blocks: with defrag=never (no compaction), a
 *    filler faults THPs until /proc/buddyinfo's free blocks of order 9 and up (2MB of them
 *    each for order 9, 4MB for 10) come down to that count. Its blocks stay resident.
 * 3. Writes DEFRAG, compaction_proactiveness 0 (no kcompactd on its own), then faults a fresh
 *    WORK_MB MADV_HUGEPAGE region one 2MB block at a time (one store at each block's start),
 *    timing each store with CLOCK_MONOTONIC: one fault each, a THP or, when the allocation
 *    failed, a 4KB page (the rest of the block is not touched, so no other fault is timed).
 * 4. Prints the latencies' p50 / p95 / p99 / max in ns, the THPs granted (AnonHugePages) and the
 *    /proc/vmstat deltas of the timed part.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "procfs.h"

#define PAGE 4096UL
#define KEEP 16

static const char *names[] = {"compact_stall", "compact_success", "compact_fail",
			      "thp_fault_alloc", "thp_fault_fallback", "pgmigrate_success",
			      "compact_migrate_scanned", "compact_free_scanned", "compact_isolated",
			      "compact_daemon_wake"};
#define NV 10
static void vmstat(uint64_t v[NV]) { vmstat_read(names, NV, v); }

/* Free memory in blocks of order 9 and up, in 2MB units (/proc/buddyinfo, every zone). */
static long free_2m_blocks(void) {
	char line[512];
	long total = 0;
	FILE *f = fopen("/proc/buddyinfo", "r");
	if (!f) { perror("/proc/buddyinfo"); exit(1); }
	while (fgets(line, sizeof line, f)) {
		char *p = strstr(line, "zone");
		if (!p) continue;
		p += 4;
		while (*p == ' ') p++;
		while (*p && *p != ' ') p++; /* the zone's name */
		for (int order = 0; order < 11; order++) {
			char *end;
			long n = strtol(p, &end, 10);
			if (end == p) break;
			p = end;
			if (order >= 9) total += n << (order - 9);
		}
	}
	fclose(f);
	return total;
}

static double now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The q-quantile of n sorted values (nearest rank). */
static double pctl(const double *v, size_t n, double q) {
	return v[(size_t)(q * (n - 1) + 0.5)];
}

static const char *DEFRAG = "/sys/kernel/mm/transparent_hugepage/defrag";
static const char *PROACT = "/proc/sys/vm/compaction_proactiveness";

int main(int argc, char **argv) {
	if (argc < 4 || argc > 6) {
		fprintf(stderr, "usage: %s PCT WORK_MB DEFRAG [noreport] [inproc]   (e.g. 50 1024 always noreport)\n",
			argv[0]);
		return 2;
	}
	long pct = strtol(argv[1], NULL, 10), work_mb = strtol(argv[2], NULL, 10);
	if (pct < 0 || pct > 100 || work_mb < 2) { fprintf(stderr, "bad PCT or WORK_MB\n"); return 2; }
	char old_defrag[64], old_proact[64];
	read_word(DEFRAG, old_defrag, sizeof old_defrag);
	read_word(PROACT, old_proact, sizeof old_proact);
	write_file(PROACT, "0");
	write_file(DEFRAG, "never");
	write_file("/proc/sys/vm/drop_caches", "3");
	char old_report[64] = "";
	int noreport = 0;
	for (int i = 4; i < argc; i++) noreport |= !strcmp(argv[i], "noreport");
	if (noreport) {
		write_file(DEFRAG, "madvise"); /* the touching takes THPs */
		reporting_off_and_back_all(old_report, sizeof old_report);
		write_file(DEFRAG, "never");
	}

	/* 1-2 run in a child that then sleeps holding its memory (seed 003's tool is a process of
	 * its own: migrating its pages flushes its TLB, not the faulting program's). It reports
	 * through a pipe. */
	int fd[2];
	if (pipe(fd)) { perror("pipe"); return 1; }
	long rep[4];
	/* `inproc` (a last argument): the holder is this process itself, as in
	 * scripts/compact-cost.c, so migrating its pages needs no other CPU's TLB flushed. */
	int inproc = !strcmp(argv[argc - 1], "inproc");
	pid_t child = inproc ? 0 : fork();
	if (child == 0) {
		if (!inproc) close(fd[0]);
		/* 1. The holder: all free memory but 3 GB and the workload's, left 16 pages a 2MB
		 *    block (the filler takes what is left over the target as THPs). */
		long free_mb = meminfo("MemFree:") / 1024;
		/* FRAG_FAULT_SLACK_MB (default 3072) is left beside the workload's; 1024 makes the
		 * holder reach into ZONE_DMA32 too, as seed 003's tool, which fragments every free
		 * block, does (the proactive compaction score weights each zone by its size). */
		long slack = getenv("FRAG_FAULT_SLACK_MB") ? atol(getenv("FRAG_FAULT_SLACK_MB")) : 3072;
		if (slack < 512 || free_mb < 1024 + slack + 2 * work_mb) {
			fprintf(stderr, "too little free memory or FRAG_FAULT_SLACK_MB under 512\n");
			_exit(1);
		}
		size_t hold = (size_t)(free_mb - slack - work_mb) / 2 * HPAGE;
		char *h = map_aligned(hold);
		write_file(DEFRAG, "madvise"); /* the holder's THPs may compact: before any timing */
		for (size_t off = 0; off < hold; off += HPAGE) memset(h + off, 1, HPAGE);
		rep[0] = (long)(hold >> 20);
		rep[1] = meminfo("AnonHugePages:") / 1024;
		for (size_t off = 0; off < hold; off += HPAGE) munmap(h + off, HPAGE - KEEP * PAGE);
		write_file("/proc/sys/vm/drop_caches", "2");
		sleep(1);
		write_file(DEFRAG, "never");
		/* 2. The filler: free 2MB blocks down to (100 - pct)% of the workload's. */
		long target = work_mb * (100 - pct) / 100 / 2;
		long before_fill = free_2m_blocks();
		size_t fill_max = (size_t)(before_fill > target ? before_fill - target : 0) * HPAGE;
		long filled = 0;
		if (fill_max) {
			/* Twice, 2 s apart: blocks that free page reporting had taken off the free lists
			 * for the host come back after a while. */
			char *fl = map_aligned(2 * fill_max);
			size_t off = 0;
			for (int pass = 0; pass < 2; pass++) {
				for (; off < 2 * fill_max && free_2m_blocks() > target; off += HPAGE) {
					memset(fl + off, 2, HPAGE);
					filled++;
				}
				sleep(2);
			}
		}
		rep[2] = before_fill;
		rep[3] = filled;
		if (!inproc) {
			if (write(fd[1], rep, sizeof rep) != sizeof rep) _exit(1);
			pause(); /* holds its memory until killed */
			_exit(0);
		}
	}
	if (!inproc) {
		close(fd[1]);
		if (read(fd[0], rep, sizeof rep) != sizeof rep) { fprintf(stderr, "the holder failed\n"); return 1; }
	}
	long target = work_mb * (100 - pct) / 100 / 2;
	long at_start = free_2m_blocks();

	/* Optionally, seed 003's 60 s between the tool and the workload with kcompactd's proactive
	 * compaction on (FRAG_FAULT_PROACTIVE=20 FRAG_FAULT_IDLE=60): what it does to the blocks. */
	const char *pro = getenv("FRAG_FAULT_PROACTIVE"), *idle = getenv("FRAG_FAULT_IDLE");
	uint64_t i0[NV], i1[NV];
	vmstat(i0);
	if (pro) write_file(PROACT, pro);
	if (idle) sleep((unsigned)atoi(idle));
	vmstat(i1);
	long after_idle = free_2m_blocks();

	/* 3. The timed part. */
	write_file(DEFRAG, argv[3]);
	size_t work = (size_t)work_mb << 20, blocks = work / HPAGE;
	char *w = map_aligned(work);
	double *lat = malloc(blocks * sizeof *lat);
	uint64_t a[NV], b[NV];
	vmstat(a);
	long thp0 = meminfo("AnonHugePages:");
	uint64_t (*delta)[NV] = calloc(blocks, sizeof *delta); /* [0]: compact_stall */
	double t0 = now_ns();
	for (size_t i = 0; i < blocks; i++) {
		uint64_t c0[NV], c1[NV];
		vmstat(c0);
		double s = now_ns();
		*(volatile char *)(w + i * HPAGE) = 3;
		lat[i] = now_ns() - s;
		vmstat(c1);
		for (int k = 0; k < NV; k++) delta[i][k] = c1[k] - c0[k];
	}
	double t1 = now_ns();
	/* The faults that compacted and those that did not, apart. */
	double *part[2];
	size_t np[2] = {0, 0};
	part[0] = malloc(blocks * sizeof(double));
	part[1] = malloc(blocks * sizeof(double));
	for (size_t i = 0; i < blocks; i++) { int k = delta[i][0] != 0; part[k][np[k]++] = lat[i]; }
	long thp1 = meminfo("AnonHugePages:");
	vmstat(b);
	write_file(DEFRAG, old_defrag);
	write_file(PROACT, old_proact);
	reporting_restore(old_report);
	if (!inproc) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
	/* Per stalled fault: its pages migrated against its latency (least squares), so the cost
	 * of a stall can be split into what migration adds and the rest. */
	double sx = 0, sy = 0, sxx = 0, sxy = 0, n = 0;
	for (size_t i = 0; i < blocks; i++) {
		if (!delta[i][0]) continue;
		double x = delta[i][5], y = lat[i];
		sx += x; sy += y; sxx += x * x; sxy += x * y; n++;
	}
	if (getenv("FRAG_FAULT_CSV")) {
		FILE *f = fopen(getenv("FRAG_FAULT_CSV"), "w");
		if (f) {
			fprintf(f, "fault,ns");
			for (int k = 0; k < NV; k++) fprintf(f, ",%s", names[k]);
			fprintf(f, "\n");
			for (size_t i = 0; i < blocks; i++) {
				fprintf(f, "%zu,%.0f", i, lat[i]);
				for (int k = 0; k < NV; k++) fprintf(f, ",%llu", (unsigned long long)delta[i][k]);
				fprintf(f, "\n");
			}
			fclose(f);
		}
	}

	qsort(lat, blocks, sizeof *lat, cmp);
	printf("frag %ld work_mb %ld defrag %s: held %ld MB (%ld MB as THPs), 2MB blocks free %ld -> "
	       "%ld after %ld filled (target %ld); THPs granted %ld of %zu; fault ns p50 %.0f p95 %.0f "
	       "p99 %.0f max %.0f; total ms %.1f;",
	       pct, work_mb, argv[3], rep[0], rep[1], rep[2], at_start, rep[3], target,
	       (thp1 - thp0) / 2048, blocks, pctl(lat, blocks, 0.5), pctl(lat, blocks, 0.95), pctl(lat, blocks, 0.99), lat[blocks - 1],
	       (t1 - t0) / 1e6);
	for (int i = 0; i < NV; i++) printf(" %s %llu", names[i], (unsigned long long)(b[i] - a[i]));
	printf("\n");
	if (pro || idle) {
		printf("  idle %s s at compaction_proactiveness %s: 2MB blocks free %ld -> %ld;", idle ? idle : "0",
		       pro ? pro : "0", at_start, after_idle);
		for (int i = 5; i < NV; i++) printf(" %s %llu", names[i], (unsigned long long)(i1[i] - i0[i]));
		printf("\n");
	}
	for (int k = 0; k < 2; k++) {
		if (!np[k]) continue;
		qsort(part[k], np[k], sizeof(double), cmp);
		printf("  %s: %zu faults, ns p50 %.0f p95 %.0f max %.0f\n",
		       k ? "with a compaction stall" : "without", np[k], pctl(part[k], np[k], 0.5),
		       pctl(part[k], np[k], 0.95), part[k][np[k] - 1]);
	}
	if (n > 2 && n * sxx - sx * sx > 0) {
		double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
		printf("  stalls: %.1f pages migrated each (mean); latency = %.0f ns + %.0f ns a page "
		       "migrated (least squares over the %.0f stalls)\n",
		       sx / n, (sy - slope * sx) / n, slope, n);
	}
	return 0;
}
