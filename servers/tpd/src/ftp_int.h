/*
 * ftp_int.h - declarations shared by the FTP modules of tpd (not by HTTP):
 *   ftp_parse.c    pure parsers: command lines, PORT/EPRT arguments, the
 *                  AUTH/PBSZ/PROT state rules (fuzzed: fuzz_ftp, fuzz_tls)
 *   ftp_session.c  session state, control connection, replies, idle
 *                  timeout, close/free
 *   ftp_cmds.c     command handlers and the command table (dispatch, HELP)
 *   ftp_data.c     data channel: PASV/EPSV/PORT/EPRT, passive accept,
 *                  active connect, and the transfers (RETR, STOR/APPE,
 *                  listings) through io.c
 */
#ifndef FTP_INT_H
#define FTP_INT_H

#include "tpd.h"

/* ---- ftp_parse.c: pure parsers (no I/O, no allocation) ----------------- */
enum ftp_cmd_id {
    FC_UNKNOWN = 0,
    FC_USER, FC_PASS, FC_ACCT, FC_SYST, FC_FEAT, FC_OPTS, FC_PWD, FC_CWD,
    FC_CDUP, FC_TYPE, FC_MODE, FC_STRU, FC_PASV, FC_EPSV, FC_PORT, FC_EPRT,
    FC_LIST, FC_NLST, FC_MLSD, FC_MLST, FC_SIZE, FC_MDTM, FC_REST, FC_RETR,
    FC_STOR, FC_APPE, FC_DELE, FC_MKD, FC_RMD, FC_RNFR, FC_RNTO, FC_NOOP,
    FC_ABOR, FC_QUIT, FC_STAT, FC_HELP, FC_ALLO, FC_SITE, FC_AUTH, FC_PBSZ,
    FC_PROT, FC_LANG, FC_HOST, FC_CLNT,
    FC__COUNT
};
struct ftp_cmd {
    int  id;               /* enum ftp_cmd_id                           */
    char verb[5];          /* upper-cased verb as received              */
    char *arg;             /* NUL-terminated argument ("" if none)      */
    size_t arglen;
};
int ftp_parse_line(const char *line, size_t len, char *work, size_t worksz,
                   struct ftp_cmd *cmd);
int ftp_parse_port(const char *arg, struct sockaddr_in *out);
int ftp_parse_eprt(const char *arg, struct sockaddr_storage *out,
                   socklen_t *outlen);

/* RFC 4217 security state of an FTP session, and its commands. */
struct ftp_sec {
    bool can_tls;          /* a certificate is configured               */
    bool tls;              /* the control connection is (becoming) TLS  */
    bool pbsz;             /* PBSZ 0 accepted                           */
    bool prot_p;           /* PROT P: data connections use TLS          */
    bool logged_in;
};
int ftp_sec_cmd(struct ftp_sec *st, int id, const char *arg,
                const char **text);

/* ---- FTP sessions ------------------------------------------------------- */
enum { X_NONE, X_FILE_OUT, X_BUF_OUT, X_FILE_IN };

struct ftp_sess {
    struct conn base;              /* must be first */
    struct handler ctl, pasv, data;
    struct sockaddr_storage peer, local;
    struct user *user;             /* NULL until PASS succeeds */
    char *pending_user;            /* name given with USER */
    char *cwd;                     /* virtual working directory */
    char *rnfr;                    /* pending rename source */
    off_t rest;                    /* REST offset for next transfer */
    int fails;                     /* failed logins */
    bool broken;                   /* kill at end of event */
    bool quitting;                 /* close once replies are flushed */
    bool discarding;               /* skipping the rest of a long line */
    bool in_process;               /* reentrancy guard for process_lines */
    bool epsv_all;
    bool port_set;                 /* PORT/EPRT address pending */
    bool connecting;               /* active-mode connect in progress */
    bool auth_pending;             /* 234 sent: start TLS once it is out */
    bool finishing;                /* TLS data: close_notify to send */
    const char *fin_msg;           /* the 226 text after close_notify */
    struct ftp_sec sec;            /* AUTH / PBSZ / PROT state (RFC 4217) */
    struct sockaddr_storage port_addr;
    socklen_t port_len;
    int xfer;                      /* X_* */
    const char *xverb;             /* for the transfer log line */
    int file_fd;
    struct io_src src;             /* RETR range (file_fd, xbuf borrowed) */
    char *xbuf;                    /* STOR / no-sendfile buffer */
    struct obuf list;              /* listing chunk being sent */
    struct lister *lister;         /* listing in progress (streamed) */
    struct upload up;              /* STOR to a temporary name */
    uint64_t xbytes;
    int64_t xstart;
    struct obuf out;               /* pending control replies */
    size_t inlen;
    char in[FTP_LINE_MAX];
};

/* ftp_session.c */
void ftp_reply_raw(struct ftp_sess *s, const char *text, size_t len);
void ftp_reply(struct ftp_sess *s, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void ftp_process_lines(struct ftp_sess *s);
bool ftp_tls_step(struct ftp_sess *s, struct handler *h, const char *what);

/* ftp_cmds.c */
void ftp_dispatch(struct ftp_sess *s, const struct ftp_cmd *cmd);
bool ftp_cmd_in_xfer(int id);

/* ftp_data.c */
void ftp_data_reset(struct ftp_sess *s);
bool ftp_data_ready(const struct ftp_sess *s);
void ftp_xfer_begin(struct ftp_sess *s);
void ftp_xfer_done(struct ftp_sess *s, int code, const char *msg);
void ftp_pasv_accept(struct ftp_sess *s);
void ftp_data_event(struct ftp_sess *s, uint32_t events);
void ftp_cmd_pasv(struct ftp_sess *s, const char *arg);
void ftp_cmd_epsv(struct ftp_sess *s, const char *arg);
void ftp_cmd_port(struct ftp_sess *s, const char *arg);
void ftp_cmd_eprt(struct ftp_sess *s, const char *arg);

#endif /* FTP_INT_H */
