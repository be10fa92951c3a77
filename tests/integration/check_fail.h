/*
 * The integration programs' failure check: CHECK(cond, fmt, ...) prints
 * "FAIL rank R line L: message" and ends the process at once (so
 * fabrpc-run stops the other ranks and names this one).
 */
#ifndef FR_TEST_CHECK_FAIL_H
#define FR_TEST_CHECK_FAIL_H

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static int me = -1; /* this rank, for the messages; set after frpc_init */

/* Set by a program that can say more about a failure (its agent's
 * counters): called after the message, before the exit. */
static void (*check_fail_dump)(void);

__attribute__((format(printf, 2, 3), noreturn, unused)) static void
check_failed(int line, const char *fmt, ...)
{
    va_list ap;
    fflush(stdout); /* _exit below would lose what the phases printed */
    fprintf(stderr, "FAIL rank %d line %d: ", me, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    if (check_fail_dump)
        check_fail_dump();
    fflush(stderr);
    _exit(1);
}

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond))                                                          \
            check_failed(__LINE__, __VA_ARGS__);                              \
    } while (0)

#endif /* FR_TEST_CHECK_FAIL_H */
