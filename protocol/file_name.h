/* Names a peer may give for something the server holds (a config, an
 * external step's program): a name, never a path. */
#ifndef MR_PROTOCOL_FILE_NAME_H
#define MR_PROTOCOL_FILE_NAME_H

/* 1 when name (NUL-terminated) is non-empty and has no '/', '\\', "..",
 * control character or DEL; 0 otherwise. */
int mr_file_name_is_safe(const char *name);

#endif
