#define _GNU_SOURCE
#include "islet_epoll.h"
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

int islet_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int islet_epoll_ctl(int epfd, int op, int fd, uint32_t events) {
    struct epoll_event event = { .events = events, .data = { .fd = fd } };
    return epoll_ctl(epfd, op, fd, &event);
}

int islet_epoll_wait(int epfd, int *fds, uint32_t *events, int max, int timeout_ms) {
    struct epoll_event ready[256];
    if (max > 256) max = 256;
    int count = epoll_wait(epfd, ready, max, timeout_ms);
    for (int i = 0; i < count; i++) { fds[i] = ready[i].data.fd; events[i] = ready[i].events; }
    return count;
}

int islet_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

void islet_eventfd_signal(int fd) { uint64_t one = 1; ssize_t r = write(fd, &one, sizeof one); (void)r; }

void islet_eventfd_drain(int fd) { uint64_t value; while (read(fd, &value, sizeof value) > 0) {} }

static void tune(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

int islet_tcp_connect(const char *host, int port, char *error, int error_length) {
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *found = NULL;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    int status = getaddrinfo(host, service, &hints, &found);
    if (status != 0) { snprintf(error, error_length, "cannot resolve %s: %s", host, gai_strerror(status)); return -1; }
    int fd = -1;
    for (struct addrinfo *a = found; a != NULL; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        tune(fd);
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 || errno == EINPROGRESS) break;
        close(fd);
        fd = -1;
    }
    if (fd < 0) snprintf(error, error_length, "cannot connect to %s:%d: %s", host, port, strerror(errno));
    freeaddrinfo(found);
    return fd;
}

int islet_socket_error(int fd) {
    int value = 0;
    socklen_t length = sizeof value;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &value, &length) != 0) return errno;
    return value;
}

int islet_tcp_listen(const char *host, int port, char *error, int error_length) {
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICHOST }, *found = NULL;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    int status = getaddrinfo(host, service, &hints, &found);
    if (status != 0) { snprintf(error, error_length, "bad listen address %s: %s", host, gai_strerror(status)); return -1; }
    int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    if (fd < 0 || bind(fd, found->ai_addr, found->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
        snprintf(error, error_length, "cannot listen on %s:%d: %s", host, port, strerror(errno));
        if (fd >= 0) close(fd);
        freeaddrinfo(found);
        return -1;
    }
    freeaddrinfo(found);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

int islet_socket_port(int fd) {
    struct sockaddr_storage address;
    socklen_t length = sizeof address;
    if (getsockname(fd, (struct sockaddr *)&address, &length) != 0) return 0;
    if (address.ss_family == AF_INET) return ntohs(((struct sockaddr_in *)&address)->sin_port);
    return ntohs(((struct sockaddr_in6 *)&address)->sin6_port);
}

int islet_tcp_accept(int fd) {
    int client = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
    if (client >= 0) tune(client);
    return client;
}
