#ifndef ISLET_POSTGRES_H
#define ISLET_POSTGRES_H
#include <postgresql/libpq-fe.h>

/// The SQLSTATE of a failed result (PG_DIAG_SQLSTATE is a character macro Swift cannot import), or NULL.
const char *islet_pq_sqlstate(const PGresult *result);

/// Drops the server's NOTICE messages instead of printing them on stderr (libpq's default).
void islet_pq_quiet(PGconn *connection);

#endif
