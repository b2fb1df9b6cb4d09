/* alu-chain.c: a loop-carried chain of ALU operations bounds a loop the model sees as
 * dispatch-bound (docs/timing.md, "What is simplified"). Not part of the build.
 *
 *   cc -O2 -o /tmp/alu-chain scripts/alu-chain.c && /tmp/alu-chain
 *
 * Prints (1) ns per iteration of xorshift64's three shift-xor pairs alone (six dependent
 * single-cycle operations: 6 cycles an iteration), and (2) validate's held-out gups update
 * (heldout.c's `next()` and `t[r & mask] ^= r`) over a 1 MiB THP table, with the generator as
 * heldout.c compiles it (a call, the state in memory), with the state in a register, and with
 * a one-add chain in place of xorshift: the update's time follows the chain, not the memory
 * (the first two agree: the state's trip through memory adds nothing here). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static uint64_t now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000ull + t.tv_nsec;
}

static uint64_t rng = 88172645463325252ULL;
__attribute__((noinline)) static uint64_t next(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545F4914F6CDD1DULL;
}

int main(void)
{
	uint64_t x = 88172645463325252ULL, n = 100000000;
	for (int r = 0; r < 3; r++) {
		uint64_t t0 = now();
		for (uint64_t i = 0; i < n; i++) {
			x ^= x >> 12;
			x ^= x << 25;
			x ^= x >> 27;
			__asm__ volatile("" : "+r"(x));
		}
		uint64_t t1 = now();
		printf("xorshift chain alone: %.3f ns an iteration (%.2f GHz if 6 cycles)\n",
		       (t1 - t0) / (double)n, 6.0 / ((t1 - t0) / (double)n));
	}
	size_t size = 1 << 20;
	char *raw = mmap(NULL, size + (4 << 20), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *b = (char *)(((uintptr_t)raw + (2 << 20) - 1) & ~((uintptr_t)(2 << 20) - 1));
	madvise(b, size, MADV_HUGEPAGE);
	memset(b, 1, size);
	uint64_t *t = (uint64_t *)b, words = size / 8, u = 4194304;
	for (int rep = 0; rep < 3; rep++) {
		for (int mode = 0; mode < 3; mode++) {
			uint64_t t0 = now(), y = rng;
			if (mode == 0)
				for (uint64_t i = 0; i < u; i++) {
					uint64_t r = next();
					t[r & (words - 1)] ^= r;
				}
			else if (mode == 1)
				for (uint64_t i = 0; i < u; i++) {
					y ^= y >> 12;
					y ^= y << 25;
					y ^= y >> 27;
					uint64_t r = y * 0x2545F4914F6CDD1DULL;
					t[r & (words - 1)] ^= r;
				}
			else
				for (uint64_t i = 0; i < u; i++) {
					y += 0x9E3779B97F4A7C15ULL;
					uint64_t r = y * 0x2545F4914F6CDD1DULL;
					t[r & (words - 1)] ^= r;
				}
			rng ^= y;
			printf("gups update over 1 MiB, %s: %.2f ns\n",
			       mode == 0 ? "generator as heldout.c (call, state in memory)"
			       : mode == 1 ? "xorshift state in a register" : "a one-add chain instead",
			       (now() - t0) / (double)u);
		}
	}
	return (int)(t[0] & 1);
}
