/* See threads.h. */
#include "config.h"

#include <stddef.h>

#include "comm/threads.h"

void fr_async_signals(sigset_t *set)
{
    static const int own[] = {SIGSEGV, SIGBUS, SIGILL,  SIGFPE,
                              SIGTRAP, SIGSYS, SIGABRT, SIGPIPE};
    sigfillset(set);
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        sigdelset(set, own[i]);
}

int fr_thread_create(pthread_t *t, void *(*fn)(void *), void *arg)
{
    sigset_t async, old;
    fr_async_signals(&async);
    /* The new thread inherits the mask in force when it is created. */
    int masked = pthread_sigmask(SIG_BLOCK, &async, &old) == 0;
    int rc = pthread_create(t, NULL, fn, arg);
    if (masked)
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

_Thread_local int fr_woke_sleeper FR_TLS_FAST;
