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

static int logged_port(const char *path) {
  FILE *f = fopen(path, "r");
  char line[1024];
  int port = 0;
  while (f != NULL && port == 0 && fgets(line, sizeof line, f) != NULL) {
    const char *at = strstr(line, " listening on 127.0.0.1:");
    if (at != NULL)
      port = atoi(at + strlen(" listening on 127.0.0.1:"));
  }
  if (f != NULL)
    fclose(f);
  return port;
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
    if ((s->port = logged_port(log_path)) > 0)
      return 0;
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

void stream_server_session_line(stream_server *s, int wait_ms, char *line, size_t size) {
  line[0] = '\0';
  for (int waited = 0; line[0] == '\0' && waited <= wait_ms; waited += 10) {
    FILE *f = fopen(s->log_path, "r");
    char buf[4096];
    if (f == NULL || fseek(f, s->log_read, SEEK_SET) != 0) {
      if (f != NULL)
        fclose(f);
      return;
    }
    /* Whole lines only: a line being written is read next time. */
    while (fgets(buf, sizeof buf, f) != NULL && strchr(buf, '\n') != NULL) {
      s->log_read += (long)strlen(buf);
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
    FILE *f = fopen(s->log_path, "r");
    char buf[4096];
    if (f == NULL || fseek(f, s->log_read, SEEK_SET) != 0) {
      if (f != NULL)
        fclose(f);
      return -1;
    }
    int found = 0;
    while (!found && fgets(buf, sizeof buf, f) != NULL && strchr(buf, '\n') != NULL) {
      s->log_read += (long)strlen(buf);
      found = strstr(buf, text) != NULL;
    }
    fclose(f);
    if (found)
      return 0;
    usleep(10000);
  }
  return -1;
}
