/*
 * fuzz_tls.c - libFuzzer target for tpd's TLS state machine (src/tls_io.c)
 * and the RFC 4217 command states (ftp_sec_cmd, src/ftp_parse.c).
 *
 * The first input byte picks a mode, the rest is the data:
 *   0  a server handshake fed the bytes (in pieces whose sizes come from
 *      the input) through memory BIOs: tls_handshake() must report
 *      IO_OK / IO_AGAIN / IO_SOCK_ERR consistently with TLS_HANDSHAKE,
 *      and reads/writes before the end of the handshake must wait
 *   1  a real handshake with an OpenSSL client (memory BIOs, TLS 1.2 or
 *      1.3 by a bit of the input), one valid application record, then the
 *      bytes as further records: tls_read() with small buffers (so
 *      plaintext stays in OpenSSL: SSL_pending) must never overrun or
 *      lose bytes before the valid record is read whole, and tls_write()
 *      and tls_close_notify() must not fail in unexpected ways
 *   2  FTP command lines (split at '\n') through ftp_parse_line() and, for
 *      AUTH / PBSZ / PROT / PASS, the session's security state: the reply
 *      codes are the documented ones, and PROT P implies PBSZ implies TLS
 *      implies a configured certificate, whatever the order of commands
 */
#include "ftp_int.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static SSL_CTX *g_srv, *g_cli;

/* The server context as tls_init() builds it, with a fresh self-signed
 * P-256 certificate (no files). */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    EVP_PKEY *pkey = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    if (!pkey || !x)
        abort();
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -60);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, pkey);
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
                               (const unsigned char *)"fuzz", -1, -1, 0);
    X509_set_issuer_name(x, n);
    if (!X509_sign(x, pkey, EVP_sha256()))
        abort();
    g_srv = SSL_CTX_new(TLS_server_method());
    g_cli = SSL_CTX_new(TLS_client_method());
    if (!g_srv || !g_cli || SSL_CTX_use_certificate(g_srv, x) != 1 ||
        SSL_CTX_use_PrivateKey(g_srv, pkey) != 1)
        abort();
    SSL_CTX_set_min_proto_version(g_srv, TLS1_2_VERSION);
    SSL_CTX_set_options(g_srv, SSL_OP_NO_RENEGOTIATION | SSL_OP_ENABLE_KTLS);
    SSL_CTX_set_mode(g_srv, SSL_MODE_ENABLE_PARTIAL_WRITE |
                            SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_session_cache_mode(g_srv, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_verify(g_cli, SSL_VERIFY_NONE, NULL);
    X509_free(x);
    EVP_PKEY_free(pkey);
    return 0;
}

/* A server SSL on two memory BIOs (*in: what it reads, *out: writes). */
static SSL *new_server(BIO **in, BIO **out, struct handler *h)
{
    SSL *ssl = SSL_new(g_srv);
    *in = BIO_new(BIO_s_mem());
    *out = BIO_new(BIO_s_mem());
    if (!ssl || !*in || !*out)
        abort();
    BIO_set_mem_eof_return(*in, -1);           /* empty = would block */
    BIO_set_mem_eof_return(*out, -1);
    SSL_set_bio(ssl, *in, *out);               /* ssl owns both */
    SSL_set_accept_state(ssl);
    memset(h, 0, sizeof(*h));
    h->fd = -1;
    h->ssl = ssl;
    h->tls_flags = TLS_HANDSHAKE;
    return ssl;
}

/* Move what `from` holds into `to` (bounded). */
static void pump(BIO *from, BIO *to)
{
    char buf[4096];
    for (int i = 0; i < 64; i++) {
        int n = BIO_read(from, buf, sizeof(buf));
        if (n <= 0)
            return;
        if (BIO_write(to, buf, n) != n)
            abort();
    }
}

static void check_status(int r)
{
    if (r != IO_OK && r != IO_AGAIN && r != IO_EOF && r != IO_SOCK_ERR)
        abort();
}

/* Mode 0: handshake fed arbitrary bytes in arbitrary pieces. */
static void fuzz_handshake(const uint8_t *d, size_t n)
{
    struct handler h;
    BIO *in, *out;
    SSL *ssl = new_server(&in, &out, &h);
    char buf[64];
    size_t got;
    for (int step = 0; step < 64 && n > 0; step++) {
        size_t piece = 1 + d[0] % 200;
        d++, n--;
        if (piece > n)
            piece = n;
        BIO_write(in, d, (int)piece);
        d += piece, n -= piece;
        int r = tls_handshake(&h);
        check_status(r);
        if (r == IO_EOF)
            abort();                   /* a handshake has no clean EOF */
        if ((r == IO_OK) == !!(h.tls_flags & TLS_HANDSHAKE))
            abort();
        if (r == IO_SOCK_ERR) {
            if (tls_last_error()[0] == '\0')
                abort();
            break;
        }
        if (r == IO_AGAIN) {
            /* nothing may be read or written before the handshake */
            if (tls_read(&h, buf, sizeof(buf), &got) != IO_AGAIN || got)
                abort();
            if (tls_write(&h, "x", 1, &got) != IO_AGAIN || got)
                abort();
        }
        (void)BIO_reset(out);
        if (r == IO_OK)
            break;
    }
    SSL_free(ssl);
    ERR_clear_error();
}

/* Mode 1: a real handshake, one valid record, then arbitrary records. */
static void fuzz_records(const uint8_t *d, size_t n)
{
    struct handler h;
    BIO *in, *out;
    SSL *srv = new_server(&in, &out, &h);
    SSL *cli = SSL_new(g_cli);
    BIO *cin = BIO_new(BIO_s_mem()), *cout = BIO_new(BIO_s_mem());
    static const char msg[] = "STOR some/file.bin\r\n";
    char buf[sizeof(msg) + 64];
    size_t got = 0, w;
    if (!cli || !cin || !cout)
        abort();
    BIO_set_mem_eof_return(cin, -1);
    BIO_set_mem_eof_return(cout, -1);
    SSL_set_bio(cli, cin, cout);
    SSL_set_connect_state(cli);
    if (n && (d[0] & 1))
        SSL_set_max_proto_version(cli, TLS1_2_VERSION);
    int done = 0;
    for (int i = 0; i < 16 && done != 3; i++) {
        if (SSL_do_handshake(cli) == 1)
            done |= 1;
        pump(cout, in);
        int r = tls_handshake(&h);
        if (r == IO_SOCK_ERR)
            abort();                   /* a real client must get through */
        if (r == IO_OK)
            done |= 2;
        pump(out, cin);
    }
    if (done != 3)
        abort();
    if (SSL_write(cli, msg, (int)sizeof(msg) - 1) != (int)sizeof(msg) - 1)
        abort();
    pump(cout, in);
    if (n)
        BIO_write(in, d + 1, (int)(n - 1));
    /* read the valid record in small pieces: the rest waits in OpenSSL */
    size_t cap = 1 + (n > 1 ? d[1] % 16 : 3);
    int r = IO_OK;
    bool again = true;       /* would the event loop call tls_read now? */
    for (int i = 0; i < 4096 && got < sizeof(buf); i++) {
        size_t step = cap;
        if (step > sizeof(buf) - got)
            step = sizeof(buf) - got;
        size_t k;
        r = tls_read(&h, buf + got, step, &k);
        check_status(r);
        if (k > step || (r != IO_OK && k))
            abort();
        /* an EOF or error must not hide: after a read that returned bytes,
         * what the next one reports needs input left in the BIO (socket
         * readiness), plaintext in OpenSSL or TLS_RD_LATER (tls.c's list) */
        if ((r == IO_EOF || r == IO_SOCK_ERR) && !again)
            abort();
        again = BIO_ctrl_pending(in) > 0 || SSL_pending(srv) > 0 ||
                (h.tls_flags & TLS_RD_LATER);
        got += k;
        if (r != IO_OK)
            break;
        if (k == step && got < sizeof(msg) - 1 && SSL_pending(srv) <= 0 &&
            r == IO_OK && BIO_ctrl_pending(in) == 0)
            abort();                   /* bytes of the record went missing */
    }
    if (got < sizeof(msg) - 1 || memcmp(buf, msg, sizeof(msg) - 1))
        abort();                       /* the valid record comes first, whole */
    r = tls_write(&h, "226 ok\r\n", 8, &w);
    check_status(r);
    if (r == IO_OK && w != 8)
        abort();
    check_status(tls_close_notify(&h));
    SSL_free(cli);
    SSL_free(srv);
    ERR_clear_error();
}

/* Mode 2: FTP lines through the parser and the RFC 4217 states. */
static void fuzz_sec(const uint8_t *d, size_t n)
{
    struct ftp_sec st = { .can_tls = n && (d[0] & 1) };
    char work[FTP_LINE_MAX];
    struct ftp_cmd cmd;
    const char *p = (const char *)d + (n ? 1 : 0), *end = (const char *)d + n;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
        if (len <= FTP_LINE_MAX &&
            ftp_parse_line(p, len, work, sizeof(work), &cmd) == 0) {
            if (cmd.id == FC_PASS)
                st.logged_in = true;
            if (cmd.id == FC_AUTH || cmd.id == FC_PBSZ || cmd.id == FC_PROT) {
                bool was = st.tls;
                const char *text = NULL;
                int code = ftp_sec_cmd(&st, cmd.id, cmd.arg, &text);
                if (!text || !text[0])
                    abort();
                switch (code) {
                case 200: case 234: case 501: case 502: case 503: case 504:
                case 536:
                    break;
                default:
                    abort();
                }
                if ((code == 234) != (!was && st.tls))
                    abort();           /* TLS starts only with a 234 */
                if (code == 234 && (cmd.id != FC_AUTH || st.logged_in))
                    abort();
                if (!st.can_tls && code != 502)
                    abort();
            }
        }
        if ((st.prot_p && !st.pbsz) || (st.pbsz && !st.tls) ||
            (st.tls && !st.can_tls))
            abort();
        p += len;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    switch (data[0] % 3) {
    case 0: fuzz_handshake(data + 1, size - 1); break;
    case 1: fuzz_records(data + 1, size - 1); break;
    default: fuzz_sec(data + 1, size - 1); break;
    }
    return 0;
}
