#include "addr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

int mr_addr_parse(const char *flag, const char *spec, struct sockaddr_storage *ss, mr_err *err) {
  char host[128];
  memset(ss, 0, sizeof *ss);
  const char *colon = strrchr(spec, ':');
  if (colon == NULL || colon[1] == '\0')
    return mr_err_set(err, MR_EINVAL, "%s '%s': expected ADDR:PORT", flag, spec);
  size_t hl = (size_t)(colon - spec);
  if (hl >= sizeof host)
    return mr_err_set(err, MR_EINVAL, "%s '%s': address too long", flag, spec);
  memcpy(host, spec, hl);
  host[hl] = '\0';
  char *end;
  long port = strtol(colon + 1, &end, 10);
  if (*end != '\0' || port < 0 || port > 65535)
    return mr_err_set(err, MR_EINVAL, "%s '%s': port must be 0..65535", flag, spec);
  if (host[0] == '[' && hl >= 2 && host[hl - 1] == ']') {
    host[hl - 1] = '\0';
    if (uv_ip6_addr(host + 1, (int)port, (struct sockaddr_in6 *)ss) == 0)
      return 0;
  } else if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss) == 0) {
    return 0;
  }
  return mr_err_set(err, MR_EINVAL, "%s '%s': '%s' is not an IP address", flag, spec, host);
}

void mr_addr_format(const struct sockaddr_storage *ss, char *out, size_t size) {
  char host[64] = "";
  if (ss->ss_family == AF_INET6) {
    uv_ip6_name((const struct sockaddr_in6 *)ss, host, sizeof host);
    snprintf(out, size, "[%s]:%d", host, ntohs(((const struct sockaddr_in6 *)ss)->sin6_port));
  } else {
    uv_ip4_name((const struct sockaddr_in *)ss, host, sizeof host);
    snprintf(out, size, "%s:%d", host, ntohs(((const struct sockaddr_in *)ss)->sin_port));
  }
}
