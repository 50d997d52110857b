/* netlimit: the loopback TCP limit of a file download, and the same C receiver
 * as an FTP RETR client (docs/methodology.md, "The loopback limit").
 *
 *   netlimit pair --file PATH [--duration S] [--sender-cpu N] [--receiver-cpu N]
 *                 [--recv recv|splice] [--bufsize BYTES] [--rcvlowat BYTES]
 *   netlimit ftp  --port P --user U --password W --name NAME [--host 127.x.y.z]
 *                 [--size BYTES] [--duration S] [--cpu N] [--recv recv|splice]
 *                 [--bufsize BYTES] [--rcvlowat BYTES] [--write-piece BYTES]
 *   netlimit stor --port P --user U --password W --name NAME --file PATH
 *                 [--host 127.x.y.z] [--duration S] [--cpu N] [--send-piece BYTES]
 *
 * pair: a forked sender (pinned to --sender-cpu) listens on 127.0.0.1:0; for each
 * connection it reads one request byte, then sends the whole file with blocking
 * sendfile(2) (zero-copy, the syscall of tpd's RETR path) and closes. The
 * receiver (this process, pinned to --receiver-cpu) connects, sends the request
 * byte, drains to EOF, and repeats whole downloads until --duration seconds of
 * transfer have passed (at least one download).
 *
 * ftp: the same receiver against an FTP server: USER/PASS/TYPE I once, then per
 * download PASV, connect, RETR NAME, the 1xx reply, drain the data connection
 * to EOF, the 2xx reply. Same loop and clock as pair; --rcvlowat as below, as the
 * load generator's RETR does.
 *
 * stor: the same FTP session uploading instead: per upload PASV, connect, STOR NAME,
 * the 1xx reply, the whole --file sent with blocking sendfile(2) (zero-copy, the
 * syscall of the load generator's STOR), close, the 2xx reply; then, untimed, SIZE
 * NAME must equal the file's size. Clock per upload: from just before "STOR" is sent
 * to the 2xx reply (the server confirmed every byte). "receiver" in the output is
 * "sendfile", "chunk_bytes" 0. With --send-piece N (bytes, > 0) the file is instead
 * read(2) and send(2)n N bytes at a time (a copy to user space and back, as curl -T
 * does with its 64 KiB upload buffer); "receiver" is then "copy", "chunk_bytes" N.
 *
 * Receivers: "recv" = recv(2) into one BYTES buffer (a copy to user space, as a
 * real client does); "splice" = splice(2) socket -> pipe -> /dev/null (no copy;
 * the pipe is resized to BYTES, at most /proc/sys/fs/pipe-max-size; "chunk_bytes"
 * in the output is the size in force).
 * --write-piece N (recv only; 0, the default, = off): each recv's bytes are then
 * also fwrite(3)n to a stdio stream on /dev/null in pieces of at most N bytes, the
 * output path of curl -o /dev/null (libcurl hands its write callback at most
 * CURL_MAX_WRITE_SIZE = 16 KiB, and the curl tool fwrite()s each piece; glibc's
 * 4 KiB stream buffer turns a 16 KiB piece into a 4 KiB and a 12 KiB write(2)).
 * Pending stream bytes are flushed before the download's clock stops.
 * Waiting: with --rcvlowat 0 (the default) each read blocks (a blocking recv or
 * splice returns as soon as any byte is queued). With --rcvlowat N > 0 the data
 * socket gets SO_RCVLOWAT N and O_NONBLOCK, the receiver waits in poll(2) (which
 * reports the socket readable only once N bytes are queued, or at EOF: socket(7))
 * and then reads until EAGAIN, at most 8 reads per wake-up: the event-loop
 * pattern of the lab's RETR client (runner/load/ftp/retr.py), which wakes once per
 * N bytes instead of once per segment. A blocking splice(2) ignores SO_RCVLOWAT
 * (tcp_splice_read waits for any data), hence poll.
 * Socket buffers are left to kernel autotuning (no SO_SNDBUF/SO_RCVBUF), as tpd
 * and the load generator do. Clock per download: CLOCK_MONOTONIC from just before
 * the request (pair: the byte; ftp: "RETR") is sent to EOF on the data socket.
 *
 * Output: one JSON object on stdout (bytes, seconds = summed download time,
 * gbps = bytes*8/seconds/1e9, mib_s, min/max per download, CPU seconds).
 * Errors: one line on stderr; exit 2 for bad arguments, 1 for a failed run.
 * Bounds: loopback only (127.0.0.0/8); --duration <= 600; each socket read times
 * out after 30 s; one download may take at most 120 s; at most 1,000,000 downloads.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define IO_TIMEOUT_S 30
#define TRANSFER_MAX_S 120.0
#define MAX_TRANSFERS 1000000L
#define READS_PER_WAKEUP 8

enum { R_RECV, R_SPLICE };

struct opts {
    const char *mode, *file, *host, *user, *password, *name;
    double duration;
    int port, sender_cpu, receiver_cpu, recv_mode;
    long long size, bufsize, rcvlowat, write_piece, send_piece;
};

struct drain {
    int mode, pipefd[2], devnull;
    char *buf;
    size_t chunk;           /* recv buffer bytes, or the pipe's size */
    int rcvlowat;           /* SO_RCVLOWAT bytes; 0 = blocking reads, kernel default */
    size_t piece;           /* --write-piece bytes; 0 = no writes */
    FILE *sink;             /* stdio stream on /dev/null when piece > 0 */
};

struct tally {
    long transfers;
    long long bytes;
    double seconds, min_gbps, max_gbps;
};

static void die(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("netlimit: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(status);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static long long parse_int(const char *flag, const char *s, long long lo, long long hi)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        die(2, "%s: expected an integer in [%lld, %lld], got '%s'", flag, lo, hi, s);
    return v;
}

static void pin(int cpu, const char *who)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) < 0)
        die(1, "cannot pin the %s to CPU %d: %s", who, cpu, strerror(errno));
}

static double cpu_seconds(const struct rusage *ru)
{
    return ru->ru_utime.tv_sec + ru->ru_utime.tv_usec / 1e6
         + ru->ru_stime.tv_sec + ru->ru_stime.tv_usec / 1e6;
}

static void set_timeout(int fd)
{
    struct timeval tv = { IO_TIMEOUT_S, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static int connect_to(struct in_addr addr, int port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr = addr };
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die(1, "socket: %s", strerror(errno));
    set_timeout(fd);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        die(1, "connect to %s:%d: %s", inet_ntoa(addr), port, strerror(errno));
    return fd;
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            die(1, "send: %s", k < 0 ? strerror(errno) : "closed");
        p += k;
        n -= (size_t)k;
    }
}

static void drain_init(struct drain *d, int mode, long long bufsize, long long rcvlowat, long long piece)
{
    d->mode = mode;
    d->piece = (size_t)piece;
    d->sink = NULL;
    if (piece > 0 && !(d->sink = fopen("/dev/null", "we")))
        die(1, "/dev/null: %s", strerror(errno));
    d->rcvlowat = (int)rcvlowat;
    d->chunk = (size_t)bufsize;
    d->buf = NULL;
    d->devnull = -1;
    if (mode == R_RECV) {
        d->buf = malloc(d->chunk);
        if (!d->buf)
            die(1, "cannot allocate a %lld-byte buffer", bufsize);
        memset(d->buf, 0, d->chunk);          /* fault the pages in before timing */
        return;
    }
    if (pipe2(d->pipefd, O_CLOEXEC) < 0)
        die(1, "pipe: %s", strerror(errno));
    long want = (long)bufsize;
    FILE *f = fopen("/proc/sys/fs/pipe-max-size", "r");   /* the most without CAP_SYS_RESOURCE */
    long most = 0;
    if (f) {
        if (fscanf(f, "%ld", &most) != 1)
            most = 0;
        fclose(f);
    }
    if (most > 0 && want > most)
        want = most;
    fcntl(d->pipefd[1], F_SETPIPE_SZ, (int)want);        /* a refusal keeps the default size */
    int got = fcntl(d->pipefd[1], F_GETPIPE_SZ);
    if (got <= 0)
        die(1, "F_GETPIPE_SZ: %s", strerror(errno));
    d->chunk = (size_t)got;
    d->devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (d->devnull < 0)
        die(1, "/dev/null: %s", strerror(errno));
}

/* Prepare a connected data socket for the drain: SO_RCVLOWAT and O_NONBLOCK when
 * the receiver waits in poll(2). */
static void drain_socket(const struct drain *d, int fd)
{
    if (d->rcvlowat <= 0)
        return;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &d->rcvlowat, sizeof(d->rcvlowat)) < 0)
        die(1, "SO_RCVLOWAT %d: %s", d->rcvlowat, strerror(errno));
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        die(1, "O_NONBLOCK: %s", strerror(errno));
}

/* One read from the data socket: bytes taken, 0 at EOF, -1 with errno. */
static ssize_t take(struct drain *d, int fd)
{
    if (d->mode == R_RECV) {
        ssize_t n = recv(fd, d->buf, d->chunk, 0);
        for (ssize_t off = 0; d->sink && off < n; off += (ssize_t)d->piece) {
            size_t k = (size_t)(n - off) < d->piece ? (size_t)(n - off) : d->piece;
            if (fwrite(d->buf + off, 1, k, d->sink) != k)
                die(1, "fwrite to /dev/null: %s", strerror(errno));
        }
        return n;
    }
    unsigned flags = SPLICE_F_MOVE | (d->rcvlowat > 0 ? SPLICE_F_NONBLOCK : 0);
    ssize_t n = splice(fd, NULL, d->pipefd[1], NULL, d->chunk, flags);
    for (ssize_t left = n; left > 0;) {
        ssize_t m = splice(d->pipefd[0], NULL, d->devnull, NULL, (size_t)left, SPLICE_F_MOVE);
        if (m <= 0)
            die(1, "splice to /dev/null: %s", m < 0 ? strerror(errno) : "no progress");
        left -= m;
    }
    return n;
}

/* Drain fd to EOF; return the byte count. Dies on an error or after TRANSFER_MAX_S. */
static long long drain(struct drain *d, int fd, double t0)
{
    long long total = 0;
    for (;;) {
        if (d->rcvlowat > 0) {
            struct pollfd p = { .fd = fd, .events = POLLIN };
            int k = poll(&p, 1, IO_TIMEOUT_S * 1000);
            if (k < 0 && errno == EINTR)
                continue;
            if (k < 0)
                die(1, "poll on the data socket: %s", strerror(errno));
            if (k == 0)
                die(1, "no data for %d s on the data socket after %lld bytes", IO_TIMEOUT_S, total);
        }
        for (int i = 0; i < (d->rcvlowat > 0 ? READS_PER_WAKEUP : 1); i++) {
            ssize_t n = take(d, fd);
            if (n == 0) {
                if (d->sink && fflush(d->sink) != 0)
                    die(1, "fflush to /dev/null: %s", strerror(errno));
                return total;
            }
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                if (d->rcvlowat > 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                    break;
                die(1, "%s on the data socket after %lld bytes: %s",
                    d->mode == R_RECV ? "recv" : "splice", total, strerror(errno));
            }
            total += n;
        }
        if (now() - t0 > TRANSFER_MAX_S)
            die(1, "one download took more than %.0f s", TRANSFER_MAX_S);
    }
}

static void tally_add(struct tally *t, long long n, double dt)
{
    double g = dt > 0 ? n * 8 / dt / 1e9 : 0;
    if (t->transfers == 0 || g < t->min_gbps)
        t->min_gbps = g;
    if (t->transfers == 0 || g > t->max_gbps)
        t->max_gbps = g;
    t->transfers++;
    t->bytes += n;
    t->seconds += dt;
}

static void print_json(const struct opts *o, const struct tally *t, const char *rname, size_t chunk,
                       double recv_cpu, double send_cpu)
{
    double g = t->seconds > 0 ? t->bytes * 8 / t->seconds / 1e9 : 0;
    double mib = t->seconds > 0 ? t->bytes / t->seconds / 1048576.0 : 0;
    printf("{\"mode\": \"%s\", \"receiver\": \"%s\", \"chunk_bytes\": %zu, "
           "\"transfers\": %ld, \"bytes\": %lld, \"seconds\": %.6f, \"gbps\": %.4f, "
           "\"mib_s\": %.2f, \"min_gbps\": %.4f, \"max_gbps\": %.4f, "
           "\"receiver_cpu_s\": %.4f, \"rcvlowat\": %d, ",
           o->mode, rname, chunk, t->transfers, t->bytes,
           t->seconds, g, mib, t->min_gbps, t->max_gbps, recv_cpu, (int)o->rcvlowat);
    if (send_cpu >= 0)
        printf("\"sender_cpu_s\": %.4f, ", send_cpu);
    else
        printf("\"sender_cpu_s\": null, ");
    if (o->sender_cpu >= 0)
        printf("\"sender_cpu\": %d, ", o->sender_cpu);
    else
        printf("\"sender_cpu\": null, ");
    if (o->receiver_cpu >= 0)
        printf("\"receiver_cpu\": %d}\n", o->receiver_cpu);
    else
        printf("\"receiver_cpu\": null}\n");
}

/* ---- pair: C sendfile sender -> C receiver ------------------------------ */

static void sender(int ls, int fd, long long size, int cpu, double lifetime)
{
    signal(SIGPIPE, SIG_IGN);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    alarm((unsigned)lifetime);                 /* never outlives the run */
    pin(cpu, "sender");
    for (long i = 0; i < MAX_TRANSFERS + 1; i++) {
        int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR)
                continue;
            _exit(1);
        }
        set_timeout(c);
        char req;
        if (recv(c, &req, 1, 0) == 1) {
            off_t off = 0;
            while (off < size) {
                ssize_t n = sendfile(c, fd, &off, (size_t)(size - off));
                if (n < 0 && errno == EINTR)
                    continue;
                if (n <= 0)
                    break;                      /* receiver gone: next connection */
            }
        }
        close(c);
    }
    _exit(0);
}

static void run_pair(struct opts *o)
{
    int fd = open(o->file, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        die(2, "--file %s: %s", o->file, strerror(errno));
    if (!S_ISREG(st.st_mode) || st.st_size == 0)
        die(2, "--file %s: not a non-empty regular file", o->file);
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t sl = sizeof(sa);
    if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(ls, 16) < 0
        || getsockname(ls, (struct sockaddr *)&sa, &sl) < 0)
        die(1, "listen on 127.0.0.1: %s", strerror(errno));
    fflush(stdout);
    pid_t child = fork();
    if (child < 0)
        die(1, "fork: %s", strerror(errno));
    if (child == 0)
        sender(ls, fd, st.st_size, o->sender_cpu, o->duration + TRANSFER_MAX_S + 10);
    close(ls);
    close(fd);
    pin(o->receiver_cpu, "receiver");
    struct drain d;
    drain_init(&d, o->recv_mode, o->bufsize, o->rcvlowat, o->write_piece);
    struct tally t = { 0 };
    double deadline = now() + o->duration;
    while (t.transfers < MAX_TRANSFERS) {
        int s = connect_to(sa.sin_addr, ntohs(sa.sin_port));
        drain_socket(&d, s);
        double t0 = now();
        send_all(s, "G", 1);
        long long n = drain(&d, s, t0);
        double dt = now() - t0;
        close(s);
        if (n != st.st_size)
            die(1, "short download: %lld of %lld bytes", n, (long long)st.st_size);
        tally_add(&t, n, dt);
        if (now() >= deadline)
            break;
    }
    struct rusage self, kid;
    getrusage(RUSAGE_SELF, &self);
    kill(child, SIGKILL);
    int status;
    if (wait4(child, &status, 0, &kid) < 0)
        die(1, "wait for the sender: %s", strerror(errno));
    print_json(o, &t, d.mode == R_RECV ? "recv" : "splice", d.chunk, cpu_seconds(&self), cpu_seconds(&kid));
}

/* ---- ftp: the C receiver as an FTP RETR client --------------------------- */

static char rbuf[8192];
static size_t rlen;

/* Read one FTP reply (multi-line aware); return its code, copy its last line to line. */
static int ftp_reply(int ctl, char *line, size_t cap)
{
    int code = 0;
    for (int lines = 0; lines < 1000; lines++) {
        char *nl;
        while (!(nl = memchr(rbuf, '\n', rlen))) {
            if (rlen == sizeof(rbuf))
                die(1, "FTP reply line longer than %zu bytes", sizeof(rbuf));
            ssize_t k = recv(ctl, rbuf + rlen, sizeof(rbuf) - rlen, 0);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0)
                die(1, "control connection: %s", k < 0 ? strerror(errno) : "closed by the server");
            rlen += (size_t)k;
        }
        size_t len = (size_t)(nl - rbuf) + 1;
        size_t keep = len < cap ? len : cap - 1;
        memcpy(line, rbuf, keep);
        line[keep] = 0;
        memmove(rbuf, rbuf + len, rlen - len);
        rlen -= len;
        int c = (len >= 4 && line[0] >= '1' && line[0] <= '5') ? atoi(line) : 0;
        if (lines == 0)
            code = c;
        if (c == code && c && line[3] == ' ')
            return code;
    }
    die(1, "FTP reply of more than 1000 lines");
    return 0;
}

static void ftp_cmd(int ctl, const char *cmd, const char *arg, int want, char *line, size_t cap)
{
    char out[4200];
    int n = snprintf(out, sizeof(out), "%s%s%s\r\n", cmd, arg ? " " : "", arg ? arg : "");
    if (n < 0 || (size_t)n >= sizeof(out))
        die(2, "FTP command too long");
    send_all(ctl, out, (size_t)n);
    int code = ftp_reply(ctl, line, cap);
    if (code / 100 != want)
        die(1, "%s: unexpected reply %s", cmd, line);
}

/* STOR NAME on the data socket s: the whole file fd (size bytes) with sendfile(2), or with
 * read(2) + send(2) of at most piece bytes through buf when piece > 0; close, the 2xx
 * reply. Returns the bytes sent; dies on a failure or after TRANSFER_MAX_S. */
static long long upload(int ctl, int s, int fd, long long size, const char *name, double t0, char *line, size_t cap,
                        char *buf, size_t piece)
{
    ftp_cmd(ctl, "STOR", name, 1, line, cap);
    off_t off = 0;
    if (piece > 0 && lseek(fd, 0, SEEK_SET) < 0)
        die(1, "lseek on --file: %s", strerror(errno));
    while (off < size) {
        ssize_t n;
        if (piece > 0) {
            size_t want = (size_t)(size - off) < piece ? (size_t)(size - off) : piece;
            n = read(fd, buf, want);
            if (n > 0) {
                send_all(s, buf, (size_t)n);
                off += n;
            }
        } else
            n = sendfile(s, fd, &off, (size_t)(size - off));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            die(1, "%s on the data socket after %lld bytes: %s", piece > 0 ? "read" : "sendfile", (long long)off,
                n < 0 ? strerror(errno) : "no progress");
        if (now() - t0 > TRANSFER_MAX_S)
            die(1, "one upload took more than %.0f s", TRANSFER_MAX_S);
    }
    close(s);
    int code = ftp_reply(ctl, line, cap);
    if (code / 100 != 2)
        die(1, "STOR %s: %s", name, line);
    return size;
}

/* Untimed: SIZE NAME must be size (RFC 3659 "213 N"); dies otherwise. */
static void check_size(int ctl, const char *name, long long size, char *line, size_t cap)
{
    ftp_cmd(ctl, "SIZE", name, 2, line, cap);
    long long held = -1;
    if (sscanf(line, "213 %lld", &held) != 1 || held != size)
        die(1, "short upload: the server holds %s for %lld bytes sent", line, size);
}

static void run_ftp(struct opts *o)
{
    struct in_addr addr;
    if (inet_pton(AF_INET, o->host, &addr) != 1 || (ntohl(addr.s_addr) >> 24) != 127)
        die(2, "--host %s: not a 127.0.0.0/8 address (loopback only)", o->host);
    int stor = !strcmp(o->mode, "stor"), fd = -1;
    struct stat st = { 0 };
    if (stor && ((fd = open(o->file, O_RDONLY | O_CLOEXEC)) < 0 || fstat(fd, &st) < 0))
        die(2, "--file %s: %s", o->file, strerror(errno));
    if (stor && (!S_ISREG(st.st_mode) || st.st_size == 0))
        die(2, "--file %s: not a non-empty regular file", o->file);
    pin(o->receiver_cpu, stor ? "uploader" : "receiver");
    struct drain d = { .mode = o->recv_mode };
    char *sendbuf = NULL;
    if (stor && o->send_piece > 0) {
        if (!(sendbuf = malloc((size_t)o->send_piece)))
            die(1, "cannot allocate a %lld-byte buffer", o->send_piece);
        memset(sendbuf, 0, (size_t)o->send_piece);   /* fault the pages in before timing */
    }
    if (!stor)
        drain_init(&d, o->recv_mode, o->bufsize, o->rcvlowat, o->write_piece);
    char line[512];
    int ctl = connect_to(addr, o->port);
    if (ftp_reply(ctl, line, sizeof(line)) != 220)
        die(1, "greeting: %s", line);
    char out[600];
    int n = snprintf(out, sizeof(out), "USER %s\r\n", o->user);
    if (n < 0 || (size_t)n >= sizeof(out))
        die(2, "--user too long");
    send_all(ctl, out, (size_t)n);
    int code = ftp_reply(ctl, line, sizeof(line));
    if (code == 331)
        ftp_cmd(ctl, "PASS", o->password, 2, line, sizeof(line));
    else if (code != 230)
        die(1, "USER: unexpected reply %s", line);
    ftp_cmd(ctl, "TYPE", "I", 2, line, sizeof(line));
    struct tally t = { 0 };
    double deadline = now() + o->duration;
    while (t.transfers < MAX_TRANSFERS) {
        ftp_cmd(ctl, "PASV", NULL, 2, line, sizeof(line));
        unsigned h[6];
        char *p = strchr(line, '(');
        if (!p || sscanf(p, "(%u,%u,%u,%u,%u,%u)", &h[0], &h[1], &h[2], &h[3], &h[4], &h[5]) != 6
            || h[4] > 255 || h[5] > 255)
            die(1, "PASV: cannot parse %s", line);
        int s = connect_to(addr, (int)(h[4] * 256 + h[5]));
        if (!stor)
            drain_socket(&d, s);
        double t0 = now();
        if (stor) {
            long long sent = upload(ctl, s, fd, st.st_size, o->name, t0, line, sizeof(line), sendbuf,
                                    (size_t)o->send_piece);
            tally_add(&t, sent, now() - t0);
            check_size(ctl, o->name, st.st_size, line, sizeof(line));
            if (now() >= deadline)
                break;
            continue;
        }
        ftp_cmd(ctl, "RETR", o->name, 1, line, sizeof(line));
        long long n = drain(&d, s, t0);
        double dt = now() - t0;
        close(s);
        int code = ftp_reply(ctl, line, sizeof(line));
        if (code / 100 != 2)
            die(1, "RETR %s: %s", o->name, line);
        if (o->size > 0 && n != o->size)
            die(1, "short download: %lld of %lld bytes", n, o->size);
        tally_add(&t, n, dt);
        if (now() >= deadline)
            break;
    }
    send_all(ctl, "QUIT\r\n", 6);
    close(ctl);
    struct rusage self;
    getrusage(RUSAGE_SELF, &self);
    if (stor)
        print_json(o, &t, o->send_piece ? "copy" : "sendfile", o->send_piece, cpu_seconds(&self), -1);
    else
        print_json(o, &t, d.mode == R_RECV ? "recv" : "splice", d.chunk, cpu_seconds(&self), -1);
}

static void usage(void)
{
    die(2, "usage: netlimit pair --file PATH [--duration S] [--sender-cpu N] [--receiver-cpu N] "
           "[--recv recv|splice] [--bufsize BYTES] [--rcvlowat BYTES] | netlimit ftp --port P --user U --password W "
           "--name NAME [--host 127.0.0.1] [--size BYTES] [--duration S] [--cpu N] "
           "[--recv recv|splice] [--bufsize BYTES] [--rcvlowat BYTES] [--write-piece BYTES] | netlimit stor --port P --user U --password W "
           "--name NAME --file PATH [--host 127.0.0.1] [--duration S] [--cpu N] [--send-piece BYTES]");
}

int main(int argc, char **argv)
{
    struct opts o = { .host = "127.0.0.1", .duration = 1.0, .sender_cpu = -1, .receiver_cpu = -1,
                      .bufsize = 4 << 20, .recv_mode = R_RECV };
    if (argc < 2)
        usage();
    o.mode = argv[1];
    int pair = !strcmp(o.mode, "pair");
    int stor = !strcmp(o.mode, "stor");
    if (!pair && !stor && strcmp(o.mode, "ftp"))
        die(2, "unknown mode '%s' (pair, ftp or stor)", o.mode);
    for (int i = 2; i < argc; i += 2) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            die(2, "%s needs a value", k);
        if (!strcmp(k, "--file") && (pair || stor))
            o.file = v;
        else if (!strcmp(k, "--duration")) {
            char *end;
            o.duration = strtod(v, &end);
            if (end == v || *end || !(o.duration > 0 && o.duration <= 600))
                die(2, "--duration: expected seconds in (0, 600], got '%s'", v);
        } else if (!strcmp(k, "--sender-cpu") && pair)
            o.sender_cpu = (int)parse_int(k, v, 0, CPU_SETSIZE - 1);
        else if (!strcmp(k, "--receiver-cpu") || (!strcmp(k, "--cpu") && !pair))
            o.receiver_cpu = (int)parse_int(k, v, 0, CPU_SETSIZE - 1);
        else if (!strcmp(k, "--recv") && !stor) {
            if (!strcmp(v, "recv"))
                o.recv_mode = R_RECV;
            else if (!strcmp(v, "splice"))
                o.recv_mode = R_SPLICE;
            else
                die(2, "--recv: expected recv or splice, got '%s'", v);
        } else if (!strcmp(k, "--bufsize") && !stor)
            o.bufsize = parse_int(k, v, 4096, 1LL << 28);
        else if (!strcmp(k, "--rcvlowat") && !stor)
            o.rcvlowat = parse_int(k, v, 0, 1LL << 28);
        else if (!strcmp(k, "--send-piece") && stor)
            o.send_piece = parse_int(k, v, 1, 1LL << 28);
        else if (!strcmp(k, "--write-piece") && !pair && !stor)
            o.write_piece = parse_int(k, v, 0, 1LL << 28);
        else if (!strcmp(k, "--host") && !pair)
            o.host = v;
        else if (!strcmp(k, "--port") && !pair)
            o.port = (int)parse_int(k, v, 1, 65535);
        else if (!strcmp(k, "--user") && !pair)
            o.user = v;
        else if (!strcmp(k, "--password") && !pair)
            o.password = v;
        else if (!strcmp(k, "--name") && !pair)
            o.name = v;
        else if (!strcmp(k, "--size") && !pair && !stor)
            o.size = parse_int(k, v, 0, 1LL << 50);
        else
            die(2, "unknown option '%s' for mode %s", k, o.mode);
    }
    if (o.write_piece && o.recv_mode != R_RECV)
        die(2, "--write-piece needs --recv recv");
    if ((pair || stor) && !o.file)
        die(2, "%s needs --file", o.mode);
    if (!pair && (!o.port || !o.user || !o.password || !o.name))
        die(2, "%s needs --port, --user, --password and --name", o.mode);
    if (!pair && (strpbrk(o.user, "\r\n") || strpbrk(o.password, "\r\n") || strpbrk(o.name, "\r\n")))
        die(2, "--user, --password and --name must not contain CR or LF");
    if (pair)
        run_pair(&o);
    else
        run_ftp(&o);
    return 0;
}
