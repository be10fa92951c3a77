/*
 * The resident set of this process, for tests that check memory is let
 * go. Under AddressSanitizer freed memory waits in its quarantine, and
 * under ThreadSanitizer its own state grows with the memory threads
 * share (a deregistration's calls over tcp: about 2.5 KiB a cycle there,
 * 140 B in a plain build, 2026-12-07), so RSS_CHECKED is 0 under both
 * and such checks are only printed.
 */
#ifndef FR_TEST_RSS_H
#define FR_TEST_RSS_H

#include <stdio.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RSS_CHECKED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RSS_CHECKED 0
#endif
#endif
#ifndef RSS_CHECKED
#define RSS_CHECKED 1
#endif

static inline long rss_kib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

#endif
