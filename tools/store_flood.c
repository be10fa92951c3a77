/*
 * A stranger flooding the bootstrap store's port, for tools/flood-figures.sh
 * (by hand, not a test):
 *
 *   fabrpc-store-flood port          prints a port free now, below the
 *                                    ephemeral range (the flood's own
 *                                    sockets take ports from that range)
 *   fabrpc-store-flood PORT SECONDS  opens connections to 127.0.0.1:PORT as
 *                                    fast as it can for SECONDS, sending
 *                                    nothing, holding the last 900 open
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HOLD 900

static struct sockaddr_in loopback(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return sa;
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int free_port(void)
{
    srand((unsigned)getpid() ^ (unsigned)time(NULL));
    for (int tries = 0; tries < 1000; tries++) {
        int port = 10000 + rand() % 20000;
        struct sockaddr_in sa = loopback(port);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0)
            break;
        int ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
        close(fd);
        if (ok) {
            printf("%d\n", port);
            return 0;
        }
    }
    fprintf(stderr, "fabrpc-store-flood: no free port found\n");
    return 1;
}

static int flood(int port, double secs)
{
    int fds[HOLD];
    for (int i = 0; i < HOLD; i++)
        fds[i] = -1;
    struct sockaddr_in sa = loopback(port);
    double end = seconds() + secs;
    long made = 0;
    for (int at = 0; seconds() < end; at = (at + 1) % HOLD) {
        if (fds[at] >= 0)
            close(fds[at]);
        fds[at] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (fds[at] < 0 ||
            (connect(fds[at], (struct sockaddr *)&sa, sizeof(sa)) != 0 &&
             errno != EINPROGRESS)) {
            usleep(1000); /* out of ports or descriptors: a breath */
            continue;
        }
        made++;
    }
    fprintf(stderr, "fabrpc-store-flood: %ld connections in %.0f s\n", made,
            secs);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "port") == 0)
        return free_port();
    if (argc == 3 && atoi(argv[1]) > 0 && atof(argv[2]) > 0)
        return flood(atoi(argv[1]), atof(argv[2]));
    fprintf(stderr, "usage: fabrpc-store-flood port | PORT SECONDS\n");
    return 2;
}
