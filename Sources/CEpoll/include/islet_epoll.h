#ifndef ISLET_EPOLL_H
#define ISLET_EPOLL_H
#include <stdint.h>

/// epoll with a plain (fd, events) interface: struct epoll_event is packed on x86_64 and does not import well.
int islet_epoll_create(void);
int islet_epoll_ctl(int epfd, int op, int fd, uint32_t events);
/// Waits; fills fds[i] and events[i]; returns the count, or -1 with errno.
int islet_epoll_wait(int epfd, int *fds, uint32_t *events, int max, int timeout_ms);

enum {
    ISLET_EPOLL_ADD = 1, ISLET_EPOLL_DEL = 2, ISLET_EPOLL_MOD = 3,
    ISLET_EPOLLIN = 0x001, ISLET_EPOLLOUT = 0x004, ISLET_EPOLLERR = 0x008, ISLET_EPOLLHUP = 0x010,
};

/// A non-blocking eventfd to wake the loop from other threads.
int islet_eventfd(void);
void islet_eventfd_signal(int fd);
void islet_eventfd_drain(int fd);

/// A non-blocking TCP socket connecting to host:port (numeric or resolved with getaddrinfo).
/// Returns the fd (connect may be in progress) or -1 with a message.
int islet_tcp_connect(const char *host, int port, char *error, int error_length);
/// 0 when a non-blocking connect finished well, else the errno it failed with.
int islet_socket_error(int fd);
/// A non-blocking listening socket on host:port (port 0: any); returns fd or -1.
int islet_tcp_listen(const char *host, int port, char *error, int error_length);
int islet_socket_port(int fd);
/// Accepts one connection, non-blocking; -1 when none is waiting.
int islet_tcp_accept(int fd);

#endif
