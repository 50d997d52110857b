/*
 * log.c - log lines on stderr ("<time> [level] message") and the
 * "addr:port" form of socket addresses used in them.  Calls libc only
 * (the level is g_log_level, set by config.c).
 */
#include "tpd.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

/* Write one log line "<time> [level] message" to stderr. */
void tpd_log(int level, const char *fmt, ...)
{
    static const char *names[] = { "error", "warn", "info", "debug" };
    char msg[1024], ts[32];
    struct timespec tv;
    struct tm tm;
    va_list ap;

    if (level > g_log_level)
        return;
    clock_gettime(CLOCK_REALTIME, &tv);
    gmtime_r(&tv.tv_sec, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s.%03ldZ [%s] %s\n", ts, tv.tv_nsec / 1000000,
            names[level], msg);
}

/* Format a socket address as "a.b.c.d:port" or "[v6]:port". */
void sockaddr_to_str(const struct sockaddr *sa, char *buf, size_t sz)
{
    char a[INET6_ADDRSTRLEN];
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const void *)sa;
        inet_ntop(AF_INET, &s4->sin_addr, a, sizeof(a));
        snprintf(buf, sz, "%s:%u", a, ntohs(s4->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const void *)sa;
        inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof(a));
        snprintf(buf, sz, "[%s]:%u", a, ntohs(s6->sin6_port));
    } else {
        snprintf(buf, sz, "?");
    }
}
