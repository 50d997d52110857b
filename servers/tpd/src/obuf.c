/*
 * obuf.c - growable output buffers (struct obuf): FTP control replies,
 * HTTP response heads and small bodies, listing chunks; appended to with
 * a pending-bytes limit and flushed to a socket.  Calls io.c (io_send)
 * and libc only.
 */
#include "tpd.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes still waiting in b. */
size_t obuf_pending(const struct obuf *b)
{
    return b->len - b->off;
}

/* Append to b; fails (-1) if the pending data would exceed `limit`. */
int obuf_append(struct obuf *b, const void *data, size_t len, size_t limit)
{
    if (obuf_pending(b) + len > limit)
        return -1;
    if (b->off > 0 && b->off == b->len)
        b->off = b->len = 0;
    if (b->len + len > b->cap) {
        if (b->off > 0) {                    /* compact first */
            memmove(b->data, b->data + b->off, b->len - b->off);
            b->len -= b->off;
            b->off = 0;
        }
        if (b->len + len > b->cap) {
            size_t ncap = b->cap ? b->cap : 256;
            while (ncap < b->len + len)
                ncap *= 2;
            char *n = realloc(b->data, ncap);
            if (!n)
                return -1;
            b->data = n;
            b->cap = ncap;
        }
    }
    memcpy(b->data + b->len, data, len);
    b->len += len;
    return 0;
}

/*
 * printf-style append.  The whole formatted text is appended or nothing:
 * text longer than the stack buffer is formatted again into a heap buffer
 * (a response head with a 12 KiB Location must never be cut short, or the
 * next pipelined response would be read as part of it).  Returns 0, or -1
 * when formatting fails, memory runs out or b would pass limit.
 */
int obuf_printf(struct obuf *b, size_t limit, const char *fmt, ...)
{
    char tmp[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    if ((size_t)n < sizeof(tmp))
        return obuf_append(b, tmp, (size_t)n, limit);
    if (b->len - b->off + (size_t)n > limit)
        return -1;
    char *big = malloc((size_t)n + 1);
    if (!big)
        return -1;
    va_start(ap, fmt);
    int m = vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    int r = m == n ? obuf_append(b, big, (size_t)n, limit) : -1;
    free(big);
    return r;
}

/*
 * Write as much of b as socket h takes (send(), or SSL_write on a TLS
 * socket; nothing before its handshake is done).  Returns 1 when b is
 * empty, 0 when the socket is full, -1 on a write error.  Small buffers are
 * released once drained so idle sessions hold no output memory.
 */
int obuf_flush(struct handler *h, struct obuf *b)
{
    for (int guard = 0; b->off < b->len && guard < 4096; guard++) {
        size_t n;
        int r = io_send(h, b->data + b->off, b->len - b->off, &n);
        if (r == IO_AGAIN)
            return 0;
        if (r != IO_OK)
            return -1;
        b->off += n;
    }
    if (b->off < b->len)
        return 0;
    b->off = b->len = 0;
    if (b->cap > 4096) {
        obuf_free(b);
    }
    return 1;
}

/* Release b's memory. */
void obuf_free(struct obuf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->off = b->cap = 0;
}
