#include <stdio.h>
#include <time.h>
#include <x86intrin.h>
int main(){struct timespec a,b;clock_gettime(CLOCK_MONOTONIC,&a);unsigned long long t0=__rdtsc();
struct timespec s={0,200000000};nanosleep(&s,0);clock_gettime(CLOCK_MONOTONIC,&b);unsigned long long t1=__rdtsc();
double ns=(b.tv_sec-a.tv_sec)*1e9+(b.tv_nsec-a.tv_nsec);printf("%f\n",(t1-t0)/ns);}
