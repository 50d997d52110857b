/*
 * ftp_data.c - the FTP data channel: passive listeners (PASV/EPSV, with
 * --pasv-ports and --masquerade), active connects (PORT/EPRT, only to the
 * client's own address), accepting the passive connection, and running the
 * transfer the data socket is ready for: RETR through io_send_file(),
 * STOR/APPE through io_recv() + io_write_all(), listings LIST_CHUNK bytes
 * at a time.  Every transfer ends in ftp_xfer_done(), which sends the
 * final reply and resumes the commands queued behind it.
 *
 * With PROT P (RFC 4217) every data connection gets a server-side TLS
 * session as soon as it is accepted or connected; the handshake runs in
 * the loop, the transfer starts once it has finished, and a transfer that
 * ends well sends close_notify before its 226 (for STOR: after the
 * client's close_notify; a TCP EOF without one is a truncated upload,
 * 426).  RETR over TLS uses SSL_sendfile() when kTLS took the socket's
 * send side, otherwise pread + SSL_write through a TLS_BUF_SIZE buffer.
 * Data-connection TLS sessions are not required to resume the control
 * connection's session.
 *
 * Calls ftp_parse.c (PORT/EPRT), ftp_session.c (replies, TLS steps), io.c,
 * obuf.c, vfs.c, tls.c / tls_io.c, event.c and logging; reads g_cfg.
 */
#include "ftp_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

static int g_next_pasv_port;

/* IPv4 address of sa (also for v4-mapped IPv6), or false. */
static bool ipv4_of(const struct sockaddr_storage *sa, struct in_addr *out)
{
    if (sa->ss_family == AF_INET) {
        *out = ((const struct sockaddr_in *)sa)->sin_addr;
        return true;
    }
    if (sa->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const void *)sa;
        if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
            memcpy(out, &s6->sin6_addr.s6_addr[12], 4);
            return true;
        }
    }
    return false;
}

/* Do a and b carry the same IP address (ports ignored)? */
static bool same_ip(const struct sockaddr_storage *a,
                    const struct sockaddr_storage *b)
{
    struct in_addr x, y;
    if (ipv4_of(a, &x) && ipv4_of(b, &y))
        return x.s_addr == y.s_addr;
    if (a->ss_family == AF_INET6 && b->ss_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                      &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
    return false;
}

/* Close any passive listener / data connection and forget PORT (no
 * errors). */
void ftp_data_reset(struct ftp_sess *s)
{
    ev_close(&s->pasv);
    ev_close(&s->data);
    s->port_set = false;
    s->connecting = false;
}

/* Is a data connection set up or on its way?  True or false. */
bool ftp_data_ready(const struct ftp_sess *s)
{
    return s->data.fd >= 0 || s->pasv.fd >= 0 || s->port_set;
}

/*
 * Open a passive listener on the control connection's local address, with
 * a port from --pasv-ports (or an ephemeral one).  Returns the port or -1.
 */
static int open_pasv(struct ftp_sess *s)
{
    struct sockaddr_storage a = s->local;
    socklen_t alen = a.ss_family == AF_INET ? sizeof(struct sockaddr_in)
                                            : sizeof(struct sockaddr_in6);
    int fd, tries, range;

    ftp_data_reset(s);
    fd = socket(a.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    /* tpd closes data connections first, so each passive port is left with
     * a TIME_WAIT connection for 60 s; without SO_REUSEADDR that blocks
     * bind() on the port and quick transfers exhaust the range (425). */
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    range = g_cfg.pasv_lo ? g_cfg.pasv_hi - g_cfg.pasv_lo + 1 : 1;
    if (range > 4096)
        range = 4096;                      /* bounded search */
    for (tries = 0; tries < range; tries++) {
        int port = 0;
        if (g_cfg.pasv_lo) {
            int span = g_cfg.pasv_hi - g_cfg.pasv_lo + 1;
            port = g_cfg.pasv_lo + (g_next_pasv_port++ % span);
            if (g_next_pasv_port >= span)
                g_next_pasv_port = 0;
        }
        if (a.ss_family == AF_INET)
            ((struct sockaddr_in *)&a)->sin_port = htons((uint16_t)port);
        else
            ((struct sockaddr_in6 *)&a)->sin6_port = htons((uint16_t)port);
        if (bind(fd, (struct sockaddr *)&a, alen) == 0)
            break;
        if (errno != EADDRINUSE) {
            close(fd);
            return -1;
        }
    }
    if (tries == range || listen(fd, 1) < 0) {
        close(fd);
        return -1;
    }
    if (getsockname(fd, (struct sockaddr *)&a, &alen) < 0) {
        close(fd);
        return -1;
    }
    s->pasv.fd = fd;
    ev_set(&s->pasv, EPOLLIN);
    return a.ss_family == AF_INET ? ntohs(((struct sockaddr_in *)&a)->sin_port)
                                  : ntohs(((struct sockaddr_in6 *)&a)->sin6_port);
}

/*
 * Free transfer state and send the final transfer reply `code msg` (a 226
 * STOR whose upload cannot be committed becomes 451), then run the commands
 * queued behind the transfer.  Returns nothing; errors mark the session
 * broken.
 */
void ftp_xfer_done(struct ftp_sess *s, int code, const char *msg)
{
    if (s->xfer != X_NONE && g_log_level >= LOG_INFO) {
        double secs = (double)(g_now - s->xstart) / 1000.0;
        log_info("ftp %s %s: %s %llu bytes in %.3fs (%d)", s->base.peer_str,
                 s->user ? s->user->name : "-", s->xverb,
                 (unsigned long long)s->xbytes, secs, code);
    }
    ftp_data_reset(s);
    s->finishing = false;
    if (s->file_fd >= 0)
        close(s->file_fd);
    s->file_fd = -1;
    if (s->up.dirfd >= 0) {
        /* STOR: the upload replaces the target only if it completed */
        if (code == 226 && vfs_upload_commit(&s->up) < 0) {
            code = 451;
            msg = "Failure writing to local storage.";
        } else {
            vfs_upload_abort(&s->up);
        }
    }
    vfs_list_close(s->lister);
    s->lister = NULL;
    free(s->xbuf);
    s->xbuf = NULL;
    s->src = (struct io_src){ .fd = -1 };
    obuf_free(&s->list);
    s->xfer = X_NONE;
    ftp_reply(s, code, "%s", msg);
    ftp_process_lines(s);          /* resume commands queued behind the transfer */
}

/* Data connection ready: arm the direction the transfer needs (during a
 * TLS handshake tls_interest() uses the handshake's instead; with no
 * transfer yet, nothing). */
static void xfer_io(struct ftp_sess *s)
{
    if (s->finishing)
        ev_set(&s->data, EPOLLOUT);
    else if (s->xfer == X_NONE)
        ev_set(&s->data, 0);
    else
        ev_set(&s->data, s->xfer == X_FILE_IN ? EPOLLIN : EPOLLOUT);
}

/*
 * A new data connection (accepted or connected): with PROT P give it a
 * TLS session, whose handshake starts at once.  Returns 0, or -1 when TLS
 * cannot be set up (the connection is closed).
 */
static int data_open(struct ftp_sess *s)
{
    if (s->sec.prot_p && tls_attach(&s->data, false) < 0) {
        log_warn("ftp %s: cannot start TLS on the data connection",
                 s->base.peer_str);
        ev_close(&s->data);
        return -1;
    }
    xfer_io(s);
    return 0;
}

/*
 * Whether the client has closed (or reset) the control connection with
 * nothing left to read on it: recv(MSG_PEEK | MSG_DONTWAIT) returns 0 or
 * fails with something other than EAGAIN.  In stream mode an EOF on the
 * data connection is the only end-of-file mark (RFC 959, 3.4.1), and a
 * client that dies closes both connections: the server may see the data
 * EOF first, even when the control connection closed long before it (both
 * arrive in one epoll batch on a busy server).  A plain upload whose
 * session is already gone cannot be told 226, so it is not committed.
 */
static bool ctl_hung_up(struct ftp_sess *s)
{
    char c;
    if (s->ctl.fd < 0)
        return true;
    ssize_t n = recv(s->ctl.fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                      errno != EINTR);
}

/*
 * The data went out (or came in) whole: on a TLS data connection send
 * close_notify first (waiting for EPOLLOUT if the socket is full), then
 * end the transfer with 226 `msg`.  A RETR or listing whose close_notify
 * cannot be sent ends with 426 (the client cannot tell the end from a
 * cut); an upload already ended with the client's close_notify, so its
 * data is whole and it gets 226 even if the client has gone meanwhile.
 */
static void data_finish(struct ftp_sess *s, const char *msg)
{
    if (!s->data.ssl) {
        if (s->xfer == X_FILE_IN && ctl_hung_up(s))
            ftp_xfer_done(s, 426, "Connection closed; transfer aborted.");
        else
            ftp_xfer_done(s, 226, msg);
        return;
    }
    s->fin_msg = msg;
    int r = tls_close_notify(&s->data);
    if (r == IO_AGAIN) {
        s->finishing = true;
        xfer_io(s);
        return;
    }
    if (r == IO_OK || s->xfer == X_FILE_IN)
        ftp_xfer_done(s, 226, msg);
    else
        ftp_xfer_done(s, 426, "Connection closed; transfer aborted.");
}

/*
 * Start the data side of a transfer that has just been accepted (150):
 * use the data connection, wait for the passive one, or connect to the
 * PORT address.  Returns nothing; on failure the transfer ends with 425.
 */
void ftp_xfer_begin(struct ftp_sess *s)
{
    s->xstart = g_now;
    s->xbytes = 0;
    if (s->data.fd >= 0) {
        xfer_io(s);
    } else if (s->pasv.fd >= 0) {
        /* wait for the client to connect (pasv_accept) */
    } else if (s->port_set) {
        int fd = socket(s->port_addr.ss_family,
                        SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        s->port_set = false;
        if (fd < 0) {
            ftp_xfer_done(s, 425, "Failed to establish connection.");
            return;
        }
        if (s->local.ss_family == s->port_addr.ss_family) {
            struct sockaddr_storage src = s->local;
            if (src.ss_family == AF_INET)
                ((struct sockaddr_in *)&src)->sin_port = 0;
            else
                ((struct sockaddr_in6 *)&src)->sin6_port = 0;
            (void)bind(fd, (struct sockaddr *)&src,
                       src.ss_family == AF_INET ? sizeof(struct sockaddr_in)
                                                : sizeof(struct sockaddr_in6));
        }
        if (connect(fd, (struct sockaddr *)&s->port_addr, s->port_len) < 0 &&
            errno != EINPROGRESS) {
            close(fd);
            ftp_xfer_done(s, 425, "Failed to establish connection.");
            return;
        }
        s->data.fd = fd;
        s->connecting = true;
        ev_set(&s->data, EPOLLOUT);
    } else {
        ftp_xfer_done(s, 425, "Use PORT or PASV first.");
    }
}

/*
 * Accept the client's connection on the passive listener (only from the
 * control connection's address; others are closed and logged).  On
 * descriptor exhaustion the listener is dropped and a waiting transfer
 * ends with 425.  Returns nothing.
 */
void ftp_pasv_accept(struct ftp_sess *s)
{
    struct sockaddr_storage peer;
    socklen_t plen = sizeof(peer);
    if (s->pasv.fd < 0)
        return;
    int fd = accept4(s->pasv.fd, (struct sockaddr *)&peer, &plen,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
            errno == ENOMEM) {
            /* The pending connection stays queued, so a level-triggered
             * listener would fire again at once and spin.  Give up this
             * passive port: a waiting transfer gets 425, otherwise the
             * next transfer command does ("Use PORT or PASV first"). */
            log_warn("ftp %s: passive accept: %s", s->base.peer_str,
                     strerror(errno));
            ev_close(&s->pasv);
            if (s->xfer != X_NONE)
                ftp_xfer_done(s, 425, "Failed to establish connection.");
        }
        return;
    }
    if (!same_ip(&peer, &s->peer)) {
        char ps[64];
        sockaddr_to_str((struct sockaddr *)&peer, ps, sizeof(ps));
        log_warn("ftp %s: rejected data connection from %s",
                 s->base.peer_str, ps);
        close(fd);
        return;
    }
    ev_close(&s->pasv);               /* one connection per PASV */
    s->data.fd = fd;
    if (data_open(s) < 0 && s->xfer != X_NONE)
        ftp_xfer_done(s, 425, "Failed to establish connection.");
}

/* RETR: sendfile() (or pread+send) up to SEND_BUDGET bytes (io.c). */
static void send_file(struct ftp_sess *s)
{
    static const struct { int code; const char *msg; } end[] = {
        [IO_OK]       = { 226, "Transfer complete." },
        [IO_EOF]      = { 451, "File shrank during transfer." },
        [IO_FILE_ERR] = { 451, "Error reading local file." },
        [IO_SOCK_ERR] = { 426, "Connection closed; transfer aborted." },
    };
    unsigned fl = g_cfg.use_sendfile ? IO_SENDFILE : 0;
    if (s->data.ssl && !(g_cfg.use_sendfile && (s->data.tls_flags & TLS_KTLS_SEND))
        && !s->src.buf) {
        /* TLS without kTLS: pread + SSL_write through a bounded buffer */
        if (!(s->xbuf = malloc(TLS_BUF_SIZE))) {
            ftp_xfer_done(s, 451, "Out of memory.");
            return;
        }
        s->src.buf = s->xbuf;
        s->src.cap = TLS_BUF_SIZE;
    }
    int r = io_send_file(&s->data, &s->src, SEND_BUDGET, fl, &s->xbytes);
    if (r == IO_OK) {
        data_finish(s, end[r].msg);
        return;
    }
    if (r != IO_AGAIN) {
        ftp_xfer_done(s, end[r].code, end[r].msg);
        return;
    }
    conn_touch(&s->base);
}

/*
 * LIST/NLST/MLSD: send the listing, generated LIST_CHUNK bytes at a time
 * when the previous chunk has gone (bounded memory per session).
 */
static void send_list(struct ftp_sess *s)
{
    for (int guard = 0; guard < 64; guard++) {
        if (obuf_pending(&s->list) == 0) {
            char chunk[LIST_CHUNK];
            ssize_t n = vfs_list_read(s->lister, chunk, sizeof(chunk));
            if (n == 0) {
                data_finish(s, "Directory send OK.");
                return;
            }
            if (obuf_append(&s->list, chunk, (size_t)n, LIST_CHUNK) < 0) {
                ftp_xfer_done(s, 451, "Out of memory.");
                return;
            }
        }
        size_t before = obuf_pending(&s->list);
        int r = obuf_flush(&s->data, &s->list);
        s->xbytes += before - obuf_pending(&s->list);
        if (r < 0) {
            ftp_xfer_done(s, 426, "Connection closed; transfer aborted.");
            return;
        }
        if (r == 0)
            break;
    }
    conn_touch(&s->base);
}

/* STOR/APPE: read the data socket and write the file (buffered). */
static void recv_file(struct ftp_sess *s)
{
    for (int i = 0; i < 16; i++) {
        size_t n;
        int r = io_recv(&s->data, s->xbuf, XFER_BUF_SIZE, &n);
        if (r == IO_AGAIN)
            break;
        if (r == IO_EOF) {
            data_finish(s, "Transfer complete.");
            return;
        }
        if (r != IO_OK) {
            if (s->data.ssl)
                log_info("ftp %s: TLS %s data connection failed: %s",
                         s->base.peer_str, s->xverb, tls_last_error());
            ftp_xfer_done(s, 426, "Connection closed; transfer aborted.");
            return;
        }
        if (io_write_all(s->file_fd, s->xbuf, n) != IO_OK) {
            ftp_xfer_done(s, 451, "Failure writing to local storage.");
            return;
        }
        s->xbytes += (uint64_t)n;
    }
    conn_touch(&s->base);
}

/* Readiness on the data connection: finish an active connect (425 on
 * failure) or move the running transfer on.  Returns nothing. */
void ftp_data_event(struct ftp_sess *s, uint32_t events)
{
    (void)events;
    if (s->data.fd < 0)
        return;
    if (s->connecting) {
        int err = 0;
        socklen_t el = sizeof(err);
        getsockopt(s->data.fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err) {
            ftp_xfer_done(s, 425, "Failed to establish connection.");
            return;
        }
        s->connecting = false;
        if (data_open(s) < 0 && s->xfer != X_NONE)
            ftp_xfer_done(s, 425, "Failed to establish connection.");
        return;
    }
    if (s->data.ssl && (s->data.tls_flags & TLS_HANDSHAKE)) {
        ftp_tls_step(s, &s->data, "ftp-data");
        if (s->data.fd >= 0)
            xfer_io(s);      /* the handshake's direction, or the transfer's */
        return;
    }
    if (s->finishing) {
        data_finish(s, s->fin_msg);
        return;
    }
    switch (s->xfer) {
    case X_FILE_OUT: send_file(s); break;
    case X_BUF_OUT:  send_list(s); break;
    case X_FILE_IN:  recv_file(s); break;
    default:         break;
    }
    /* re-arm even when the direction is unchanged: over TLS the interest
     * depends on what the last SSL call needs, and plaintext left in
     * OpenSSL (SSL_pending) must put the socket on tls.c's list */
    if (s->data.fd >= 0)
        xfer_io(s);
}

/* PASV: open a passive listener, reply 227 (425/501 on failure). */
void ftp_cmd_pasv(struct ftp_sess *s, const char *arg)
{
    struct in_addr a;
    (void)arg;
    if (s->epsv_all) {
        ftp_reply(s, 501, "PASV not allowed after EPSV ALL.");
        return;
    }
    if (g_cfg.have_masq)
        a = g_cfg.masq_addr;
    else if (!ipv4_of(&s->local, &a)) {
        ftp_reply(s, 425, "PASV needs IPv4; use EPSV.");
        return;
    }
    int port = open_pasv(s);
    if (port < 0) {
        ftp_reply(s, 425, "Could not open passive port.");
        return;
    }
    uint32_t ip = ntohl(a.s_addr);
    ftp_reply(s, 227, "Entering Passive Mode (%u,%u,%u,%u,%u,%u).",
          ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255,
          (unsigned)port >> 8, (unsigned)port & 255);
}

/* EPSV [1|2|ALL]: open a passive listener, reply 229 (425/501/522). */
void ftp_cmd_epsv(struct ftp_sess *s, const char *arg)
{
    struct in_addr dummy;
    int fam = ipv4_of(&s->local, &dummy) ? 1 : 2;
    if (!strcasecmp(arg, "ALL")) {
        s->epsv_all = true;
        ftp_reply(s, 200, "EPSV ALL ok.");
        return;
    }
    if (arg[0] && !((arg[0] == '1' || arg[0] == '2') && arg[1] == '\0')) {
        ftp_reply(s, 501, "Bad EPSV argument.");
        return;
    }
    if (arg[0] && arg[0] - '0' != fam) {
        ftp_reply(s, 522, "Network protocol not supported, use (%d)", fam);
        return;
    }
    int port = open_pasv(s);
    if (port < 0) {
        ftp_reply(s, 425, "Could not open passive port.");
        return;
    }
    ftp_reply(s, 229, "Entering Extended Passive Mode (|||%d|)", port);
}

/* Accept addr for active mode only if it is the client's own address. */
static void set_port(struct ftp_sess *s, const struct sockaddr_storage *ss,
                     socklen_t len)
{
    if (!same_ip(ss, &s->peer)) {
        ftp_reply(s, 500, "Illegal PORT command: address differs from client.");
        return;
    }
    ftp_data_reset(s);
    s->port_addr = *ss;
    s->port_len = len;
    s->port_set = true;
    ftp_reply(s, 200, "PORT command successful. Consider using PASV.");
}

/* PORT h1,h2,h3,h4,p1,p2: set the active-mode address (200; 500/501). */
void ftp_cmd_port(struct ftp_sess *s, const char *arg)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    if (s->epsv_all) {
        ftp_reply(s, 501, "PORT not allowed after EPSV ALL.");
        return;
    }
    if (ftp_parse_port(arg, (struct sockaddr_in *)&ss) < 0) {
        ftp_reply(s, 501, "Illegal PORT command.");
        return;
    }
    /* a v4-mapped control connection needs a v4-mapped target */
    if (s->local.ss_family == AF_INET6) {
        struct sockaddr_in6 s6;
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        memset(&s6, 0, sizeof(s6));
        s6.sin6_family = AF_INET6;
        s6.sin6_port = s4->sin_port;
        s6.sin6_addr.s6_addr[10] = 0xff;
        s6.sin6_addr.s6_addr[11] = 0xff;
        memcpy(&s6.sin6_addr.s6_addr[12], &s4->sin_addr, 4);
        memset(&ss, 0, sizeof(ss));
        memcpy(&ss, &s6, sizeof(s6));
        set_port(s, &ss, sizeof(s6));
        return;
    }
    set_port(s, &ss, sizeof(struct sockaddr_in));
}

/* EPRT |af|addr|port|: set the active-mode address (200; 501/522). */
void ftp_cmd_eprt(struct ftp_sess *s, const char *arg)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (s->epsv_all) {
        ftp_reply(s, 501, "EPRT not allowed after EPSV ALL.");
        return;
    }
    if (ftp_parse_eprt(arg, &ss, &len) < 0) {
        ftp_reply(s, 501, "Bad EPRT command.");
        return;
    }
    if (ss.ss_family != s->local.ss_family) {
        struct in_addr dummy;
        ftp_reply(s, 522, "Network protocol not supported, use (%d)",
              ipv4_of(&s->local, &dummy) && s->local.ss_family == AF_INET ? 1 : 2);
        return;
    }
    set_port(s, &ss, len);
}

