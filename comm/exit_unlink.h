/*
 * Names in /dev/shm that this process made and must not leave behind when
 * it exits without closing what owns them: exit, or a return from main,
 * without frpc_shutdown. libfabric 1.17's shm provider removes an
 * endpoint's region (16 MiB) only at fi_close or on a signal it catches,
 * so every rank of a job whose ranks exited that way left one.
 *
 * At exit (an atexit handler; dlclose of libfabrpc runs it too) every name
 * still listed is removed, only by the process that listed it: a child
 * made by fork that exits leaves its parent's names alone. Removing a name
 * leaves every mapping of it valid: peers still sending to this process
 * do so until they learn it is gone, and a lock it leaves held in its
 * region is still repaired, through the peers' own mappings
 * (shm_repair.h).
 */
#ifndef FR_COMM_EXIT_UNLINK_H
#define FR_COMM_EXIT_UNLINK_H

typedef struct fr_exit_name fr_exit_name;

/* Lists name (copied) for removal at exit. NULL when out of memory or name
 * is NULL: then the name stays at exit, as it did before. Any thread. */
fr_exit_name *fr_exit_unlink_add(const char *name);

/* Takes e off the list and frees it: its owner removes the name itself
 * (fi_close). NULL is ignored. Any thread. */
void fr_exit_unlink_drop(fr_exit_name *e);

/* Removes e's name now, then as fr_exit_unlink_drop: for an owner that
 * cannot close (the provider still holds operations). */
void fr_exit_unlink_now(fr_exit_name *e);

#endif /* FR_COMM_EXIT_UNLINK_H */
