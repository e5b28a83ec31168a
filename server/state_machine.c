#include "state_machine.h"

#include <stdlib.h>

#include "log.h"

void mr_state_check(const mr_state_machine *m, int from, int to, const char *who) {
  if (m->steps[from] & MR_STEP(to))
    return;
  mr_log(MR_LOG_ERROR, "%s: %s state cannot go from %s to %s", who, m->what, m->names[from],
         m->names[to]);
  abort();
}
