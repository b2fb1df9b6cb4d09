/* A parent fills 32 MiB, forks; the child rewrites all of it (a snapshotting server's
   writer side, as the parent of a Redis BGSAVE does), then both exit. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>
int main(void) {
    size_t n = 32u << 20;
    char *p = mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (size_t i = 0; i < n; i += 64) p[i] = (char)i;
    pid_t c = fork();
    if (c == 0) {
        for (int pass = 0; pass < 4; pass++)
            for (size_t i = 0; i < n; i += 64) p[i] += 1;
        _exit(0);
    }
    waitpid(c, 0, 0);
    return p[4096];
}
