/*
 * fabrpc error codes: one X-macro table yields the enum, frpc_strerror and
 * frpc_err_name, so a code and its text can never drift apart.
 *
 * Every fallible fabrpc function returns 0 or one of these negative codes
 * (rpc/fabrpc.h says what each means). This header has no dependencies and
 * lives in the lowest layer, serialization/, so that every layer returns
 * the same codes without including one above it; it is installed beside
 * fabrpc.h, which includes it.
 */
#ifndef FABRPC_ERRORS_H
#define FABRPC_ERRORS_H

#define FRPC_ERROR_TABLE(X)                                                   \
    X(EINVAL,     -1,  "invalid argument")                                    \
    X(ENOFUNC,    -2,  "no such function")                                    \
    X(ENORANK,    -3,  "no such rank")                                        \
    X(EREMOTE,    -4,  "remote handler error")                                \
    X(ETIMEDOUT,  -5,  "timed out")                                           \
    X(ECANCELED,  -6,  "cancelled")                                           \
    X(EPEERLOST,  -7,  "peer lost")                                           \
    X(ETOOBIG,    -8,  "message too large")                                   \
    X(ETRANSPORT, -9,  "transport failure")                                   \
    X(ESHUTDOWN,  -10, "shutting down")                                       \
    X(EPROTO,     -11, "protocol violation")                                  \
    X(EACCES,     -12, "not authorized")                                      \
    X(ENOMEM,     -13, "out of memory")                                       \
    X(EEXIST,     -14, "already registered")                                  \
    X(ENOBACKEND, -15, "backend not available")                               \
    X(EBOOTSTRAP, -16, "bootstrap failed")                                    \
    X(EAGAIN,     -17, "resource temporarily unavailable")               \
    X(EDEADLK,    -18, "waiting here could deadlock")                        \
    X(EINPROGRESS, -19, "still in progress")

enum frpc_error {
    FRPC_OK = 0,
#define FRPC__ERR_ENUM(name, value, text) FRPC_##name = (value),
    FRPC_ERROR_TABLE(FRPC__ERR_ENUM)
#undef FRPC__ERR_ENUM
};

#ifdef __cplusplus
extern "C" {
#endif

/* Text for a code ("timed out"); "success" for 0, "unknown error" for
 * codes not in the table; never NULL.
 * The string is static: do not free it. Any thread. */
const char *frpc_strerror(int code);

/* The code's name ("FRPC_ETIMEDOUT"); "FRPC_OK" for 0, "FRPC_EUNKNOWN" for
 * others. Static string. Any thread. */
const char *frpc_err_name(int code);

#ifdef __cplusplus
}
#endif

#endif /* FABRPC_ERRORS_H */
