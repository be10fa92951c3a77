/*
 * run_output — fabrpc-run's copy of one rank's stdout or stderr to its own,
 * each line tagged "[rank] ". Single-threaded; no locks.
 */
#ifndef FABRPC_RUN_OUTPUT_H
#define FABRPC_RUN_OUTPUT_H

#include <stddef.h>

/* One pipe from a rank. The fields are private to run_output.c except fd,
 * which the caller polls (and which is -1 once the stream is closed). */
struct run_stream {
    int rank;
    int fd;      /* read end of the rank's pipe; -1 once closed */
    int dst;     /* where the output goes: 1 (stdout) or 2 (stderr) */
    int prefix;  /* tag lines with "[rank] "; 0 passes bytes unchanged */
    int midline; /* what went out last did not end a line */
    size_t len;  /* bytes of a partial line held in buf */
    size_t cap;  /* bytes allocated at buf */
    char *buf;
};

/* Sets up s to copy fd (owned by s from now on) to dst. Cannot fail. */
void run_stream_init(struct run_stream *s, int rank, int fd, int dst,
                     int prefix);

/* Reads once from s->fd (call it when poll() says the fd is ready, so it
 * does not block) and writes out every whole line. Returns 1 at end of
 * file, on a read error, or once the reader of dst is gone (EPIPE), when
 * the caller must call run_stream_close (the rank, writing again, gets
 * SIGPIPE); else 0. Writing may block while the reader of dst is slow. */
int run_stream_read(struct run_stream *s);

/* The errno of a failed write to fd (1 or 2) other than EPIPE (whose
 * reader left on purpose, as `| head` does): the ranks' output was lost
 * from then on. 0 if none. */
int run_output_lost(int fd);

/* Writes out a held partial line (ending it with a newline), closes the
 * fd and frees the buffer. Does nothing if s is already closed. */
void run_stream_close(struct run_stream *s);

#endif
