#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fabrpc.h>
static long rss_kb(void){FILE*f=fopen("/proc/self/status","r");char l[256];long v=-1;while(fgets(l,sizeof l,f))if(!strncmp(l,"VmRSS:",6))v=atol(l+6);fclose(f);return v;}
static void echo(frpc_request *req, void *u){size_t n; const void*a=frpc_request_args(req,&n); frpc_respond(req,a,n);}
int main(int argc,char**argv){
  frpc_config cfg; frpc_agent*a; frpc_config_init(&cfg);
  if(frpc_init(&cfg,&a)) return 1;
  frpc_register(a,"echo",echo,NULL,0); frpc_barrier(a,30000);
  size_t len=16u<<20; char*buf=malloc(len); memset(buf,1,len);
  if(frpc_rank(a)==0){
    frpc_future *f[4];
    for(int r=0;r<8;r++){ for(int i=0;i<4;i++) frpc_call_async(a,1,"echo",buf,len,30000,&f[i]); frpc_wait_all(f,4,30000); for(int i=0;i<4;i++) frpc_future_free(f[i]); }
  }
  frpc_barrier(a,30000);
  printf("rank %d after: %ld kB\n",frpc_rank(a),rss_kb()); fflush(stdout);
  sleep(atoi(argv[1]));
  printf("rank %d idle %ss: %ld kB\n",frpc_rank(a),argv[1],rss_kb()); fflush(stdout);
  frpc_barrier(a,60000);
  frpc_shutdown(a,FRPC_SHUTDOWN_GRACEFUL,10000); return 0;}
