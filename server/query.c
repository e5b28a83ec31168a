#include "query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "budget.h"
#include "pool.h"

static char *devices(const mr_server_env *env, mr_pool_format format) {
  char *text = NULL;
  return mr_pool_describe(env->pool, format, &text, NULL) == 0 ? text : NULL;
}

static char *info_text(const mr_server_env *env) {
  char *text = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&text, &size);
  if (f == NULL)
    return NULL;
  fprintf(f, "reconserver %s\n", env->version);
  fprintf(f, "protocol: Gadgetron 4.x / ISMRMRD streaming\n");
  fprintf(f, "cpu cores: %ld\n", sysconf(_SC_NPROCESSORS_ONLN));
  /* What the server sized itself to (inside a container: its cgroup). */
  fprintf(f, "memory budget: %llu MiB%s\n", (unsigned long long)(mr_budget_limit() >> 20),
          mr_budget_limit() == 0 ? " (unlimited)" : "");
  fprintf(f, "configs: %d in %s\n", env->configs->n, env->configs->path);
  for (int i = 0; i < env->configs->n; i++) /* the names a CONFIG_FILE may give */
    fprintf(f, "  %s\n", env->configs->configs[i]->name);
  char *list = devices(env, MR_POOL_TEXT);
  if (list != NULL) {
    size_t n = strlen(list);
    fprintf(f, "devices:\n%s%s", list, n > 0 && list[n - 1] == '\n' ? "" : "\n");
  }
  free(list);
  fclose(f);
  return text;
}

char *mr_query_answer(const mr_server_env *env, const char *key, size_t *len) {
  char *answer;
  if (strcmp(key, "gadgetron::version") == 0)
    answer = strdup(env->version);
  else if (strcmp(key, "gadgetron::info") == 0)
    answer = info_text(env);
  else if (strcmp(key, "gadgetron::cuda::devices") == 0)
    answer = devices(env, MR_POOL_JSON);
  else if (strcmp(key, MR_QUERY_CONFIGS) == 0)
    answer = mr_config_dir_json(env->configs);
  else {
    char text[512];
    snprintf(text, sizeof text,
             "unknown query key '%.200s' (known: gadgetron::version, gadgetron::info, "
             "gadgetron::cuda::devices, %s)",
             key,
             MR_QUERY_CONFIGS);
    answer = strdup(text);
  }
  if (answer != NULL)
    *len = strlen(answer);
  return answer;
}
