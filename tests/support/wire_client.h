/* A plain blocking protocol client for tests, and a reconserver process
 * started on a free loopback port. */
#ifndef MR_TEST_WIRE_CLIENT_H
#define MR_TEST_WIRE_CLIENT_H

#include <stddef.h>
#include <sys/types.h>

#include "message.h"

typedef struct mr_test_server {
  pid_t pid;
  int port;
  char log[256]; /* its stderr */
} mr_test_server;

/* Starts build/bin/reconserver on 127.0.0.1 with extra arguments (NULL-
 * terminated), on the CPU (or the GPUs MR_TEST_GPUS names), and waits until
 * it accepts connections. Aborts on failure. */
void mr_test_server_start(mr_test_server *s, const char *const *extra_args);
/* SIGTERM, then waits; returns the exit status (-1 if it did not exit). */
int mr_test_server_stop(mr_test_server *s);
/* Waits (up to 10 s, then SIGKILL) for a server told to stop already, e.g.
 * one that got its SIGTERM from the test, without signalling it again;
 * its exit code as mr_test_server_stop() gives it. */
int mr_test_server_wait(mr_test_server *s);
/* The server's resident memory (VmRSS) in KiB, -1 when unknown. */
long mr_test_server_rss_kib(const mr_test_server *s);
/* 1 while the process runs. */
int mr_test_server_alive(const mr_test_server *s);

/* A connected socket to 127.0.0.1:port, or -1. */
int mr_test_connect(int port);
/* Writes msg's encoding (borrows msg); 0 or -1. */
int mr_test_send(int fd, const mr_message *msg);
/* Writes raw bytes; 0 or -1. */
int mr_test_send_bytes(int fd, const void *bytes, size_t len);
/* The port a server's log names after marker (" listening on 127.0.0.1:",
 * " health and metrics on http://127.0.0.1:") in the first line that has
 * it; 0 while none does. */
int mr_test_logged_port(const char *log_path, const char *marker);
/* One HTTP/1.0 request to 127.0.0.1:port (the server's --http); its status
 * code, the body into body (NUL-terminated, cut to size), or -1 when no
 * response came. */
int mr_test_http(int port, const char *method, const char *path, char *body, size_t size);

typedef struct mr_test_reply {
  mr_message *msgs[512];
  int n;
  int got_close;  /* the server's CLOSE arrived */
  int eof;        /* the server closed the socket */
} mr_test_reply;

/* Reads messages until the server's CLOSE (then until EOF), or timeout_ms
 * of silence. */
void mr_test_receive(int fd, mr_test_reply *r, int timeout_ms);
/* Reads until one message of `kind` has arrived (others are dropped), or
 * timeout_ms of silence, or EOF; returns it (the caller unrefs it) or
 * NULL. One byte at a time, so that nothing after it is taken from the
 * socket: for small answers on a connection read further afterwards (a
 * QUERY's RESPONSE, proof that the session has taken what came before). */
mr_message *mr_test_receive_kind(int fd, mr_message_kind kind, int timeout_ms);
/* Counts messages of a kind. */
int mr_test_reply_count(const mr_test_reply *r, mr_message_kind kind);
/* The first TEXT containing needle, or NULL. */
const char *mr_test_reply_text(const mr_test_reply *r, const char *needle);
void mr_test_reply_free(mr_test_reply *r);

#endif
