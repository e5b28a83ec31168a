#include "config_dir.h"

#include <assert.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "file_name.h"
#include "wire_limits.h"

static int read_file(const char *path, char **text, size_t *len, mr_err *err) {
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return mr_err_set(err, MR_EIO, "cannot open %s: %m", path);
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || st.st_size > (off_t)mr_limits_default.config_script_bytes) {
    fclose(f);
    return mr_err_set(err, MR_ELIMIT, "%s: not a readable config of at most %u bytes", path,
                      mr_limits_default.config_script_bytes);
  }
  char *buf = malloc((size_t)st.st_size + 1);
  size_t n = buf != NULL ? fread(buf, 1, (size_t)st.st_size, f) : 0;
  fclose(f);
  if (buf == NULL || n != (size_t)st.st_size) {
    free(buf);
    return mr_err_set(err, MR_EIO, "cannot read %s", path);
  }
  buf[n] = '\0';
  *text = buf;
  *len = n;
  return 0;
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Each name and alias may be claimed by one config only. */
static int check_unique(const mr_config_dir *dir, mr_err *err) {
  assert(dir->n == 0 || (dir->configs != NULL && dir->files != NULL));
  for (int i = 0; i < dir->n; i++) {
    const mr_pipeline_config *a = dir->configs[i]; /* parsed: never NULL */
    assert(a != NULL);
    for (int j = 0; j < i; j++) {
      const mr_pipeline_config *b = dir->configs[j];
      const char *clash = mr_pipeline_config_matches(b, a->name) ? a->name : NULL;
      for (int k = 0; clash == NULL && k < a->naliases; k++)
        if (mr_pipeline_config_matches(b, a->aliases[k]))
          clash = a->aliases[k];
      if (clash != NULL)
        return mr_err_set(err, MR_ECONFIG, "configs %s and %s both claim the name '%s'",
                          dir->files[j], dir->files[i], clash);
    }
  }
  return 0;
}

int mr_config_dir_load(const char *path, mr_config_dir *dir, mr_err *err) {
  memset(dir, 0, sizeof *dir);
  DIR *d = opendir(path);
  if (d == NULL)
    return mr_err_set(err, MR_ENOENT, "cannot open config directory %s: %m", path);
  char **names = NULL;
  int count = 0, rc = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.' || !ends_with(e->d_name, ".json"))
      continue;
    char **grown = realloc(names, (size_t)(count + 1) * sizeof *names);
    if (grown == NULL || (grown[count] = strdup(e->d_name)) == NULL) {
      names = grown != NULL ? grown : names;
      rc = mr_err_set(err, MR_ENOMEM, "out of memory listing %s", path);
      break;
    }
    names = grown;
    count++;
  }
  closedir(d);
  if (rc == 0) {
    if (count > 0)
      qsort(names, (size_t)count, sizeof *names, compare_names);
    dir->path = strdup(path);
    dir->configs = calloc((size_t)count + 1, sizeof *dir->configs);
    dir->files = calloc((size_t)count + 1, sizeof *dir->files);
    if (dir->path == NULL || dir->configs == NULL || dir->files == NULL)
      rc = mr_err_set(err, MR_ENOMEM, "out of memory loading %s", path);
  }
  for (int i = 0; rc == 0 && i < count; i++) {
    char full[4096], *text = NULL;
    size_t len = 0;
    snprintf(full, sizeof full, "%s/%s", path, names[i]);
    if ((rc = read_file(full, &text, &len, err)) < 0)
      break;
    rc = mr_pipeline_config_parse(text, len, names[i], &dir->configs[dir->n], err);
    free(text);
    if (rc < 0)
      break;
    dir->files[dir->n++] = names[i];
    names[i] = NULL;
  }
  for (int i = 0; i < count; i++)
    free(names[i]);
  free(names);
  if (rc == 0)
    rc = check_unique(dir, err);
  if (rc < 0)
    mr_config_dir_free(dir);
  return rc;
}

void mr_config_dir_free(mr_config_dir *dir) {
  assert(dir->n == 0 || (dir->configs != NULL && dir->files != NULL));
  for (int i = 0; i < dir->n; i++) {
    mr_pipeline_config_free(dir->configs[i]);
    free(dir->files[i]);
  }
  free(dir->configs);
  free(dir->files);
  free(dir->path);
  memset(dir, 0, sizeof *dir);
}

int mr_config_dir_find(const mr_config_dir *dir, const char *name,
                       const mr_pipeline_config **out, mr_err *err) {
  if (!mr_file_name_is_safe(name))
    return mr_err_set(err, MR_EINVAL,
                      "config name '%.100s' refused: a config name is not a path", name);
  for (int i = 0; i < dir->n; i++) {
    if (mr_pipeline_config_matches(dir->configs[i], name) ||
        strcmp(dir->files[i], name) == 0) {
      *out = dir->configs[i];
      return 0;
    }
  }
  char list[512] = "";
  for (int i = 0; i < dir->n; i++) {
    size_t used = strlen(list);
    snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", dir->configs[i]->name);
  }
  return mr_err_set(err, MR_ENOENT, "no config named '%.100s' (installed: %s)", name, list);
}

char *mr_config_dir_json(const mr_config_dir *dir) {
  cJSON *arr = cJSON_CreateArray();
  for (int i = 0; arr != NULL && i < dir->n; i++) {
    const mr_pipeline_config *c = dir->configs[i];
    cJSON *o = cJSON_CreateObject();
    cJSON *aliases = cJSON_CreateStringArray((const char *const *)c->aliases, c->naliases);
    if (o == NULL || aliases == NULL || !cJSON_AddItemToArray(arr, o)) {
      cJSON_Delete(o);
      cJSON_Delete(aliases);
      cJSON_Delete(arr);
      return NULL;
    }
    cJSON_AddStringToObject(o, "name", c->name);
    cJSON_AddItemToObject(o, "aliases", aliases);
    cJSON_AddStringToObject(o, "description", c->description);
    cJSON_AddStringToObject(o, "file", dir->files[i]);
  }
  char *s = arr != NULL ? cJSON_PrintUnformatted(arr) : NULL;
  cJSON_Delete(arr);
  return s;
}
