/* A parent fills 32 MiB, forks; the child reads all of it four times (a Redis BGSAVE child
   serialising the dataset), while the parent goes on writing one line in every 64 KiB; then
   both exit. The reader's side of the fork that examples/fork/snapshot.c writes. */
#include <stdlib.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>
int main(void) {
    size_t n = 32u << 20;
    char *p = mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (size_t i = 0; i < n; i += 64) p[i] = (char)i;
    pid_t c = fork();
    if (c == 0) {
        long sum = 0;
        for (int pass = 0; pass < 4; pass++)
            for (size_t i = 0; i < n; i += 64) sum += p[i];
        _exit((int)(sum & 1));
    }
    for (size_t i = 0; i < n; i += 65536) p[i] += 1;
    waitpid(c, 0, 0);
    return p[4096];
}
