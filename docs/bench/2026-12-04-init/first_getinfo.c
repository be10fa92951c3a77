#include <rdma/fabric.h>
#include <stdio.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
int main(){struct fi_info*h=fi_allocinfo(),*i=NULL;h->ep_attr->type=FI_EP_RDM;h->caps=FI_MSG;
double t=now();int r=fi_getinfo(FI_VERSION(1,17),NULL,NULL,0,h,&i);printf("first fi_getinfo %.1f ms rc=%d\n",now()-t,r);
fi_freeinfo(i);i=NULL;t=now();r=fi_getinfo(FI_VERSION(1,17),NULL,NULL,0,h,&i);printf("second %.1f ms\n",now()-t);return 0;}
