/*
 * Whether this process may write a range of its memory, from
 * /proc/self/maps. A region registered for peers' puts is written by the
 * provider (tcp: its receive; emulated: fabrpc's copy) in this process:
 * on read-only pages one peer's put killed the owner with SIGSEGV.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rpc/mem.h"

int fr_range_writable(const void *buf, size_t len)
{
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps)
        return 1; /* nothing to tell by: the provider decides */
    uintptr_t at = (uintptr_t)buf, end = at + len;
    if (end < at) { /* wraps around */
        fclose(maps);
        return 0;
    }
    char line[512];
    /* The lines are in address order: walk them along the range. */
    while (at < end && fgets(line, sizeof(line), maps)) {
        unsigned long lo, hi;
        char perms[5];
        int c;
        if (!strchr(line, '\n')) /* a long path: the rest is no line */
            while ((c = fgetc(maps)) != EOF && c != '\n')
                ;
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) != 3)
            continue;
        if (hi <= at)
            continue;
        if (lo > at || perms[1] != 'w')
            break; /* a hole, or pages it cannot write */
        at = hi;
    }
    fclose(maps);
    return at >= end;
}
