/* The gadget contract: what one step of a reconstruction chain is.
 *
 * A gadget class declares its parameters (bound from the JSON config into
 * its state struct before any data is read), the message kinds it handles
 * and the kinds it emits. The chain (chain.h) gives every message to the
 * first gadget that accepts its kind; messages a gadget does not accept
 * pass it untouched. process() may emit any number of messages downstream
 * through mr_emit_message(); it runs on the thread of its stage (stage.c:
 * the connection's pipeline thread for per-line gadgets, one thread per
 * later stage), one message at a time.
 *
 * Ownership: process() borrows its message. The chain drops its reference
 * when process() returns, whatever it returns, so no exit path of a gadget
 * frees it; a gadget that passes the message on, or keeps it for later,
 * takes a reference of its own: mr_emit_message(out, mr_message_ref(msg)).
 * What a gadget makes is its own until it emits it (emitting takes it, and
 * on an error too). On failure a gadget returns a negative MR_E* code with
 * its line in ctx->err (mr_gadget_fail()); the chain stops delivering. */
#ifndef MR_GADGETS_GADGET_H
#define MR_GADGETS_GADGET_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "cancel.h"
#include "error.h"
#include "message.h"
#include "stream_header.h"

struct mr_pool;

typedef enum mr_param_type {
  MR_PARAM_TYPE_BOOL,   /* int: 0 or 1 */
  MR_PARAM_TYPE_INT,    /* int, within [min, max] */
  MR_PARAM_TYPE_DOUBLE, /* double, within [min, max] */
  MR_PARAM_TYPE_ENUM,   /* int: index of the JSON string within `choices` */
  MR_PARAM_TYPE_INTS,   /* int[count], each within [min, max] */
  MR_PARAM_TYPE_DEVICE, /* int: MR_DEVICE_AUTO, MR_DEVICE_CPU or a GPU index */
  MR_PARAM_TYPE_TEXT,   /* char[count]: a JSON string of fewer than `count` bytes */
} mr_param_type;

/* Values of an MR_PARAM_DEVICE parameter ("auto", "cpu", or N >= 0). */
#define MR_PARAM_DEVICE_AUTO (-1)
#define MR_PARAM_DEVICE_CPU (-2)

/* One entry of a class's parameter table. Written with the MR_PARAM_*()
 * macros below, never by hand: they compute the offset and refuse to
 * compile when the field is not of the C type the entry writes. */
typedef struct mr_param {
  const char *name;
  mr_param_type type;
  size_t offset;      /* of the value within the gadget's state */
  const char *def;    /* the default, as JSON text ("4", "\"rss\"", "[5,4]") */
  double min, max;    /* INT, DOUBLE, INTS */
  const char *choices;/* ENUM: "rss|weighted" */
  size_t count;       /* INTS: number of elements; TEXT: buffer bytes */
  const char *help;
} mr_param;

/* 0, after a compile-time check that `ok` holds for st's field: a struct
 * declared inside sizeof is where C11 lets a _Static_assert stand within an
 * expression (an initialiser's). */
#define MR_PARAM_FIELD_CHECK(st, field, ok, what)                                               \
  (0 * sizeof(struct {                                                                          \
     _Static_assert(ok, "parameter field " #st "." #field " must be " what);                    \
     char unused;                                                                               \
   }))
/* Is st's field (an lvalue, not evaluated) of type T? */
#define MR_PARAM_FIELD_IS(st, field, T) _Generic(((st *)0)->field, T: 1, default: 0)
/* Is st's field an array of T (the count is the field's own)? */
#define MR_PARAM_FIELD_ARRAY_OF(st, field, T)                                                   \
  _Generic(&((st *)0)->field, T(*)[sizeof(((st *)0)->field) / sizeof(T)]: 1, default: 0)

#define MR_PARAM_ENTRY(st, field, key, t, dflt, lo, hi, options, n, text)                       \
  {.name = (key), .type = (t), .offset = offsetof(st, field), .def = (dflt), .min = (lo),       \
   .max = (hi), .choices = (options), .count = (n), .help = (text)}
#define MR_PARAM_INT_FIELD(st, field)                                                           \
  MR_PARAM_FIELD_CHECK(st, field, MR_PARAM_FIELD_IS(st, field, int), "an int")

/* The entries, one per type. st is the gadget's state struct, field the
 * member the value lands in, key the JSON name, dflt the default as JSON
 * text (what --describe prints), text the help line. */
#define MR_PARAM_BOOL(st, field, key, dflt, text)                                               \
  MR_PARAM_ENTRY(st, field, key, MR_PARAM_TYPE_BOOL, dflt, 0, 1, NULL,                          \
                 MR_PARAM_INT_FIELD(st, field), text)
#define MR_PARAM_INT(st, field, key, dflt, lo, hi, text)                                        \
  MR_PARAM_ENTRY(st, field, key, MR_PARAM_TYPE_INT, dflt, lo, hi, NULL,                         \
                 MR_PARAM_INT_FIELD(st, field), text)
#define MR_PARAM_DOUBLE(st, field, key, dflt, lo, hi, text)                                     \
  MR_PARAM_ENTRY(st, field, key, MR_PARAM_TYPE_DOUBLE, dflt, lo, hi, NULL,                      \
                 MR_PARAM_FIELD_CHECK(st, field, MR_PARAM_FIELD_IS(st, field, double),          \
                                      "a double"),                                              \
                 text)
/* choices: "a|b|c"; the field gets the index of the one the JSON names. */
#define MR_PARAM_ENUM(st, field, key, dflt, options, text)                                      \
  MR_PARAM_ENTRY(st, field, key, MR_PARAM_TYPE_ENUM, dflt, 0, 0, options,                       \
                 MR_PARAM_INT_FIELD(st, field), text)
/* field: an int array; the JSON array must have as many elements. */
#define MR_PARAM_INTS(st, field, key, dflt, lo, hi, text)                                       \
  MR_PARAM_ENTRY(st, field, key, MR_PARAM_TYPE_INTS, dflt, lo, hi, NULL,                        \
                 sizeof(((st *)0)->field) / sizeof(int) +                                       \
                     MR_PARAM_FIELD_CHECK(st, field, MR_PARAM_FIELD_ARRAY_OF(st, field, int),   \
                                          "an int array"),                                      \
                 text)
#define MR_PARAM_DEVICE(st, field, key, dflt, text)                                             \
  MR_PARAM_ENTRY(st, field, key, MR_PARAM_TYPE_DEVICE, dflt, 0, 0, NULL,                        \
                 MR_PARAM_INT_FIELD(st, field), text)
/* field: a char array; the string must leave room for its NUL. */
#define MR_PARAM_TEXT(st, field, key, dflt, text)                                               \
  MR_PARAM_ENTRY(st, field, key, MR_PARAM_TYPE_TEXT, dflt, 0, 0, NULL,                          \
                 sizeof(((st *)0)->field) +                                                     \
                     MR_PARAM_FIELD_CHECK(st, field, MR_PARAM_FIELD_ARRAY_OF(st, field, char),  \
                                          "a char array"),                                      \
                 text)

/* Where a gadget sends what it produces. */
typedef struct mr_emit mr_emit;
/* Hands msg to the rest of the chain (takes msg). Returns the first error
 * any later gadget reported. */
int mr_emit_message(mr_emit *out, mr_message *msg);

/* What a gadget tells the gadgets after it about the whole stream. A field
 * is written once, before the writer emits the first data it concerns, so
 * a later gadget (on another stage's thread, reached through that stage's
 * queue) reads it whole. */
typedef struct mr_chain_notes {
  char noise[160]; /* noise_adjust's prewhitening: "scan", a stored measurement id, or "" */
} mr_chain_notes;

/* What a gadget sees of its surroundings. */
typedef struct mr_gadget_ctx {
  const mr_stream_header *hdr; /* NULL when the client sent no HEADER */
  struct mr_pool *pool;        /* compute backend (gpu/core/pool.h) */
  struct mr_device *device;    /* the session's placement ("auto") */
  mr_err *err;                 /* one line for the client on failure */
  const char *config;          /* config name, for messages */
  const char *gadget;          /* this gadget's class name */
  int index;                   /* position in the chain, from 0 */
  const char *history;         /* the chain's gadget names, comma-separated */
  mr_chain_notes *notes;       /* the chain's (shared by its gadgets) */
  /* Non-zero once the client went away (may be NULL) or any gadget of a
   * pipelined chain failed (mr_gadget_cancel reads them for a long
   * solve; a gadget that waits on something outside the chain has its
   * channel closed instead: mr_gadget_close_on_stop). */
  const atomic_int *cancel;
  const atomic_int *failed;
  void *stage; /* the runtime's (chain_impl.h): its stage thread, or NULL */
} mr_gadget_ctx;

/* What of a scan a class deals with beyond its message kinds (its
 * `handles`): a scan that needs what no gadget of a chain handles is
 * refused, or warned about, before its data is used (capability.h). */
enum {
  MR_HANDLES_REVERSE = 1u << 0,      /* readouts flagged IS_REVERSE, put in k-space order */
  MR_HANDLES_EPI = 1u << 1,          /* EPI echo trains: navigators (IS_PHASECORR_DATA), the
                                        odd/even correction, ramp sampling */
  MR_HANDLES_ACCELERATION = 1u << 2, /* undersampled k-space (a header acceleration over 1):
                                        parallel imaging or compressed sensing */
  MR_HANDLES_MULTIBAND = 1u << 3,   /* simultaneous multi-slice: collapsed slices split */
  MR_HANDLES_ANY = 0xffffffffu,      /* whatever comes (a step done by another program) */
};

typedef struct mr_gadget_class {
  const char *name;
  const char *summary; /* one line for --describe */
  const mr_param *params;
  size_t nparams;
  size_t state_size;
  uint32_t accepts;  /* MR_KIND_BIT()s of the kinds process() handles */
  uint32_t produces; /* kinds it emits (the chain type-checks with these) */
  /* Chain objects (k-space, image arrays) it reads where their samples
   * are, through mr_kspace_on() / mr_image_array_on(): a GPU gadget before
   * it may leave them on the device (handoff.h). */
  uint32_t device_input;
  /* MR_HANDLES_* of what it deals with (0: none of them). */
  uint32_t handles;
  /* 1: in a pipelined chain it runs on a stage thread of its own even
   * though it handles wire kinds (it waits on a peer process). */
  int own_stage;
  /* The most threads of its own (workers.h) it may start in a pipelined
   * chain, from its parameters (bound before they are taken: the server's
   * session_threads counts them). May be NULL: none. */
  int (*threads)(const void *state);
  /* Once, after the HEADER (or at CLOSE when none came), before data.
   * May be NULL. */
  int (*configure)(void *state, mr_gadget_ctx *ctx);
  /* Borrows msg (see the top of this file). */
  int (*process)(void *state, mr_gadget_ctx *ctx, mr_message *msg, mr_emit *out);
  /* End of stream: emit whatever is still held. May be NULL. */
  int (*flush)(void *state, mr_gadget_ctx *ctx, mr_emit *out);
  /* Runs on its stage's thread after mr_gadget_wake(): emits what came
   * from outside the chain meanwhile (external's peer). May be NULL. */
  int (*wake)(void *state, mr_gadget_ctx *ctx, mr_emit *out);
  /* Frees what the state holds (not the state itself). May be NULL. */
  void (*destroy)(void *state);
} mr_gadget_class;

/* From any thread, never blocking: has the gadget's wake() called soon on
 * its stage's thread (once for any number of calls before it runs). Does
 * nothing for a gadget without a stage thread of its own (a synchronous
 * chain): it then catches up in its next process() or flush(). Valid until
 * the gadget's destroy() returns. */
void mr_gadget_wake(mr_gadget_ctx *ctx);
/* 1 when the gadget runs on a stage thread of its own (a pipelined chain,
 * past its first stage), where mr_gadget_wake() reaches it; 0 in a
 * synchronous chain, whose caller expects the output of a push by its
 * return. From the gadget's process(), flush() or wake(). */
int mr_gadget_has_thread(const mr_gadget_ctx *ctx);

/* A gadget that waits on something outside the chain (external's peer)
 * waits on a channel (base/channel.h) that the chain closes when it is
 * told to stop: the client left, the drain deadline passed, another stage
 * failed (at once when that has already happened). So the wait ends at
 * once, with nothing polled. ch NULL: no channel any more (before the
 * gadget frees it). From the gadget's own calls (configure ... destroy). */
struct mr_chan;
void mr_gadget_close_on_stop(mr_gadget_ctx *ctx, struct mr_chan *ch);

/* Reports a failure of the current gadget: writes "config, gadget: ..."
 * into ctx->err and returns code. */
int mr_gadget_fail(mr_gadget_ctx *ctx, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#ifdef __clang_analyzer__
/* The static analyzer does not follow calls into variadic functions, and
 * would take `return mr_gadget_fail(...)` for a possible success: for it
 * alone, the call says what it returns (code is a plain expression at
 * every call). */
#define mr_gadget_fail(ctx, code, ...) (mr_gadget_fail((ctx), (code), __VA_ARGS__), (code))
#endif

/* The chain's request to stop (the client left, the server's drain
 * deadline passed, another stage failed) as gpu/'s mr_cancel
 * (gpu/core/cancel.h), for a long solve's options (mr_cg_opts.cancel):
 * the solve then ends within an iteration instead of at its last. Valid
 * until the gadget's destroy() returns. */
mr_cancel mr_gadget_cancel(mr_gadget_ctx *ctx);

#endif
