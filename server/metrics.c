#include "metrics.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "error.h"
#include "pool.h"
#include "registry.h"

/* Slots: the installed configs, then "other" and "none". */
#define MAX_CONFIG_SLOTS 64
#define MAX_GADGET_SLOTS 64

/* Session latency, seconds: a health check to a long 3D iterative scan. */
static const double session_bounds[] = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
/* One gadget's time on one session, seconds. */
static const double gadget_bounds[] = {0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30};
#define SESSION_BUCKETS (sizeof session_bounds / sizeof session_bounds[0])
#define GADGET_BUCKETS (sizeof gadget_bounds / sizeof gadget_bounds[0])

/* Buckets are stored non-cumulative (one add per observation) and summed
 * when rendered; the sum is kept in microseconds (an integer add). */
typedef struct histogram {
  atomic_uint_fast64_t
      bucket[SESSION_BUCKETS > GADGET_BUCKETS ? SESSION_BUCKETS + 1 : GADGET_BUCKETS + 1];
  atomic_uint_fast64_t count, sum_us;
} histogram;

typedef struct config_slot {
  const char *name;
  atomic_uint_fast64_t finished[MR_OUTCOME_COUNT];
  histogram latency;
} config_slot;

typedef struct gadget_slot {
  const char *name;
  histogram time;
} gadget_slot;

static const char *const outcome_names[MR_OUTCOME_COUNT] = {
    [MR_OUTCOME_OK] = "ok",
    [MR_OUTCOME_ERROR] = "error",
    [MR_OUTCOME_CUT] = "cut",
    [MR_OUTCOME_REFUSED] = "refused",
};
static const char *const error_kind_names[MR_ERRKIND_COUNT] = {
    [MR_ERRKIND_PROTOCOL] = "protocol", [MR_ERRKIND_LIMIT] = "limit",
    [MR_ERRKIND_CONFIG] = "config",     [MR_ERRKIND_HEADER] = "header",
    [MR_ERRKIND_DATA] = "data",         [MR_ERRKIND_MEMORY] = "memory",
    [MR_ERRKIND_GPU] = "gpu",           [MR_ERRKIND_PROCESSING] = "processing",
    [MR_ERRKIND_TIMEOUT] = "timeout",   [MR_ERRKIND_CONNECTION] = "connection",
    [MR_ERRKIND_BUSY] = "busy",         [MR_ERRKIND_SHUTDOWN] = "shutdown",
};

static struct {
  config_slot configs[MAX_CONFIG_SLOTS];
  int nconfigs; /* installed ones, then "other", then "none" */
  gadget_slot gadgets[MAX_GADGET_SLOTS];
  int ngadgets;
  int max_connections;
  atomic_int state;
  atomic_int_fast64_t connections_open;
  atomic_uint_fast64_t bytes_in, bytes_out, acquisitions, images;
  atomic_int_fast64_t inbox_bytes, outbox_bytes;
  atomic_uint_fast64_t errors[MR_ERRKIND_COUNT];
  int nloops;
  atomic_uint_fast64_t loop_connections[MR_METRICS_MAX_LOOPS];
} m;

mr_metrics_error_kind mr_metrics_error_kind_of(int code) {
  switch (code) {
  case MR_EPROTO:
  case MR_EFRAME:
  case MR_ESTATE:
    return MR_ERRKIND_PROTOCOL;
  case MR_ELIMIT:
    return MR_ERRKIND_LIMIT;
  case MR_ECONFIG:
  case MR_ENOENT:
    return MR_ERRKIND_CONFIG;
  case MR_EHEADER:
    return MR_ERRKIND_HEADER;
  case MR_EDATA:
  case MR_ENOTSUP:
    return MR_ERRKIND_DATA;
  case MR_ENOMEM:
    return MR_ERRKIND_MEMORY;
  case MR_EDEVICE:
  case MR_EDEVMEM:
    return MR_ERRKIND_GPU;
  case MR_ETIMEDOUT:
    return MR_ERRKIND_TIMEOUT;
  case MR_ECONN:
  case MR_ECANCELED:
    return MR_ERRKIND_CONNECTION;
  default:
    return MR_ERRKIND_PROCESSING;
  }
}

void mr_metrics_init(const mr_config_dir *configs, int max_connections) {
  int n = 0;
  for (int i = 0; configs != NULL && i < configs->n && n < MAX_CONFIG_SLOTS - 2; i++)
    m.configs[n++].name = configs->configs[i]->name;
  m.configs[n++].name = "other";
  m.configs[n++].name = "none";
  m.nconfigs = n;
  const mr_gadget_class *const *all = mr_registry_all();
  m.ngadgets = 0;
  for (int i = 0; all[i] != NULL && m.ngadgets < MAX_GADGET_SLOTS; i++)
    m.gadgets[m.ngadgets++].name = all[i]->name;
  m.max_connections = max_connections;
}

static void observe(histogram *h, const double *bounds, size_t nbounds, double seconds) {
  size_t b = 0;
  while (b < nbounds && seconds > bounds[b])
    b++;
  atomic_fetch_add_explicit(&h->bucket[b], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->sum_us, (uint_fast64_t)(seconds * 1e6), memory_order_relaxed);
}

static config_slot *config_slot_of(const char *config) {
  if (m.nconfigs == 0)
    return NULL; /* not initialised: nothing is counted by config */
  if (config == NULL || config[0] == '\0')
    return &m.configs[m.nconfigs - 1];
  for (int i = 0; i < m.nconfigs - 2; i++)
    if (strcmp(m.configs[i].name, config) == 0)
      return &m.configs[i];
  return &m.configs[m.nconfigs - 2];
}

static void add(atomic_uint_fast64_t *counter, uint64_t n) {
  atomic_fetch_add_explicit(counter, n, memory_order_relaxed);
}

void mr_metrics_connection_open(void) {
  atomic_fetch_add_explicit(&m.connections_open, 1, memory_order_relaxed);
}
void mr_metrics_connection_closed(void) {
  atomic_fetch_sub_explicit(&m.connections_open, 1, memory_order_relaxed);
}
void mr_metrics_set_state(mr_metrics_state state) { atomic_store(&m.state, (int)state); }
void mr_metrics_warmed(void) {
  int warming = MR_STATE_WARMING;
  atomic_compare_exchange_strong(&m.state, &warming, MR_STATE_ACCEPTING);
}

void mr_metrics_session_finished(const char *config, mr_metrics_outcome outcome, double seconds) {
  config_slot *slot = config_slot_of(config);
  if (slot == NULL || outcome < 0 || outcome >= MR_OUTCOME_COUNT)
    return;
  add(&slot->finished[outcome], 1);
  observe(&slot->latency, session_bounds, SESSION_BUCKETS, seconds);
}

void mr_metrics_gadget_time(const char *gadget, uint64_t busy_ns) {
  for (int i = 0; i < m.ngadgets; i++) {
    if (strcmp(m.gadgets[i].name, gadget) == 0) {
      observe(&m.gadgets[i].time, gadget_bounds, GADGET_BUCKETS, (double)busy_ns / 1e9);
      return;
    }
  }
}

void mr_metrics_error(mr_metrics_error_kind kind) {
  if (kind >= 0 && kind < MR_ERRKIND_COUNT)
    add(&m.errors[kind], 1);
}

void mr_metrics_bytes_in(uint64_t bytes) { add(&m.bytes_in, bytes); }
void mr_metrics_bytes_out(uint64_t bytes) { add(&m.bytes_out, bytes); }
void mr_metrics_acquisitions(uint64_t n) { add(&m.acquisitions, n); }
void mr_metrics_images(uint64_t n) { add(&m.images, n); }
void mr_metrics_loops(int n) { m.nloops = n < MR_METRICS_MAX_LOOPS ? n : MR_METRICS_MAX_LOOPS; }
void mr_metrics_loop_connection(int loop) {
  if (loop >= 0 && loop < m.nloops)
    add(&m.loop_connections[loop], 1);
}
void mr_metrics_inbox_bytes(int64_t delta) {
  atomic_fetch_add_explicit(&m.inbox_bytes, delta, memory_order_relaxed);
}
void mr_metrics_outbox_bytes(int64_t delta) {
  atomic_fetch_add_explicit(&m.outbox_bytes, delta, memory_order_relaxed);
}

int mr_metrics_ready(char *why, size_t size) {
  char scratch[1];
  if (why == NULL) {
    why = scratch;
    size = sizeof scratch;
  }
  int state = atomic_load(&m.state);
  if (state != MR_STATE_ACCEPTING) {
    snprintf(why, size, "%s",
             state == MR_STATE_STARTING  ? "starting"
             : state == MR_STATE_WARMING ? "warming up: replaying --warm's sessions"
                                         : "draining: no new connections");
    return 0;
  }
  int64_t open = atomic_load_explicit(&m.connections_open, memory_order_relaxed);
  if (m.max_connections > 0 && open >= m.max_connections) {
    snprintf(why, size, "busy: %lld connections open (--max-connections %d)", (long long)open,
             m.max_connections);
    return 0;
  }
  uint64_t limit = mr_budget_limit(), used = mr_budget_used();
  if (limit > 0 && (double)(limit - (used < limit ? used : limit)) <
                       MR_METRICS_BUDGET_HEADROOM * (double)limit) {
    snprintf(why, size, "memory budget nearly spent: %llu of %llu MiB in use",
             (unsigned long long)(used >> 20), (unsigned long long)(limit >> 20));
    return 0;
  }
  snprintf(why, size, "ready");
  return 1;
}

/* ---- rendering ---- */

static void family(FILE *t, const char *name, const char *type, const char *help) {
  fprintf(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static uint64_t load(atomic_uint_fast64_t *v) {
  return atomic_load_explicit(v, memory_order_relaxed);
}

/* A label value as the exposition format wants it: '\\', '"' and newline
 * escaped (a config's name is any JSON string), cut to fit out. */
static const char *label_value(const char *in, char *out, size_t size) {
  size_t o = 0;
  for (; *in != '\0' && o + 3 < size; in++) {
    if (*in == '\\' || *in == '"' || *in == '\n') {
      out[o++] = '\\';
      out[o++] = *in == '\n' ? 'n' : *in;
    } else {
      out[o++] = *in;
    }
  }
  out[o] = '\0';
  return out;
}

static void put_histogram(FILE *t, const char *name, const char *label, const char *raw,
                          histogram *h, const double *bounds, size_t nbounds) {
  char value[256];
  label_value(raw, value, sizeof value);
  uint64_t cumulative = 0;
  for (size_t b = 0; b <= nbounds; b++) {
    cumulative += load(&h->bucket[b]);
    if (b < nbounds)
      fprintf(t, "%s_bucket{%s=\"%s\",le=\"%g\"} %llu\n", name, label, value, bounds[b],
              (unsigned long long)cumulative);
    else
      fprintf(t, "%s_bucket{%s=\"%s\",le=\"+Inf\"} %llu\n", name, label, value,
              (unsigned long long)cumulative);
  }
  /* Read after the buckets: a concurrent observation never makes the
   * count smaller than the +Inf bucket by more than it adds to both. */
  fprintf(t, "%s_sum{%s=\"%s\"} %.6f\n", name, label, value, (double)load(&h->sum_us) / 1e6);
  fprintf(t, "%s_count{%s=\"%s\"} %llu\n", name, label, value,
          (unsigned long long)(cumulative > load(&h->count) ? cumulative : load(&h->count)));
}

static void put_devices(FILE *t, mr_pool *pool) {
  int n = mr_pool_gpu_count(pool);
  if (n == 0)
    return;
  mr_device_info info[64];
  n = n > 64 ? 64 : n;
  for (int i = 0; i < n; i++)
    mr_pool_gpu_info(pool, i, &info[i]);
  family(t, "mrrecon_gpu_memory_total_bytes", "gauge", "Memory of each GPU.");
  for (int i = 0; i < n; i++)
    fprintf(t, "mrrecon_gpu_memory_total_bytes{gpu=\"%d\"} %zu\n", info[i].ordinal,
            info[i].mem_total);
  family(t, "mrrecon_gpu_memory_used_bytes", "gauge",
         "GPU memory in use: total less free, as the driver reports it.");
  for (int i = 0; i < n; i++)
    fprintf(t, "mrrecon_gpu_memory_used_bytes{gpu=\"%d\"} %zu\n", info[i].ordinal,
            info[i].mem_total -
                (info[i].mem_free < info[i].mem_total ? info[i].mem_free : info[i].mem_total));
  family(t, "mrrecon_gpu_sessions", "gauge", "Sessions placed on each GPU.");
  for (int i = 0; i < n; i++)
    fprintf(t, "mrrecon_gpu_sessions{gpu=\"%d\"} %d\n", info[i].ordinal, info[i].load);
  family(t, "mrrecon_gpu_lane_busy_seconds_total", "counter",
         "Time each GPU lane spent running tasks, a task's start to its streams' "
         "synchronisation (the lanes of a GPU overlap on it).");
  for (int i = 0; i < n; i++) {
    double busy[MR_GPU_LANES_ALL];
    int lanes = mr_pool_gpu_lanes_busy(pool, i, busy, MR_GPU_LANES_ALL);
    for (int l = 0; l < lanes && l < MR_GPU_LANES_ALL; l++)
      fprintf(t, "mrrecon_gpu_lane_busy_seconds_total{gpu=\"%d\",lane=\"%d\"} %.6f\n",
              info[i].ordinal, l, busy[l]);
  }
}

int mr_metrics_render(mr_pool *pool, char **out, size_t *len) {
  char *text = NULL;
  size_t size = 0;
  FILE *t = open_memstream(&text, &size);
  if (t == NULL)
    return MR_ENOMEM;
  char value[256];
  family(t, "mrrecon_up", "gauge", "1 while the server runs.");
  fprintf(t, "mrrecon_up 1\n");
  family(t, "mrrecon_ready", "gauge", "1 when new scans are accepted (/readyz).");
  fprintf(t, "mrrecon_ready %d\n", mr_metrics_ready(NULL, 0));
  family(t, "mrrecon_sessions_active", "gauge", "Connections being served.");
  fprintf(t, "mrrecon_sessions_active %lld\n",
          (long long)atomic_load_explicit(&m.connections_open, memory_order_relaxed));
  family(t, "mrrecon_max_connections", "gauge", "--max-connections.");
  fprintf(t, "mrrecon_max_connections %d\n", m.max_connections);

  family(t, "mrrecon_sessions_total", "counter", "Connections ended, by config and outcome.");
  for (int i = 0; i < m.nconfigs; i++)
    for (int o = 0; o < MR_OUTCOME_COUNT; o++)
      fprintf(t, "mrrecon_sessions_total{config=\"%s\",outcome=\"%s\"} %llu\n",
              label_value(m.configs[i].name, value, sizeof value), outcome_names[o],
              (unsigned long long)load(&m.configs[i].finished[o]));
  family(t, "mrrecon_session_duration_seconds", "histogram",
         "From connecting to the connection's end, by config.");
  for (int i = 0; i < m.nconfigs; i++)
    put_histogram(t, "mrrecon_session_duration_seconds", "config", m.configs[i].name,
                  &m.configs[i].latency, session_bounds, SESSION_BUCKETS);
  family(t, "mrrecon_gadget_seconds", "histogram",
         "Processing time of a gadget over one session, by gadget.");
  for (int i = 0; i < m.ngadgets; i++)
    put_histogram(t, "mrrecon_gadget_seconds", "gadget", m.gadgets[i].name, &m.gadgets[i].time,
                  gadget_bounds, GADGET_BUCKETS);

  family(t, "mrrecon_loop_connections_total", "counter",
         "Connections handed to each loop thread (--loops).");
  for (int i = 0; i < m.nloops; i++)
    fprintf(t, "mrrecon_loop_connections_total{loop=\"%d\"} %llu\n", i,
            (unsigned long long)load(&m.loop_connections[i]));
  family(t, "mrrecon_received_bytes_total", "counter", "Bytes read from clients.");
  fprintf(t, "mrrecon_received_bytes_total %llu\n", (unsigned long long)load(&m.bytes_in));
  family(t, "mrrecon_sent_bytes_total", "counter", "Bytes written to clients.");
  fprintf(t, "mrrecon_sent_bytes_total %llu\n", (unsigned long long)load(&m.bytes_out));
  family(t, "mrrecon_acquisitions_total", "counter", "Acquisitions received.");
  fprintf(t, "mrrecon_acquisitions_total %llu\n", (unsigned long long)load(&m.acquisitions));
  family(t, "mrrecon_images_total", "counter", "Images written to clients.");
  fprintf(t, "mrrecon_images_total %llu\n", (unsigned long long)load(&m.images));
  family(t, "mrrecon_errors_total", "counter", "Errors, by kind.");
  for (int k = 0; k < MR_ERRKIND_COUNT; k++)
    fprintf(t, "mrrecon_errors_total{kind=\"%s\"} %llu\n", error_kind_names[k],
            (unsigned long long)load(&m.errors[k]));

  family(t, "mrrecon_queue_bytes", "gauge",
         "Memory held in the connections' queues: read ahead (inbox), answers not yet written "
         "(outbox).");
  fprintf(t, "mrrecon_queue_bytes{queue=\"inbox\"} %lld\n",
          (long long)atomic_load_explicit(&m.inbox_bytes, memory_order_relaxed));
  fprintf(t, "mrrecon_queue_bytes{queue=\"outbox\"} %lld\n",
          (long long)atomic_load_explicit(&m.outbox_bytes, memory_order_relaxed));
  family(t, "mrrecon_memory_budget_bytes", "gauge", "--memory-budget (0: unlimited).");
  fprintf(t, "mrrecon_memory_budget_bytes %llu\n", (unsigned long long)mr_budget_limit());
  family(t, "mrrecon_memory_budget_used_bytes", "gauge",
         "Of the memory budget, what the sessions hold now.");
  fprintf(t, "mrrecon_memory_budget_used_bytes %llu\n", (unsigned long long)mr_budget_used());
  family(t, "mrrecon_memory_budget_spare_bytes", "gauge",
         "Of the memory budget, what the k-space block cache keeps (freed when needed).");
  fprintf(t, "mrrecon_memory_budget_spare_bytes %llu\n", (unsigned long long)mr_budget_spare());
  if (pool != NULL)
    put_devices(t, pool);
  int failed = ferror(t);
  if (fclose(t) != 0 || failed || text == NULL) {
    free(text);
    return MR_ENOMEM;
  }
  *out = text;
  *len = size;
  return 0;
}
