#include <malloc.h>
#include "islet_mhd.h"
#include <arpa/inet.h>

struct MHD_Daemon *islet_mhd_start(const islet_mhd_options *options,
                                   MHD_AccessHandlerCallback handler, void *handler_context,
                                   MHD_RequestCompletedCallback completed, void *completed_context) {
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME;
    if (options->address->sa_family == AF_INET6) flags |= MHD_USE_IPv6;
    return MHD_start_daemon(flags, 0, options->accept_policy, options->accept_context, handler, handler_context,
                            MHD_OPTION_NOTIFY_CONNECTION, options->notify_connection, options->notify_context,
                            MHD_OPTION_SOCK_ADDR, options->address,
                            MHD_OPTION_THREAD_POOL_SIZE, options->thread_pool_size,
                            MHD_OPTION_CONNECTION_TIMEOUT, options->connection_timeout_seconds,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, options->connection_memory_limit,
                            MHD_OPTION_CONNECTION_LIMIT, options->connection_limit,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_context,
                            MHD_OPTION_URI_LOG_CALLBACK, options->request_line, options->request_line_context,
                            MHD_OPTION_END);
}

uint16_t islet_mhd_bound_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

void islet_mhd_client_address(struct MHD_Connection *connection, char *buffer, size_t size) {
    if (size == 0) return;
    buffer[0] = '\0';
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (info != NULL) islet_address_text(info->client_addr, buffer, size);
}

void islet_address_text(const struct sockaddr *address, char *buffer, size_t size) {
    if (size == 0) return;
    buffer[0] = '\0';
    if (address == NULL) return;
    if (address->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)address)->sin_addr, buffer, (socklen_t)size);
    } else if (address->sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)address)->sin6_addr, buffer, (socklen_t)size);
    }
}

int islet_mhd_connection_socket(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}

void islet_release_free_memory(void) {
    malloc_trim(0);
}
