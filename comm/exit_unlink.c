/*
 * See exit_unlink.h. The list is a plain doubly linked one under a mutex:
 * a process has one entry per open shm agent.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "comm/exit_unlink.h"

struct fr_exit_name {
    fr_exit_name *prev, *next;
    pid_t pid; /* the process that listed it */
    char name[];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static fr_exit_name *head;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* In a child made by fork: the parent's entries are not the child's to
 * remove, and another parent thread may have held the lock (or been
 * halfway through the list) at the fork. The child starts an empty list;
 * the parent's entries stay allocated in it, a copy it never frees. */
static void after_fork_in_child(void)
{
    pthread_mutex_init(&lock, NULL);
    head = NULL;
}

/* The lock, waited for at most about 100 ms: exit may be called from a
 * signal handler that interrupted this very thread while it held it (in
 * frpc_init), and exit must not hang. Names are then left, as before. */
static int lock_for_exit(void)
{
    for (int i = 0; i < 100; i++) {
        if (pthread_mutex_trylock(&lock) == 0)
            return 1;
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
    return 0;
}

static void at_exit(void)
{
    pid_t me = getpid();
    if (!lock_for_exit())
        return;
    for (fr_exit_name *e = head; e; e = e->next)
        if (e->pid == me)
            shm_unlink(e->name);
    pthread_mutex_unlock(&lock);
}

static void register_handlers(void)
{
    pthread_atfork(NULL, NULL, after_fork_in_child);
    atexit(at_exit);
}

fr_exit_name *fr_exit_unlink_add(const char *name)
{
    if (!name)
        return NULL;
    size_t len = strlen(name) + 1;
    fr_exit_name *e = malloc(sizeof(*e) + len);
    if (!e)
        return NULL;
    memcpy(e->name, name, len);
    e->pid = getpid();
    e->prev = NULL;
    pthread_once(&once, register_handlers);
    pthread_mutex_lock(&lock);
    e->next = head;
    if (head)
        head->prev = e;
    head = e;
    pthread_mutex_unlock(&lock);
    return e;
}

void fr_exit_unlink_drop(fr_exit_name *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&lock);
    if (e->pid == getpid()) { /* else listed in the parent, not here */
        if (e->prev)
            e->prev->next = e->next;
        else
            head = e->next;
        if (e->next)
            e->next->prev = e->prev;
    }
    pthread_mutex_unlock(&lock);
    free(e);
}

void fr_exit_unlink_now(fr_exit_name *e)
{
    if (e && e->pid == getpid())
        shm_unlink(e->name);
    fr_exit_unlink_drop(e);
}
