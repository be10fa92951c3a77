/*
 * Repairing what a killed process leaves locked in libfabric's shm
 * provider.
 *
 * libfabric 1.17's shm provider keeps a spin lock at the head of each
 * endpoint's shared region: its owner takes it to read its command queue,
 * and every sender takes it to add a command. A process killed while it
 * holds one (its own region, receiving; or a peer's, sending) leaves it
 * held for ever, and every later sender to that region, and the region's
 * owner, spins inside fi_inject / fi_send / fi_cq_read with no way out:
 * no deadline of ours can end a thread stuck inside the provider. Seen
 * with a rank SIGKILLed while others flooded it with calls.
 *
 * After a peer on this host died, fr_shm_release_stuck looks at the
 * regions of the ranks on this host and releases a lock that it watches
 * for hold_ms, trying to take it, and sees neither free nor handed over
 * (back nearer free: threads that come to wait on a held lock move it
 * away from free, and only a release brings it back): a live holder
 * keeps it for the few instructions of a queue operation, and live
 * senders that flood a region hand it over every few microseconds, so a
 * look that only reads it now and then sees it held every time, but one
 * that watches it sees a hand-over soon. Several ranks' watchers may
 * watch one lock at once; one releases it. The region's layout is
 * checked first (libfabric 1.17: its version byte, and the pid of the
 * process that made it at its place); a region that does not match is
 * left alone. What it
 * cannot tell from a dead holder is a live one that is not scheduled for
 * all of hold_ms: a process stopped (SIGSTOP) inside the provider.
 */
#ifndef FR_COMM_SHM_REPAIR_H
#define FR_COMM_SHM_REPAIR_H

/* One region: its name under /dev/shm (the shm endpoint's name) and the
 * pid of the process that made it. */
typedef struct fr_shm_region_ref {
    const char *name;
    int pid;
} fr_shm_region_ref;

/* Releases each region's lock not seen alive for hold_ms (see above).
 * Returns how many were released. Blocks up to hold_ms per region whose
 * lock stays held (longer on a machine so loaded that a 1 ms look takes
 * 8 ms or more), on the CPU all that time. A region whose name is gone
 * (its process removed it at exit, or a survivor after its death) is
 * looked for among this process's own mappings, where a sender to it has
 * it; one mapped nowhere here is skipped. Any thread; never one that could
 * itself be spinning on such a lock. */
int fr_shm_release_stuck(const fr_shm_region_ref *regions, int n,
                         unsigned hold_ms);

/* Takes the lock of the region named name, made by pid, and raises the
 * region's signal, as a sender does that queued a message and has not
 * let the lock go yet; keeps both (and its mapping): for fault injection,
 * a process that then dies holding it. The region is found as
 * fr_shm_release_stuck finds it (by name, else this process's mapping:
 * a sender has its peers' regions mapped after their names are gone). 0,
 * or -1 when it is not found or not of the layout known (libfabric
 * 1.17). Spins while the lock is held. */
int fr_shm_take_lock(const char *name, int pid);

#endif /* FR_COMM_SHM_REPAIR_H */
