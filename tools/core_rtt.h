/*
 * The machine's state as fabrpc-bench and tools/core_pingpong.c see it:
 * the round trip of a cache line between two CPUs, with no libfabric and
 * no fabrpc in the way. Every message between two ranks on one host moves
 * cache lines between cores, so a small call's round trip rises and falls
 * with this one (docs/bench/2026-12-03-bimodal).
 */
#ifndef FABRPC_CORE_RTT_H
#define FABRPC_CORE_RTT_H

/*
 * Bounces a cache line between the calling thread, pinned for the while
 * to the first CPU this process may use, and a thread of its own pinned
 * to the second, for window_ms (> 0), and returns the mean round trip in
 * ns. The calling thread's CPU affinity is as before on return. NAN when
 * it cannot be measured: fewer than two usable CPUs, no thread, a pin
 * refused. Blocks for window_ms (and both CPUs are busy meanwhile: a
 * thread that spins elsewhere in the process or on the machine makes the
 * figure meaningless, so callers measure while nothing else spins).
 */
double core_rtt_ns(double window_ms);

#endif
