/*
 * io.c - the transfer loops shared by FTP and HTTP: sending a file range to
 * a socket (sendfile(), or pread+send through a bounce buffer with
 * --no-sendfile) at most `budget` bytes per wakeup, receiving from a socket
 * into a buffer, and writing a buffer whole to a file.  All descriptors are
 * non-blocking sockets or regular files; EINTR is retried, EAGAIN is
 * reported as IO_AGAIN, and the callers turn the codes into protocol
 * replies.
 */
#include "tpd.h"

#include <errno.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

/*
 * Send the rest of x's file range to sock, at most `budget` bytes this
 * call, and add the bytes sent to *sent.  With IO_SENDFILE the kernel
 * copies from the page cache; otherwise the file is read into x->buf.
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
int io_send_file(int sock, struct io_src *x, size_t budget, unsigned flags,
                 uint64_t *sent)
{
    int ret = IO_AGAIN;
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
            n = sendfile(sock, x->fd, &x->off, want);
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
            n = send(sock, x->buf + x->pos, x->len - x->pos, MSG_NOSIGNAL);
            if (n > 0)
                x->pos += (size_t)n;
        }
        if (n > 0) {
            *sent += (uint64_t)n;
            budget = (size_t)n >= budget ? 0 : budget - (size_t)n;
            if (full && x->off < x->end)
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
 * Receive at most cap bytes from sock into buf; *got is set to the count.
 * Returns IO_OK (*got > 0), IO_EOF (the peer closed its side), IO_AGAIN
 * (nothing to read now) or IO_SOCK_ERR (errno).  EINTR is retried.
 */
int io_recv(int sock, void *buf, size_t cap, size_t *got)
{
    *got = 0;
    for (;;) {
        ssize_t n = recv(sock, buf, cap, 0);
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
int io_recv_append(int sock, char *buf, size_t *len, size_t cap)
{
    size_t got;
    if (*len >= cap)
        return IO_AGAIN;
    int r = io_recv(sock, buf + *len, cap - *len, &got);
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
