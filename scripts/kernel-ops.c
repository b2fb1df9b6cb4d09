/* kernel-ops.c: the superpage bookkeeping a fault, a free, a preemption and a PTE rewrite do in
 * a kernel, written as FreeBSD writes it, to measure what splab charges for them
 * (docs/constants.md section 7). Not part of the build.
 *
 *   cc -O2 -mpopcnt -o /tmp/kernel-ops scripts/kernel-ops.c
 *   /tmp/kernel-ops                      # host TSC cycles per operation, warm caches
 *   valgrind --tool=callgrind --callgrind-out-file=/tmp/ko.cg /tmp/kernel-ops 1
 *   callgrind_annotate --inclusive=yes /tmp/ko.cg | grep op_   # instructions per call
 *
 * Each op_ function is one operation, noinline so callgrind counts it alone:
 *   op_popmap_update  seed 000 4.9: one population-map level, a hash lookup of (object,
 *                     index) and its somepop / fullpop counters (one call per level updated);
 *   op_resv_populate  FreeBSD vm_reserv_populate: set the bit, popcnt, the free-extent counts
 *                     of the sizes below (seed 000 4.8), and move to the tail of the list;
 *   op_resv_depopulate  vm_reserv_depopulate, the same in reverse (the list unchanged);
 *   op_resv_create    vm_reserv_alloc_page's new reservation: a free one from the pool, its
 *                     fields, a cleared 512-page popmap, its slot in the reservation array;
 *   op_preempt_piece  seed 000 4.8, one of the R pieces of a preempted reservation: its
 *                     population from the bitmap, then freed to a buddy list or re-reserved
 *                     at the head of its list;
 *   op_pte_rewrite    one PTE of a promotion or demotion as FreeBSD's Alpha pmap reaches it
 *                     (sys/alpha/alpha/pmap.c, pmap_protect: pmap_lev1pte, pmap_lev2pte,
 *                     pmap_lev3pte for each page, then read-modify-write of the entry);
 *   op_pte_fill       the entries of a new page-table page filled in a loop, as x86 kernels
 *                     split a large mapping (Linux __split_huge_pmd_locked: one made-up entry
 *                     stored per base page); per entry = the call's count / 512;
 *   op_migrate_scan   Linux 4.3 mm/compaction.c isolate_migratepages_block over one 2MB
 *                     pageblock of 64-byte struct pages: per pfn visited, the abort check every
 *                     SWAP_CLUSTER_MAX pfns, PageBuddy (a free chunk is passed over by its
 *                     order, one visit), PageLRU, PageCompound, the page_count / mapcount test;
 *                     isolation itself (lru lock, __isolate_lru_page) is not in the loop;
 *                     per visit = the call's count / the visits it returns;
 *   op_free_scan      isolate_freepages_block over one pageblock: per pfn visited, the abort
 *                     check and PageBuddy; a free chunk is taken whole (split_free_page's
 *                     per-page list_add not counted) and passed over. Both scans are timed
 *                     twice: warm (64 pageblocks over and over) and cold (4096 pageblocks of
 *                     struct pages, 128MB, each once; not under callgrind);
 *   op_drain_2_8, op_drain_4_16  Linux 4.3 mm/compaction.c compact_zone's check_drain step
 *                     once it fires: the test of last_migrated_pfn against the migrate
 *                     scanner's order-aligned block, lru_add_drain_cpu (the four per-CPU
 *                     pagevecs looked at; lru_add_pvec's pages put on the LRU under the lru
 *                     lock, then release_pages' lock, the pages freed to the per-CPU list) and
 *                     drain_local_pages -> drain_pages_zone (irq save/restore; the per-CPU
 *                     list's pages given to free_pcppages_bulk under zone->lock). The per-page
 *                     steps are one-line stand-ins (no buddy merging): the two calls (2 pagevec
 *                     pages and 8 per-CPU pages; 4 and 16) differ only in pages, so the fixed
 *                     part of a drain is 2 x the first - the second. Spin locks are a lock
 *                     cmpxchg and a store (qspinlock), irq save a pushf/pop (cli, privileged,
 *                     left out: one instruction), restore a push/popf.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

#define NOINLINE __attribute__((noinline))

/* ---- lists (sys/queue.h TAILQ) ---- */
struct resv {
	struct resv *prev, *next;
	uint64_t obj, pindex, pfn;
	int order, class, list, popcnt;
	uint64_t free_extents[4];
	uint64_t popmap[8]; /* 512 pages */
	uint64_t last;
};
struct listhead { struct resv *head, *tail; };
static struct listhead lists[4];

static inline void list_remove(struct resv *r) {
	struct listhead *l = &lists[r->list];
	if (r->prev) r->prev->next = r->next; else l->head = r->next;
	if (r->next) r->next->prev = r->prev; else l->tail = r->prev;
}
static inline void list_insert_tail(struct resv *r, int list) {
	struct listhead *l = &lists[list];
	r->list = list; r->next = 0; r->prev = l->tail;
	if (l->tail) l->tail->next = r; else l->head = r;
	l->tail = r;
}
static inline void list_insert_head(struct resv *r, int list) {
	struct listhead *l = &lists[list];
	r->list = list; r->prev = 0; r->next = l->head;
	if (l->head) l->head->prev = r; else l->tail = r;
	l->head = r;
}

static const int orders[4] = {0, 3, 6, 9}; /* Alpha: 8K, 64K, 512K, 4M */
static uint64_t clock_;

static inline int range_empty(const uint64_t *bits, unsigned from, unsigned n) {
	if (n >= 64) {
		for (unsigned w = from / 64; w < (from + n) / 64; w++)
			if (bits[w]) return 0;
		return 1;
	}
	return ((bits[from / 64] >> (from % 64)) & ((1ULL << n) - 1)) == 0;
}
static inline int list_for(const struct resv *r) {
	for (int c = r->class - 1; c > 0; c--)
		if (r->free_extents[c]) return c;
	return 0;
}

NOINLINE void op_resv_populate(struct resv *r, unsigned i) {
	for (int c = 0; c < r->class; c++) {
		unsigned n = 1u << orders[c];
		if (range_empty(r->popmap, i & ~(n - 1), n)) r->free_extents[c]--;
	}
	r->popmap[i / 64] |= 1ULL << (i % 64);
	r->popcnt++;
	r->last = ++clock_;
	list_remove(r);
	list_insert_tail(r, list_for(r));
}

NOINLINE void op_resv_depopulate(struct resv *r, unsigned i) {
	r->popmap[i / 64] &= ~(1ULL << (i % 64));
	r->popcnt--;
	for (int c = 0; c < r->class; c++) {
		unsigned n = 1u << orders[c];
		if (range_empty(r->popmap, i & ~(n - 1), n)) r->free_extents[c]++;
	}
	if (list_for(r) != r->list) { list_remove(r); list_insert_head(r, list_for(r)); }
}

static struct resv *pool;
static struct resv *freeresv;
static struct resv **resv_array; /* one slot per 4MB extent (vm_reserv_array) */

NOINLINE struct resv *op_resv_create(uint64_t obj, uint64_t pindex, uint64_t pfn, int class) {
	struct resv *r = freeresv;
	freeresv = r->next;
	r->obj = obj; r->pindex = pindex; r->pfn = pfn;
	r->class = class; r->order = orders[class]; r->popcnt = 0; r->last = clock_;
	for (int c = 0; c < class; c++) r->free_extents[c] = 1ULL << (r->order - orders[c]);
	memset(r->popmap, 0, sizeof r->popmap);
	r->prev = r->next = 0; r->list = 0;
	resv_array[pfn >> 9] = r;
	return r;
}

/* ---- population map: a hash of (object, level, index) -> node (seed 000 4.9) ---- */
struct pnode { struct pnode *next; uint64_t obj, key; uint16_t somepop, fullpop; struct resv *resv; };
#define NBUCKETS 4096
static struct pnode *buckets[NBUCKETS];

static inline unsigned hash(uint64_t obj, uint64_t key) {
	uint64_t h = (obj * 0x9e3779b97f4a7c15ULL) ^ (key * 0xff51afd7ed558ccdULL);
	return (unsigned)(h >> 52) & (NBUCKETS - 1);
}
/* One level: find the node and count a child that became populated / full. Returns whether
 * the change propagates to the next level. */
NOINLINE int op_popmap_update(uint64_t obj, uint64_t key, int some, int full, int ratio) {
	struct pnode *n = buckets[hash(obj, key)];
	while (n && (n->obj != obj || n->key != key)) n = n->next;
	if (!n) return 0;
	int up = 0;
	if (some && ++n->somepop == 1) up = 1;
	if (full && ++n->fullpop == ratio) up = 1;
	return up;
}

/* ---- buddy free lists, for the freed pieces ---- */
struct fblock { struct fblock *next, *prev; int order; };
static struct fblock *free_heads[16];
static struct fblock *frames_meta;

NOINLINE void op_preempt_piece(struct resv *parent, unsigned k, struct resv *spare) {
	/* A 4MB reservation's k-th 512KB piece: its 64 pages are one popmap word. */
	uint64_t w = parent->popmap[k];
	int pop = __builtin_popcountll(w);
	uint64_t pfn = parent->pfn + k * 64;
	if (pop == 0) {
		struct fblock *b = &frames_meta[pfn];
		b->order = 6; b->prev = 0; b->next = free_heads[6];
		if (free_heads[6]) free_heads[6]->prev = b;
		free_heads[6] = b;
	} else {
		spare->obj = parent->obj; spare->pindex = parent->pindex + k * 64; spare->pfn = pfn;
		spare->class = 2; spare->order = 6; spare->popcnt = pop; spare->last = parent->last;
		spare->popmap[0] = w;
		uint64_t x = w; x |= x >> 1; x |= x >> 2; x |= x >> 4;
		spare->free_extents[1] = __builtin_popcountll(0x0101010101010101ULL & ~x);
		spare->free_extents[0] = 64 - pop;
		list_insert_head(spare, list_for(spare));
	}
}

/* ---- Alpha page table, three levels of 1024 entries ---- */
typedef uint64_t pt_entry_t;
#define PG_V 1ULL
struct pmap { pt_entry_t *lev1; };
static inline pt_entry_t *k0seg(pt_entry_t pte) { return (pt_entry_t *)(uintptr_t)(pte & ~0xfffULL); }
static inline pt_entry_t *lev1pte(struct pmap *p, uint64_t va) { return &p->lev1[(va >> 33) & 1023]; }
static inline pt_entry_t *lev2pte(struct pmap *p, uint64_t va) {
	pt_entry_t *l1 = lev1pte(p, va);
	if (!(*l1 & PG_V)) return 0;
	return &k0seg(*l1)[(va >> 23) & 1023];
}
static inline pt_entry_t *lev3pte(struct pmap *p, uint64_t va) {
	pt_entry_t *l2 = lev2pte(p, va);
	if (!l2 || !(*l2 & PG_V)) return 0;
	return &k0seg(*l2)[(va >> 13) & 1023];
}
NOINLINE int op_pte_rewrite(struct pmap *p, uint64_t va, uint64_t gh) {
	pt_entry_t *pte = lev1pte(p, va);
	if (!(*pte & PG_V)) return 0;
	pte = lev2pte(p, va);
	if (!(*pte & PG_V)) return 0;
	pte = lev3pte(p, va);
	if (!(*pte & PG_V)) return 0;
	*pte = (*pte & ~(3ULL << 5)) | (gh << 5); /* the granularity hint field */
	return 1;
}

NOINLINE void op_pte_fill(pt_entry_t *table, uint64_t pfn, uint64_t prot) {
	for (int i = 0; i < 512; i++)
		table[i] = ((pfn + i) << 12) | prot | PG_V;
}

/* ---- Linux struct page (64 bytes) and the compaction scanners ---- */
#define PG_LRU (1UL << 5)
#define PG_HEAD (1UL << 15)
#define PAGE_BUDDY_MAPCOUNT (-128)
struct page {
	unsigned long flags;
	void *mapping;
	unsigned long index;
	int mapcount;
	int count;
	struct page *lru_next, *lru_prev;
	unsigned long private; /* the buddy order of a free chunk's head */
	unsigned long pad;
};
static volatile int abort_flag;
static inline int page_buddy(const struct page *p) { return p->mapcount == PAGE_BUDDY_MAPCOUNT; }

/* isolate_migratepages_block's scan of [pfn, end): returns the pfns visited; the pages it would
 * isolate go to `out`. */
NOINLINE long op_migrate_scan(struct page *map, unsigned long pfn, unsigned long end,
			      struct page **out, int *nout) {
	long visits = 0;
	for (; pfn < end; pfn++) {
		if (!(pfn % 32) && abort_flag) break; /* compact_unlock_should_abort */
		visits++;
		struct page *page = &map[pfn];
		if (page_buddy(page)) {
			unsigned long order = page->private;
			if (order > 0 && order < 11) pfn += (1UL << order) - 1;
			continue;
		}
		if (!(page->flags & PG_LRU)) continue;
		if (page->flags & PG_HEAD) { pfn += (1UL << page->private) - 1; continue; }
		if (!page->mapping && page->count > page->mapcount + 1) continue;
		out[(*nout)++ & 31] = page;
	}
	return visits;
}

/* isolate_freepages_block's scan of [pfn, end): returns the pfns visited. */
NOINLINE long op_free_scan(struct page *map, unsigned long pfn, unsigned long end,
			   struct page **out, int *nout) {
	long visits = 0;
	for (; pfn < end; pfn++) {
		if (!(pfn % 32) && abort_flag) break;
		visits++;
		struct page *page = &map[pfn];
		if (!page_buddy(page)) continue;
		unsigned long n = 1UL << page->private;
		out[(*nout)++ & 31] = page;
		pfn += n - 1;
	}
	return visits;
}

/* ---- Linux 4.3 compaction's check_drain (replica of its control flow; per-page steps are
 * stand-ins) ---- */
#define PAGEVEC_SIZE 14
struct pagevec { unsigned long nr; int cold; struct page *pages[PAGEVEC_SIZE]; };
struct lruhead { struct page *next, *prev; };
static struct pagevec lru_add_pvec, lru_rotate_pvec, lru_deactivate_file_pvec, activate_pvec;
static struct { int count, high, batch; struct page *lists[3]; } pcp;
static struct lruhead lru_list, free_list;
static volatile int lru_lock, zone_lock;
static long nr_free_pages;
static inline void spin_lock(volatile int *l) { while (__sync_val_compare_and_swap(l, 0, 1)) ; }
static inline void spin_unlock(volatile int *l) { __atomic_store_n(l, 0, __ATOMIC_RELEASE); }
static inline unsigned long irq_save(void) {
	unsigned long f;
	__asm__ volatile("pushf; pop %0" : "=r"(f) : : "memory");
	return f;
}
static inline void irq_restore(unsigned long f) { __asm__ volatile("push %0; popf" : : "r"(f) : "memory", "cc"); }
static inline void list_push(struct lruhead *h, struct page *p) { p->lru_next = h->next; h->next = p; }
static inline struct page *list_pop(struct page **h) { struct page *p = *h; *h = p->lru_next; return p; }

static NOINLINE void pagevec_lru_add(struct pagevec *pv) {
	/* pagevec_lru_move_fn(__pagevec_lru_add_fn): under the lru lock, each page onto the LRU */
	unsigned long f = irq_save();
	spin_lock(&lru_lock);
	for (unsigned long i = 0; i < pv->nr; i++) { pv->pages[i]->flags |= PG_LRU; list_push(&lru_list, pv->pages[i]); }
	spin_unlock(&lru_lock);
	irq_restore(f);
	/* release_pages: the pagevec's references dropped; a migrated-from page reaches 0, leaves
	 * the LRU (the lru lock again) and is freed to the per-CPU list (free_hot_cold_page_list) */
	struct page *to_free = 0;
	int locked = 0;
	for (unsigned long i = 0; i < pv->nr; i++) {
		struct page *p = pv->pages[i];
		if (--p->count) continue;
		if (p->flags & PG_LRU) {
			if (!locked) { f = irq_save(); spin_lock(&lru_lock); locked = 1; }
			p->flags &= ~PG_LRU;
		}
		p->lru_next = to_free; to_free = p;
	}
	if (locked) { spin_unlock(&lru_lock); irq_restore(f); }
	while (to_free) {
		struct page *p = list_pop(&to_free);
		unsigned long g = irq_save();
		p->lru_next = pcp.lists[0]; pcp.lists[0] = p; pcp.count++;
		irq_restore(g);
	}
	pv->nr = 0;
}

static NOINLINE void free_pcppages_bulk(int count) {
	spin_lock(&zone_lock);
	int mt = 0;
	while (count) {
		while (!pcp.lists[mt]) mt = (mt + 1) % 3;
		do { struct page *p = list_pop(&pcp.lists[mt]); p->mapcount = PAGE_BUDDY_MAPCOUNT; list_push(&free_list, p); nr_free_pages++; } while (--count && pcp.lists[mt]);
	}
	spin_unlock(&zone_lock);
}

static NOINLINE void lru_add_drain_cpu(void) {
	if (lru_add_pvec.nr) pagevec_lru_add(&lru_add_pvec);
	if (lru_rotate_pvec.nr) { unsigned long f = irq_save(); pagevec_lru_add(&lru_rotate_pvec); irq_restore(f); }
	if (lru_deactivate_file_pvec.nr) pagevec_lru_add(&lru_deactivate_file_pvec);
	if (activate_pvec.nr) pagevec_lru_add(&activate_pvec);
}

static NOINLINE void drain_local_pages(void) {
	unsigned long f = irq_save();
	if (pcp.count) { free_pcppages_bulk(pcp.count); pcp.count = 0; }
	irq_restore(f);
}

static unsigned long last_migrated_pfn;
static inline void check_drain(int order, unsigned long migrate_pfn) {
	if (order > 0 && last_migrated_pfn) {
		unsigned long block_start = migrate_pfn & ~((1UL << order) - 1);
		if (last_migrated_pfn < block_start) {
			lru_add_drain_cpu();
			drain_local_pages();
			last_migrated_pfn = 0;
		}
	}
}

/* The state a drain finds: `npv` pages on lru_add_pvec (each one a migrated-from page, its
 * count 1, held only by the pagevec) and `npcp` more on the per-CPU list. */
static struct page drain_pages[64];
static void drain_setup(int npv, int npcp) {
	for (int i = 0; i < npv; i++) { drain_pages[i].count = 1; drain_pages[i].flags = 0; lru_add_pvec.pages[i] = &drain_pages[i]; }
	lru_add_pvec.nr = npv;
	for (int i = 0; i < npcp; i++) { struct page *p = &drain_pages[32 + i]; p->lru_next = pcp.lists[i % 3]; pcp.lists[i % 3] = p; }
	pcp.count = npcp;
	lru_list.next = 0; free_list.next = 0;
	last_migrated_pfn = 512;
}
NOINLINE void op_drain_2_8(void) { check_drain(9, 1024); }
NOINLINE void op_drain_4_16(void) { check_drain(9, 1025); }

static double tsc_per(uint64_t t0, uint64_t t1, long n) { return (double)(t1 - t0) / n; }

int main(int argc, char **argv) {
	long iters = argc > 1 ? 100000 : 2000000;
	pool = aligned_alloc(64, 1024 * sizeof *pool);
	memset(pool, 0, 1024 * sizeof *pool);
	for (int i = 0; i < 1023; i++) pool[i].next = &pool[i + 1];
	freeresv = &pool[0];
	resv_array = calloc(1 << 16, sizeof *resv_array);
	frames_meta = calloc(1 << 16, sizeof *frames_meta);
	struct pnode *nodes = calloc(3 * 256, sizeof *nodes);
	for (int i = 0; i < 3 * 256; i++) {
		nodes[i].obj = i % 256; nodes[i].key = i / 256;
		unsigned h = hash(nodes[i].obj, nodes[i].key);
		nodes[i].next = buckets[h]; buckets[h] = &nodes[i];
	}
	/* 64 live 4MB reservations on the lists. */
	struct resv *live[64];
	for (int i = 0; i < 64; i++) {
		live[i] = op_resv_create(i, 0, (uint64_t)i * 512, 3);
		list_insert_tail(live[i], 2);
	}
	uint64_t t0, t1;
	volatile long sink = 0;
	long npop = 0, ndep = 0;

	t0 = __rdtsc();
	for (long k = 0; k < iters; k++) {
		struct resv *r = live[k & 63];
		unsigned i = (unsigned)((k >> 6) * 37) & 511;
		if (r->popmap[i / 64] >> (i % 64) & 1) { op_resv_depopulate(r, i); ndep++; }
		else { op_resv_populate(r, i); npop++; }
	}
	t1 = __rdtsc();
	printf("resv populate/depopulate: %.1f TSC cycles per op (%ld populates, %ld depopulates)\n",
	       tsc_per(t0, t1, iters), npop, ndep);

	t0 = __rdtsc();
	for (long k = 0; k < iters; k++)
		sink += op_popmap_update(k & 255, (k >> 8) % 3, 1, 0, 8);
	t1 = __rdtsc();
	printf("popmap level update: %.1f TSC cycles per level\n", tsc_per(t0, t1, iters));

	t0 = __rdtsc();
	for (long k = 0; k < iters; k++) {
		struct resv *r = op_resv_create(k, 0, (uint64_t)(k & 127) * 512, 3);
		r->next = freeresv; freeresv = r; /* back to the pool */
	}
	t1 = __rdtsc();
	printf("resv create: %.1f TSC cycles per op\n", tsc_per(t0, t1, iters));

	struct resv spare;
	memset(&spare, 0, sizeof spare);
	live[0]->popmap[3] = 0x10; /* piece 3 partially populated, the others empty */
	t0 = __rdtsc();
	for (long k = 0; k < iters; k++) {
		op_preempt_piece(live[0], k & 7, &spare);
		if ((k & 7) == 3) list_remove(&spare);
		else free_heads[6] = 0;
	}
	t1 = __rdtsc();
	printf("preempt piece: %.1f TSC cycles per piece\n", tsc_per(t0, t1, iters));

	/* A 64MB region's page table: lev1 -> one lev2 page -> 8 lev3 pages. */
	pt_entry_t *l1 = aligned_alloc(8192, 8192), *l2 = aligned_alloc(8192, 8192);
	memset(l1, 0, 8192); memset(l2, 0, 8192);
	l1[0] = (uint64_t)(uintptr_t)l2 | PG_V;
	for (int j = 0; j < 8; j++) {
		pt_entry_t *l3 = aligned_alloc(8192, 8192);
		for (int e = 0; e < 1024; e++) l3[e] = PG_V;
		l2[j] = (uint64_t)(uintptr_t)l3 | PG_V;
	}
	struct pmap pm = { l1 };
	t0 = __rdtsc();
	for (long k = 0; k < iters; k++)
		sink += op_pte_rewrite(&pm, (uint64_t)(k & 8191) << 13, k & 3);
	t1 = __rdtsc();
	printf("PTE rewrite: %.1f TSC cycles per PTE\n", tsc_per(t0, t1, iters));

	pt_entry_t *table = aligned_alloc(4096, 4096);
	t0 = __rdtsc();
	for (long k = 0; k < iters / 512; k++) op_pte_fill(table, k * 512, k & 0x1e);
	t1 = __rdtsc();
	sink += table[7];
	printf("PTE fill: %.2f TSC cycles per entry\n", tsc_per(t0, t1, iters / 512 * 512));

	/* 64 fragmented pageblocks as --frag leaves them: 496 free pages (chunks of 256, 128, 64,
	 * 32, 16) and 16 resident LRU pages at the end of each 2MB. */
	long nblocks = 64;
	struct page *map = aligned_alloc(64, nblocks * 512 * sizeof *map);
	memset(map, 0, nblocks * 512 * sizeof *map);
	for (long b = 0; b < nblocks; b++) {
		unsigned long off = 0;
		for (int o = 8; o >= 4; o--) {
			map[b * 512 + off].mapcount = PAGE_BUDDY_MAPCOUNT;
			map[b * 512 + off].private = o;
			off += 1UL << o;
		}
		for (; off < 512; off++) {
			map[b * 512 + off].flags = PG_LRU;
			map[b * 512 + off].mapping = &map[0];
			map[b * 512 + off].count = 1;
		}
	}
	struct page *iso[32];
	int niso = 0;
	long visits = 0;
	t0 = __rdtsc();
	for (long k = 0; k < iters / 512; k++) {
		long b = k % nblocks;
		visits += op_migrate_scan(map, b * 512, b * 512 + 512, iso, &niso);
	}
	t1 = __rdtsc();
	printf("migrate scan: %.2f TSC cycles per pfn visited (%ld visits)\n", tsc_per(t0, t1, visits), visits);
	visits = 0;
	t0 = __rdtsc();
	for (long k = 0; k < iters / 512; k++) {
		long b = k % nblocks;
		visits += op_free_scan(map, b * 512, b * 512 + 512, iso, &niso);
	}
	t1 = __rdtsc();
	sink += niso;
	printf("free scan: %.2f TSC cycles per pfn visited (%ld visits)\n", tsc_per(t0, t1, visits), visits);

	/* compact_zone's check_drain, warm: the fixed part is 2 x op_drain_2_8 - op_drain_4_16. */
	{
		uint64_t c28 = 0, c416 = 0;
		for (long k = 0; k < iters / 16; k++) {
			drain_setup(2, 8);
			t0 = __rdtsc(); op_drain_2_8(); t1 = __rdtsc(); c28 += t1 - t0;
			drain_setup(4, 16);
			t0 = __rdtsc(); op_drain_4_16(); t1 = __rdtsc(); c416 += t1 - t0;
		}
		sink += nr_free_pages;
		printf("check_drain: %.1f TSC cycles (2 + 8 pages), %.1f (4 + 16 pages)\n",
		       (double)c28 / (iters / 16), (double)c416 / (iters / 16));
	}

	/* The same scans with cold struct pages: 4096 such pageblocks (128MB of struct pages,
	 * larger than the host's last-level cache), each scanned once, in order. Host TSC only. */
	if (argc == 1) {
		long nb = 4096;
		struct page *big = aligned_alloc(64, nb * 512 * sizeof *big);
		memset(big, 0, nb * 512 * sizeof *big);
		for (long b = 0; b < nb; b++) memcpy(&big[b * 512], &map[(b % nblocks) * 512], 512 * sizeof *big);
		char *evict = malloc(256UL << 20);
		memset(evict, 1, 256UL << 20);
		sink += evict[4096];
		visits = 0;
		t0 = __rdtsc();
		for (long b = 0; b < nb; b++) visits += op_migrate_scan(big, b * 512, b * 512 + 512, iso, &niso);
		t1 = __rdtsc();
		printf("migrate scan, cold struct pages: %.2f TSC cycles per pfn visited (%ld visits)\n", tsc_per(t0, t1, visits), visits);
		memset(evict, 2, 256UL << 20);
		sink += evict[8192];
		visits = 0;
		t0 = __rdtsc();
		for (long b = nb - 1; b >= 0; b--) visits += op_free_scan(big, b * 512, b * 512 + 512, iso, &niso);
		t1 = __rdtsc();
		printf("free scan, cold struct pages: %.2f TSC cycles per pfn visited (%ld visits)\n", tsc_per(t0, t1, visits), visits);
	}
	return (int)(sink & 0);
}
