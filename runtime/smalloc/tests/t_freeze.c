/* Base heap freezing (smalloc.c's reading of seed 004 section 3), in the preload build with
 * SMALLOC_FREEZE_BASE=1 and SMALLOC_HINTS holding "superpages size=300000..300000": once the
 * superpage heap has served a request the base heap maps no new region, so base-routed
 * requests it cannot serve from what it has go to the superpage heap. Prints "t_freeze: ok". */
#include "check.h"

int main(void)
{
    void *small = malloc(1000);            /* base heap: its first arena */
    CHECK(small && in_base_vma(small));
    void *big_before = malloc(3 << 20);    /* base, a region of its own: not frozen yet */
    CHECK(big_before && in_base_vma(big_before));
    void *sp = malloc(300000);             /* the superpage heap: freezes the base heap */
    CHECK(sp && in_superpage_vma(sp));
    void *small2 = malloc(1000);           /* still served by the base arena */
    CHECK(small2 && in_base_vma(small2));
    void *big_after = malloc(5 << 20);     /* would need a new base region: superpage heap */
    CHECK(big_after && in_superpage_vma(big_after));
    free(big_before);
    void *reuse = malloc(3 << 20);         /* the kept base region may still be reused */
    CHECK(reuse == big_before && in_base_vma(reuse));
    printf("t_freeze: ok\n");
    return 0;
}
