#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
/* measurement only: hide /proc/kallsyms from libfabric's verbs probe */
FILE *fopen(const char *p, const char *m){static FILE*(*r)(const char*,const char*);if(!r)r=dlsym(RTLD_NEXT,"fopen");if(p&&!strcmp(p,"/proc/kallsyms")){errno=ENOENT;return NULL;}return r(p,m);}
FILE *fopen64(const char *p, const char *m){static FILE*(*r)(const char*,const char*);if(!r)r=dlsym(RTLD_NEXT,"fopen64");if(p&&!strcmp(p,"/proc/kallsyms")){errno=ENOENT;return NULL;}return r(p,m);}
