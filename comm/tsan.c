/* The one address comm/tsan.h's release and acquire use (why: there). */
#include "config.h"

#include "comm/tsan.h"

#ifdef FR_TSAN
char fr_tsan_wire;
#else
/* ISO C wants a translation unit to declare something. */
typedef int fr_tsan_unused;
#endif
