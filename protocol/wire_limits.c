#include "wire_limits.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

const mr_limits mr_limits_default = {
    .config_script_bytes = 1u << 20, /* our JSON or a Gadgetron XML chain */
    .header_bytes = 16u << 20,       /* vendor headers carry big user maps */
    .text_bytes = 1u << 20,
    .query_bytes = 64u << 10,
    .channels = MR_MAX_CHANNELS,
    .trajectory_dims = MR_MAX_TRAJECTORY_DIMS,
    .samples = 65535, /* the u16 field's own range */
    /* 65535 samples x 1024 channels x 8 bytes would be 512 MiB: nobody
     * acquires that in one line; 64 MiB covers 16k samples x 512 coils. */
    .acquisition_bytes = 64ull << 20,
    .image_bytes = 1ull << 30,
    .attribute_bytes = 4u << 20,
    .waveform_bytes = 16u << 20,
    /* The installed configs have at most a dozen steps and a handful of
     * stages; 1,000 steps of a script asked for 1,000 threads. */
    .chain_steps = 64,
    .session_threads = 16,
    /* A 64 MiB read-ahead holds a few thousand clinical lines: enough to
     * keep a GPU busy, small enough for 64 connections on a modest box. */
    .connection_bytes = 64ull << 20,
    /* A 3D image of 1024 partitions is far past clinical ones; a client's
     * own 1x1x4000 image must not come back as 4000 files. */
    .dicom_planes = 1024,
};

static const mr_limits *installed = &mr_limits_default;

void mr_limits_install(const mr_limits *limits) { installed = limits; }

const mr_limits *mr_limits_installed(void) { return installed; }

#define FIELD(name, type) {#name, offsetof(mr_limits, name), sizeof(type)}
static const struct {
  const char *name;
  size_t offset, size;
} fields[] = {
    FIELD(config_script_bytes, uint32_t), FIELD(header_bytes, uint32_t),
    FIELD(text_bytes, uint32_t),          FIELD(query_bytes, uint64_t),
    FIELD(channels, uint32_t),            FIELD(trajectory_dims, uint32_t),
    FIELD(samples, uint32_t),             FIELD(acquisition_bytes, uint64_t),
    FIELD(image_bytes, uint64_t),         FIELD(attribute_bytes, uint64_t),
    FIELD(waveform_bytes, uint64_t),      FIELD(chain_steps, uint32_t),
    FIELD(session_threads, uint32_t),     FIELD(connection_bytes, uint64_t),
    FIELD(dicom_planes, uint32_t),
};

int mr_limits_set(mr_limits *l, const char *name, const char *value) {
  for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
    if (strcmp(fields[i].name, name) != 0)
      continue;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(value, &end, 10);
    if (value[0] == '\0' || value[0] == '-' || *end != '\0' || errno != 0 ||
        (fields[i].size == 4 && v > UINT32_MAX))
      return MR_EINVAL;
    /* The wire format bounds these; a larger "limit" would be a lie. */
    if ((strcmp(name, "channels") == 0 && v > MR_MAX_CHANNELS) ||
        (strcmp(name, "trajectory_dims") == 0 && v > MR_MAX_TRAJECTORY_DIMS))
      return MR_EINVAL;
    char *dst = (char *)l + fields[i].offset;
    if (fields[i].size == 4) {
      uint32_t v32 = (uint32_t)v;
      memcpy(dst, &v32, 4);
    } else {
      uint64_t v64 = v;
      memcpy(dst, &v64, 8);
    }
    return 0;
  }
  return MR_EINVAL;
}

void mr_limits_each(const mr_limits *l, void (*fn)(void *ctx, const char *name, uint64_t value),
                    void *ctx) {
  for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
    const char *src = (const char *)l + fields[i].offset;
    uint64_t v = 0;
    if (fields[i].size == 4) {
      uint32_t v32;
      memcpy(&v32, src, 4);
      v = v32;
    } else {
      memcpy(&v, src, 8);
    }
    fn(ctx, fields[i].name, v);
  }
}
