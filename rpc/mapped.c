/*
 * What this process may do with a range of its memory, from
 * /proc/self/maps. A registered region is read by the provider for
 * peers' gets and this rank's puts, and written for peers' puts and this
 * rank's gets (tcp: its send and receive; emulated: fabrpc's copies), in
 * this process: on pages it may not read or write, or not mapped at all,
 * one transfer killed the owner with SIGSEGV, and a range reaching past
 * the mapping was handed out in descriptors as if it were memory.
 *
 * Permissions are not all: a file mapped past its end has pages that
 * look readable and raise SIGBUS when touched (a get of one killed the
 * owner, emulated and over tcp), and so do some of the kernel's [vvar]
 * pages. Such bytes count as unreadable. A file truncated after the
 * registration cannot be seen here (the header says so).
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "rpc/mem.h"

/* The file behind a mapping, by its maps line: st from the mapping's own
 * link (the same file even if renamed or deleted), else from its path if
 * that is still the same file (device and inode). 0, or -1: cannot tell. */
static int mapped_file(unsigned long lo, unsigned long hi, unsigned maj,
                       unsigned min, unsigned long inode, const char *path,
                       struct stat *st)
{
    char link[64];
    snprintf(link, sizeof(link), "/proc/self/map_files/%lx-%lx", lo, hi);
    if (stat(link, st) == 0)
        return 0;
    if (path[0] == '/' && stat(path, st) == 0 &&
        st->st_ino == (ino_t)inode && major(st->st_dev) == maj &&
        minor(st->st_dev) == min)
        return 0;
    return -1;
}

/* The end of the bytes of mapping [lo, hi) that may be read: hi, or less
 * for a regular file mapped past its end (from offset off) and for [vvar]
 * pages. */
static unsigned long readable_end(unsigned long lo, unsigned long hi,
                                  unsigned long long off, unsigned maj,
                                  unsigned min, unsigned long inode,
                                  const char *path)
{
    if (!strncmp(path, "[vvar", 5)) /* [vvar], [vvar_vclock] */
        return lo;
    struct stat st;
    if (!inode || mapped_file(lo, hi, maj, min, inode, path, &st) ||
        !S_ISREG(st.st_mode))
        return hi; /* anonymous, a device, or nothing to tell by */
    unsigned long long size = (unsigned long long)st.st_size;
    if (size <= off)
        return lo;
    unsigned long long page = (unsigned long long)sysconf(_SC_PAGESIZE);
    unsigned long long in = (size - off + page - 1) / page * page;
    return in < hi - lo ? lo + (unsigned long)in : hi;
}

unsigned fr_range_perms(const void *buf, size_t len)
{
    uintptr_t at = (uintptr_t)buf, end = at + len;
    if (end < at) /* wraps around the address space */
        return 0;
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps)
        return FR_RANGE_READ | FR_RANGE_WRITE; /* nothing to tell by: the
                                                  provider decides */
    unsigned perms = FR_RANGE_READ | FR_RANGE_WRITE;
    char line[512];
    /* The lines are in address order: walk them along the range. */
    while (at < end && fgets(line, sizeof(line), maps)) {
        unsigned long lo, hi, inode = 0;
        unsigned long long off = 0;
        unsigned maj = 0, min = 0;
        char p[5];
        int c, n = 0;
        if (!strchr(line, '\n')) /* a long path: the rest is no line */
            while ((c = fgetc(maps)) != EOF && c != '\n')
                ;
        if (sscanf(line, "%lx-%lx %4s %llx %x:%x %lu %n", &lo, &hi, p, &off,
                   &maj, &min, &inode, &n) < 3)
            continue;
        if (hi <= at)
            continue;
        if (lo > at)
            break; /* a hole */
        if (p[0] != 'r')
            perms &= ~(unsigned)FR_RANGE_READ;
        if (p[1] != 'w')
            perms &= ~(unsigned)FR_RANGE_WRITE;
        char *path = n ? line + n : line + strlen(line);
        path[strcspn(path, "\n")] = '\0';
        unsigned long ok = readable_end(lo, hi, off, maj, min, inode, path);
        if (ok < hi && ok < end)
            break; /* bytes of the range that raise SIGBUS */
        at = hi;
    }
    fclose(maps);
    return at >= end ? perms : 0;
}
