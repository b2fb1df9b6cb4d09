/* reported-touch.c: what a guest's free page reporting adds to a first touch (docs/calibrate.md,
 * "Free page reporting"). Not part of the build; root (it writes page_reporting_order).
 *
 *   cc -O2 -o /tmp/reported-touch scripts/reported-touch.c && /tmp/reported-touch
 *
 * Three times: 4 GiB is written and freed, the program sleeps 6 s (free page reporting hands
 * blocks back to the host about 2 s after they are freed), then 256 MiB is first-touched with
 * 4KB pages (MADV_NOHUGEPAGE, one store per page) and 256 MiB with THP (MADV_HUGEPAGE, one
 * store per 2MB), and the same again at once. Then reporting is turned off and free memory
 * written once (scripts/procfs.h), and the two touches are timed three times after 6 s idle.
 * Prints the mean cost of a 4KB fault and of a 2MB fault in each case.
 */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "procfs.h"

static double now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static void touch_both(const char *when) {
	size_t size = (size_t)256 << 20;
	char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) { perror("mmap"); exit(1); }
	if (madvise(p, size, MADV_NOHUGEPAGE)) { perror("madvise"); exit(1); }
	double t4 = now_ns();
	for (size_t off = 0; off < size; off += 4096) p[off] = 1;
	t4 = now_ns() - t4;
	munmap(p, size);
	char *h = map_aligned(size);
	double t2 = now_ns();
	for (size_t off = 0; off < size; off += HPAGE) h[off] = 1;
	t2 = now_ns() - t2;
	munmap(h, size);
	printf("%-34s 4KB fault %6.0f ns, 2MB fault %7.0f ns\n", when, t4 / (size / 4096),
	       t2 / (size / HPAGE));
}

int main(void) {
	char old[32];
	for (int i = 0; i < 3; i++) {
		size_t big = (size_t)4 << 30;
		char *b = map_aligned(big);
		for (size_t off = 0; off < big; off += 4096) b[off] = 1;
		munmap(b, big);
		sleep(6);
		touch_both("reporting on, 6 s after a free:");
		touch_both("reporting on, at once again:");
	}
	reporting_off_and_back_all(old, sizeof old);
	for (int i = 0; i < 3; i++) {
		sleep(6);
		touch_both("reporting off, memory backed:");
	}
	reporting_restore(old);
	return 0;
}
