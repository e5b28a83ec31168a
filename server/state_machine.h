/* A state machine's legal steps, checked: the connection's three machines
 * (conn.c) and the session's (session.c) each list, for every state, the
 * states it may go to. A step the table does not list is a bug in the
 * file that took it: it is logged, naming the machine, the owner and both
 * states, and the process stops (as libuv asserts its handles' states),
 * rather than serving on in a state nobody designed. */
#ifndef MR_SERVER_STATE_MACHINE_H
#define MR_SERVER_STATE_MACHINE_H

#define MR_STEP(to) (1u << (to))

typedef struct mr_state_machine {
  const char *what;          /* "connection life", "session", ... */
  const char *const *names;  /* names[state] */
  const unsigned *steps;     /* steps[from]: MR_STEP()s of the states `from` may go to */
} mr_state_machine;

/* Returns when from -> to is listed; else logs and aborts. who names the
 * owner in the log line (a peer address). */
void mr_state_check(const mr_state_machine *m, int from, int to, const char *who);

#endif
