#include "stream_server.h"

#include <cJSON.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "wire_client.h"

/* The last line of the log (for a server that did not start). */
static void last_line(const char *path, char *out, size_t size) {
  FILE *f = fopen(path, "r");
  char line[400];
  out[0] = '\0';
  while (f != NULL && fgets(line, sizeof line, f) != NULL) {
    line[strcspn(line, "\n")] = '\0';
    if (line[0] != '\0')
      snprintf(out, size, "%s", line);
  }
  if (f != NULL)
    fclose(f);
}

int stream_server_start(stream_server *s, const char *bin, const char *configs, const char *gpus,
                        const char *const *extra, const char *log_path, char *why,
                        size_t why_size) {
  memset(s, 0, sizeof *s);
  snprintf(s->log_path, sizeof s->log_path, "%s", log_path);
  int log = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (log < 0) {
    snprintf(why, why_size, "cannot write %s", log_path);
    return -1;
  }
  const char *argv[8 + 16 + 1] = {bin, "--listen", "127.0.0.1:0", "--configs", configs,
                                  "--gpus", gpus};
  for (int i = 0; extra != NULL && extra[i] != NULL && i < 16; i++)
    argv[7 + i] = extra[i];
  s->pid = fork();
  if (s->pid == 0) {
    dup2(log, STDERR_FILENO);
    int null = open("/dev/null", O_WRONLY);
    dup2(null, STDOUT_FILENO);
    execv(bin, (char *const *)argv);
    perror(bin);
    _exit(127);
  }
  close(log);
  for (int i = 0; s->pid > 0 && i < 3000; i++) {
    if ((s->port = mr_test_logged_port(log_path, " listening on 127.0.0.1:")) > 0) {
      /* Logged before the listener's line when --http is given. */
      s->http_port = mr_test_logged_port(log_path, " health and metrics on http://127.0.0.1:");
      return 0;
    }
    if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
      s->pid = 0;
      break;
    }
    usleep(10000);
  }
  char line[400];
  last_line(log_path, line, sizeof line);
  snprintf(why, why_size, "reconserver --gpus %s did not start: %s", gpus,
           line[0] != '\0' ? line : "no log line");
  stream_server_stop(s);
  return -1;
}

void stream_server_stop(stream_server *s) {
  if (s->pid <= 0)
    return;
  kill(s->pid, SIGTERM);
  for (int i = 0; i < 1000; i++) {
    if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
      s->pid = 0;
      return;
    }
    usleep(10000);
  }
  kill(s->pid, SIGKILL);
  waitpid(s->pid, NULL, 0);
  s->pid = 0;
}

static int names_config(const cJSON *c, const char *name) {
  const cJSON *n = cJSON_GetObjectItemCaseSensitive(c, "name");
  if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0)
    return 1;
  const cJSON *a;
  cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(c, "aliases"))
    if (cJSON_IsString(a) && strcmp(a->valuestring, name) == 0)
      return 1;
  return 0;
}

int stream_server_has_config(const stream_server *s, const char *name) {
  static const char key[] = "mrrecon::configs";
  int fd = mr_test_connect(s->port);
  if (fd < 0)
    return -1;
  mr_message *q = mr_message_new_query(MR_MSG_QUERY, 1, key, strlen(key));
  mr_message *c = mr_message_new(MR_MSG_CLOSE);
  int rc = q != NULL && c != NULL && mr_test_send(fd, q) == 0 && mr_test_send(fd, c) == 0 ? 0 : -1;
  mr_message_unref(q);
  mr_message_unref(c);
  mr_test_reply r;
  memset(&r, 0, sizeof r);
  if (rc == 0)
    mr_test_receive(fd, &r, 10000);
  close(fd);
  int has = -1;
  for (int i = 0; i < r.n && has < 0; i++) {
    if (r.msgs[i]->kind != MR_MSG_RESPONSE)
      continue;
    cJSON *list = cJSON_Parse(r.msgs[i]->u.query.text);
    const cJSON *item;
    has = cJSON_IsArray(list) ? 0 : -1;
    cJSON_ArrayForEach(item, list) has |= names_config(item, name);
    cJSON_Delete(list);
  }
  mr_test_reply_free(&r);
  return has;
}

/* The log from where the last look stopped; NULL when it cannot be read. */
static FILE *open_unread(const stream_server *s) {
  FILE *f = fopen(s->log_path, "r");
  if (f != NULL && fseek(f, s->log_read, SEEK_SET) != 0) {
    fclose(f);
    f = NULL;
  }
  return f;
}

/* The next whole line (a line being written is read next time), moving
 * past it; 0 when there is none yet. */
static int next_line(stream_server *s, FILE *f, char *buf, int size) {
  if (fgets(buf, size, f) == NULL || strchr(buf, '\n') == NULL)
    return 0;
  s->log_read += (long)strlen(buf);
  return 1;
}

void stream_server_session_line(stream_server *s, int wait_ms, char *line, size_t size) {
  line[0] = '\0';
  for (int waited = 0; line[0] == '\0' && waited <= wait_ms; waited += 10) {
    FILE *f = open_unread(s);
    char buf[4096];
    if (f == NULL)
      return;
    while (next_line(s, f, buf, sizeof buf)) {
      /* " config=-": a connection without a session (the configs query). */
      if (strstr(buf, " config=") != NULL && strstr(buf, " config=- ") == NULL) {
        buf[strcspn(buf, "\n")] = '\0';
        snprintf(line, size, "%s", buf);
      }
    }
    fclose(f);
    if (line[0] == '\0')
      usleep(10000);
  }
}

int stream_server_wait_line(stream_server *s, const char *text, int wait_ms) {
  for (int waited = 0; waited <= wait_ms; waited += 10) {
    FILE *f = open_unread(s);
    char buf[4096];
    if (f == NULL)
      return -1;
    int found = 0;
    while (!found && next_line(s, f, buf, sizeof buf))
      found = strstr(buf, text) != NULL;
    fclose(f);
    if (found)
      return 0;
    usleep(10000);
  }
  return -1;
}

int stream_server_lanes_busy(const stream_server *s, double busy[][STREAM_LANES], int max_gpus) {
  static const char series[] = "mrrecon_gpu_lane_busy_seconds_total{gpu=\"";
  if (s->http_port <= 0)
    return -1;
  size_t cap = 1 << 20;
  char *page = malloc(cap);
  if (page == NULL || mr_test_http(s->http_port, "GET", "/metrics", page, cap) != 200) {
    free(page);
    return -1;
  }
  int gpus = 0;
  for (int g = 0; g < max_gpus; g++)
    for (int l = 0; l < STREAM_LANES; l++)
      busy[g][l] = -1;
  for (const char *p = strstr(page, series); p != NULL; p = strstr(p + 1, series)) {
    int g = -1, l = -1;
    double v = 0;
    if (sscanf(p + sizeof series - 1, "%d\",lane=\"%d\"} %lf", &g, &l, &v) == 3 && g >= 0 &&
        g < max_gpus && l >= 0 && l < STREAM_LANES) {
      busy[g][l] = v;
      gpus = g + 1 > gpus ? g + 1 : gpus;
    }
  }
  free(page);
  return gpus;
}

int stream_server_gadget_totals(stream_server *s, int sessions, int wait_ms, stream_gadgets *t) {
  memset(t, 0, sizeof *t);
  for (int waited = 0; t->sessions < sessions && waited <= wait_ms; waited += 10) {
    FILE *f = open_unread(s);
    char buf[4096];
    if (f == NULL)
      return -1;
    while (next_line(s, f, buf, sizeof buf)) {
      const char *g = strstr(buf, " gadgets=");
      if (g == NULL)
        continue;
      t->sessions++;
      /* name=12.3ms,name=4.5ms,... */
      for (const char *p = g + strlen(" gadgets="); *p != '\0' && *p != ' ' && *p != '\n';) {
        char name[40];
        double ms;
        int used = 0;
        if (sscanf(p, "%39[^=]=%lfms%n", name, &ms, &used) != 2 || used == 0)
          break;
        int k = 0;
        while (k < t->n && strcmp(t->name[k], name) != 0)
          k++;
        if (k == t->n && t->n < STREAM_GADGETS)
          snprintf(t->name[t->n++], sizeof t->name[0], "%s", name);
        if (k < t->n)
          t->ms[k] += ms;
        p += used;
        p += *p == ',';
      }
    }
    fclose(f);
    if (t->sessions < sessions)
      usleep(10000);
  }
  return t->sessions;
}
