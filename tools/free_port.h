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

/* As fr_tool_free_port, and keeps the port from the others who pick
 * ports so (this, tests' free_port): *held is a socket bound there,
 * SO_REUSEADDR, not listening, close-on-exec, so that a server with
 * SO_REUSEADDR (the bootstrap store) still listens there while another
 * check by bind finds the port taken. Close *held once done (-1 if the
 * port is -1). A port another picker checked just before is still
 * theirs to take: --port avoids even that. */
int fr_tool_reserve_port(int *held);

#endif
