/* The server's installed pipeline configs: every *.json of one directory,
 * loaded and checked at start-up, looked up by name, alias or file name. */
#ifndef MR_SERVER_CONFIG_DIR_H
#define MR_SERVER_CONFIG_DIR_H

#include "error.h"
#include "pipeline_config.h"

typedef struct mr_config_dir {
  char *path;
  mr_pipeline_config **configs;
  char **files; /* file name of each config ("cartesian.json") */
  int n;
} mr_config_dir;

/* Loads every *.json in path. Any file that does not parse or build fails
 * the whole load (a broken config should stop a deploy, not vanish), as
 * does a name or alias claimed twice. */
int mr_config_dir_load(const char *path, mr_config_dir *dir, mr_err *err);
void mr_config_dir_free(mr_config_dir *dir);

/* The config a CONFIG_FILE name refers to. A name is never a path: names
 * with '/', '\\', "..", control characters or an empty name are refused
 * (MR_EINVAL); an unknown name is MR_ENOENT. The error line lists what is
 * installed. */
int mr_config_dir_find(const mr_config_dir *dir, const char *name,
                       const mr_pipeline_config **out, mr_err *err);

/* The installed configs as a JSON array of {name, aliases, description}
 * (malloc'ed). */
char *mr_config_dir_json(const mr_config_dir *dir);

#endif
