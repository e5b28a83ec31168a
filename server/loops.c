#include "loops.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn.h"
#include "log.h"
#include "metrics.h"
#include "thread_name.h"

/* One loop thread. What the acceptor sends it (sockets, stop, cut) waits
 * under lock until its wake callback takes it, sockets first. */
typedef struct serve_loop {
  mr_loops *owner;
  int index;
  uv_loop_t uv;
  mr_conn_host host; /* what its connections see: its loop, its connection list */
  int stopping;      /* told to stop: it ends once its last connection is gone */
  uv_async_t wake;
  uv_thread_t thread;
  uv_mutex_t lock;
  int *fds, nfds, cap; /* sockets handed, not yet served */
  int stop, cut;       /* commands given, not yet carried out */
  int closed;          /* its wake handle is closed: nothing more reaches it */
} serve_loop;

struct mr_loops {
  mr_server *acceptor;
  void (*all_ended)(mr_server *acceptor);
  uv_async_t ended; /* on the acceptor's loop: a loop thread has ended */
  atomic_int running;
  int n, next;
  serve_loop *loop;
};

int mr_loops_default(int cpus) {
  int n = cpus / 4;
  return n < 1 ? 1 : n > 8 ? 8 : n;
}

/* Its last connection is gone after a stop: its loop may end. */
static void loop_drained(serve_loop *s) {
  uv_mutex_lock(&s->lock);
  int first = !s->closed;
  s->closed = 1;
  /* Sockets handed meanwhile (none should be: the acceptor stopped first)
   * are let go rather than left open. */
  for (int i = 0; i < s->nfds; i++)
    close(s->fds[i]);
  s->nfds = 0;
  uv_mutex_unlock(&s->lock);
  if (first)
    uv_close((uv_handle_t *)&s->wake, NULL);
}

static void on_wake(uv_async_t *a) {
  serve_loop *s = a->data;
  uv_mutex_lock(&s->lock);
  int *fds = s->fds, nfds = s->nfds, stop = s->stop, cut = s->cut;
  s->fds = NULL;
  s->nfds = s->cap = 0;
  s->stop = s->cut = 0;
  uv_mutex_unlock(&s->lock);
  for (int i = 0; i < nfds; i++) {
    mr_metrics_loop_connection(s->index);
    mr_conn_accept(&s->host, fds[i]);
  }
  free(fds);
  if (cut && s->host.nconns > 0) {
    mr_log(MR_LOG_WARN, "drain deadline passed: cutting %d session(s)", s->host.nconns);
    mr_conn_cancel_all(&s->host);
  }
  if (stop && !s->stopping) {
    s->stopping = 1;
    if (s->host.nconns == 0)
      loop_drained(s);
  }
}

/* The host's side of the slots: server-wide, in the acceptor. */
static int host_admit(void *ctx) { return mr_server_admit(((serve_loop *)ctx)->owner->acceptor); }

static void host_release(void *ctx) { mr_server_release(((serve_loop *)ctx)->owner->acceptor); }

static int host_open_count(void *ctx) {
  return mr_server_open_count(((serve_loop *)ctx)->owner->acceptor);
}

static void host_closed(void *ctx) {
  serve_loop *s = ctx;
  if (s->stopping && s->host.nconns == 0)
    loop_drained(s);
}

static void loop_main(void *arg) {
  serve_loop *s = arg;
  mr_thread_name("mr-loop%d", s->index);
  uv_run(&s->uv, UV_RUN_DEFAULT);
  uv_loop_close(&s->uv);
  atomic_fetch_sub(&s->owner->running, 1);
  uv_async_send(&s->owner->ended);
}

static void on_loop_ended(uv_async_t *a) {
  mr_loops *l = a->data;
  if (atomic_load(&l->running) == 0 && l->all_ended != NULL) {
    l->all_ended(l->acceptor);
    l->all_ended = NULL; /* once */
  }
}

/* Under s->lock: carries the command out on s's thread, unless s has
 * ended. */
static void send_locked(serve_loop *s) {
  if (!s->closed)
    uv_async_send(&s->wake);
}

void mr_loops_hand(mr_loops *l, int fd) {
  serve_loop *s = &l->loop[l->next];
  l->next = (l->next + 1) % l->n;
  uv_mutex_lock(&s->lock);
  if (s->closed) {
    close(fd);
  } else if (s->nfds == s->cap) {
    int cap = s->cap > 0 ? 2 * s->cap : 16;
    int *grown = realloc(s->fds, (size_t)cap * sizeof *grown);
    if (grown == NULL) {
      mr_log(MR_LOG_ERROR, "out of memory handing a connection to a loop");
      close(fd);
    } else {
      s->fds = grown;
      s->cap = cap;
      s->fds[s->nfds++] = fd;
    }
  } else {
    s->fds[s->nfds++] = fd;
  }
  send_locked(s);
  uv_mutex_unlock(&s->lock);
}

/* Tells loop s to stop or to cut its sessions. */
static void command(serve_loop *s, int stop) {
  uv_mutex_lock(&s->lock);
  if (stop)
    s->stop = 1;
  else
    s->cut = 1;
  send_locked(s);
  uv_mutex_unlock(&s->lock);
}

static void command_all(mr_loops *l, int stop) {
  for (int i = 0; i < l->n; i++)
    command(&l->loop[i], stop);
}

void mr_loops_stop(mr_loops *l) { command_all(l, 1); }

void mr_loops_cut(mr_loops *l) { command_all(l, 0); }

static void free_loops(mr_loops *l) {
  for (int i = 0; i < l->n; i++) {
    uv_mutex_destroy(&l->loop[i].lock);
    free(l->loop[i].fds);
  }
  free(l->loop);
  free(l);
}

static void on_ended_closed(uv_handle_t *h) { free_loops(h->data); }

int mr_loops_start(mr_server *acceptor, int n, void (*all_ended)(mr_server *acceptor),
                   mr_err *err) {
  mr_loops *l = calloc(1, sizeof *l);
  serve_loop *loops = calloc((size_t)n, sizeof *loops);
  if (l == NULL || loops == NULL) {
    free(l);
    free(loops);
    return mr_err_set(err, MR_ENOMEM, "out of memory for %d loop threads", n);
  }
  *l = (mr_loops){.acceptor = acceptor, .all_ended = all_ended, .n = n, .loop = loops};
  mr_metrics_loops(n);
  for (int i = 0; i < n; i++) {
    loops[i].owner = l;
    loops[i].index = i;
    uv_mutex_init(&loops[i].lock);
  }
  /* Unreferenced: it does not keep the acceptor's loop running (the signal
   * handles do, until all_ended), and it is closed only in mr_loops_join,
   * when no loop thread can send to it any more. */
  uv_async_init(acceptor->loop, &l->ended, on_loop_ended);
  uv_unref((uv_handle_t *)&l->ended);
  l->ended.data = l;
  int started = 0;
  for (; started < n; started++) {
    serve_loop *s = &loops[started];
    s->host = (mr_conn_host){.loop = &s->uv, .env = acceptor->env,
                             .max_connections = acceptor->opt.max_connections,
                             .drain_timeout_ms = acceptor->opt.drain_timeout_ms,
                             .close_grace_ms = acceptor->opt.close_grace_ms,
                             .write_timeout_ms = acceptor->opt.write_timeout_ms,
                             .admit = host_admit, .release = host_release,
                             .open_count = host_open_count, .closed = host_closed, .ctx = s};
    /* The handles are made here, before the thread runs the loop. */
    if (uv_loop_init(&s->uv) != 0)
      break;
    s->uv.data = s;
    uv_async_init(&s->uv, &s->wake, on_wake);
    s->wake.data = s;
    atomic_fetch_add(&l->running, 1);
    if (uv_thread_create(&s->thread, loop_main, s) != 0) {
      atomic_fetch_sub(&l->running, 1);
      uv_close((uv_handle_t *)&s->wake, NULL);
      uv_run(&s->uv, UV_RUN_DEFAULT);
      uv_loop_close(&s->uv);
      break;
    }
  }
  if (started < n) { /* those running end at once: they have no connections */
    for (int i = 0; i < started; i++)
      command(&loops[i], 1);
    for (int i = 0; i < started; i++)
      uv_thread_join(&loops[i].thread);
    /* The acceptor's loop runs the close, which frees l. */
    uv_close((uv_handle_t *)&l->ended, on_ended_closed);
    return mr_err_set(err, MR_EIO, "cannot start loop thread %d of %d", started + 1, n);
  }
  acceptor->loops = l;
  return 0;
}

void mr_loops_join(mr_loops *l) {
  uv_loop_t *acceptor_loop = l->ended.loop;
  for (int i = 0; i < l->n; i++)
    uv_thread_join(&l->loop[i].thread);
  uv_close((uv_handle_t *)&l->ended, on_ended_closed);
  uv_run(acceptor_loop, UV_RUN_DEFAULT); /* the close, which frees l */
}
