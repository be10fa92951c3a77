#ifndef FABRPC_TOOLS_FREE_PORT_H
#define FABRPC_TOOLS_FREE_PORT_H

/* A port on 127.0.0.1 that was free a moment ago, below the kernel's
 * ephemeral range where it can (random in 20000 up to the start of
 * ip_local_port_range, checked by bind), else any (bind to port 0); -1
 * if none. A port from the ephemeral range was taken, between such a
 * check and the server's listen, by some process's outgoing connection
 * ("Address already in use": fabrpc-run's rank 0, run_rma_tcp in make
 * check -j2); below it only an explicit bind can take one. Another
 * process may still bind it first: fabrpc-run's --port avoids that. */
int fr_tool_free_port(void);

#endif
