/*
 * run_output — fabrpc-run's copy of the ranks' stdout and stderr.
 *
 * Design notes
 * - Output goes out line by line, each line in one writev() with its
 *   "[rank] " prefix, so lines of different ranks never mix.
 * - A partial line is held until its newline, the pipe's end (then a
 *   newline is added) or LINE_BYTES (1 MiB; then it goes out as it is and
 *   the rest of that line follows without a prefix, and may be mixed with
 *   other ranks' lines). Apart from prefixes and that one newline, bytes
 *   (NULs, invalid UTF-8) are passed on as they were read, never dropped
 *   while their reader is there; once it is gone, the ranks' pipes to it
 *   close, and a rank writing there gets SIGPIPE, as in a shell pipeline.
 * - A buffer grown for a long line is freed when the line ends, so memory
 *   stays small however many ranks there are.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "run_output.h"

#define LINE_BYTES (1 << 20) /* longest partial line held back */
#define READ_BYTES 65536

static int broken[3]; /* writing to fd 1 or 2 failed: drop that output */
static int lost[3];   /* ... for another reason than a reader gone */

int run_output_lost(int fd)
{
    return fd == 1 || fd == 2 ? lost[fd] : 0;
}

void run_stream_init(struct run_stream *s, int rank, int fd, int dst,
                     int prefix)
{
    *s = (struct run_stream){.rank = rank, .fd = fd, .dst = dst,
                             .prefix = prefix};
}

/* Writes all of iov to fd; after a write error (reader gone) nothing more
 * is written to fd, and the streams copied there close (run_stream_read). */
static void write_all(int fd, struct iovec *iov, int cnt)
{
    while (cnt > 0 && !broken[fd]) {
        ssize_t w = writev(fd, iov, cnt);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) { /* stdout was left non-blocking */
                struct pollfd p = {.fd = fd, .events = POLLOUT};
                poll(&p, 1, -1);
                continue;
            }
            broken[fd] = 1;
            if (errno != EPIPE) /* a full disk, /dev/full: output lost */
                lost[fd] = errno;
            return;
        }
        while (cnt > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++, cnt--;
        }
        if (cnt > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
}

/* Writes a then b (either may be empty) for the stream's rank, with the
 * prefix when a new line starts; remembers whether the line was left open. */
static void emit(struct run_stream *s, const char *a, size_t alen,
                 const char *b, size_t blen)
{
    char pre[16];
    struct iovec iov[3];
    int k = 0;
    if (s->prefix && !s->midline) {
        int n = snprintf(pre, sizeof pre, "[%d] ", s->rank);
        iov[k++] = (struct iovec){pre, (size_t)n};
    }
    if (alen)
        iov[k++] = (struct iovec){(void *)a, alen};
    if (blen)
        iov[k++] = (struct iovec){(void *)b, blen};
    write_all(s->dst, iov, k);
    const char *last = blen ? b + blen - 1 : alen ? a + alen - 1 : NULL;
    if (last)
        s->midline = *last != '\n';
}

static void drop_buf(struct run_stream *s)
{
    free(s->buf);
    s->buf = NULL;
    s->cap = 0;
}

void run_stream_close(struct run_stream *s)
{
    if (s->fd < 0)
        return;
    if (s->prefix && (s->len || s->midline))
        emit(s, s->buf, s->len, "\n", 1); /* end the partial line */
    s->len = 0;
    close(s->fd);
    s->fd = -1;
    drop_buf(s);
}

/* Makes room in s->buf for n more bytes; -1 if there is no memory. */
static int hold(struct run_stream *s, size_t n)
{
    size_t cap = s->cap ? s->cap : 4096;
    while (cap < s->len + n)
        cap *= 2;
    if (cap != s->cap) {
        char *p = realloc(s->buf, cap);
        if (!p)
            return -1;
        s->buf = p;
        s->cap = cap;
    }
    return 0;
}

/* Hands n new bytes to the output: whole lines go out at once, with what
 * was held; the rest is held until it ends or grows past LINE_BYTES. */
static void feed(struct run_stream *s, const char *p, size_t n)
{
    while (n > 0) {
        const char *nl = memchr(p, '\n', n);
        size_t take = nl ? (size_t)(nl - p) + 1 : n;
        if (!nl && s->len + n <= LINE_BYTES && hold(s, n) == 0) {
            memcpy(s->buf + s->len, p, n);
            s->len += n;
            return;
        }
        emit(s, s->buf, s->len, p, take);
        s->len = 0;
        if (s->cap > READ_BYTES)
            drop_buf(s); /* give back what a long line took */
        p += take, n -= take;
    }
}

int run_stream_read(struct run_stream *s)
{
    static char buf[READ_BYTES];
    ssize_t n = read(s->fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 0;
    if (n <= 0)
        return 1;
    if (!s->prefix)
        emit(s, buf, (size_t)n, NULL, 0);
    else
        feed(s, buf, (size_t)n);
    /* The reader of dst is gone (`fabrpc-run ... | head`): close the pipe,
     * so that the rank's next write ends it by SIGPIPE as in a shell
     * pipeline, rather than reading and dropping its output for ever. */
    return broken[s->dst];
}
