/*
 * event.h - the objects and interface of tpd's event loop (event.c):
 * handlers (one registered descriptor each), connections (the common head
 * of FTP sessions and HTTP connections, kept on the idle list), epoll
 * interest, connection bookkeeping for every protocol module, and the
 * loop's life cycle for main.c.  Included by tpd.h.
 */
#ifndef TPD_EVENT_H
#define TPD_EVENT_H

#include <stdbool.h>
#include <stdint.h>

enum htype {
    H_LISTEN_FTP, H_LISTEN_HTTP, H_LISTEN_FTPS, H_LISTEN_HTTPS, H_SIGNAL,
    H_FTP_CTL, H_FTP_PASV, H_FTP_DATA, H_HTTP
};
enum ckind { C_FTP, C_HTTP };

struct conn;
struct ssl_st;

/* One registered descriptor; epoll_event.data.ptr points here. */
struct handler {
    int type;              /* enum htype                                */
    int fd;                /* -1 when closed                            */
    uint32_t events;       /* current epoll interest (0 = unregistered) */
    struct conn *conn;     /* owning connection (NULL for listeners)    */
    struct ssl_st *ssl;    /* TLS session (OpenSSL SSL *), NULL = plain  */
    unsigned tls_flags;    /* TLS_* bits                                */
    struct handler *pend_prev, *pend_next;  /* TLS_PENDQ list links     */
};

/* Common head of FTP sessions and HTTP connections: idle LRU list. */
struct conn {
    struct conn *lru_prev, *lru_next;
    struct conn *free_next;
    int64_t last_active;   /* ms, monotonic                             */
    int kind;              /* enum ckind                                */
    bool dead;             /* closed; memory released after this batch  */
    char peer_str[64];     /* "addr:port" for logs                      */
};

extern int64_t g_now;      /* ms, updated once per loop iteration */
extern int g_nconns;

/* interest and connection bookkeeping (every protocol module) */
void ev_set(struct handler *h, uint32_t events);
void ev_close(struct handler *h);
void conn_register(struct conn *c);
void conn_touch(struct conn *c);
void conn_kill(struct conn *c);

/* life cycle (main.c): ev_init, then register the first handlers,
 * ev_now_update, ev_run until ev_stop, ev_drain, ev_fini */
int  ev_init(void);                  /* 0, or -1 (logged)                */
void ev_now_update(void);            /* g_now from the monotonic clock   */
void ev_run(void);                   /* the loop; returns after ev_stop  */
void ev_stop(void);                  /* leave ev_run after this batch    */
void ev_drain(void);                 /* close and free every connection  */
void ev_fini(void);                  /* close the epoll descriptor       */

#endif /* TPD_EVENT_H */
