/*
 * frpc_version: the library's version, which a program compares with the
 * FRPC_VERSION_* of the header it was built against.
 */
#include "config.h"

#include "rpc/fabrpc.h"

int frpc_version(const char **string)
{
    if (string)
        *string = PACKAGE_VERSION;
    return FRPC_VERSION_NUMBER;
}
