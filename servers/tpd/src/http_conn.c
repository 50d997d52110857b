/*
 * http_conn.c - tpd's HTTP/1.1 connections: accept, the per-connection
 * state machine, reading request heads and upload bodies, sending
 * responses (the queued head, then the file body with sendfile() or the
 * streamed listing), persistent connections with pipelining, the
 * lingering close, idle timeout and release.
 *
 * Per-connection state machine (all non-blocking, driven by http_event):
 *   HS_READ   accumulate the request head in a fixed HTTP_HDR_MAX buffer
 *   HS_BODY   receive an upload body into a 256 KiB buffer, write() it
 *   HS_SEND   send the response head (obuf) then the file via sendfile()
 *   HS_DRAIN  after a "Connection: close" response: write side shut down,
 *             unread input discarded until EOF (so the kernel does not
 *             reset the connection under the response)
 *   HS_SHUT   (TLS) close_notify waits for room in the socket, then
 *             HS_DRAIN
 *
 * HTTPS (--https-listen) runs the same machine over TLS: the handshake
 * comes first (in the loop, nothing read or sent before it is done), a
 * GET body goes out with SSL_sendfile() under kTLS or else pread +
 * SSL_write through a TLS_BUF_SIZE buffer held only while a body is
 * being sent, and a closing response ends with close_notify.
 *
 * Calls http_handlers.c (http_try_request, http_body_feed,
 * http_body_result), io.c, obuf.c, vfs.c (listing reads, upload abort),
 * tls.c / tls_io.c, event.c (interest, connection bookkeeping) and
 * logging; reads g_cfg.
 */
#include "http_int.h"

#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

/* Drop the first n bytes of the request buffer. */
void http_consume(struct http_conn *c, size_t n)
{
    memmove(c->in, c->in + n, c->inlen - n);
    c->inlen -= n;
}

/*
 * Closing response sent: (TLS) close_notify, then shut the write side and
 * drain input (HS_DRAIN); HS_SHUT while close_notify waits for room.
 */
static void start_close(struct http_conn *c)
{
    if (c->h.ssl) {
        int r = tls_close_notify(&c->h);
        if (r == IO_AGAIN) {
            c->state = HS_SHUT;
            return;
        }
        if (r != IO_OK) {
            c->broken = true;
            return;
        }
    }
    shutdown(c->h.fd, SHUT_WR);
    c->state = HS_DRAIN;
    c->drained = 0;
}

/* Response fully sent: log, then keep-alive or start the lingering close. */
static void response_done(struct http_conn *c)
{
    log_info("http %s %s %d %llu", c->base.peer_str, c->method, c->status,
             (unsigned long long)c->sent);
    free(c->tlsbuf);
    c->tlsbuf = NULL;
    if (!c->keepalive) {
        start_close(c);
        return;
    }
    c->state = HS_READ;
}

/* Send the response head and file body.  True when the response is done. */
static bool send_some(struct http_conn *c)
{
    if (obuf_pending(&c->out)) {
        int r = obuf_flush(&c->h, &c->out);
        if (r < 0) {
            c->broken = true;
            return false;
        }
        if (r == 0)
            return false;
    }
    if (c->file_fd >= 0) {
        char buf[65536];               /* --no-sendfile bounce buffer */
        unsigned fl = g_cfg.use_sendfile ? IO_SENDFILE : IO_NOKEEP;
        int r;
        if (c->h.ssl && !(g_cfg.use_sendfile && (c->h.tls_flags & TLS_KTLS_SEND))) {
            /* TLS without kTLS: SSL_write must be offered the same bytes
             * again after IO_AGAIN, so the buffer outlives the wakeup */
            if (!c->tlsbuf && !(c->tlsbuf = malloc(TLS_BUF_SIZE))) {
                c->broken = true;
                return false;
            }
            c->body.buf = c->tlsbuf;
            c->body.cap = TLS_BUF_SIZE;
            r = io_send_file(&c->h, &c->body, SEND_BUDGET, 0, &c->sent);
        } else {
            c->body.buf = buf;
            c->body.cap = sizeof(buf);
            r = io_send_file(&c->h, &c->body, SEND_BUDGET,
                             c->h.ssl ? IO_SENDFILE : fl, &c->sent);
            c->body.buf = NULL;
        }
        if (r != IO_OK && r != IO_AGAIN) {
            /* error or file shrank: the length promised is wrong, close */
            c->broken = true;
            return false;
        }
        conn_touch(&c->base);
        if (r == IO_AGAIN)
            return false;
        close(c->file_fd);
        c->file_fd = -1;
    }
    if (c->lister) {
        /* next piece of a streamed listing, once the last one has gone */
        char chunk[LIST_CHUNK];
        ssize_t n = vfs_list_read(c->lister, chunk, sizeof(chunk));
        int r = 0;
        if (n > 0 && c->chunked_out)
            r = obuf_printf(&c->out, HTTP_OBUF_LIMIT, "%zx\r\n", (size_t)n);
        if (n > 0 && r == 0)
            r = obuf_append(&c->out, chunk, (size_t)n, HTTP_OBUF_LIMIT);
        if (n > 0 && r == 0 && c->chunked_out)
            r = obuf_append(&c->out, "\r\n", 2, HTTP_OBUF_LIMIT);
        if (n == 0) {
            vfs_list_close(c->lister);
            c->lister = NULL;
            if (c->chunked_out)
                r = obuf_append(&c->out, "0\r\n\r\n", 5, HTTP_OBUF_LIMIT);
        }
        if (r < 0) {
            c->broken = true;
            return false;
        }
        c->sent += (uint64_t)(n > 0 ? n : 0);
        conn_touch(&c->base);
        return true;                   /* loop again: flush what was queued */
    }
    response_done(c);
    return true;
}

/* Read more of the request head. */
static void read_head(struct http_conn *c)
{
    int r = io_recv_append(&c->h, c->in, &c->inlen, HTTP_HDR_MAX);
    if (r != IO_OK) {
        if (r != IO_AGAIN)
            c->broken = true;
        return;
    }
    conn_touch(&c->base);
}

/* Read upload body bytes from the socket (up to 4 MiB per wakeup). */
static void read_body(struct http_conn *c)
{
    if (!c->upbuf && !(c->upbuf = malloc(XFER_BUF_SIZE))) {
        c->broken = true;
        return;
    }
    for (int i = 0; i < 16 && c->state == HS_BODY; i++) {
        size_t cap = XFER_BUF_SIZE;
        if (!c->up_chunked && (int64_t)cap > c->up_remaining)
            cap = (size_t)c->up_remaining;
        size_t n;
        int r = io_recv(&c->h, c->upbuf, cap, &n);
        if (r == IO_EOF) {
            log_info("http %s: client closed during upload",
                     c->base.peer_str);
            c->broken = true;
            return;
        }
        if (r != IO_OK) {
            if (r != IO_AGAIN)
                c->broken = true;
            break;
        }
        conn_touch(&c->base);
        size_t used = 0;
        r = http_body_feed(c, c->upbuf, n, &used);
        if (r > 0 && used < n) {
            /* pipelined bytes after a chunked body: keep them if they fit */
            size_t left = n - used;
            if (c->inlen + left <= HTTP_HDR_MAX) {
                memcpy(c->in + c->inlen, c->upbuf + used, left);
                c->inlen += left;
            } else {
                c->keepalive = false;
            }
        }
        http_body_result(c, r);
    }
}

/* Discard input after a closing response until EOF (bounded; over TLS
 * the plaintext, so nothing stays buffered in OpenSSL). */
static void drain(struct http_conn *c)
{
    char buf[16384];
    for (int i = 0; i < 8; i++) {
        size_t n;
        int r = io_recv(&c->h, buf, sizeof(buf), &n);
        if (r == IO_OK) {
            c->drained += n;
            if (c->drained > (1u << 20)) {
                c->broken = true;
                return;
            }
            continue;
        }
        if (r == IO_AGAIN)
            return;
        c->broken = true;             /* EOF or error: done */
        return;
    }
}

/* Set epoll interest from the state. */
static void http_update(struct http_conn *c)
{
    uint32_t ev = 0;
    switch (c->state) {
    case HS_READ:
        if (c->inlen < HTTP_HDR_MAX)
            ev = EPOLLIN;
        if (c->kick)
            ev |= EPOLLOUT;
        break;
    case HS_BODY:
    case HS_DRAIN:
        ev = EPOLLIN;
        break;
    case HS_SEND:
    case HS_SHUT:
        ev = EPOLLOUT;
        break;
    }
    ev_set(&c->h, ev);
}

/* Readiness on an HTTP connection: run the state machine. */
void http_event(struct handler *h, uint32_t events)
{
    struct http_conn *c = (struct http_conn *)h->conn;
    bool readable = events & (EPOLLIN | EPOLLHUP | EPOLLERR);

    c->kick = false;
    if (c->h.ssl && (c->h.tls_flags & TLS_HANDSHAKE)) {
        int r = tls_handshake(&c->h);
        if (r == IO_OK) {
            tls_done_log(&c->h, "https");
        } else {
            if (r != IO_AGAIN) {
                log_info("http %s: TLS handshake failed: %s",
                         c->base.peer_str, tls_last_error());
                c->broken = true;
            }
            goto out;
        }
        readable = false;      /* the request comes with the next wakeup */
    }
    if (c->state == HS_SHUT && (events & EPOLLOUT))
        start_close(c);
    if (readable) {
        if (c->state == HS_READ)
            read_head(c);
        else if (c->state == HS_BODY)
            read_body(c);
        else if (c->state == HS_DRAIN)
            drain(c);
    }
    int guard;
    for (guard = 0; guard < 32 && !c->broken; guard++) {
        if (c->state == HS_READ) {
            if (!http_try_request(c))
                break;
        } else if (c->state == HS_SEND) {
            if (!send_some(c))
                break;
        } else {
            break;
        }
    }
    if (guard == 32 && c->state == HS_READ && c->inlen > 0)
        c->kick = true;
out:
    if (c->broken)
        conn_kill(&c->base);
    else
        http_update(c);
}

/* New HTTP connection (tls: from the HTTPS listener, handshake first). */
void http_accept(int fd, const struct sockaddr_storage *peer, bool tls)
{
    struct http_conn *c = malloc(sizeof(*c));
    if (!c) {
        close(fd);
        return;
    }
    memset(c, 0, offsetof(struct http_conn, in));
    /* A response is a head written with write() and a body sent with sendfile():
     * with Nagle on, the body's last partial segment waits for the ACK of the head,
     * which a keep-alive client delays (~40 ms on Linux) as it has nothing to send
     * until the response is complete: 22 GETs/s on one connection.  Every response
     * is built whole before it is written, so Nagle has nothing to coalesce here
     * (as on the FTP control connection); the cost is the head's own segment. */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->base.kind = C_HTTP;
    c->h = (struct handler){ .type = H_HTTP, .fd = fd, .conn = &c->base };
    c->file_fd = -1;
    c->up_fd = -1;
    c->up.dirfd = c->up.fd = -1;
    c->state = HS_READ;
    sockaddr_to_str((const struct sockaddr *)peer, c->base.peer_str,
                    sizeof(c->base.peer_str));
    conn_register(&c->base);
    if (tls && tls_attach(&c->h, true) < 0) {
        conn_kill(&c->base);
        return;
    }
    http_update(c);
}

/* Idle timeout (event.c closes the connection afterwards). */
void http_timeout(struct conn *c)
{
    log_debug("http %s: idle timeout", c->peer_str);
}

/* Close the connection's descriptors. */
void http_close(struct conn *cc)
{
    struct http_conn *c = (struct http_conn *)cc;
    ev_close(&c->h);
    if (c->file_fd >= 0)
        close(c->file_fd);
    if (c->up_fd >= 0)
        close(c->up_fd);
    c->file_fd = c->up_fd = -1;
    vfs_upload_abort(&c->up);          /* an unfinished PUT leaves no trace */
    vfs_list_close(c->lister);
    c->lister = NULL;
}

/* Release the connection's memory. */
void http_free(struct conn *cc)
{
    struct http_conn *c = (struct http_conn *)cc;
    obuf_free(&c->out);
    free(c->upbuf);
    free(c->tlsbuf);
    free(c->location);
    free(c);
}
