#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
_Atomic long x; volatile long y;
int main(void){ const long N=100000000; 
 for(int r=0;r<3;r++){
 double t0=now(); for(long i=0;i<N;i++) atomic_fetch_add_explicit(&x,1,memory_order_relaxed); double t1=now();
 for(long i=0;i<N;i++) y=y+1; double t2=now();
 printf("lock add %.2f ns, plain volatile add %.2f ns\n",(t1-t0)/N,(t2-t1)/N);}
 return 0;}
