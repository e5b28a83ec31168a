#include "file_name.h"

#include <string.h>

int mr_file_name_is_safe(const char *name) {
  if (name[0] == '\0' || strstr(name, "..") != NULL)
    return 0;
  for (const unsigned char *p = (const unsigned char *)name; *p != '\0'; p++)
    if (*p == '/' || *p == '\\' || *p < 0x20 || *p == 0x7f)
      return 0;
  return 1;
}
