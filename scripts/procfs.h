/* procfs.h: the /proc and /sys reads and writes scripts/compact-cost.c and scripts/frag-fault.c
 * share. Not part of the build; each script includes it from its own directory. */
#ifndef SPLAB_SCRIPTS_PROCFS_H
#define SPLAB_SCRIPTS_PROCFS_H
#include <fcntl.h>
#include <sys/mman.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The /proc/vmstat counters named in names[0..n) into v (0 for a counter the kernel lacks). */
__attribute__((unused)) static void vmstat_read(const char *const *names, int n, uint64_t *v) {
	char line[256];
	FILE *f = fopen("/proc/vmstat", "r");
	if (!f) { perror("/proc/vmstat"); exit(1); }
	memset(v, 0, n * sizeof *v);
	while (fgets(line, sizeof line, f))
		for (int i = 0; i < n; i++) {
			size_t len = strlen(names[i]);
			if (!strncmp(line, names[i], len) && line[len] == ' ')
				v[i] = strtoull(line + len + 1, NULL, 10);
		}
	fclose(f);
}

/* Writes s to a /proc or /sys file, or exits naming it. */
__attribute__((unused)) static void write_file(const char *path, const char *s) {
	int fd = open(path, O_WRONLY);
	if (fd < 0 || write(fd, s, strlen(s)) < 0) { perror(path); exit(1); }
	close(fd);
}

/* A /proc/meminfo field in kB ("MemFree:"), -1 if absent. */
__attribute__((unused)) static long meminfo(const char *key) {
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/meminfo", "r");
	if (!f) { perror("/proc/meminfo"); exit(1); }
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, key, strlen(key)))
			v = strtol(line + strlen(key) + 1, NULL, 10);
	fclose(f);
	return v;
}

/* The bracketed word of a sysfs choice ("always [madvise] never"), or the whole line. */
__attribute__((unused)) static void read_word(const char *path, char *out, size_t n) {
	char line[256] = "";
	FILE *f = fopen(path, "r");
	if (!f || !fgets(line, sizeof line, f)) { perror(path); exit(1); }
	fclose(f);
	char *a = strchr(line, '['), *b = a ? strchr(a, ']') : NULL;
	if (a && b) { *b = 0; snprintf(out, n, "%s", a + 1); }
	else { line[strcspn(line, "\n")] = 0; snprintf(out, n, "%s", line); }
}

#define HPAGE (2UL << 20) /* a 2MB THP */

/* SIZE bytes of anonymous memory at a 2MB boundary, given MADV_HUGEPAGE. */
__attribute__((unused)) static char *map_aligned(size_t size) {
	char *raw = mmap(NULL, size + HPAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);
	if (raw == MAP_FAILED) { perror("mmap"); exit(1); }
	char *p = (char *)(((uintptr_t)raw + HPAGE - 1) & ~(HPAGE - 1));
	if (madvise(p, size, MADV_HUGEPAGE)) { perror("madvise"); exit(1); }
	return p;
}

static const char *const PAGE_REPORTING = "/sys/module/page_reporting/parameters/page_reporting_order";

/* A guest with free page reporting (virtio-balloon) gives its free 2MB blocks back to the host,
 * and a first touch of one then also faults the host's pages in (a THP fault of this guest:
 * milliseconds). Turns reporting off (page_reporting_order 11, the old value into old), waits
 * for blocks being reported to come back, and writes all free memory but 1 GB once, so that
 * the runs after touch memory the host backs. reporting_restore puts the old value back. */
__attribute__((unused)) static void reporting_off_and_back_all(char *old, size_t n) {
	read_word(PAGE_REPORTING, old, n);
	write_file(PAGE_REPORTING, "11");
	sleep(3);
	size_t all = (size_t)(meminfo("MemFree:") / 1024 - 1024) / 2 * HPAGE;
	char *t = map_aligned(all);
	for (size_t off = 0; off < all; off += HPAGE) memset(t + off, 4, HPAGE);
	munmap(t, all);
}

__attribute__((unused)) static void reporting_restore(const char *old) {
	if (old[0]) write_file(PAGE_REPORTING, old);
}
#endif
