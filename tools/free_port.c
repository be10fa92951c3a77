/*
 * A free TCP port on 127.0.0.1 for a server the tools start (fabrpc-run's
 * bootstrap store, fabrpc-bench's fi_pingpong).
 */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "free_port.h"

/* 1 if 127.0.0.1:port can be bound now (port 0: any; *got says which).
 * With held, the socket stays bound in *held, made SO_REUSEADDR once
 * bound: a server with SO_REUSEADDR (the bootstrap store) can still
 * listen there, but another check by bind, as this one, finds it taken. */
static int bindable(int port, int *got, int *held)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port)};
    socklen_t len = sizeof a;
    int ok = 0, one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0 &&
        (!held ||
         setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0)) {
        *got = ntohs(a.sin_port);
        ok = 1;
    }
    if (ok && held)
        *held = fd;
    else
        close(fd);
    return ok;
}

/* The lowest port the kernel hands out for outgoing connections. */
static int ephemeral_low(void)
{
    int lo = 32768;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d", &lo) != 1)
            lo = 32768;
        fclose(f);
    }
    return lo;
}

/* A port below the ephemeral range where it can, else any; see
 * free_port.h. held: as bindable's. */
static int pick(int *held)
{
    int lo = ephemeral_low(), got = -1;
    if (lo > 21000) {
        unsigned seed = 0;
        if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != sizeof seed)
            seed = (unsigned)getpid() * 2654435761u;
        for (int i = 0; i < 100; i++) {
            seed = seed * 1103515245u + 12345u;
            int p = 20000 + (int)((seed >> 8) % (unsigned)(lo - 20000));
            if (bindable(p, &got, held))
                return got;
        }
    }
    return bindable(0, &got, held) ? got : -1;
}

int fr_tool_free_port(void) { return pick(NULL); }

int fr_tool_reserve_port(int *held)
{
    *held = -1;
    return pick(held);
}
