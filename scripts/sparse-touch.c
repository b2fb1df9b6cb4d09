/* sparse-touch.c: seed 003 observation 1 on this machine's own kernel: one byte written every
 * 2MB over a large anonymous region, timed, with THP on (MADV_HUGEPAGE) and off
 * (MADV_NOHUGEPAGE), and the resident memory each leaves (issue 11's sparse-touch item, README
 * "Linux THP"). Not part of the build.
 *
 *   cc -O2 -o /tmp/sparse-touch scripts/sparse-touch.c
 *   for i in 1 2 3; do for m in huge base; do /tmp/sparse-touch 16384 $m noreport; done; done
 *
 * Arguments: SIZE_MB, `huge` or `base`, and optionally `noreport` (root: free page reporting
 * off for the run and all free memory touched once first, scripts/procfs.h; without it, on
 * this guest a first touch also faults the host's memory in). THP `enabled` must be `always`
 * or `madvise`. Prints the touching's wall time and the anonymous and THP memory it added
 * (/proc/meminfo).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "procfs.h"

int main(int argc, char **argv) {
	if (argc < 3 || argc > 4 || (strcmp(argv[2], "huge") && strcmp(argv[2], "base")) ||
	    (argc == 4 && strcmp(argv[3], "noreport"))) {
		fprintf(stderr, "usage: %s SIZE_MB huge|base [noreport]\n", argv[0]);
		return 2;
	}
	char old_report[64] = "";
	if (argc == 4) reporting_off_and_back_all(old_report, sizeof old_report);
	size_t size = strtoul(argv[1], NULL, 10) << 20, step = HPAGE;
	char *raw = mmap(NULL, size + step, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED) { perror("mmap"); return 1; }
	char *p = (char *)(((uintptr_t)raw + step - 1) & ~(step - 1));
	if (madvise(p, size, strcmp(argv[2], "huge") ? MADV_NOHUGEPAGE : MADV_HUGEPAGE)) {
		perror("madvise");
		return 1;
	}
	long rss0 = meminfo("AnonPages:"), thp0 = meminfo("AnonHugePages:");
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (size_t off = 0; off < size; off += step) p[off] = 1;
	clock_gettime(CLOCK_MONOTONIC, &b);
	long rss1 = meminfo("AnonPages:"), thp1 = meminfo("AnonHugePages:");
	reporting_restore(old_report);
	printf("%s %zu MB: %.1f ms, %zu touches, anon memory +%ld MB, of it THP +%ld MB\n", argv[2],
	       size >> 20, (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6, size / step,
	       (rss1 - rss0) / 1024, (thp1 - thp0) / 1024);
	return 0;
}
