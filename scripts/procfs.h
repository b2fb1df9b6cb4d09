/* procfs.h: the /proc and /sys reads and writes scripts/compact-cost.c and scripts/frag-fault.c
 * share. Not part of the build; each script includes it from its own directory. */
#ifndef SPLAB_SCRIPTS_PROCFS_H
#define SPLAB_SCRIPTS_PROCFS_H
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The /proc/vmstat counters named in names[0..n) into v (0 for a counter the kernel lacks). */
static void vmstat_read(const char *const *names, int n, uint64_t *v) {
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
static void write_file(const char *path, const char *s) {
	int fd = open(path, O_WRONLY);
	if (fd < 0 || write(fd, s, strlen(s)) < 0) { perror(path); exit(1); }
	close(fd);
}

/* A /proc/meminfo field in kB ("MemFree:"), -1 if absent. */
static long meminfo(const char *key) {
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
#endif
