/*
 * main.c - tpd's start-up and shutdown: configuration (config.c), the
 * --tls-info mode, the users file, TLS set-up, the descriptor limit,
 * signals (SIGPIPE ignored; SIGTERM and SIGINT through a signalfd that
 * stops the loop), the listeners (listen.c), then the event loop
 * (event.c) until a signal, and an orderly shutdown.
 */
#include "tpd.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

static struct handler g_sigh = { .type = H_SIGNAL, .fd = -1 };

/* The signalfd is readable: SIGTERM or SIGINT stops the loop. */
void signal_event(struct handler *h)
{
    struct signalfd_siginfo si;
    while (read(h->fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        log_info("signal %u: shutting down", si.ssi_signo);
        ev_stop();
    }
}

/* Raise RLIMIT_NOFILE soft limit to the hard limit. */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int main(int argc, char **argv)
{
    sigset_t mask;

    if (config_load(argc, argv))
        return 2;
    if (g_cfg.tls_info) {
        int r = tls_init();
        tls_print_info(stdout);
        tls_cleanup();
        return r ? 2 : 0;
    }
    if (users_load(g_cfg.users_file))
        return 2;
    if (tls_init()) {
        users_free();
        return 2;
    }
    raise_nofile();
    signal(SIGPIPE, SIG_IGN);

    if (ev_init())
        return 1;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    g_sigh.fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (g_sigh.fd < 0) {
        log_error("signalfd: %s", strerror(errno));
        return 1;
    }
    ev_set(&g_sigh, EPOLLIN);

    ev_now_update();
    if (listen_start())
        return 1;
    log_info("tpd ready: epoll level-triggered, sendfile %s, max-conns %d, "
             "idle-timeout %ds, TLS %s", g_cfg.use_sendfile ? "on" : "off",
             g_cfg.max_conns, g_cfg.idle_timeout, tls_enabled() ? "on" : "off");

    ev_run();

    /* clean shutdown: listeners first, then every connection */
    listen_stop();
    ev_drain();
    ev_close(&g_sigh);
    ev_fini();
    users_free();
    tls_cleanup();
    log_info("tpd stopped");
    return 0;
}
