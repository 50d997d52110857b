/*
 * ftp_session.c - FTP sessions (RFC 959, with the RFC 2389 FEAT/OPTS, RFC 3659
 * SIZE/MDTM/REST/MLST/MLSD and RFC 2428 EPSV/EPRT extensions).
 *
 * A session owns three handlers: the control connection, an optional
 * passive listener (PASV/EPSV) and an optional data connection.  The
 * control connection is line-buffered in a fixed FTP_LINE_MAX buffer; each
 * complete line is parsed (ftp_parse.c) and dispatched.  While a transfer runs,
 * only ABOR, QUIT, STAT and NOOP are executed; other commands wait in the
 * buffer (in order) until the transfer reply has been sent.
 *
 * Transfers: RETR uses sendfile() from the file to the data socket, at most
 * SEND_BUDGET bytes per wakeup (or pread+send with --no-sendfile); STOR and
 * APPE read the data socket into a 256 KiB buffer and write() it to the
 * file (large buffered writes); a STOR that starts a new file writes a
 * temporary name and renames it over the target only on success; listings
 * are generated LIST_CHUNK bytes at a time as the data socket drains.  Replies that cannot be written at once are kept in a
 * per-session output buffer; a client that stops reading replies stops
 * having its commands processed, and is closed past OBUF_LIMIT.
 *
 * Errors never close the session directly: they set `broken`, and the
 * session is killed at the end of the event (ftp_event) - this keeps every
 * code path free of use-after-free.
 *
 * Calls ftp_parse.c, ftp_cmds.c (dispatch), ftp_data.c, io.c, obuf.c,
 * vfs.c, tls.c / tls_io.c, event.c and logging; reads g_cfg.
 */
#include "ftp_int.h"

#include <errno.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

/*
 * Queue raw reply text (complete CRLF-terminated lines) and try to send it
 * now.  Returns nothing; past OBUF_LIMIT or on a send error the session is
 * marked broken (killed at the end of the event).
 */
void ftp_reply_raw(struct ftp_sess *s, const char *text, size_t len)
{
    if (s->broken)
        return;
    if (obuf_append(&s->out, text, len, OBUF_LIMIT) < 0) {
        log_warn("ftp %s: client not reading replies, closing",
                 s->base.peer_str);
        s->broken = true;
        return;
    }
    if (obuf_flush(&s->ctl, &s->out) < 0)
        s->broken = true;
}

/*
 * Queue a single-line reply "code text" (CR/LF in the text become spaces;
 * cut to fit a quoted VPATH_MAX path).  Errors as ftp_reply_raw.
 */
void ftp_reply(struct ftp_sess *s, int code, const char *fmt, ...)
{
    char buf[VPATH_MAX * 2 + 256];    /* a quoted path doubles its '"' */
    int n = snprintf(buf, sizeof(buf), "%d ", code);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 2, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    n += m;
    if ((size_t)n > sizeof(buf) - 3)
        n = (int)sizeof(buf) - 3;
    /* a reply must not contain CR/LF from client-supplied text */
    for (int i = 4; i < n; i++)
        if (buf[i] == '\r' || buf[i] == '\n')
            buf[i] = ' ';
    buf[n++] = '\r';
    buf[n++] = '\n';
    ftp_reply_raw(s, buf, (size_t)n);
}

/*
 * Set the control connection's epoll interest from the session state.
 * After AUTH TLS, once the 234 reply is out, TLS starts on the control
 * connection (nothing is read in between: bytes the client sent after
 * AUTH were discarded with the rest of the plaintext input).
 */
static void ctl_update(struct ftp_sess *s)
{
    uint32_t ev = 0;
    size_t pend = obuf_pending(&s->out);
    if (s->auth_pending && pend == 0) {
        s->auth_pending = false;
        if (tls_attach(&s->ctl, true) < 0) {
            log_warn("ftp %s: cannot start TLS", s->base.peer_str);
            conn_kill(&s->base);
            return;
        }
    }
    if (pend)
        ev |= EPOLLOUT;
    if (!s->quitting && !s->auth_pending && s->inlen < FTP_LINE_MAX &&
        pend < 16384)
        ev |= EPOLLIN;
    ev_set(&s->ctl, ev);
}

/*
 * Run one TLS handshake step on h (the control or data connection of s,
 * named `what` in logs).  Returns true when the handshake has finished
 * (now or before); false while it waits, or after it failed: then the
 * control connection's session is marked broken, a data connection is
 * closed (a transfer waiting for it ends with 425).  A failed handshake
 * is logged at info level and costs only this connection.
 */
bool ftp_tls_step(struct ftp_sess *s, struct handler *h, const char *what)
{
    if (!h->ssl || !(h->tls_flags & TLS_HANDSHAKE))
        return true;
    int r = tls_handshake(h);
    if (r == IO_OK) {
        tls_done_log(h, what);
        return true;
    }
    if (r == IO_AGAIN)
        return false;
    log_info("ftp %s: TLS handshake failed on the %s connection: %s",
             s->base.peer_str, h == &s->ctl ? "control" : "data",
             tls_last_error());
    if (h == &s->ctl) {
        s->broken = true;
    } else {
        ev_close(h);
        if (s->xfer != X_NONE)
            ftp_xfer_done(s, 425, "TLS handshake failed on the data connection.");
    }
    return false;
}

/* Drop the first n bytes of the input buffer. */
static void consume(struct ftp_sess *s, size_t n)
{
    memmove(s->in, s->in + n, s->inlen - n);
    s->inlen -= n;
}

/*
 * Execute complete command lines from the input buffer, in order.  Stops
 * when no complete line remains, when replies back up (the client is not
 * reading), or when a command must wait for the running transfer.
 * Reentrant calls (from a transfer ending inside a command) return at once.
 * Returns nothing; errors mark the session broken.
 */
void ftp_process_lines(struct ftp_sess *s)
{
    char work[FTP_LINE_MAX];
    struct ftp_cmd cmd;

    if (s->in_process)
        return;
    s->in_process = true;
    for (int guard = 0; guard < FTP_LINE_MAX && !s->broken && !s->quitting &&
         !s->auth_pending; guard++) {
        if (obuf_pending(&s->out) > 16384)
            break;
        char *nl = memchr(s->in, '\n', s->inlen);
        if (!nl) {
            if (s->inlen == FTP_LINE_MAX) {
                s->inlen = 0;
                if (!s->discarding)
                    ftp_reply(s, 500, "Command line too long.");
                s->discarding = true;
            }
            break;
        }
        size_t ll = (size_t)(nl - s->in) + 1;
        if (s->discarding) {
            consume(s, ll);
            s->discarding = false;
            continue;
        }
        int r = ftp_parse_line(s->in, ll, work, sizeof(work), &cmd);
        if (r == 0 && s->xfer != X_NONE && cmd.id != FC_UNKNOWN &&
            !ftp_cmd_in_xfer(cmd.id))
            break;                     /* wait for the transfer to end */
        consume(s, ll);
        if (r < 0) {
            if (ll > 2)
                ftp_reply(s, 500, "Syntax error, command unrecognized.");
            continue;
        }
        ftp_dispatch(s, &cmd);
    }
    s->in_process = false;
}

/* Read from the control connection and run what arrived. */
static void ctl_read(struct ftp_sess *s)
{
    int r = io_recv_append(&s->ctl, s->in, &s->inlen, FTP_LINE_MAX);
    if (r == IO_EOF)
        log_debug("ftp %s: client closed control connection",
                  s->base.peer_str);
    if (r != IO_OK) {
        if (r != IO_AGAIN)
            s->broken = true;
        return;
    }
    conn_touch(&s->base);
    ftp_process_lines(s);
}

/* Dispatch readiness on any of a session's descriptors. */
void ftp_event(struct handler *h, uint32_t events)
{
    struct ftp_sess *s = (struct ftp_sess *)h->conn;

    switch (h->type) {
    case H_FTP_CTL:
        if (s->ctl.ssl && (s->ctl.tls_flags & TLS_HANDSHAKE)) {
            if (!ftp_tls_step(s, &s->ctl, "ftp"))
                break;
            events = EPOLLOUT;     /* done: send what is queued (220) */
        }
        if (events & EPOLLOUT) {
            if (obuf_flush(&s->ctl, &s->out) < 0)
                s->broken = true;
            else if (obuf_pending(&s->out) == 0 && !s->auth_pending)
                ftp_process_lines(s);      /* resume after back-pressure */
        }
        if (!s->broken && (events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
            ctl_read(s);
        break;
    case H_FTP_PASV:
        ftp_pasv_accept(s);
        break;
    case H_FTP_DATA:
        ftp_data_event(s, events);
        break;
    }
    if (s->broken || (s->quitting && obuf_pending(&s->out) == 0))
        conn_kill(&s->base);
    else
        ctl_update(s);
}

/*
 * New control connection: allocate the session and greet (with tls, the
 * implicit-FTPS listener's connections: the greeting waits for the TLS
 * handshake, and data connections are protected as after PROT P).
 */
void ftp_accept(int fd, const struct sockaddr_storage *peer, bool tls)
{
    struct ftp_sess *s = calloc(1, sizeof(*s));
    int one = 1;
    socklen_t llen = sizeof(s->local);
    if (!s) {
        close(fd);
        return;
    }
    s->base.kind = C_FTP;
    s->ctl = (struct handler){ .type = H_FTP_CTL, .fd = fd, .conn = &s->base };
    s->pasv = (struct handler){ .type = H_FTP_PASV, .fd = -1, .conn = &s->base };
    s->data = (struct handler){ .type = H_FTP_DATA, .fd = -1, .conn = &s->base };
    s->file_fd = -1;
    s->src.fd = -1;
    s->up.dirfd = s->up.fd = -1;
    s->peer = *peer;
    getsockname(fd, (struct sockaddr *)&s->local, &llen);
    setsockopt(fd, SOL_SOCKET, SO_OOBINLINE, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    sockaddr_to_str((const struct sockaddr *)peer, s->base.peer_str,
                    sizeof(s->base.peer_str));
    conn_register(&s->base);
    log_debug("ftp %s: connected%s", s->base.peer_str, tls ? " (implicit TLS)" : "");
    s->sec.can_tls = tls_enabled();
    if (tls) {
        if (tls_attach(&s->ctl, true) < 0) {
            conn_kill(&s->base);
            return;
        }
        s->sec.tls = s->sec.pbsz = s->sec.prot_p = true;
    }
    ftp_reply(s, 220, "tpd FTP server ready.");
    if (s->broken)
        conn_kill(&s->base);
    else
        ctl_update(s);
}

/* Idle timeout: say so (best effort) before event.c closes the session. */
void ftp_timeout(struct conn *c)
{
    struct ftp_sess *s = (struct ftp_sess *)c;
    static const char msg[] = "421 Timeout.\r\n";
    size_t n;
    /* over TLS only between records: a half-written reply must be retried
     * with the same bytes, and nothing can go before the handshake */
    if (!s->ctl.ssl || (!(s->ctl.tls_flags & TLS_HANDSHAKE) &&
                        obuf_pending(&s->out) == 0))
        (void)io_send(&s->ctl, msg, sizeof(msg) - 1, &n);
    log_info("ftp %s: idle timeout%s", c->peer_str,
             s->ctl.ssl && (s->ctl.tls_flags & TLS_HANDSHAKE)
                 ? " (during the TLS handshake)" : "");
}

/* Close every descriptor of the session (memory freed by ftp_free). */
void ftp_close(struct conn *c)
{
    struct ftp_sess *s = (struct ftp_sess *)c;
    ev_close(&s->ctl);
    ev_close(&s->pasv);
    ev_close(&s->data);
    if (s->file_fd >= 0)
        close(s->file_fd);
    s->file_fd = -1;
    vfs_upload_abort(&s->up);          /* an unfinished STOR leaves no trace */
    vfs_list_close(s->lister);
    s->lister = NULL;
    log_debug("ftp %s: closed", c->peer_str);
}

/* Release the session's memory. */
void ftp_free(struct conn *c)
{
    struct ftp_sess *s = (struct ftp_sess *)c;
    free(s->pending_user);
    free(s->cwd);
    free(s->rnfr);
    free(s->xbuf);
    obuf_free(&s->list);
    obuf_free(&s->out);
    free(s);
}
