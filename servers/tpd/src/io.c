/*
 * io.c - the transfer loops shared by FTP and HTTP: sending a file range to
 * a socket (sendfile(), or pread+send through a bounce buffer with
 * --no-sendfile) at most `budget` bytes per wakeup, receiving from a socket
 * into a buffer, and writing a buffer whole to a file.  All descriptors are
 * non-blocking sockets or regular files; EINTR is retried, EAGAIN is
 * reported as IO_AGAIN, and the callers turn the codes into protocol
 * replies.
 *
 * A socket with TLS (h->ssl) goes through tls_io.c instead of send/recv:
 * a file range with SSL_sendfile() when the kernel took the send side
 * (kTLS), otherwise pread into the caller's bounce buffer + SSL_write.
 *
 * Calls tls_io.c (the steps on TLS sockets) and libc only.
 */
#include "tpd.h"

#include <errno.h>
#include <openssl/ssl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

/*
 * Write up to len bytes of p to h (send(), or SSL_write on a TLS socket);
 * *n is the count written.  Returns IO_OK (*n may be < len), IO_AGAIN
 * (nothing written: the socket is full, or the TLS handshake is not done)
 * or IO_SOCK_ERR (errno).  EINTR is retried.
 */
int io_send(struct handler *h, const void *p, size_t len, size_t *n)
{
    *n = 0;
    if (h->ssl)
        return tls_write(h, p, len, n);
    for (;;) {
        ssize_t r = send(h->fd, p, len, MSG_NOSIGNAL);
        if (r >= 0) {
            *n = (size_t)r;
            return IO_OK;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return IO_AGAIN;
        return IO_SOCK_ERR;
    }
}

/* kTLS: SSL_sendfile() up to want bytes of fd from *off.  Returns the
 * count (advancing *off), 0 with errno EAGAIN when the socket is full, or
 * -1 with errno set. */
static ssize_t ktls_sendfile(struct handler *h, int fd, off_t *off, size_t want)
{
#ifdef OPENSSL_NO_KTLS
    (void)h; (void)fd; (void)off; (void)want;
    errno = EOPNOTSUPP;
    return -1;
#else
    errno = 0;
    ossl_ssize_t n = SSL_sendfile(h->ssl, fd, *off, want, 0);
    if (n > 0) {
        *off += n;
        return (ssize_t)n;
    }
    int e = SSL_get_error(h->ssl, (int)n);
    if (e == SSL_ERROR_WANT_WRITE || errno == EAGAIN) {
        errno = EAGAIN;
        return -1;
    }
    if (!errno)
        errno = EPROTO;
    return -1;
#endif
}

/*
 * Send the rest of x's file range to socket h, at most `budget` bytes this
 * call, and add the bytes sent to *sent.  With IO_SENDFILE the kernel
 * copies from the page cache (on a TLS socket only when kTLS took its send
 * side: SSL_sendfile); otherwise the file is read into x->buf (which the
 * caller must provide) and written with send() or SSL_write.
 * With IO_NOKEEP the buffer does not survive the call (it lives on the
 * caller's stack): bytes read but not sent are given back by moving x->off
 * back, and read again next time.
 *
 * Returns IO_OK when the whole range has been sent; IO_AGAIN when the
 * socket is full or the budget is spent (wait for EPOLLOUT); IO_EOF when
 * sendfile() found the file shorter than x->end (it shrank); IO_FILE_ERR
 * when reading the file failed (errno; EIO when pread() found the end
 * early); IO_SOCK_ERR when the socket failed (errno).
 */
int io_send_file(struct handler *h, struct io_src *x, size_t budget,
                 unsigned flags, uint64_t *sent)
{
    int ret = IO_AGAIN;
    if (h->ssl && !(h->tls_flags & TLS_KTLS_SEND))
        flags &= ~IO_SENDFILE;
    if (h->ssl && (h->tls_flags & TLS_HANDSHAKE))
        return IO_AGAIN;
    for (int guard = 0; guard < 1024; guard++) {
        if (x->off >= x->end && x->pos >= x->len) {
            ret = IO_OK;
            break;
        }
        if (budget == 0)
            break;
        ssize_t n;
        bool full = false;
        if (flags & IO_SENDFILE) {
            size_t want = (size_t)(x->end - x->off);
            if (want > budget)
                want = budget;
            n = h->ssl ? ktls_sendfile(h, x->fd, &x->off, want)
                       : sendfile(h->fd, x->fd, &x->off, want);
            /* a short count means the socket buffer is full: wait for
             * EPOLLOUT rather than spend a syscall on EAGAIN */
            full = n > 0 && (size_t)n < want;
            if (n == 0) {
                ret = IO_EOF;
                break;
            }
        } else {
            if (x->pos >= x->len) {
                size_t want = (size_t)(x->end - x->off);
                if (want > x->cap)
                    want = x->cap;
                if ((flags & IO_NOKEEP) && want > budget)
                    want = budget;      /* what is read is meant to go now */
                ssize_t r = pread(x->fd, x->buf, want, x->off);
                if (r < 0 && errno == EINTR)
                    continue;
                if (r <= 0) {
                    if (r == 0)
                        errno = EIO;
                    ret = IO_FILE_ERR;
                    break;
                }
                x->off += r;
                x->len = (size_t)r;
                x->pos = 0;
            }
            size_t w, req = x->len - x->pos;
            int r = io_send(h, x->buf + x->pos, req, &w);
            if (r == IO_AGAIN) {
                errno = EAGAIN;
                break;
            }
            if (r != IO_OK) {
                ret = IO_SOCK_ERR;
                break;
            }
            n = (ssize_t)w;
            x->pos += w;
            /* send() taking less means the socket is full; SSL_write in
             * partial-write mode returns after each 16 KiB record */
            full = !h->ssl && w < req;
            if (n == 0)
                break;
        }
        if (n > 0) {
            *sent += (uint64_t)n;
            budget = (size_t)n >= budget ? 0 : budget - (size_t)n;
            if (full && (x->off < x->end || x->pos < x->len))
                break;
            continue;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            break;
        ret = IO_SOCK_ERR;
        break;
    }
    if ((flags & IO_NOKEEP) && x->pos < x->len) {
        int e = errno;
        x->off -= (off_t)(x->len - x->pos);
        errno = e;
    }
    if (flags & IO_NOKEEP)
        x->len = x->pos = 0;
    return ret;
}

/*
 * Receive at most cap bytes from socket h into buf (recv(), or decrypted
 * plaintext of a TLS socket: several records until buf is full or the
 * socket is empty); *got is set to the count.
 * Returns IO_OK (*got > 0), IO_EOF (the peer closed its side), IO_AGAIN
 * (nothing to read now) or IO_SOCK_ERR (errno).  EINTR is retried.
 */
int io_recv(struct handler *h, void *buf, size_t cap, size_t *got)
{
    *got = 0;
    if (h->ssl)
        return tls_read(h, buf, cap, got);
    for (;;) {
        ssize_t n = recv(h->fd, buf, cap, 0);
        if (n > 0) {
            *got = (size_t)n;
            return IO_OK;
        }
        if (n == 0)
            return IO_EOF;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return IO_AGAIN;
        return IO_SOCK_ERR;
    }
}

/*
 * Receive into the free tail of buf (*len bytes used of cap) and add the
 * count to *len.  Returns as io_recv; IO_AGAIN also when buf is full.
 */
int io_recv_append(struct handler *h, char *buf, size_t *len, size_t cap)
{
    size_t got;
    if (*len >= cap)
        return IO_AGAIN;
    int r = io_recv(h, buf + *len, cap - *len, &got);
    *len += got;
    return r;
}

/*
 * Write all n bytes of p to the file fd (retrying short writes and EINTR).
 * Returns IO_OK, or IO_FILE_ERR with errno set (ENOSPC when write()
 * returned 0).
 */
int io_write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, c + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = ENOSPC;
            return IO_FILE_ERR;
        }
        off += (size_t)w;
    }
    return IO_OK;
}
