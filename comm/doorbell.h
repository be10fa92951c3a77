/*
 * Doorbells: how an idle rank on a shared-memory provider sleeps without
 * missing work. libfabric's shm provider has no wait object (its
 * fi_cq_sread spins), so each rank owns a small POSIX shared-memory
 * segment holding a futex word; a rank that goes to sleep says so there,
 * and a same-host peer that sends to it rings the bell (bumps the word and
 * wakes the futex).
 *
 * Design notes
 * - Sleeping is "announce, re-check, wait": the sleeper sets its sleeping
 *   flag, then polls once more, then waits on the futex only if the word
 *   still holds the value it read before polling. A sender posts its
 *   message first and rings after, so either the sleeper's re-check finds
 *   the message or the sender sees the flag and the futex wait returns.
 * - Waits are bounded (the caller passes a timeout), so a wake-up that a
 *   provider's internal protocol does not ring for costs at most that.
 * - Segments are named from the job token and the rank, and unlinked as
 *   soon as every peer has mapped them (fr_doorbell_unlink), so a crashed
 *   job leaves nothing behind in /dev/shm.
 */
#ifndef FR_COMM_DOORBELL_H
#define FR_COMM_DOORBELL_H

#include <stdint.h>

#include "serialization/fabrpc_errors.h"

typedef struct fr_doorbell fr_doorbell;

/* Creates this rank's bell, named /<base>_bell_<rank> (base: unique to
 * the job, up to 95 bytes, and public: anyone may list /dev/shm).
 * FRPC_ETRANSPORT (with the system's text in errbuf) or FRPC_ENOMEM. */
int fr_doorbell_open(const char *base, uint32_t rank, uint32_t world,
                     fr_doorbell **out, char *errbuf, size_t errlen);

/* Maps peer's bell (created by its fr_doorbell_open). FRPC_ETRANSPORT if it
 * does not exist. Call for every peer before fr_doorbell_unlink. */
int fr_doorbell_connect(fr_doorbell *d, uint32_t peer);

/* Removes this rank's segment name; mappings stay valid. Until then the
 * name is also removed if the process exits (comm/exit_unlink.h). */
void fr_doorbell_unlink(fr_doorbell *d);

/* The name of rank's bell in a job whose base is base (as given to
 * fr_doorbell_open), "/<base>_bell_<rank>", into buf[0..len). For the
 * ranks that clean after a peer that died before it removed its own. */
void fr_doorbell_name(const char *base, uint32_t rank, char *buf,
                      size_t len);

/* Wakes peer if it is asleep. Cheap when it is not (one atomic load).
 * Peers that were never connected are ignored. Any thread. */
void fr_doorbell_ring(fr_doorbell *d, uint32_t peer);

/*
 * Sleeps up to timeout_us unless work arrives: announces sleep, calls
 * recheck(arg) (which polls; > 0 means work was found, so no sleep), then
 * waits for a ring. Returns at once if recheck found work.
 */
void fr_doorbell_sleep(fr_doorbell *d, unsigned timeout_us,
                       int (*recheck)(void *arg), void *arg);

/* Says that this rank's agent has ended: what it offered to be read
 * (rendezvous payloads, loans) may be freed or changed from now on. A
 * same-host reader that copies straight from this process's memory (shm's
 * fast path, which asks no registration) checks fr_doorbell_peer_ended
 * after its copy: 0 then means the copy was made before the end, so it is
 * whole. Set before the first such byte is freed. Any thread. */
void fr_doorbell_end(fr_doorbell *d);

/* 1 once peer called fr_doorbell_end; 0 otherwise (also for a peer never
 * connected, or d NULL). Never blocks. */
int fr_doorbell_peer_ended(fr_doorbell *d, uint32_t peer);

/*
 * A loan's own end, for a reader that copies straight from this process's
 * memory (as fr_doorbell_end is for all of them at once): the lender
 * opens a slot holding tag (nonzero, never reused) before it offers the
 * bytes, and closes it before it takes them back early (a call that timed
 * out while a stopped callee had yet to read its args). A reader that
 * still finds tag in the slot after its copy made the copy while the
 * bytes were offered: it is whole. fr_doorbell_loan_open returns the slot
 * (0..FR_DOORBELL_LOANS-1), or -1 when all are taken or d is NULL (the
 * loan then cannot be taken back early). Any thread; never block.
 */
#define FR_DOORBELL_LOANS 1024
int fr_doorbell_loan_open(fr_doorbell *d, uint64_t tag);
void fr_doorbell_loan_close(fr_doorbell *d, int slot);
/* 1 if peer's slot holds tag; 0 otherwise (also for a peer never
 * connected, a slot out of range, or d NULL). */
int fr_doorbell_peer_loan_is(fr_doorbell *d, uint32_t peer, int slot,
                             uint64_t tag);

/*
 * Regions a same-host peer copies straight from or into (shm's RMA fast
 * path, which checks no key): the owner lists each registered region in
 * a slot of its bell, holding tag (its id: nonzero, never reused, not
 * UINT64_MAX). A peer's transfer first takes a hold on the slot in the
 * owner's bell (a count in the peer's own row there), then checks that
 * the slot still holds tag; it gives the hold back when the provider is
 * done with the transfer. The owner ending a region seals its slot, then
 * waits until no live peer holds it: either the peer's check saw the
 * seal, or the owner sees the hold (both sides' steps are sequentially
 * consistent). Holds are per slot, not per tag, so a stale hold only
 * delays; a peer holding more slots of one owner at once than its row
 * has entries takes the row's catch-all hold, which every slot's ending
 * waits for.
 *
 * fr_doorbell_region_open returns the slot (0..FR_DOORBELL_REGIONS-1),
 * or -1 when all are taken, tag is 0 or UINT64_MAX, or d is NULL. Seal,
 * unseal (back to tag, after a wait that ran out) and close (free the
 * slot) are the owner's; any thread, never block.
 */
#define FR_DOORBELL_REGIONS 1024
int fr_doorbell_region_open(fr_doorbell *d, uint64_t tag);
void fr_doorbell_region_seal(fr_doorbell *d, int slot);
void fr_doorbell_region_unseal(fr_doorbell *d, int slot, uint64_t tag);
void fr_doorbell_region_close(fr_doorbell *d, int slot);

/* A peer's hold on owner's slot, for a transfer from or into the region
 * tag: >= 0, a handle for fr_doorbell_region_release, once the slot was
 * found holding tag after the hold was taken; FR_REGION_GONE when it
 * does not (deregistered, or being so): nothing is held;
 * FR_REGION_UNCHECKED when owner's bell is not mapped (never connected,
 * or d NULL): nothing is held and nothing could be checked. Never blocks. */
#define FR_REGION_GONE (-1)
#define FR_REGION_UNCHECKED (-2)
int fr_doorbell_region_hold(fr_doorbell *d, uint32_t owner, int slot,
                            uint64_t tag);
void fr_doorbell_region_release(fr_doorbell *d, uint32_t owner, int hold);
/* 0 if owner's slot does not hold tag now (FR_REGION_GONE's case), else 1
 * (also when nothing can be checked): a look, no hold, so a transfer
 * refused for it is refused before it begins. Never blocks. */
int fr_doorbell_region_listed(fr_doorbell *d, uint32_t owner, int slot,
                              uint64_t tag);

/* The holds peer has on this rank's slot now (its catch-all included). */
uint64_t fr_doorbell_region_held_by(fr_doorbell *d, uint32_t peer,
                                    int slot);

/* Unmaps everything and frees d (and unlinks its name if still there).
 * NULL is a no-op. */
void fr_doorbell_close(fr_doorbell *d);

#endif /* FR_COMM_DOORBELL_H */
