/*
 * Who this rank is and where the bootstrap store lives: rank, world size and
 * store address, from explicit values (the frpc_config) or from the
 * variables a launcher sets. Lookups only: getenv (never setenv), no
 * allocation, no I/O, so any thread may call these while no other thread
 * changes the environment.
 *
 * Rank and world size: the first source that is set wins.
 *   "config"    cfg_rank/cfg_world >= 0
 *   "FABRPC"    FABRPC_RANK / FABRPC_WORLD_SIZE         (fabrpc-run)
 *   "torchrun"  RANK / WORLD_SIZE
 *   "mpirun"    OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE
 *   "pmi"       PMI_RANK / PMI_SIZE                    (MPICH, Intel MPI)
 *   "slurm"     SLURM_PROCID / SLURM_NTASKS            (srun; SLURM_NPROCS
 *               when SLURM_NTASKS is unset)
 *   "default"   none of these: rank 0 of 1
 * Store address: the first that is set wins.
 *   "config"             cfg_store_addr, "host:port" or "[v6addr]:port"
 *   "FABRPC_STORE_ADDR"  same syntax
 *   "MASTER_ADDR"        MASTER_ADDR (a host, brackets optional) with
 *                        MASTER_PORT + 1 (torchrun's own store already
 *                        listens on MASTER_PORT)
 *   "default"            127.0.0.1:29500
 *
 * Strict: a source that is set must be complete and valid, it is never
 * skipped for the next one. A variable set to the empty string counts as
 * unset. FRPC_EINVAL, with a message naming the variable and its value, for:
 * a value that is not a plain decimal integer (no sign but '-', no spaces),
 * rank < 0, rank >= world size, world size < 1 or > FR_BOOTENV_MAX_WORLD,
 * port 0 or > 65535, a host over 255 bytes or that is neither a name
 * (letters, digits, '.', '-', '_') nor an IP address, a malformed
 * address, and a pair
 * of which only one is set (also for the config values and for
 * MASTER_ADDR/MASTER_PORT).
 */
#ifndef FR_COMM_BOOTENV_H
#define FR_COMM_BOOTENV_H

#include <stddef.h>
#include <stdint.h>

#include "serialization/fabrpc_errors.h"

#define FR_BOOTENV_MAX_WORLD 65536
#define FR_BOOTENV_MAX_HOST 255
#define FR_BOOTENV_DEFAULT_HOST "127.0.0.1"
#define FR_BOOTENV_DEFAULT_PORT 29500

typedef struct fr_bootenv {
    int rank;
    int world_size;
    char store_host[FR_BOOTENV_MAX_HOST + 1]; /* without brackets: "::1" */
    uint16_t store_port;
    const char *source;       /* which source gave rank and world size (a
                                 static string, see above) */
    const char *rank_name;    /* what held the rank: "FABRPC_RANK",
                                 "RANK", ..., "config.rank" (static) */
    const char *store_source; /* which gave the store address (static) */
    int rank_outside; /* set with FRPC_EINVAL when the one fault is a rank
                         not below its world size: rank, world_size and
                         the store address are filled all the same, so
                         that the rank can tell the job (rpc/agent.c) */
} fr_bootenv;

/*
 * Resolves rank, world size and store address as described above.
 * cfg_rank/cfg_world < 0 and cfg_store_addr NULL or "" mean "not given".
 * cfg_store_addr is only read. Returns 0 and fills *out, or FRPC_EINVAL
 * with the reason in errbuf (if not NULL; truncated to errlen) and *out
 * unspecified but for out->rank_outside (see fr_bootenv).
 */
int fr_bootenv_resolve(int cfg_rank, int cfg_world, const char *cfg_store_addr,
                       fr_bootenv *out, char *errbuf, size_t errlen);

/*
 * Rank and world size alone, as fr_bootenv_resolve finds them, the store
 * address left unread (out->store_source NULL, store_host "", port 0):
 * for a world of one, which has no store. Same errors for the rank.
 */
int fr_bootenv_resolve_rank(int cfg_rank, int cfg_world, fr_bootenv *out,
                            char *errbuf, size_t errlen);

/*
 * Parses "host:port" or "[v6addr]:port" (text, only read) into host (a
 * NUL-terminated copy without brackets, of hostlen bytes at most with the
 * NUL) and *port (1..65535). A bare IPv6 address ("::1:80") is refused as
 * ambiguous. name labels the text in the message ("FABRPC_STORE_ADDR").
 * Returns 0 or FRPC_EINVAL (message in errbuf).
 */
int fr_bootenv_parse_addr(const char *name, const char *text, char *host,
                          size_t hostlen, uint16_t *port, char *errbuf,
                          size_t errlen);

/*
 * Parses text as a decimal integer in [lo, hi]: an optional '-' and digits,
 * nothing else. name labels the value in the message ("RANK"). Returns 0
 * and *out, or FRPC_EINVAL ("NAME='text' is not a decimal integer",
 * "NAME=text is out of range (lo..hi)").
 */
int fr_bootenv_parse_long(const char *name, const char *text, long lo,
                          long hi, long *out, char *errbuf, size_t errlen);

/*
 * Reads environment variable name as fr_bootenv_parse_long does. Returns 0
 * with *found = 0 when it is unset or empty (*out untouched), 0 with
 * *found = 1 and *out when it is valid, FRPC_EINVAL otherwise.
 */
int fr_bootenv_getenv_long(const char *name, long lo, long hi, long *out,
                           int *found, char *errbuf, size_t errlen);

#endif /* FR_COMM_BOOTENV_H */
