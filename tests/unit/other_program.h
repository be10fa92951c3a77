/*
 * Another program on a port fabrpc expects its store on: it accepts every
 * connection, reads what comes, answers as a web server would and closes,
 * until stopped. For tests that a store address held by something else
 * fails at once, quoting its answer (OTHER_PROGRAM_ANSWER's start). Or,
 * started with other_program_start_as, one that accepts and says
 * nothing (holding the connections until stopped), or that closes each
 * at once: those look like a rank 0 stopped or ending.
 */
#ifndef FR_TESTS_OTHER_PROGRAM_H
#define FR_TESTS_OTHER_PROGRAM_H

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#define OTHER_PROGRAM_ANSWER "HTTP/1.0 200 OK\r\n\r\n<html></html>"

enum { OTHER_ANSWERS, OTHER_SILENT, OTHER_CLOSES };

#define OTHER_PROGRAM_HELD 64

typedef struct {
    int lfd;
    uint16_t port;
    int how; /* OTHER_* */
    atomic_int stop;
    pthread_t th;
    int held[OTHER_PROGRAM_HELD]; /* OTHER_SILENT's connections */
    int nheld;
} other_program;

static void *other_program_serve(void *arg)
{
    other_program *w = arg;
    while (!atomic_load(&w->stop)) {
        struct pollfd p = {.fd = w->lfd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept(w->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        if (w->how == OTHER_SILENT && w->nheld < OTHER_PROGRAM_HELD) {
            w->held[w->nheld++] = fd;
            continue;
        }
        if (w->how == OTHER_ANSWERS) {
            char in[256];
            (void)!recv(fd, in, sizeof(in), 0);
            (void)!send(fd, OTHER_PROGRAM_ANSWER,
                        sizeof(OTHER_PROGRAM_ANSWER) - 1, MSG_NOSIGNAL);
        }
        close(fd);
    }
    for (int i = 0; i < w->nheld; i++)
        close(w->held[i]);
    return NULL;
}

/* Starts w on a free port of 127.0.0.1 (w->port), behaving as how. */
static inline void other_program_start_as(other_program *w, int how)
{
    struct sockaddr_in la = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t ll = sizeof(la);
    w->lfd = socket(AF_INET, SOCK_STREAM, 0);
    w->how = how;
    w->nheld = 0;
    atomic_init(&w->stop, 0);
    ck_assert_int_ge(w->lfd, 0);
    ck_assert_int_eq(bind(w->lfd, (struct sockaddr *)&la, sizeof(la)), 0);
    ck_assert_int_eq(getsockname(w->lfd, (struct sockaddr *)&la, &ll), 0);
    ck_assert_int_eq(listen(w->lfd, 4), 0);
    w->port = ntohs(la.sin_port);
    ck_assert_int_eq(pthread_create(&w->th, NULL, other_program_serve, w), 0);
}

static inline void other_program_start(other_program *w)
{
    other_program_start_as(w, OTHER_ANSWERS);
}

static inline void other_program_stop(other_program *w)
{
    atomic_store(&w->stop, 1);
    pthread_join(w->th, NULL);
    close(w->lfd);
}

#endif /* FR_TESTS_OTHER_PROGRAM_H */
