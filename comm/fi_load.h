/*
 * libfabric, loaded with dlopen on first use instead of linked.
 *
 * Debian's libfabric depends on libinfinipath, whose constructor takes
 * SIGINT, SIGTERM, SIGABRT, SIGSEGV, SIGILL and SIGBUS from whatever
 * program loads it, and keeps no record of the handlers it replaced. A
 * program that loaded libfabrpc with dlopen after it set handlers of its
 * own (Python's ctypes: Ctrl-C then killed the interpreter instead of
 * raising KeyboardInterrupt) lost them for good. Linked, libfabric loads
 * before any code of ours can look. Loaded here, the handlers in place
 * are read first and put back after: every one libinfinipath replaced
 * during the load is restored, whatever it was (the program's, the
 * default, ignored).
 *
 * The library keeps the fi_* entry points fabrpc calls (fi_getinfo,
 * fi_freeinfo, fi_dupinfo, fi_fabric, fi_strerror, fi_version: the rest
 * of libfabric's API is inline calls through its objects' operation
 * tables) as hidden forwarders: never exported, so a program that links
 * libfabric itself keeps libfabric's own.
 */
#ifndef FR_COMM_FI_LOAD_H
#define FR_COMM_FI_LOAD_H

/* The soname of libfabric 1.x, the library loaded. */
#define FR_LIBFABRIC_SONAME "libfabric.so.1"

/* Loads libfabric once per process (the first call loads; later calls
 * return what it found); libfabrpc's constructor makes the first call. 0, or -1 with *why (static text, may be NULL)
 * saying what dlopen or dlsym said. Any thread; blocks while another
 * thread loads it. The forwarders load it too: where it could not be
 * loaded they fail (-FI_ENOSYS, NULL, 0; fi_strerror says why). */
int fr_fi_load(const char **why);

/* The signals libinfinipath's constructor takes. */
#define FR_INFINIPATH_SIGNALS {SIGINT, SIGTERM, SIGABRT, SIGSEGV, SIGILL, SIGBUS}

/* 1 if sa's handler lives in libinfinipath. */
struct sigaction;
int fr_fi_taken_by_infinipath(const struct sigaction *sa);

#endif /* FR_COMM_FI_LOAD_H */
