/* build-stores.c: the tree build of validate's held-out `tree` (heldout.c's `build`), timed
 * against the same stores without the recursion (docs/timing.md, the store buffer). Not part
 * of the build.
 *
 *   cc -O2 -o /tmp/build-stores scripts/build-stores.c
 *   /tmp/build-stores 16 1; /tmp/build-stores 16 0      # MiB, 1 = MADV_HUGEPAGE, 0 = 4KB
 *
 * Prints ns per node of the first build (first touch), of a second build over the same
 * memory, and of the same node stores in a flat loop. The flat stores are bound by the fill
 * buffers (about a DRAM latency over 20); the recursive build, whose calls and returns put
 * five or six stack stores behind each node's store, fills the store buffer with them while
 * the node's line is fetched, and is 3-6x slower (2026-11-28 01:10, the AMD EPYC guest:
 * flat 5.6-7.8 ns, second build 22-41 ns, first 28-86 ns). */
/* The held-out program itself, for its `build`, `slot`, `nodes` and `slots_mask`: this script
 * times that very build, not a copy of it. */
#define main heldout_main
#include "../crates/splab/src/validate/heldout.c"
#undef main

static __attribute__((noinline)) void flat(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		slot(i)->key = i;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: build-stores MIB 1|0\n");
		return 2;
	}
	size_t size = (size_t)atoll(argv[1]) << 20;
	int huge = atoi(argv[2]);
	char *raw = mmap(NULL, size + 2 * HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *b = (char *)(((uintptr_t)raw + HUGE - 1) & ~((uintptr_t)HUGE - 1));
	madvise(b, size, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	nodes = (struct node *)b;
	uint64_t n = size / 64;
	slots_mask = n - 1;
	uint64_t t0 = now_ns();
	build(0, n);
	uint64_t t1 = now_ns();
	build(0, n);
	uint64_t t2 = now_ns();
	flat(n);
	uint64_t t3 = now_ns();
	printf("%zu MiB %s: first build %.1f ns a node, second build %.1f, flat stores %.1f\n", size >> 20,
	       huge ? "2MB" : "4KB", (t1 - t0) / (double)n, (t2 - t1) / (double)n, (t3 - t2) / (double)n);
	return 0;
}
