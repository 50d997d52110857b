/*
 * tpd.h - shared declarations for tpd, the single-threaded, event-driven,
 * zero-copy FTP + HTTP server of xferlab (after teepeedee).
 *
 * This header holds what is shared across protocols; FTP-only
 * declarations are in ftp_int.h, HTTP-only ones in http_int.h.
 *
 * Module map (each file's header comment says what it may call):
 *   main.c   start-up and shutdown: options, users, TLS set-up, limits,
 *            signals (signalfd), listeners, then the loop
 *   event.c  the epoll loop, dispatch, idle timers, connection
 *            bookkeeping (declared in event.h, included here)
 *   log.c    log lines and "addr:port" formatting
 *   obuf.c   growable output buffers (replies, response heads)
 *   config.c defaults, configuration file and command line
 *   listen.c listening sockets, accept, descriptor-exhaustion recovery
 *   users.c  the users file and password checks
 *   vpath.c  virtual path normalisation (pure; fuzzed)
 *   listing.c directory-listing line formats, LIST/NLST/MLSD/MLST (pure;
 *            fuzzed)
 *   vfs.c    confined file access below a user's home (openat2
 *            RESOLVE_BENEATH) and directory listings
 *   io.c     transfer loops shared by FTP and HTTP (sendfile or
 *            pread+send of a file range, recv, write to a file)
 *   ftp_*.c  FTP sessions: ftp_parse.c (command lines, PORT/EPRT, the
 *            AUTH/PBSZ/PROT rules; pure, fuzzed), ftp_session.c (control
 *            connection, replies), ftp_cmds.c (command table, handlers),
 *            ftp_data.c (data channel, transfers); see ftp_int.h
 *   http_*.c HTTP/1.1: http_parse.c (request head, chunked bodies, Range,
 *            percent coding; pure, fuzzed), http_conn.c (connections: the
 *            state machine, reading, sending, keep-alive), http_handlers.c
 *            (GET/HEAD, PUT/POST, error replies); see http_int.h
 *   tls.c    TLS configuration (OpenSSL context from --tls-cert/--tls-key),
 *            the kernel-TLS probe, --tls-info, attaching TLS to a socket,
 *            the list of TLS sockets with buffered plaintext
 *   tls_io.c non-blocking OpenSSL state machine steps (handshake, read,
 *            write, close_notify) mapped to io_status codes; fuzzed
 */
#ifndef TPD_H
#define TPD_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <netinet/in.h>

#include "event.h"         /* handlers, connections, the loop */

/* ---- limits (documented in README.md) ---------------------------------- */
#define FTP_LINE_MAX   2048           /* FTP command line incl. CRLF      */
#define HTTP_HDR_MAX   8192           /* HTTP request line + headers      */
#define HTTP_MAX_HEADERS 100          /* header fields per request        */
#define TPD_LISTEN_BACKLOG 1024      /* listen(2) backlog: the lab gives every server with a knob 1024 */
#define VPATH_MAX      4096           /* virtual path length              */
#define XFER_BUF_SIZE  (256 * 1024)   /* buffered upload / no-sendfile    */
#define SEND_BUDGET    (4 << 20)      /* bytes sent per wakeup per conn   */
#define OBUF_LIMIT     (256 * 1024)   /* unread control output => close   */
#define LIST_MAX_ENTRIES 200000       /* directory listing cap            */
#define LIST_LINE_MAX  (VPATH_MAX * 2 + 512) /* one formatted listing line */
#define LIST_CHUNK     (32 * 1024)    /* listing bytes generated at a time */
#define HTTP_OBUF_LIMIT (256 * 1024)  /* buffered HTTP response bytes     */
#ifndef TLS_BUF_SIZE
#define TLS_BUF_SIZE   (64 * 1024)    /* TLS RETR/GET without kTLS: pread chunk */
#endif

/* ---- log.c: logging ----------------------------------------------------- */
enum { LOG_ERROR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG };
extern int g_log_level;
void tpd_log(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
#define log_error(...) tpd_log(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  tpd_log(LOG_WARN, __VA_ARGS__)
#define log_info(...)  do { if (g_log_level >= LOG_INFO) tpd_log(LOG_INFO, __VA_ARGS__); } while (0)
#define log_debug(...) do { if (g_log_level >= LOG_DEBUG) tpd_log(LOG_DEBUG, __VA_ARGS__); } while (0)
void sockaddr_to_str(const struct sockaddr *sa, char *buf, size_t sz);

/* ---- users -------------------------------------------------------------- */
struct user {
    char *name;
    char *pass;        /* "{plain}secret" or a crypt(3) hash "$..."     */
    char *home;        /* home directory as configured                 */
    char *home_real;   /* realpath() of home (fallback confinement)    */
    int   home_fd;     /* O_PATH descriptor, shared by all sessions    */
    bool  can_write;   /* perms "rw"                                   */
};
int  users_load(const char *path);
struct user *users_find(const char *name);
bool users_check_password(const struct user *u, const char *password);
struct user *users_first(void);
void users_free(void);

/* ---- configuration ------------------------------------------------------ */
struct config {
    char ftp_listen[128];
    char http_listen[128];
    char users_file[1024];
    int  pasv_lo, pasv_hi;     /* 0,0 = kernel-chosen ephemeral ports */
    int  max_conns;
    int  idle_timeout;         /* seconds */
    bool have_masq;
    struct in_addr masq_addr;
    bool use_sendfile;
    long long max_body;        /* largest HTTP upload body, bytes (>= 1)  */
    char tls_cert[1024];       /* PEM certificate (chain); "" = no TLS     */
    char tls_key[1024];        /* PEM private key                          */
    char ftps_listen[128];     /* implicit FTPS listener, "" = none        */
    char https_listen[128];    /* HTTPS listener, "" = none                */
    bool tls_info;             /* --tls-info: print JSON and exit          */
};
extern struct config g_cfg;
/* --max-body: default 1 GiB (the lab's default for every HTTP server),
 * accepted range 1 .. 2^62 (no "no limit" value) */
#define TPD_DEFAULT_MAX_BODY (1LL << 30)
#define TPD_MAX_BODY_MAX (1LL << 62)
int config_load(int argc, char **argv);
int config_parse_int(const char *v, long lo, long hi, int *out);
FILE *config_fopen(const char *what, const char *path);
bool config_getline(FILE *f, char *line, int size, int *lineno, int max);

/* ---- obuf.c: growable output buffers ----------------------------------- */
/* Output buffer for control replies and HTTP headers. */
struct obuf {
    char  *data;
    size_t len, off, cap;
};
int  obuf_append(struct obuf *b, const void *data, size_t len, size_t limit);
int  obuf_printf(struct obuf *b, size_t limit, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int  obuf_flush(struct handler *h, struct obuf *b);
size_t obuf_pending(const struct obuf *b);
void obuf_free(struct obuf *b);

/* ---- listeners and protocol entry points (event.c and main.c call them) - */
/* listen.c */
int  listen_start(void);
void listen_event(struct handler *h);
int64_t listen_resume_at(void);
void listen_resume(void);
void listen_stop(void);

/* ftp_session.c / http_conn.c entry points (tls: TLS from the first byte) */
void ftp_accept(int fd, const struct sockaddr_storage *peer, bool tls);
void ftp_event(struct handler *h, uint32_t events);
void ftp_timeout(struct conn *c);
void ftp_close(struct conn *c);
void ftp_free(struct conn *c);
void http_accept(int fd, const struct sockaddr_storage *peer, bool tls);
void http_event(struct handler *h, uint32_t events);
void http_timeout(struct conn *c);
void http_close(struct conn *c);
void http_free(struct conn *c);
/* main.c: the signalfd is readable (SIGTERM, SIGINT: ev_stop) */
void signal_event(struct handler *h);

/* ---- io.c: transfer loops shared by FTP and HTTP ------------------------- */
enum io_status {
    IO_OK = 0,             /* done (range sent, bytes received, written) */
    IO_AGAIN,              /* would block, or the per-wakeup budget is spent */
    IO_EOF,                /* peer closed (recv) / file shrank (sendfile)   */
    IO_SOCK_ERR,           /* socket error, errno set                      */
    IO_FILE_ERR            /* file read or write error, errno set          */
};
#define IO_SENDFILE 1u     /* io_send_file: use sendfile(), not pread+send  */
#define IO_NOKEEP   2u     /* io_send_file: buf does not outlive the call   */
/* A file range being sent; the descriptor and the buffer are borrowed. */
struct io_src {
    int fd;                /* file to send                               */
    off_t off, end;        /* next byte to read, end of the range         */
    char *buf;             /* bounce buffer without sendfile (else NULL)  */
    size_t cap, len, pos;  /* its size, bytes held, bytes already sent    */
};
int io_send_file(struct handler *h, struct io_src *x, size_t budget,
                 unsigned flags, uint64_t *sent);
int io_send(struct handler *h, const void *p, size_t len, size_t *n);
int io_recv(struct handler *h, void *buf, size_t cap, size_t *got);
int io_recv_append(struct handler *h, char *buf, size_t *len, size_t cap);
int io_write_all(int fd, const void *p, size_t n);

/* ---- tls.c / tls_io.c ---------------------------------------------------- */
/* TLS state bits of a handler (tls_flags). */
#define TLS_HANDSHAKE   0x01u  /* handshake not finished yet               */
#define TLS_HS_WRITE    0x02u  /* the handshake waits for EPOLLOUT          */
#define TLS_RD_WANTS_WR 0x04u  /* the last SSL_read needs EPOLLOUT          */
#define TLS_WR_WANTS_RD 0x08u  /* the last SSL_write needs EPOLLIN          */
#define TLS_KTLS_SEND   0x10u  /* kernel TLS send offload is active         */
#define TLS_PENDQ       0x20u  /* on the buffered-plaintext list (tls.c)    */
#define TLS_SHUT_SENT   0x40u  /* close_notify sent                         */
#define TLS_RD_LATER    0x80u  /* tls_read owes an EOF or error it already
                                  took from the socket: call it again      */

int  tls_init(void);                 /* 0, or -1 (logged; exit status 2) */
bool tls_enabled(void);              /* --tls-cert/--tls-key configured  */
void tls_print_info(FILE *f);        /* the --tls-info JSON line         */
int  tls_attach(struct handler *h, bool tickets); /* server TLS on h->fd */
void tls_detach(struct handler *h);  /* free h->ssl (no close_notify)    */
void tls_done_log(struct handler *h, const char *what); /* after handshake */
uint32_t tls_interest(struct handler *h, uint32_t events);
uint32_t tls_events(const struct handler *h, uint32_t events);
int  tls_pending_take(struct handler **out, int max);
bool tls_have_pending(void);
void tls_cleanup(void);
/* tls_io.c: steps on h->ssl, returning enum io_status; h->fd unused */
int tls_handshake(struct handler *h);
int tls_read(struct handler *h, void *buf, size_t cap, size_t *got);
int tls_write(struct handler *h, const void *buf, size_t len, size_t *n);
int tls_close_notify(struct handler *h);
const char *tls_last_error(void);

/* ---- vpath.c: virtual path normalisation (pure) --------------------------- */
int vpath_join(const char *cwd, const char *arg, char *out, size_t outsz);
const char *vpath_rel(const char *vpath);

/* ---- listing.c: directory-listing line formats (pure) ------------------- */
enum { LS_LIST, LS_NLST, LS_MLSD };
int list_format_line(int style, const char *name, const struct stat *st,
                     const char *link, bool writable, time_t now,
                     char *line, size_t sz);
int vfs_mlst_line(const struct stat *st, const char *type, bool writable,
                  char *buf, size_t sz);

/* ---- vfs.c --------------------------------------------------------------- */
int vfs_open(const struct user *u, const char *vpath, int flags, mode_t mode);
int vfs_open_parent(const struct user *u, const char *vpath,
                    const char **name);
/* Streaming directory listings: at most one LIST_LINE_MAX line and the
 * DIR stream are held; the caller pulls bounded chunks. */
struct lister;
struct lister *vfs_list_open(const struct user *u, const char *vpath,
                             int style);
ssize_t vfs_list_read(struct lister *l, char *buf, size_t cap);
void vfs_list_close(struct lister *l);
/* Uploads that replace a file: written to an unnamed O_TMPFILE inode in
 * the target's directory (a random ".tpd-up.*" name where the filesystem
 * lacks O_TMPFILE), given a name and renamed over the target on success,
 * discarded on failure.  Names beginning TMP_PREFIX are reserved: never
 * listed, refused when a client names them (EACCES). */
#define TMP_PREFIX ".tpd-up."
struct upload {
    int dirfd;             /* O_PATH parent directory, -1 when idle     */
    int fd;                /* O_TMPFILE inode (own descriptor), or -1   */
    char tmp[64];          /* temporary name in dirfd (named mode)      */
    char *name;            /* final name in dirfd (malloc'd)            */
};
bool vfs_reserved_path(const char *vpath);
int  vfs_upload_open(const struct user *u, const char *vpath,
                     struct upload *up, bool *existed);
int  vfs_upload_commit(struct upload *up);
void vfs_upload_abort(struct upload *up);

#endif /* TPD_H */
