/*
 * What ThreadSanitizer cannot see: ordering that leaves this process in a
 * message and comes back in another. A thread writes a registered region
 * and then sends (a call, a barrier); a peer, having heard of it, asks
 * for the region; this rank's poll thread reads it to serve the emulated
 * get (rpc/emu_serve.c). The order is real (the provider's queues order
 * it), but it runs through libfabric and another process, which TSan does
 * not instrument, so it reported the read as racing with the write.
 * The same holds for the bootstrap store's socket: a barrier is a store
 * round trip (comm/store_client.c), so the write before a barrier and a
 * peer's get after it meet only through the store and the fabric.
 * Every message posted to the fabric or sent to the store releases, and
 * every message handled or store reply received acquires, one
 * process-wide wire address (fr_tsan_wire): a message received may
 * follow anything this process did before any of its sends. That over-approximates (a
 * message received need not follow every send), so a race between two
 * threads that only ever meet through a peer would go unseen; within a
 * process, threads meet through locks and atomics TSan does see.
 * No-ops unless built with -fsanitize=thread.
 */
#ifndef FR_COMM_TSAN_H
#define FR_COMM_TSAN_H

#if defined(__SANITIZE_THREAD__)
#define FR_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FR_TSAN 1
#endif
#endif

#ifdef FR_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
extern char fr_tsan_wire; /* defined in comm/fabric.c; only its address */
#define fr_tsan_sent() __tsan_release(&fr_tsan_wire)
#define fr_tsan_received() __tsan_acquire(&fr_tsan_wire)
#else
#define fr_tsan_sent() ((void)0)
#define fr_tsan_received() ((void)0)
#endif

#endif /* FR_COMM_TSAN_H */
