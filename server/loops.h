/* The loop threads that serve connections (--loops N).
 *
 * Every connection's bytes pass through a libuv loop thread (conn.c); one
 * thread for all of them flattens the server's input near what one core
 * can decode. So the main loop only accepts (server.c, with its EMFILE
 * handling and signals) and hands each accepted socket, round robin, to
 * one of N loop threads; each serves its connections with a mr_server of
 * its own (its uv loop and connection list; conn.c does not know there are
 * others), while --max-connections is counted in the acceptor's (atomics,
 * mr_server_admit). Draining is the acceptor's word: it tells every loop
 * to stop (each ends once its last connection is gone) and, past the
 * deadline, to cut its sessions; the acceptor's loop ends when every loop
 * thread has. Commands and sockets reach a loop through a mutex-guarded
 * list and a uv_async_t, in the order they were given. */
#ifndef MR_SERVER_LOOPS_H
#define MR_SERVER_LOOPS_H

#include "error.h"
#include "server.h"

typedef struct mr_loops mr_loops;

/* The default --loops for this many CPUs: one loop per 4, 1 to 8. */
int mr_loops_default(int cpus);

/* Starts n loop threads serving like acceptor (its options, env and
 * counts), and sets acceptor->loops. all_ended is called on the acceptor's
 * loop thread once every loop thread has ended (after mr_loops_stop). */
int mr_loops_start(mr_server *acceptor, int n, void (*all_ended)(mr_server *acceptor),
                   mr_err *err);

/* Hands an accepted socket (taken) to the next loop. Acceptor's thread,
 * before mr_loops_stop. */
void mr_loops_hand(mr_loops *l, int fd);

/* No more sockets: each loop finishes its connections and ends. */
void mr_loops_stop(mr_loops *l);

/* Past the drain deadline: each loop cuts its sessions. */
void mr_loops_cut(mr_loops *l);

/* After the acceptor's loop has returned (every loop thread ended, or
 * stopped before): joins the threads, closes l's handle on the acceptor's
 * loop (running it for that) and frees l. */
void mr_loops_join(mr_loops *l);

#endif
