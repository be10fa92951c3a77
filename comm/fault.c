/* Fault injection for tests (fault.h). */
#include "config.h"

#include "comm/fault.h"

atomic_int fr__fault_left[FR_FAULT_SITES];

void fr_fault_arm(fr_fault_site site, int n)
{
    if (site < FR_FAULT_SITES)
        atomic_store(&fr__fault_left[site], n > 0 ? n : 0);
}
