/*
 * tls.c - TLS for tpd with OpenSSL: the server context (--tls-cert,
 * --tls-key; TLS 1.2 and 1.3, OpenSSL's defaults otherwise), the kernel-TLS
 * probe, --tls-info, attaching a server-side SSL object to an accepted
 * socket, the epoll interest of a TLS socket, and the list of TLS sockets
 * that hold decrypted plaintext epoll cannot see.
 *
 * kTLS: with SSL_OP_ENABLE_KTLS OpenSSL hands the record layer's send
 * side to the kernel after the handshake when the kernel has the "tls" TCP
 * upper-layer protocol (CONFIG_TLS) and the cipher suits it; then
 * SSL_sendfile() keeps RETR and GET zero-copy.  Whether it did is asked
 * per connection with BIO_get_ktls_send() (tls_done_log).  At start-up a
 * connected loopback pair tries setsockopt(TCP_ULP, "tls") to say whether
 * the kernel offers it at all (logged, and printed by --tls-info).
 *
 * Interest: during the handshake a TLS socket waits only for the direction
 * the handshake needs.  Afterwards the protocol's interest is used, plus
 * EPOLLOUT when the last SSL_read needs to write, plus EPOLLIN when the last
 * SSL_write needs to read.  Plaintext already decrypted into OpenSSL's
 * buffer (SSL_pending() > 0, left when a read filled the caller's buffer)
 * raises no readiness, nor does an EOF or error a read has taken from the
 * socket but reports only on the next call (TLS_RD_LATER, after the bytes
 * before it); such sockets, when they want to read, sit on a list
 * the event loop (event.c) serves as if EPOLLIN had fired (and it then
 * polls with a zero timeout).  Without read-ahead OpenSSL never buffers
 * more than the record it is reading, so nothing else can hide from
 * epoll.
 *
 * Calls OpenSSL and logging; reads g_cfg.
 */
#include "tpd.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

static SSL_CTX *g_ctx;
static bool g_ktls_send;                 /* kernel + OpenSSL offer kTLS send */
static char g_ktls_reason[192];
static struct handler *g_pend_head;      /* TLS_PENDQ list */

/* True when --tls-cert and --tls-key are configured (after tls_init). */
bool tls_enabled(void)
{
    return g_ctx != NULL;
}

/*
 * Does the kernel offer kTLS send?  Tries the "tls" TCP upper-layer
 * protocol on a connected loopback socket (what OpenSSL does after each
 * handshake).  Sets g_ktls_send and g_ktls_reason.
 */
static void ktls_probe(void)
{
#ifdef OPENSSL_NO_KTLS
    snprintf(g_ktls_reason, sizeof(g_ktls_reason),
             "OpenSSL built without kTLS (OPENSSL_NO_KTLS)");
    return;
#else
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof(a);
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int s = -1;
    const char *step = "socket";
    if (l < 0 || c < 0)
        goto fail;
    step = "loopback listen";
    if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0 ||
        getsockname(l, (struct sockaddr *)&a, &al) < 0)
        goto fail;
    step = "loopback connect";
    if (connect(c, (struct sockaddr *)&a, sizeof(a)) < 0)
        goto fail;
    s = accept(l, NULL, NULL);
    if (s < 0)
        goto fail;
    if (setsockopt(c, SOL_TCP, TCP_ULP, "tls", sizeof("tls")) == 0) {
        g_ktls_send = true;
        snprintf(g_ktls_reason, sizeof(g_ktls_reason),
                 "kernel has the TLS ULP; used per connection when the "
                 "cipher allows (BIO_get_ktls_send)");
    } else {
        int e = errno;
        snprintf(g_ktls_reason, sizeof(g_ktls_reason),
                 "%ssetsockopt TCP_ULP \"tls\": %s)",
                 e == ENOENT ? "kernel has no TLS ULP (" : "kTLS refused (",
                 strerrorname_np(e) ? strerrorname_np(e) : strerror(e));
    }
    close(s);
    close(c);
    close(l);
    return;
fail:
    snprintf(g_ktls_reason, sizeof(g_ktls_reason), "probe failed (%s: %s)",
             step, strerror(errno));
    if (s >= 0)
        close(s);
    if (c >= 0)
        close(c);
    if (l >= 0)
        close(l);
#endif
}

/* OpenSSL's reasons for the last failure, oldest first ("; "-joined), or
 * strerror(errno) when its error queue is empty. */
static const char *ossl_reason(char *buf, size_t sz)
{
    size_t o = 0;
    unsigned long e;
    buf[0] = '\0';
    while ((e = ERR_get_error()) != 0 && o + 8 < sz) {
        if (o)
            o += (size_t)snprintf(buf + o, sz - o, "; ");
        ERR_error_string_n(e, buf + o, sz - o);
        o += strlen(buf + o);
    }
    if (!o)
        snprintf(buf, sz, "%s", strerror(errno));
    ERR_clear_error();
    return buf;
}

/* Can `path` be opened for reading?  Logs "what path: reason" if not. */
static bool readable(const char *what, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        log_error("%s %s: %s", what, path, strerror(errno));
        return false;
    }
    fclose(f);
    return true;
}

/*
 * Probe kTLS and, when --tls-cert and --tls-key are set, build the server
 * context: TLS 1.2 minimum, no renegotiation, kTLS enabled, partial writes
 * and moving write buffers (the event loop retries with the same bytes from
 * wherever they are), idle buffers released (an idle TLS session holds no
 * record buffers), no server-side session cache (resumption works through
 * stateless tickets when a client offers one; tpd does not require it).
 * Returns 0, or -1 after logging the file and OpenSSL's reason (exit 2).
 */
int tls_init(void)
{
    char why[512];
    ktls_probe();
    bool cert = g_cfg.tls_cert[0], key = g_cfg.tls_key[0];
    if (cert != key) {
        log_error("--tls-cert and --tls-key must be given together");
        return -1;
    }
    if (!cert) {
        if (g_cfg.ftps_listen[0] || g_cfg.https_listen[0]) {
            log_error("--%s needs --tls-cert and --tls-key",
                      g_cfg.ftps_listen[0] ? "ftps-listen" : "https-listen");
            return -1;
        }
        return 0;
    }
    if (!readable("tls-cert", g_cfg.tls_cert) || !readable("tls-key", g_cfg.tls_key))
        return -1;
    g_ctx = SSL_CTX_new(TLS_server_method());
    if (!g_ctx) {
        log_error("SSL_CTX_new: %s", ossl_reason(why, sizeof(why)));
        return -1;
    }
    SSL_CTX_set_min_proto_version(g_ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(g_ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_ENABLE_KTLS);
    SSL_CTX_set_mode(g_ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                            SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_session_cache_mode(g_ctx, SSL_SESS_CACHE_OFF);
    if (SSL_CTX_use_certificate_chain_file(g_ctx, g_cfg.tls_cert) != 1) {
        log_error("tls-cert %s: %s", g_cfg.tls_cert, ossl_reason(why, sizeof(why)));
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(g_ctx, g_cfg.tls_key, SSL_FILETYPE_PEM) != 1) {
        log_error("tls-key %s: %s", g_cfg.tls_key, ossl_reason(why, sizeof(why)));
        goto fail;
    }
    if (SSL_CTX_check_private_key(g_ctx) != 1) {
        log_error("tls-key %s does not match tls-cert %s: %s", g_cfg.tls_key,
                  g_cfg.tls_cert, ossl_reason(why, sizeof(why)));
        goto fail;
    }
    if (g_ktls_send)
        log_info("TLS: %s; kTLS send available: %s",
                 OpenSSL_version(OPENSSL_VERSION), g_ktls_reason);
    else
        log_warn("TLS: %s; kTLS send not available: %s; TLS RETR/GET use "
                 "SSL_write from %d KiB pread buffers", OpenSSL_version(OPENSSL_VERSION),
                 g_ktls_reason, TLS_BUF_SIZE / 1024);
    return 0;
fail:
    SSL_CTX_free(g_ctx);
    g_ctx = NULL;
    return -1;
}

/* Print s as a JSON string (quotes, backslashes and controls escaped). */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

/*
 * --tls-info: one JSON line {"tls": true, "openssl": VERSION,
 * "ktls_send": BOOL, "ktls_reason": TEXT} (tls_init() must have probed).
 */
void tls_print_info(FILE *f)
{
    fputs("{\"tls\": true, \"openssl\": ", f);
    json_str(f, OpenSSL_version(OPENSSL_VERSION));
    fprintf(f, ", \"ktls_send\": %s, \"ktls_reason\": ",
            g_ktls_send ? "true" : "false");
    json_str(f, g_ktls_reason);
    fputs("}\n", f);
}

/*
 * Give h (an accepted or connected socket) a server-side TLS session; the
 * handshake is then run by the protocol code (tls_handshake).  tickets
 * false: no TLS 1.3 session tickets after the handshake (FTP data
 * connections: a client uploading never reads them, and closing a socket
 * with unread bytes sends a TCP RST that can destroy the end of the upload
 * before tpd has read it - seen with lftp; nor does any client resume a
 * session from a data connection).  Returns 0, or -1 when OpenSSL cannot
 * allocate one.
 */
int tls_attach(struct handler *h, bool tickets)
{
    SSL *ssl = SSL_new(g_ctx);
    if (!ssl)
        return -1;
    if (SSL_set_fd(ssl, h->fd) != 1) {     /* socket BIO, BIO_NOCLOSE */
        SSL_free(ssl);
        ERR_clear_error();
        return -1;
    }
    SSL_set_accept_state(ssl);
    if (!tickets)
        SSL_set_num_tickets(ssl, 0);
    h->ssl = ssl;
    h->tls_flags = TLS_HANDSHAKE;
    return 0;
}

/* Put h on the buffered-plaintext list (on) or take it off. */
static void pend_set(struct handler *h, bool on)
{
    if (on == !!(h->tls_flags & TLS_PENDQ))
        return;
    if (on) {
        h->pend_prev = NULL;
        h->pend_next = g_pend_head;
        if (g_pend_head)
            g_pend_head->pend_prev = h;
        g_pend_head = h;
        h->tls_flags |= TLS_PENDQ;
        return;
    }
    if (h->pend_prev)
        h->pend_prev->pend_next = h->pend_next;
    else
        g_pend_head = h->pend_next;
    if (h->pend_next)
        h->pend_next->pend_prev = h->pend_prev;
    h->pend_prev = h->pend_next = NULL;
    h->tls_flags &= ~TLS_PENDQ;
}

/* Free h's TLS session (no close_notify: see tls_close_notify). */
void tls_detach(struct handler *h)
{
    if (!h->ssl)
        return;
    pend_set(h, false);
    SSL_free(h->ssl);
    h->ssl = NULL;
    h->tls_flags = 0;
}

/*
 * After a finished handshake: ask OpenSSL whether the send side went to
 * the kernel (TLS_KTLS_SEND) and log protocol, cipher and kTLS state at
 * debug level ("what" names the connection: "ftp", "ftp-data", "http").
 */
void tls_done_log(struct handler *h, const char *what)
{
    bool k = BIO_get_ktls_send(SSL_get_wbio(h->ssl));
    if (k)
        h->tls_flags |= TLS_KTLS_SEND;
    log_debug("%s %s: %s %s, kTLS send %s", what,
              h->conn ? h->conn->peer_str : "-", SSL_get_version(h->ssl),
              SSL_get_cipher_name(h->ssl),
              k ? "on (SSL_sendfile)" : g_ktls_send ? "off for this session"
                                                    : "off (kernel)");
}

/*
 * The epoll interest of TLS socket h when the protocol wants `events`
 * (see the file comment), keeping h on the buffered-plaintext list while
 * it wants to read and OpenSSL holds plaintext.  Returns the interest.
 */
uint32_t tls_interest(struct handler *h, uint32_t events)
{
    if (h->tls_flags & TLS_HANDSHAKE) {
        pend_set(h, false);
        return h->tls_flags & TLS_HS_WRITE ? EPOLLOUT : EPOLLIN;
    }
    if ((events & EPOLLIN) && (h->tls_flags & TLS_RD_WANTS_WR))
        events |= EPOLLOUT;
    if ((events & EPOLLOUT) && (h->tls_flags & TLS_WR_WANTS_RD))
        events |= EPOLLIN;
    pend_set(h, (events & EPOLLIN) && (SSL_pending(h->ssl) > 0 ||
                                       (h->tls_flags & TLS_RD_LATER)));
    return events;
}

/*
 * Readiness `events` seen by the protocol on TLS socket h: a read blocked
 * on writing counts as readable once writable, and the other way round.
 */
uint32_t tls_events(const struct handler *h, uint32_t events)
{
    if (!h->ssl)
        return events;
    if ((events & EPOLLOUT) && (h->tls_flags & TLS_RD_WANTS_WR))
        events |= EPOLLIN;
    if ((events & EPOLLIN) && (h->tls_flags & TLS_WR_WANTS_RD))
        events |= EPOLLOUT;
    return events;
}

/* Is any socket on the buffered-plaintext list? */
bool tls_have_pending(void)
{
    return g_pend_head != NULL;
}

/*
 * Take up to max sockets off the buffered-plaintext list into out (the
 * event loop then runs them as readable; they return to the list through
 * tls_interest while plaintext remains).  Returns the count.
 */
int tls_pending_take(struct handler **out, int max)
{
    int n = 0;
    while (g_pend_head && n < max) {
        struct handler *h = g_pend_head;
        pend_set(h, false);
        out[n++] = h;
    }
    return n;
}

/* Free the server context (at exit). */
void tls_cleanup(void)
{
    SSL_CTX_free(g_ctx);
    g_ctx = NULL;
}
