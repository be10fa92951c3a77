/*
 * What this process may do with a range of its memory, from
 * /proc/self/maps. A registered region is read by the provider for
 * peers' gets and this rank's puts, and written for peers' puts and this
 * rank's gets (tcp: its send and receive; emulated: fabrpc's copies), in
 * this process: on pages it may not read or write, or not mapped at all,
 * one transfer killed the owner with SIGSEGV, and a range reaching past
 * the mapping was handed out in descriptors as if it were memory.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rpc/mem.h"

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
        unsigned long lo, hi;
        char p[5];
        int c;
        if (!strchr(line, '\n')) /* a long path: the rest is no line */
            while ((c = fgetc(maps)) != EOF && c != '\n')
                ;
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, p) != 3)
            continue;
        if (hi <= at)
            continue;
        if (lo > at)
            break; /* a hole */
        if (p[0] != 'r')
            perms &= ~(unsigned)FR_RANGE_READ;
        if (p[1] != 'w')
            perms &= ~(unsigned)FR_RANGE_WRITE;
        at = hi;
    }
    fclose(maps);
    return at >= end ? perms : 0;
}
