/*
 * tls_io.c - the non-blocking OpenSSL steps tpd runs inside its event loop:
 * one handshake step, reading, writing and sending close_notify on a
 * server-side SSL object, each mapped to an io_status code.
 *
 * None of these blocks or loops waiting: an operation that needs the socket
 * returns IO_AGAIN and records which readiness it needs in h->tls_flags
 * (the handshake's direction, or a read that must write / a write that must
 * read, RFC 8446 KeyUpdate and alerts being the cases), and tls.c turns
 * those bits into the epoll interest set.  The functions only touch
 * h->ssl and h->tls_flags, so the fuzzer (fuzz/fuzz_tls.c) drives them
 * through memory BIOs.
 *
 * OpenSSL's error queue is per thread and must be empty before each call
 * for SSL_get_error() to be right: every step clears it first.
 *
 * Calls OpenSSL only (no other tpd module), so fuzz/fuzz_tls.c links it
 * alone.
 */
#include "tpd.h"

#include <errno.h>
#include <string.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

static char g_tls_err[160];

/* The reason of the last failed step (for logs), "" if none. */
const char *tls_last_error(void)
{
    return g_tls_err;
}

/* Record OpenSSL's reason for a failure (or `fallback`) in g_tls_err. */
static void note_error(const char *fallback)
{
    unsigned long e = ERR_peek_last_error();
    if (e)
        ERR_error_string_n(e, g_tls_err, sizeof(g_tls_err));
    else
        snprintf(g_tls_err, sizeof(g_tls_err), "%s", fallback);
    ERR_clear_error();
}

/*
 * Map the result `ret` of an SSL call to an io_status.  WANT_READ and
 * WANT_WRITE become IO_AGAIN; `other` is the flag set when the call needs
 * the direction it did not ask for (TLS_RD_WANTS_WR for reads,
 * TLS_WR_WANTS_RD for writes, 0 for the handshake).  A close_notify from
 * the peer is IO_EOF; a TCP EOF without close_notify (a possibly truncated
 * stream), a protocol error or a socket error is IO_SOCK_ERR with errno
 * EPROTO (or the socket's errno).
 */
static int map_result(struct handler *h, int ret, unsigned other, bool reading)
{
    int e = SSL_get_error(h->ssl, ret);
    switch (e) {
    case SSL_ERROR_WANT_READ:
        if (!reading)
            h->tls_flags |= other;
        return IO_AGAIN;
    case SSL_ERROR_WANT_WRITE:
        if (reading)
            h->tls_flags |= other;
        return IO_AGAIN;
    case SSL_ERROR_ZERO_RETURN:
        ERR_clear_error();
        return IO_EOF;
    case SSL_ERROR_SYSCALL:
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) {
            /* only after a failed syscall; treat as "try again later" */
            ERR_clear_error();
            return IO_AGAIN;
        }
        note_error(errno ? strerror(errno) : "unexpected EOF");
        if (!errno)
            errno = EPROTO;
        return IO_SOCK_ERR;
    default:
        note_error("TLS protocol error");
        errno = EPROTO;
        return IO_SOCK_ERR;
    }
}

/*
 * One step of the server handshake.  Returns IO_OK when it has finished
 * (TLS_HANDSHAKE cleared), IO_AGAIN when it waits for the socket
 * (TLS_HS_WRITE tells the direction), IO_SOCK_ERR when it failed (the
 * reason in tls_last_error()).
 */
int tls_handshake(struct handler *h)
{
    ERR_clear_error();
    errno = 0;
    int r = SSL_do_handshake(h->ssl);
    if (r == 1) {
        h->tls_flags &= ~(TLS_HANDSHAKE | TLS_HS_WRITE);
        return IO_OK;
    }
    int e = SSL_get_error(h->ssl, r);
    if (e == SSL_ERROR_WANT_READ) {
        h->tls_flags &= ~TLS_HS_WRITE;
        return IO_AGAIN;
    }
    if (e == SSL_ERROR_WANT_WRITE) {
        h->tls_flags |= TLS_HS_WRITE;
        return IO_AGAIN;
    }
    r = map_result(h, r, 0, true);
    return r == IO_EOF ? IO_SOCK_ERR : r;
}

/*
 * Read plaintext into buf until it holds cap bytes or nothing more can be
 * read without waiting; *got is the count (0 unless IO_OK: bytes read
 * before an EOF or an error are delivered first, with IO_OK, and the EOF
 * or error is reported by the next call; TLS_RD_LATER marks that, as no
 * socket readiness will).  Several records may be read
 * (each SSL_read returns at most one record, 16 KiB), so an upload buffer
 * fills as it would from recv().  Returns IO_OK (*got > 0), IO_AGAIN,
 * IO_EOF (close_notify received and no bytes read), or IO_SOCK_ERR.
 * Plaintext left in OpenSSL when buf is full is seen by SSL_pending()
 * (tls.c keeps such sockets on a list, as epoll cannot report it).
 */
int tls_read(struct handler *h, void *buf, size_t cap, size_t *got)
{
    char *p = buf;
    *got = 0;
    h->tls_flags &= ~(TLS_RD_WANTS_WR | TLS_RD_LATER);
    if (h->tls_flags & TLS_HANDSHAKE)
        return IO_AGAIN;
    while (*got < cap) {
        size_t n = 0;
        ERR_clear_error();
        errno = 0;
        if (SSL_read_ex(h->ssl, p + *got, cap - *got, &n) == 1) {
            *got += n;
            continue;
        }
        int r = map_result(h, 0, TLS_RD_WANTS_WR, true);
        if (*got > 0) {
            /* bytes first: the EOF or error recurs next call, but its
             * bytes have left the socket, so no readiness will say so */
            if (r != IO_AGAIN)
                h->tls_flags |= TLS_RD_LATER;
            return IO_OK;
        }
        return r;
    }
    return IO_OK;
}

/*
 * Write up to len bytes (SSL_MODE_ENABLE_PARTIAL_WRITE: whole records are
 * reported as they reach the socket); *n is the count written.  After
 * IO_AGAIN the caller must offer the same bytes again (they may move:
 * SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER).  Returns IO_OK, IO_AGAIN or
 * IO_SOCK_ERR (errno EPIPE when the peer has closed).
 */
int tls_write(struct handler *h, const void *buf, size_t len, size_t *n)
{
    *n = 0;
    h->tls_flags &= ~TLS_WR_WANTS_RD;
    if (h->tls_flags & TLS_HANDSHAKE)
        return IO_AGAIN;
    if (len == 0)
        return IO_OK;
    ERR_clear_error();
    errno = 0;
    if (SSL_write_ex(h->ssl, buf, len, n) == 1)
        return IO_OK;
    int r = map_result(h, 0, TLS_WR_WANTS_RD, false);
    if (r == IO_EOF) {
        errno = EPIPE;
        return IO_SOCK_ERR;
    }
    return r;
}

/*
 * Send close_notify (once; the peer's is not waited for).  Returns IO_OK
 * when it has been written, IO_AGAIN when the socket is full (wait for
 * EPOLLOUT and call again), IO_SOCK_ERR otherwise.  Not for a session
 * whose handshake did not finish or that failed: those are just closed.
 */
int tls_close_notify(struct handler *h)
{
    if (h->tls_flags & TLS_HANDSHAKE)
        return IO_SOCK_ERR;
    ERR_clear_error();
    errno = 0;
    int r = SSL_shutdown(h->ssl);
    if (r >= 0) {
        h->tls_flags |= TLS_SHUT_SENT;
        return IO_OK;
    }
    r = map_result(h, r, TLS_WR_WANTS_RD, false);
    return r == IO_EOF ? IO_SOCK_ERR : r;
}
