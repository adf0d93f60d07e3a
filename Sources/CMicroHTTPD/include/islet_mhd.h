#ifndef ISLET_MHD_H
#define ISLET_MHD_H
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <microhttpd.h>

/// Options for islet_mhd_start; MHD_start_daemon itself is variadic and cannot be called from Swift.
typedef struct {
    const struct sockaddr *address;   /* IPv4 or IPv6 socket address to bind */
    unsigned int thread_pool_size;
    unsigned int connection_timeout_seconds;
    size_t connection_memory_limit;
    unsigned int connection_limit;
    /* asked before a connection is accepted (MHD_NO refuses it), and told when one starts and closes; may be NULL */
    MHD_AcceptPolicyCallback accept_policy;
    void *accept_context;
    MHD_NotifyConnectionCallback notify_connection;
    void *notify_context;
    /* told when a request's first line is in (before its headers); returns NULL; may be NULL */
    void *(*request_line)(void *context, const char *uri, struct MHD_Connection *connection);
    void *request_line_context;
} islet_mhd_options;

/// Starts an epoll, thread-pool daemon that supports quiescing (MHD_USE_ITC) and suspend/resume.
struct MHD_Daemon *islet_mhd_start(const islet_mhd_options *options,
                                   MHD_AccessHandlerCallback handler, void *handler_context,
                                   MHD_RequestCompletedCallback completed, void *completed_context);

/// The port the daemon is bound to (useful with port 0), or 0 when unknown.
uint16_t islet_mhd_bound_port(struct MHD_Daemon *daemon);

/// The client's address as text (IPv4 or IPv6) into `buffer`; an empty string when unknown.
/// MHD_get_connection_info is variadic, so Swift reaches it through here.
void islet_mhd_client_address(struct MHD_Connection *connection, char *buffer, size_t size);

/// A socket address as text (IPv4 or IPv6) into `buffer`; an empty string when it is neither.
void islet_address_text(const struct sockaddr *address, char *buffer, size_t size);

/// The connection's socket, or -1 when unknown (MHD_get_connection_info is variadic).
int islet_mhd_connection_socket(struct MHD_Connection *connection);

/// Gives the free pages of every malloc arena back to the system (glibc's malloc_trim, whose header Swift's Glibc
/// module does not import).
void islet_release_free_memory(void);

#endif
