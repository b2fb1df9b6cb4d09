/* thpreport: an LD_PRELOAD library that, at exit, when SPLAB_THP_REPORT=1, prints
 *     thpreport: AnonHugePages K kB, Rss R kB
 * on stderr for the whole process, read from /proc/self/smaps_rollup, and a second line
 *     thpreport: VmHWM H kB
 * the process's peak resident set (from /proc/self/status: the program's own, since exec,
 * unlike a parent's wait4 ru_maxrss, which includes the forked parent's size before exec). It lets a program on
 * the C library's malloc (the "standard pages" run of seed 004 section 5.1's pairs) be
 * measured the way smalloc's SMALLOC_REPORT measures the superpage run.
 *
 * Build: cc -O2 -fPIC -shared -o thpreport.so thpreport.c
 * It allocates nothing and uses no stdio, so it works at any point of exit. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t field_kb(const char *text, const char *key, int *found)
{
    const char *p = strstr(text, key);
    uint64_t v = 0;
    *found = 0;
    if (!p)
        return 0;
    p += strlen(key);
    while (*p == ' ' || *p == '\t')
        p++;
    while (*p >= '0' && *p <= '9') {
        v = v * 10 + (uint64_t)(*p++ - '0');
        *found = 1;
    }
    return v;
}

static uint64_t read_field(const char *path, const char *key, int *found)
{
    static char text[8192];
    ssize_t got = 0, r;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        while (got < (ssize_t)sizeof text - 1 &&
               (r = read(fd, text + got, sizeof text - 1 - (size_t)got)) > 0)
            got += r;
        close(fd);
    }
    text[got > 0 ? got : 0] = 0;
    return field_kb(text, key, found);
}

static size_t put(char *b, size_t n, size_t cap, const char *s)
{
    while (*s && n < cap)
        b[n++] = *s++;
    return n;
}

static size_t put_u(char *b, size_t n, size_t cap, uint64_t v)
{
    char t[24];
    int i = 0;
    do {
        t[i++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (i && n < cap)
        b[n++] = t[--i];
    return n;
}

__attribute__((destructor)) static void thpreport(void)
{
    const char *e = getenv("SPLAB_THP_REPORT");
    if (!e || strcmp(e, "1") != 0)
        return;
    char out[256];
    size_t n = 0, cap = sizeof out - 1;
    int f1, f2, f3;
    uint64_t ahp = read_field("/proc/self/smaps_rollup", "\nAnonHugePages:", &f1);
    uint64_t rss = read_field("/proc/self/smaps_rollup", "\nRss:", &f2);
    uint64_t hwm = read_field("/proc/self/status", "\nVmHWM:", &f3);
    if (!f1 || !f2) {
        n = put(out, n, cap, "thpreport: cannot read AnonHugePages and Rss from /proc/self/smaps_rollup\n");
    } else {
        n = put(out, n, cap, "thpreport: AnonHugePages ");
        n = put_u(out, n, cap, ahp);
        n = put(out, n, cap, " kB, Rss ");
        n = put_u(out, n, cap, rss);
        n = put(out, n, cap, " kB\n");
    }
    if (f3) {
        n = put(out, n, cap, "thpreport: VmHWM ");
        n = put_u(out, n, cap, hwm);
        n = put(out, n, cap, " kB\n");
    }
    if (write(2, out, n) < 0)
        return;
}
