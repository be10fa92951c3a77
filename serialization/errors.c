/*
 * frpc_strerror and frpc_err_name, generated from FRPC_ERROR_TABLE so a code
 * and its text cannot drift apart.
 */
#include "serialization/fabrpc_errors.h"

const char *frpc_strerror(int code)
{
    switch (code) {
    case FRPC_OK:
        return "success";
#define FRPC__ERR_TEXT(name, value, text) \
    case FRPC_##name:                     \
        return text;
        FRPC_ERROR_TABLE(FRPC__ERR_TEXT)
#undef FRPC__ERR_TEXT
    default:
        return "unknown error";
    }
}

const char *frpc_err_name(int code)
{
    switch (code) {
    case FRPC_OK:
        return "FRPC_OK";
#define FRPC__ERR_NAME(name, value, text) \
    case FRPC_##name:                     \
        return "FRPC_" #name;
        FRPC_ERROR_TABLE(FRPC__ERR_NAME)
#undef FRPC__ERR_NAME
    default:
        return "FRPC_EUNKNOWN";
    }
}
