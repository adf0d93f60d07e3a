#include "islet_postgres.h"

const char *islet_pq_sqlstate(const PGresult *result) {
    return PQresultErrorField(result, PG_DIAG_SQLSTATE);
}

static void islet_pq_ignore_notice(void *argument, const char *message) {
    (void)argument;
    (void)message;
}

void islet_pq_quiet(PGconn *connection) {
    PQsetNoticeProcessor(connection, islet_pq_ignore_notice, NULL);
}
